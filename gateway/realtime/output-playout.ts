// What a realtime session needs of a transport that plays the answers' audio itself (a WebRTC
// call's audio track, gateway/webrtc/audio-playout.ts) rather than handing it to the client as
// response.output_audio.delta events: such a transport paces the audio, so it knows what was
// heard, and it can stop it at once when the user speaks over it. A phone carrier plays the
// audio it is sent and echoes marks (gateway/phone/phone-bridge.ts): the same, as it reports.
import type { RealtimeAudioFormat } from './session-config.ts';

export interface HeardAudio {
  responseId: string;
  itemId: string;
  /** Milliseconds of the item's audio played before it stopped. */
  playedMs: number;
}

export interface OutputPlayout {
  /** The audio the transport takes in and plays out, whatever a session.update asks (pcm16 for Opus on WebRTC, G.711 on a phone line). */
  readonly audioFormat: RealtimeAudioFormat;
  /** Stops the audio being played now and drops what waits (later audio of that response too); what was heard of it, or null when nothing was playing. */
  stop(): HeardAudio | null;
}
