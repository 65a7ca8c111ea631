// werift (WebRTC in TypeScript) and opusscript (Opus in WebAssembly), loaded on the first call:
// werift alone costs ~40 MB of memory and ~1 s to load, which a gateway that never takes a
// WebRTC call should not pay. Dynamic imports of the packages themselves, so that the bundle
// (scripts/lib/bundle.mjs, packages external) does not hoist them to its top.
import type * as Werift from 'werift';
import type OpusScriptType from 'opusscript';

export interface WebRtcLibs {
  werift: typeof Werift;
  OpusScript: typeof OpusScriptType;
}

let loading: Promise<WebRtcLibs> | undefined;

export function loadWebRtc(): Promise<WebRtcLibs> {
  loading ??= Promise.all([import('werift'), import('opusscript')]).then(([werift, opus]) => ({ werift, OpusScript: opus.default }));
  // A failed load (it should not: both are plain packages) is tried again by the next call.
  loading.catch(() => (loading = undefined));
  return loading;
}
