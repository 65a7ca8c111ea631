// Streaming speech, written once. Text arrives in pieces (a client's generation requests, an
// LLM's tokens) and is cut into spans as soon as one can be spoken (text-spans.ts: a sentence, a
// long enough clause, or the words waiting once the delay has passed). Each span is paid for
// (span-credit.ts), synthesized through the pipeline of POST /tts/sse (synthesize.ts: dictionary,
// engine, failover), converted, and handed to the sink in order, the speaker waiting whenever
// the sink is behind. One span is spoken at a time, so the audio is in order. WS /tts/websocket
// runs one speaker per context (tts-stream-session.ts), /v1/realtime one per spoken answer.
//
// Metering: a span's cost is reserved before its engine starts and debited once its first audio
// is out, per character synthesized, whether or not the listener stays for the rest. A span
// cancelled before its first audio, and text never synthesized (cancelled, or whitespace and
// punctuation alone) are not billed.
import { perUnitCostMicros } from '../../server/services/credits/pricing.ts';
import { createAudioConverter, type OutputFormat } from '../audio/convert.ts';
import type { GatewayContext } from '../context.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import { clientErrorFor } from '../core/try-upstreams.ts';
import type { SpanCredit } from './span-credit.ts';
import { allChunks, billedCharacters, startEngine, type ResolvedVoice } from './synthesize.ts';
import type { FailoverTrace } from './tts-failover.ts';
import { isSpeakable, takeSpans, takeWords } from './text-spans.ts';

export interface SpeakerVoice {
  model: ModelEntry;
  voice: ResolvedVoice;
  language: string | undefined;
  speed: number;
  /** Raw audio: live sessions send no container. */
  output: OutputFormat & { container: 'raw' };
  volume?: number;
}

export interface SpanCutting {
  /** Words waiting this long (from when they started waiting) are spoken without a span's end; 0: each piece's complete words at once. */
  delayMs: number;
  /** Once the delay has passed, text with no whitespace at all is spoken whole (a language written without spaces); otherwise it waits for its word's end. */
  wholeAfterDelay: boolean;
  /** Spans waiting behind a running one are spoken as one, up to this many characters (fewer engine calls, better prosody); 0: each alone. */
  joinUpToChars: number;
  /** Each span is spoken and billed without the whitespace around it. */
  trim: boolean;
}

/** A span as the sink sees it. */
export interface SpokenSpan {
  text: string;
  characters: number;
  costMicros: bigint;
  /** The part of the text it belongs to: 1, then one more after each flush. */
  part: number;
  /** Its place among this speaker's spans, from 0. */
  index: number;
  /** From its turn to speak to its first audio (reservation, engine start), in ms. */
  waitedMs: number;
}

export interface SpanSink {
  /** A span's first audio is ready (and it is being billed); its chunks follow. */
  started(span: SpokenSpan): void;
  /** A chunk of the span's audio, in order. The speaker waits for the returned promise (backpressure) before going on. */
  audio(chunk: Buffer, durationMs: number, span: SpokenSpan): void | Promise<void>;
  /** Everything before flush number `part` has been spoken. */
  flushed?(part: number): void;
}

export interface SpanSpeakerOptions extends SpeakerVoice {
  ctx: GatewayContext;
  /** The usage rows' route. */
  route: string;
  credit: SpanCredit;
  cutting: SpanCutting;
  sink: SpanSink;
  /** Who a span's move to another upstream is recorded for (its log row, its log line). */
  failover?: Omit<FailoverTrace, 'released'>;
  /** Runs each span's synthesis (a trace span around it, say). */
  around?: (span: { text: string; characters: number }, speak: () => Promise<void>) => Promise<void>;
}

/**
 * speaking: takes text; ending: the last text came, spans are left; done: all spoken;
 * failed: a span failed (nothing more is spoken); cancelled: stopped by cancel().
 */
export type SpeakerState = 'speaking' | 'ending' | 'done' | 'failed' | 'cancelled';

type Item = { kind: 'span'; text: string; characters: number; part: number } | { kind: 'flush'; part: number } | { kind: 'end' };

const BYTES_PER_SAMPLE = { pcm_s16le: 2, pcm_f32le: 4, pcm_mulaw: 1, pcm_alaw: 1 } as const;

export class SpanSpeaker {
  private current: SpeakerState = 'speaking';
  private buffer = '';
  private readonly queue: Item[] = [];
  private running = false;
  private part = 1;
  private spoken = 0;
  private pending = 0;
  private delay: NodeJS.Timeout | undefined;
  /** The engine call of the span being spoken. */
  private call: AbortController | null = null;
  private readonly bytesPerMs: number;
  /** The cutting rules; the delay may change with each push. */
  private readonly cutting: SpanCutting;
  private readonly stopListening: () => void;
  private settle!: { resolve: () => void; reject: (e: unknown) => void };
  /**
   * Settles once the speaker is finished: resolves when everything was spoken (after end()) or
   * when cancelled (once the span being spoken has stopped and its debit is written); rejects
   * with the first span's failure.
   */
  readonly finished: Promise<void>;

  constructor(private readonly o: SpanSpeakerOptions) {
    this.finished = new Promise<void>((resolve, reject) => (this.settle = { resolve, reject }));
    // A failure before anyone awaits `finished` is no unhandled rejection: whoever awaits it later still hears of it.
    this.finished.catch(() => {});
    this.cutting = { ...o.cutting };
    this.bytesPerMs = (o.output.sampleRate / 1000) * BYTES_PER_SAMPLE[o.output.encoding ?? 'pcm_s16le'];
    // Out of credit: waiting for text is over (running spans end first, then the refusal).
    this.stopListening = o.credit.whenExhausted(() => this.pump());
  }

  get state(): SpeakerState {
    return this.current;
  }

  /** A span is being spoken or waits for its turn. */
  get busy(): boolean {
    return this.running || this.queue.length > 0;
  }

  /** Characters received and not synthesized yet (waiting to be cut, or queued). */
  get pendingCharacters(): number {
    return this.pending;
  }

  /**
   * A piece of text. `flush`: what waits is spoken as it is, and the sink hears `flushed` once
   * it has been; `last`: nothing more comes (the rest is spoken, then the speaker is done);
   * `delayMs`: a new delay from now on.
   */
  push(text: string, options: { flush?: boolean; last?: boolean; delayMs?: number } = {}): void {
    if (this.current !== 'speaking') return;
    this.pending += billedCharacters(text);
    if (options.delayMs !== undefined) this.cutting.delayMs = options.delayMs;
    if (text && this.buffer === '') this.armDelay();
    this.buffer += text;
    if (options.flush) {
      this.cutAll();
      this.queue.push({ kind: 'flush', part: this.part++ });
    }
    if (options.last) {
      this.cutAll();
      this.queue.push({ kind: 'end' });
      this.current = 'ending';
    } else if (!options.flush) this.cutSpans();
    this.pump();
  }

  /** Nothing more comes: the rest is spoken. Resolves as `finished` does. */
  end(): Promise<void> {
    this.push('', { last: true });
    return this.finished;
  }

  /** Stops at once: the engine call ends, what waits is dropped, nothing more reaches the sink. */
  cancel(): void {
    if (this.current === 'done' || this.current === 'failed' || this.current === 'cancelled') return;
    this.current = 'cancelled';
    this.stop();
    if (!this.running) this.settle.resolve();
  }

  private get stopped(): boolean {
    return this.current === 'failed' || this.current === 'cancelled';
  }

  private stop(): void {
    this.disarmDelay();
    this.call?.abort();
    this.queue.length = 0;
    this.buffer = '';
    this.pending = 0;
    this.stopListening();
  }

  private fail(e: unknown): void {
    if (this.stopped || this.current === 'done') return;
    this.current = 'failed';
    this.stop();
    this.settle.reject(e);
  }

  // ------------------------------------------------------------------------------------------
  // Cutting

  private queueSpan(text: string): void {
    if (!text) return;
    const span = this.cutting.trim ? text.trim() : text;
    const characters = billedCharacters(span);
    // Whitespace or punctuation alone is not spoken, nor billed; nor is the whitespace trimmed off.
    this.pending -= billedCharacters(text) - characters;
    if (isSpeakable(span)) this.queue.push({ kind: 'span', text: span, characters, part: this.part });
    else this.pending -= characters;
  }

  /** The spans that can be spoken now; with no delay, every complete word too. */
  private cutSpans(): void {
    const { spans, rest } = takeSpans(this.buffer);
    for (const s of spans) this.queueSpan(s);
    this.buffer = rest;
    if (this.cutting.delayMs === 0 && rest) {
      const words = takeWords(rest, false);
      this.queueSpan(words.span);
      this.buffer = words.rest;
    }
    if (spans.length > 0) this.armDelay();
    if (!this.buffer) this.disarmDelay();
  }

  /** A flush or the end: everything waiting is one last span. */
  private cutAll(): void {
    this.queueSpan(this.buffer);
    this.buffer = '';
    this.disarmDelay();
  }

  private armDelay(): void {
    this.disarmDelay();
    if (this.cutting.delayMs === 0) return;
    this.delay = setTimeout(() => {
      this.delay = undefined;
      if (this.current !== 'speaking' || !this.buffer) return;
      const words = takeWords(this.buffer, this.cutting.wholeAfterDelay);
      this.queueSpan(words.span);
      this.buffer = words.rest;
      if (this.buffer) this.armDelay();
      this.pump();
    }, this.cutting.delayMs);
  }

  private disarmDelay(): void {
    clearTimeout(this.delay);
    this.delay = undefined;
  }

  // ------------------------------------------------------------------------------------------
  // Speaking: one runner at a time, items in order

  private pump(): void {
    if (this.running || this.stopped || this.current === 'done') return;
    if (this.queue.length === 0) {
      // Waiting for text that could not be paid for: over now.
      if (this.current === 'speaking' && this.o.credit.exhausted) this.fail(this.o.credit.refusal());
      return;
    }
    this.running = true;
    void this.run().finally(() => {
      this.running = false;
      if (this.current === 'cancelled') this.settle.resolve();
      else this.pump();
    });
  }

  private async run(): Promise<void> {
    try {
      while (!this.stopped && this.queue.length > 0) {
        const item = this.queue[0]!;
        if (item.kind === 'flush') {
          this.queue.shift();
          this.o.sink.flushed?.(item.part);
          continue;
        }
        if (item.kind === 'end') {
          this.queue.shift();
          this.current = 'done';
          this.stopListening();
          this.settle.resolve();
          return;
        }
        // Spans that waited behind the last one are spoken together.
        let text = '';
        let characters = 0;
        for (let next = this.queue[0]; next?.kind === 'span'; next = this.queue[0]) {
          if (characters > 0 && characters + next.characters > this.cutting.joinUpToChars) break;
          this.queue.shift();
          text += next.text;
          characters += next.characters;
        }
        const span = { text, characters };
        await (this.o.around ? this.o.around(span, () => this.speak(text, characters, item.part)) : this.speak(text, characters, item.part));
      }
    } catch (e) {
      this.fail(e);
    }
  }

  private async speak(text: string, characters: number, part: number): Promise<void> {
    const { ctx, credit, model, sink } = this.o;
    const costMicros = perUnitCostMicros(model.prices.picoPerChar, characters);
    const turnAt = performance.now();
    if (!(await credit.reserve(costMicros))) throw credit.refusal();
    // Claimed until the debit takes it out of the hold; given back if none comes.
    let claimed = true;
    const call = new AbortController();
    this.call = call;
    const timeoutMs = ctx.config.upstreamTimeoutMs;
    const deadline = setTimeout(() => call.abort(new DOMException('The engine call reached its deadline.', 'TimeoutError')), timeoutMs);
    const upstreamCall = { signal: call.signal, timeoutMs };
    try {
      if (this.stopped) return;
      // After this speaker's first audio, a failing engine is a seam in a stream the listener hears.
      const trace = { ...this.o.failover, released: () => this.spoken > 0 };
      const engine = await startEngine(ctx, model, this.o.voice, { language: this.o.language, speed: this.o.speed }, text, upstreamCall, trace);
      // Stopped while the engine started: nothing was sent, nothing is billed.
      if (this.stopped) return;
      claimed = false;
      this.pending -= characters;
      const span: SpokenSpan = { text, characters, costMicros, part, index: this.spoken++, waitedMs: performance.now() - turnAt };
      sink.started(span);
      // The debit is written once the first chunk is out (the credit is reserved already) and awaited before the next span.
      let debit: Promise<unknown> | undefined;
      const startDebit = () => (debit ??= credit.charge(costMicros, { modelId: model.id, modality: 'tts', route: this.o.route, characters }));
      const converter = createAudioConverter({ inputSampleRate: engine.sampleRate, output: this.o.output, volume: this.o.volume });
      let converted = false;
      try {
        for await (const pcm of allChunks({ ...engine, call: upstreamCall })) {
          if (this.stopped) return;
          const out = converter.push(pcm);
          if (out.length) await sink.audio(out, out.length / this.bytesPerMs, span);
          startDebit();
        }
        converted = true;
        const tail = converter.end();
        if (tail.length && !this.stopped) await sink.audio(tail, tail.length / this.bytesPerMs, span);
      } finally {
        if (!converted) converter.close();
        await startDebit();
      }
    } catch (e) {
      if (this.stopped) return;
      throw clientErrorFor(e, upstreamCall);
    } finally {
      clearTimeout(deadline);
      if (this.call === call) this.call = null;
      if (claimed) credit.unreserve(costMicros);
    }
  }
}
