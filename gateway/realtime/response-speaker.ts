// The speech of one /v1/realtime response (response-run.ts): its text in pieces in, cut into
// spans as soon as one is speakable, each span spoken through the TTS pipeline of /tts/sse.
import { perUnitCostMicros } from '../../server/services/credits/pricing.ts';
import { ServiceError } from '../../server/services/errors.ts';
import { createAudioConverter } from '../audio/convert.ts';
import type { CreditHold } from '../core/gateway-core.ts';
import { allChunks, billedCharacters, startEngine } from '../tts/synthesize.ts';
import { isSpeakable, takeSpans, takeWords } from '../tts/text-spans.ts';
import { clientErrorFor } from '../core/try-upstreams.ts';
import type { ResponseEngines } from './engines.ts';
import type { ResponseHost, ResponseRun } from './response-run.ts';
import { FORMAT_AUDIO } from './session-config.ts';

/** Idle span cutting: words waiting this long without a sentence's end are spoken anyway. */
const SPAN_DELAY_MS = 300;

/**
 * The TTS of one response: text in pieces in, spans cut as soon as one is speakable, spoken one
 * after the other (so the audio is in order), each paid for before its engine starts.
 */
export class Speaker {
  private buffer = '';
  private queue: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private failed: unknown;
  private readonly output;

  constructor(
    private readonly run: ResponseRun,
    private readonly host: ResponseHost,
    private readonly tts: NonNullable<ResponseEngines['tts']>,
    private readonly hold: CreditHold,
    private readonly signal: AbortSignal,
  ) {
    const { sampleRate, encoding } = FORMAT_AUDIO[tts.format];
    this.output = { container: 'raw' as const, encoding, sampleRate };
  }

  push(text: string): void {
    this.buffer += text;
    const { spans, rest } = takeSpans(this.buffer);
    this.buffer = rest;
    for (const span of spans) this.enqueue(span);
    clearTimeout(this.timer);
    // An LLM that pauses mid-sentence: what is waiting is spoken anyway after a moment.
    if (this.buffer.trim()) {
      this.timer = setTimeout(() => {
        const { span, rest: left } = takeWords(this.buffer, false);
        this.buffer = left;
        if (span) this.enqueue(span);
      }, SPAN_DELAY_MS);
    }
  }

  /** The rest of the text spoken (none when cancelled), and every span done. */
  async end(cancelled: boolean): Promise<void> {
    clearTimeout(this.timer);
    if (!cancelled && isSpeakable(this.buffer)) this.enqueue(this.buffer.trim());
    this.buffer = '';
    await this.queue;
    if (this.failed && !this.signal.aborted) throw this.failed;
  }

  private enqueue(text: string): void {
    if (!isSpeakable(text)) return;
    const span = text.trim();
    this.queue = this.queue
      .then(() => this.run.traced('realtime.tts', { 'svc.model': this.tts.model.id, 'svc.characters': billedCharacters(span) }, () => this.speak(span)))
      .catch((e: unknown) => {
        this.failed ??= e;
      });
  }

  private async speak(span: string): Promise<void> {
    if (this.signal.aborted || this.failed) return;
    const { ctx, auth, requestId } = this.host;
    const { model } = this.tts;
    const characters = billedCharacters(span);
    const cost = perUnitCostMicros(model.prices.picoPerChar, characters);
    if (!(await this.hold.extend(cost))) {
      throw new ServiceError('insufficient_quota', "The organization's credit does not cover the answer's speech; add credits to continue.");
    }
    const call = { signal: this.signal, timeoutMs: ctx.config.upstreamTimeoutMs };
    let engine;
    try {
      engine = await startEngine(ctx, model, this.tts.voice, { language: this.tts.language, speed: this.tts.speed }, span, call);
    } catch (e) {
      if (this.signal.aborted) return;
      throw clientErrorFor(e, call);
    }
    if (this.signal.aborted) return;
    // Billed once its first audio is ready, as the TTS routes bill.
    const remaining = ctx.core.charge(auth, requestId, cost, { modelId: model.id, modality: 'tts', route: 'realtime', characters }, this.hold, cost);
    this.run.usage.ttsCharacters += characters;
    this.run.usage.ttsMicros += cost;
    const converter = createAudioConverter({ inputSampleRate: engine.sampleRate, output: this.output });
    const bytesPerMs = (this.output.sampleRate / 1000) * (this.output.encoding === 'pcm_s16le' ? 2 : 1);
    let first = true;
    let converted = false;
    try {
      for await (const pcm of allChunks({ ...engine, call })) {
        if (this.signal.aborted) return;
        const out = converter.push(pcm);
        await this.run.spoke(first ? span : '', out, out.length / bytesPerMs);
        first = false;
      }
      converted = true;
      const tail = converter.end();
      if (tail.length && !this.signal.aborted) await this.run.spoke('', tail, tail.length / bytesPerMs);
    } catch (e) {
      if (!this.signal.aborted) throw clientErrorFor(e, call);
    } finally {
      if (!converted) converter.close();
      this.host.onBalance(await remaining);
    }
  }
}
