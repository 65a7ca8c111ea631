// A streaming TTS session's first outputs (WS /tts/websocket and the vendors' sockets): per
// context, the time from its first span's turn to its first audio and to its first audible sample
// (the metrics svc_time_to_first_output_seconds{kind="tts_first_audio"|"tts_first_audible"});
// once per session, the same from the upgrade's arrival (the request log row's firstAudioMs and
// firstAudibleMs). The first audible sample is heard when a client playing the context's audio
// from its first byte reaches the first sample above -50 dBFS (gateway/audio/first-audible.ts).
import { AudibleWatch } from '../audio/first-audible.ts';
import type { Encoding } from '../audio/output-format.ts';
import type { GatewayContext } from '../context.ts';
import type { LogRef } from '../request-log/request-log-types.ts';

export class ContextFirstOutputs {
  private readonly audible = new AudibleWatch();
  private firstSpanAt: number | undefined;

  constructor(
    private readonly session: SessionFirstOutputs,
    private readonly model: string,
    private readonly encoding: Encoding,
    private readonly sampleRate: number,
  ) {}

  /** The context's first span has its first audio, after waiting `waitedMs` from its turn. */
  firstAudio(waitedMs: number, now = performance.now()): void {
    this.firstSpanAt = now - waitedMs;
    this.session.ctx.metrics.firstOutput('tts_first_audio', this.model, waitedMs / 1000);
    this.session.logged('firstAudioMs', now);
  }

  /** A chunk of the context's audio goes out now. */
  sent(audio: Uint8Array, now = performance.now()): void {
    const heardAt = this.audible.sentBytes(audio, this.encoding, this.sampleRate, now);
    if (heardAt === undefined) return;
    if (this.firstSpanAt !== undefined) this.session.ctx.metrics.firstOutput('tts_first_audible', this.model, (heardAt - this.firstSpanAt) / 1000);
    this.session.logged('firstAudibleMs', heardAt);
  }
}

export class SessionFirstOutputs {
  private readonly done = new Set<'firstAudioMs' | 'firstAudibleMs'>();

  constructor(
    readonly ctx: GatewayContext,
    private readonly ref: () => LogRef,
    /** When the upgrade arrived (performance.now()); undefined: the session has no row of its own. */
    private readonly arrivedAt: number | undefined,
  ) {}

  /** The session's first `field` happened at `at`: its row keeps the first only. */
  logged(field: 'firstAudioMs' | 'firstAudibleMs', at: number): void {
    if (this.done.has(field) || this.arrivedAt === undefined) return;
    this.done.add(field);
    this.ctx.requestLog?.annotate(this.ref(), { [field]: Math.round(at - this.arrivedAt) });
  }
}
