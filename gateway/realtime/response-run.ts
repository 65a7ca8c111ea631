// One response of a /v1/realtime conversation: the LLM streamed (text and tool calls), its text
// spoken as it arrives (cut into spans as /tts/websocket cuts an LLM's tokens, each span through
// the TTS pipeline of /tts/sse), and the Realtime events for all of it, response.created to
// response.done. Metering per leg, on the org's credits at each model's price: the LLM's answer
// is reserved before it runs (as chat reserves) and debited with the engine's token counts; each
// span is reserved before its engine starts and debited at its first audio, per character (as
// the TTS routes). A cancelled response (response.cancel, or the user speaking over it) stops the
// LLM and the TTS at once and is billed for what was generated: the tokens streamed so far, the
// spans whose audio started.
import { randomBytes } from 'node:crypto';
import type { Attributes, Context, Span } from '@opentelemetry/api';
import { perUnitCostMicros } from '../../server/services/credits/pricing.ts';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import { formatUsd } from '../../server/money.ts';
import { createAudioConverter } from '../audio/convert.ts';
import { ERROR_TABLE } from '../errors.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import type { GatewayContext } from '../context.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import { chatStreamEvents, type ChatDelta } from '../llm/chat-stream.ts';
import { LlmRun, callChat } from '../llm/llm-run.ts';
import { allChunks, billedCharacters, startEngine, type ResolvedVoice } from '../tts/synthesize.ts';
import { isSpeakable, takeSpans, takeWords } from '../tts/text-spans.ts';
import { clientErrorFor } from '../core/try-upstreams.ts';
import type { ContentPart, ConversationItem } from './conversation.ts';
import { FORMAT_AUDIO, GA_FORMAT, type RealtimeAudioFormat } from './session-config.ts';

export interface ResponseLegs {
  llm: ModelEntry;
  /** null: a text-only response. */
  tts: { model: ModelEntry; voice: ResolvedVoice; voiceId: string; speed: number; language: string | undefined; format: RealtimeAudioFormat } | null;
}

export interface ResponseSpec {
  id: string;
  /** Chat request fields: messages, tools, tool_choice, temperature, max_tokens. */
  chat: Record<string, unknown>;
  legs: ResponseLegs;
  /** The response's items go into the conversation (false: an out-of-band response). */
  conversation: 'auto' | 'none';
  metadata: unknown;
  /** The client's event that asked for it (error events name it). */
  newItemId: () => string;
}

export interface ResponseHost {
  ctx: GatewayContext;
  auth: RequestAuth;
  requestId: string;
  send(event: Record<string, unknown>): void;
  /** Sends, and waits while the client has not taken what was sent before (backpressure for audio). */
  sendPaced(event: Record<string, unknown>): Promise<void>;
  /** An output item was added (to the conversation, when the response writes there). */
  onItem(item: ConversationItem, previousId: string | null): void;
  /** The balance after a debit (a zero balance ends the session). */
  onBalance(remaining: bigint): void;
  log: { warn(obj: unknown, msg: string): void };
}

/** What a response cost and used, per leg (response.done.usage, and the metrics). */
export interface ResponseUsage {
  inputTokens: number;
  outputTokens: number;
  ttsCharacters: number;
  llmMicros: bigint;
  ttsMicros: bigint;
}

/** One spoken span: its text and where its audio lies in the item's audio (ms). */
interface SpokenSpan {
  text: string;
  startMs: number;
  endMs: number;
}

/** A content part as response.content_part.* name it ("text" / "audio"; items call them output_text / output_audio). */
const partWire = (part: ContentPart): object =>
  part.type === 'output_audio' ? { type: 'audio', transcript: part.transcript } : { type: 'text', text: 'text' in part ? part.text : '' };

const round1 = (ms: number | undefined) => (ms === undefined ? null : Math.round(ms * 10) / 10);

type Status = 'completed' | 'cancelled' | 'incomplete' | 'failed';

/** Idle span cutting: words waiting this long without a sentence's end are spoken anyway. */
const SPAN_DELAY_MS = 300;
/** Tool calls one answer may make. */
const MAX_TOOL_CALLS = 32;

export class ResponseRun {
  readonly done: Promise<void>;
  private readonly abort = new AbortController();
  private cancelReason: 'turn_detected' | 'client_cancelled' | null = null;
  status: Status = 'completed';
  private statusDetails: Record<string, unknown> | null = null;
  private readonly output: ConversationItem[] = [];
  readonly usage: ResponseUsage = { inputTokens: 0, outputTokens: 0, ttsCharacters: 0, llmMicros: 0n, ttsMicros: 0n };
  /** The assistant message being spoken, and its spans. */
  private message: (ConversationItem & { type: 'message' }) | null = null;
  readonly spans: SpokenSpan[] = [];
  private audioMs = 0;
  private firstAudioAt: number | undefined;
  /** Gateway-side timings for the metrics and the benchmark (ms since the run started). */
  readonly timings: { llmFirstToken?: number; ttsFirstAudio?: number } = {};
  private readonly startedAt = performance.now();

  constructor(
    private readonly host: ResponseHost,
    private readonly spec: ResponseSpec,
  ) {
    // One trace per response, a span per leg (the LLM's, each spoken span's) with their upstream attempts under them.
    const tracing = host.ctx.tracing;
    this.trace = tracing?.startInternal('realtime.response', {
      'svc.response_id': spec.id,
      'svc.org_id': host.auth.orgId,
      'svc.request_id': host.requestId,
      'svc.model': spec.legs.llm.id,
    });
    const running = this.trace ? tracing!.run(this.trace.context, () => this.run()) : this.run();
    this.done = running
      .catch((e: unknown) => this.host.log.warn({ err: e }, 'realtime response failed'))
      .finally(() => {
        this.trace?.span.setAttributes({
          'svc.status': this.status,
          'svc.output_tokens': this.usage.outputTokens,
          'svc.tts_characters': this.usage.ttsCharacters,
        });
        this.trace?.span.end();
      });
  }

  private readonly trace: { span: Span; context: Context } | undefined;

  /** Runs `fn` under a leg's span (a child of the response's), ended when `fn` settles. */
  async leg<T>(name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
    const tracing = this.host.ctx.tracing;
    if (!tracing || !this.trace) return fn();
    const { span, context } = tracing.startInternal(name, attributes, this.trace.context);
    try {
      return await tracing.run(context, fn);
    } catch (e) {
      span.setStatus({ code: 2, message: e instanceof Error ? e.message : String(e) });
      throw e;
    } finally {
      span.end();
    }
  }

  get id(): string {
    return this.spec.id;
  }

  get assistantItemId(): string | null {
    return this.message?.id ?? null;
  }

  get cancelled(): boolean {
    return this.cancelReason !== null;
  }

  /** Stops the LLM and the TTS now; the response ends `cancelled`. */
  cancel(reason: 'turn_detected' | 'client_cancelled'): void {
    if (this.cancelReason || this.abort.signal.aborted) return;
    this.cancelReason = reason;
    this.abort.abort(new DOMException('cancelled', 'AbortError'));
  }

  /** Milliseconds of the answer's audio the client may have played by now: sent, and no faster than real time. */
  playedMs(): number {
    if (this.firstAudioAt === undefined) return 0;
    return Math.min(this.audioMs, performance.now() - this.firstAudioAt);
  }

  private base(): Record<string, unknown> {
    return { response_id: this.spec.id };
  }

  private responseObject(status: Status | 'in_progress'): Record<string, unknown> {
    const { legs } = this.spec;
    return {
      id: this.spec.id,
      object: 'realtime.response',
      status,
      status_details: status === 'in_progress' ? null : this.statusDetails,
      output: status === 'in_progress' ? [] : this.output,
      conversation_id: this.spec.conversation === 'auto' ? 'conv_default' : null,
      output_modalities: legs.tts ? ['audio'] : ['text'],
      max_output_tokens: this.spec.chat.max_tokens ?? 'inf',
      audio: legs.tts ? { output: { format: GA_FORMAT[legs.tts.format], voice: legs.tts.voiceId } } : null,
      metadata: this.spec.metadata ?? null,
      usage: status === 'in_progress' ? null : this.usageWire(),
      // Ours: ms from the response's start to the LLM's first token and to the first audio sent (latency per leg).
      ...(status === 'in_progress'
        ? {}
        : { svc_timings: { llm_first_token_ms: round1(this.timings.llmFirstToken), first_audio_ms: round1(this.timings.ttsFirstAudio) } }),
    };
  }

  private usageWire(): Record<string, unknown> {
    const u = this.usage;
    return {
      total_tokens: u.inputTokens + u.outputTokens,
      input_tokens: u.inputTokens,
      output_tokens: u.outputTokens,
      input_token_details: {
        text_tokens: u.inputTokens,
        audio_tokens: 0,
        cached_tokens: 0,
        image_tokens: 0,
        cached_tokens_details: { text_tokens: 0, audio_tokens: 0, image_tokens: 0 },
      },
      output_token_details: { text_tokens: u.outputTokens, audio_tokens: 0 },
      // Ours: what each leg of this response used and cost (the speech-to-text of the user's audio is metered by the second, apart).
      svc: {
        llm_model: this.spec.legs.llm.id,
        tts_model: this.spec.legs.tts?.model.id ?? null,
        tts_characters: u.ttsCharacters,
        llm_cost_usd: formatUsd(u.llmMicros),
        tts_cost_usd: formatUsd(u.ttsMicros),
      },
    };
  }

  private async run(): Promise<void> {
    const { host, spec } = this;
    host.send({ type: 'response.created', response: this.responseObject('in_progress') });
    let llm: LlmRun | null = null;
    let ttsHold: CreditHold | null = null;
    try {
      const { ctx, auth } = host;
      const body = { ...spec.chat, stream: true, stream_options: { include_usage: true } };
      const raw = Buffer.from(JSON.stringify(body));
      llm = await LlmRun.reserve(ctx, { auth, requestId: host.requestId }, spec.legs.llm, 'realtime', body, raw.length);
      if (spec.legs.tts) ttsHold = await ctx.core.reserve(auth, 0n);
      await this.leg('realtime.llm', { 'svc.model': spec.legs.llm.id }, () => this.stream(body, raw, llm!, ttsHold));
    } catch (e) {
      if (!this.cancelReason) {
        this.status = 'failed';
        const error = isServiceError(e)
          ? { type: ERROR_TABLE[e.code].status >= 500 ? 'server_error' : 'invalid_request_error', code: e.code, message: e.message }
          : { type: 'server_error', code: 'server_error', message: 'The response failed.' };
        if (!isServiceError(e)) host.log.warn({ err: e }, 'realtime response failed');
        this.statusDetails = { type: 'failed', error };
        host.send({ type: 'error', error: { ...error, param: null, event_id: null } });
      }
    } finally {
      if (this.cancelReason) {
        this.status = 'cancelled';
        this.statusDetails = { type: 'cancelled', reason: this.cancelReason };
      }
      llm?.release();
      ttsHold?.release();
      this.finishItems();
      host.send({ type: 'response.done', response: this.responseObject(this.status) });
    }
  }

  /** The LLM's stream: text deltas to the message (spoken when audio), tool calls to function_call items. */
  private async stream(body: Record<string, unknown>, raw: Buffer, llm: LlmRun, ttsHold: CreditHold | null): Promise<void> {
    const { host, spec } = this;
    const { ctx } = host;
    const call = { signal: this.abort.signal, timeoutMs: ctx.config.upstreamTimeoutMs };
    const { res } = await callChat(ctx, spec.legs.llm, call, (upstream) => {
      const sent = { ...body, model: upstream.upstreamModel };
      return {
        raw: upstream.upstreamModel === spec.legs.llm.id ? raw : Buffer.from(JSON.stringify(sent)),
        body: sent,
        signal: call.signal,
        timeoutMs: call.timeoutMs,
      };
    });

    const speaker = spec.legs.tts ? new Speaker(this, host, spec.legs.tts, ttsHold!, this.abort.signal) : null;
    const calls = new Map<number, ConversationItem & { type: 'function_call' }>();
    let text = '';
    let finish: string | null = null;
    try {
      for await (const event of chatStreamEvents(res.body)) {
        if (llm.countChat(event)) this.timings.llmFirstToken = performance.now() - this.startedAt;
        for (const d of event.deltas) {
          if (d.type === 'finish') finish = d.reason;
          else if (d.type === 'text') {
            text += d.text;
            this.textDelta(d.text, speaker);
          } else if (d.type === 'tool_call') this.toolCallDelta(calls, d);
        }
      }
    } catch (e) {
      if (!this.cancelReason) throw clientErrorFor(e, call);
    } finally {
      // Billed once, for what was generated: the engine's count, else one token per output chunk.
      const { input, output } = llm.tokens();
      this.usage.inputTokens = input;
      this.usage.outputTokens = output;
      this.usage.llmMicros = llm.cost();
      host.onBalance((await llm.debit()).remaining);
    }
    // The parts already out are closed with their .done events even when the speech failed (no credit for the next span).
    let speechError: unknown;
    if (speaker) await speaker.end(this.cancelReason !== null).catch((e: unknown) => (speechError = e));
    if (this.message) {
      const part = this.message.content[0]!;
      const full = part.type === 'output_audio' ? part.transcript : text;
      if (speaker)
        host.send({
          type: 'response.output_audio.done',
          ...this.base(),
          item_id: this.message.id,
          output_index: this.output.indexOf(this.message),
          content_index: 0,
        });
      host.send({
        type: speaker ? 'response.output_audio_transcript.done' : 'response.output_text.done',
        ...this.base(),
        item_id: this.message.id,
        output_index: this.output.indexOf(this.message),
        content_index: 0,
        ...(speaker ? { transcript: full } : { text: full }),
      });
      host.send({
        type: 'response.content_part.done',
        ...this.base(),
        item_id: this.message.id,
        output_index: this.output.indexOf(this.message),
        content_index: 0,
        part: partWire(part),
      });
    }
    for (const item of calls.values()) {
      item.status = 'completed';
      host.send({
        type: 'response.function_call_arguments.done',
        ...this.base(),
        item_id: item.id,
        output_index: this.output.indexOf(item),
        call_id: item.call_id,
        name: item.name,
        arguments: item.arguments,
      });
    }
    if (speechError) throw speechError;
    if (finish === 'length' && !this.cancelReason) {
      this.status = 'incomplete';
      this.statusDetails = { type: 'incomplete', reason: 'max_output_tokens' };
    }
  }

  private addItem(item: ConversationItem): void {
    const previous = this.output.at(-1)?.id ?? null;
    this.output.push(item);
    this.host.send({ type: 'response.output_item.added', ...this.base(), output_index: this.output.length - 1, item: { ...item } });
    this.host.onItem(item, previous);
  }

  private textDelta(content: string, speaker: Speaker | null): void {
    if (!this.message) {
      this.message = { id: this.spec.newItemId(), object: 'realtime.item', type: 'message', role: 'assistant', status: 'in_progress', content: [] };
      this.addItem(this.message);
      const part = speaker ? ({ type: 'output_audio', transcript: '' } as const) : ({ type: 'output_text', text: '' } as const);
      this.message.content.push({ ...part });
      this.host.send({
        type: 'response.content_part.added',
        ...this.base(),
        item_id: this.message.id,
        output_index: this.output.indexOf(this.message),
        content_index: 0,
        part: partWire(part),
      });
    }
    if (speaker) return speaker.push(content);
    const part = this.message.content[0] as { type: 'output_text'; text: string };
    part.text += content;
    this.host.send({
      type: 'response.output_text.delta',
      ...this.base(),
      item_id: this.message.id,
      output_index: this.output.indexOf(this.message),
      content_index: 0,
      delta: content,
    });
  }

  private toolCallDelta(calls: Map<number, ConversationItem & { type: 'function_call' }>, t: ChatDelta & { type: 'tool_call' }): void {
    const index = t.index;
    let item = calls.get(index);
    if (!item) {
      if (calls.size >= MAX_TOOL_CALLS) return;
      item = {
        id: this.spec.newItemId(),
        object: 'realtime.item',
        type: 'function_call',
        status: 'in_progress',
        call_id: t.id ?? `call_${randomBytes(8).toString('hex')}`,
        name: t.name ?? '',
        arguments: '',
      };
      calls.set(index, item);
      this.addItem(item);
    }
    const piece = t.arguments;
    if (!piece) return;
    item.arguments += piece;
    this.host.send({
      type: 'response.function_call_arguments.delta',
      ...this.base(),
      item_id: item.id,
      output_index: this.output.indexOf(item),
      call_id: item.call_id,
      delta: piece,
    });
  }

  /** Sends a span's transcript (with its first audio) and its audio (Speaker); waits while the client is behind. */
  async spoke(span: string, audio: Buffer, millis: number): Promise<void> {
    const m = this.message!;
    const part = m.content[0] as { type: 'output_audio'; transcript: string };
    const index = this.output.indexOf(m);
    if (span) {
      this.spans.push({ text: span, startMs: this.audioMs, endMs: this.audioMs });
      const piece = part.transcript ? ` ${span}` : span;
      part.transcript += piece;
      this.host.send({ type: 'response.output_audio_transcript.delta', ...this.base(), item_id: m.id, output_index: index, content_index: 0, delta: piece });
    }
    if (audio.length === 0) return;
    if (this.firstAudioAt === undefined) {
      this.firstAudioAt = performance.now();
      this.timings.ttsFirstAudio = this.firstAudioAt - this.startedAt;
    }
    this.audioMs += millis;
    this.spans.at(-1)!.endMs = this.audioMs;
    await this.host.sendPaced({
      type: 'response.output_audio.delta',
      ...this.base(),
      item_id: m.id,
      output_index: index,
      content_index: 0,
      delta: audio.toString('base64'),
    });
  }

  /** Item statuses at the end, and conversation.item.done for each (in the conversation's order). */
  private finishItems(): void {
    for (const [index, item] of this.output.entries()) {
      if (item.type !== 'function_call_output') item.status = this.status === 'completed' ? 'completed' : 'incomplete';
      this.host.send({ type: 'response.output_item.done', ...this.base(), output_index: index, item: { ...item } });
      if (this.spec.conversation === 'auto') this.host.send({ type: 'conversation.item.done', item: { ...item } });
    }
  }
}

/**
 * The TTS of one response: text in pieces in, spans cut as soon as one is speakable, spoken one
 * after the other (so the audio is in order), each paid for before its engine starts.
 */
class Speaker {
  private buffer = '';
  private queue: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private failed: unknown;
  private readonly output;

  constructor(
    private readonly run: ResponseRun,
    private readonly host: ResponseHost,
    private readonly tts: NonNullable<ResponseLegs['tts']>,
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
      .then(() => this.run.leg('realtime.tts', { 'svc.model': this.tts.model.id, 'svc.characters': billedCharacters(span) }, () => this.speak(span)))
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
