// One response of a /v1/realtime conversation: the LLM streamed (text and tool calls), its text
// spoken as it arrives (cut into spans as /tts/websocket cuts an LLM's tokens, each span through
// the TTS pipeline of /tts/sse), and the Realtime events for all of it, response.created to
// response.done. Metering per model, on the org's credits at each model's price: the LLM's answer
// is reserved before it runs (as chat reserves, from the prompt's size as the session measured
// it, before the prompt is built) and debited with the engine's token counts; each span is
// reserved before its engine starts and debited at its first audio, per character (as the TTS
// routes). A cancelled response (response.cancel, the user speaking over it, the session's end)
// stops the LLM and the TTS at once and is billed for what was generated: the tokens streamed so
// far, the spans whose audio started. A failed one stops its speech before response.done.
import { randomBytes } from 'node:crypto';
import type { Attributes, Context, Span } from '@opentelemetry/api';
import { isServiceError } from '../../server/services/errors.ts';
import { ERROR_TABLE } from '../errors.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import type { GatewayContext } from '../context.ts';
import { ChatFailover } from '../llm/chat-failover.ts';
import type { ChatDelta } from '../llm/chat-stream.ts';
import { LlmRun } from '../llm/llm-run.ts';
import { clientErrorFor } from '../core/try-upstreams.ts';
import type { ConversationItem, SpokenSpan } from './conversation.ts';
import type { ResponseEngines } from './engines.ts';
import type { SpanSpeaker } from '../tts/span-speaker.ts';
import { AudibleWatch, firstAudibleSample } from '../audio/first-audible.ts';
import { decodeSamples } from '../audio/sample-encoding.ts';
import { FORMAT_AUDIO } from './session-config.ts';
import { responseSpeaker } from './response-speaker.ts';
import { responseObject, type ResponseStatus, type ResponseUsage } from './response-object.ts';
import { partWire, type ResponseObject, type ServerEvent } from './server-events.ts';

export interface ResponseSpec {
  id: string;
  /** Chat request fields but the messages: tools, tool_choice, temperature, max_tokens. */
  chat: Record<string, unknown>;
  /** The chat messages, built once the answer's credit is reserved. */
  messages: () => object[];
  /** The prompt's size in bytes as the session measured it (the reservation's estimate). */
  promptBytes: number;
  engines: ResponseEngines;
  /** The response's items go into the conversation (false: an out-of-band response). */
  conversation: 'auto' | 'none';
  metadata: unknown;
  /** Ids for the response's items (the session's sequence). */
  newItemId: () => string;
  /**
   * A preemptive answer (responses.ts): it runs, but what it would send (its events, its items
   * into the conversation, its audio) waits until release() -- or is dropped by discard().
   */
  held?: boolean;
}

export interface ResponseHost {
  ctx: GatewayContext;
  auth: RequestAuth;
  requestId: string;
  send(event: ServerEvent): void;
  /** Sends, and waits while the client has not taken what was sent before (backpressure for audio). */
  sendPaced(event: ServerEvent): Promise<void>;
  /** An output item was added (to the conversation, when the response writes there). */
  onItem(item: ConversationItem, previousId: string | null): void;
  /** The balance after a debit (a zero balance ends the session). */
  onBalance(remaining: bigint): void;
  log: { warn(obj: unknown, msg: string): void };
}

/** Of the silence before an answer's first audible sample, this much is kept (a fade-in, not a cut). */
const LEAD_IN_KEPT_MS = 10;
/** Tool calls one answer may make. */
const MAX_TOOL_CALLS = 32;
/** Events a held answer may keep waiting; past it the answer is discarded (an answer that long was not worth preparing). */
const MAX_HELD_EVENTS = 2_000;

export class ResponseRun {
  readonly done: Promise<void>;
  private readonly abort = new AbortController();
  private cancelReason: 'turn_detected' | 'client_cancelled' | null = null;
  status: ResponseStatus = 'completed';
  private statusDetails: Record<string, unknown> | null = null;
  private readonly output: ConversationItem[] = [];
  readonly usage: ResponseUsage = { inputTokens: 0, outputTokens: 0, ttsCharacters: 0, llmMicros: 0n, ttsMicros: 0n };
  /** The assistant message being spoken, and its spans. */
  private message: (ConversationItem & { type: 'message' }) | null = null;
  readonly spans: SpokenSpan[] = [];
  private audioMs = 0;
  private firstAudioAt: number | undefined;
  /** When the answer's first audible sample is heard. */
  private readonly audible = new AudibleWatch();
  /** Gateway-side timings for the metrics and the benchmark (ms since the run started). */
  readonly timings: { llmFirstToken?: number; ttsFirstAudio?: number; firstAudible?: number } = {};
  /** When the run started (performance.now()), the origin of its timings. */
  readonly startedAt = performance.now();
  /** The answer's speech, once its LLM answered (audio responses). */
  private speech: SpanSpeaker | null = null;
  /** A held answer's output, in order, until it is released (null: live). */
  private held: (() => void)[] | null;
  private discarded = false;
  private readonly live: Promise<void>;
  private goLive!: () => void;

  constructor(
    private readonly host: ResponseHost,
    private readonly spec: ResponseSpec,
  ) {
    this.held = spec.held ? [] : null;
    this.live = spec.held ? new Promise((resolve) => (this.goLive = resolve)) : Promise.resolve();
    // One trace per response, a span for the LLM and one per spoken span, with their upstream attempts under them.
    const tracing = host.ctx.tracing;
    this.trace = tracing?.startInternal('realtime.response', {
      'svc.response_id': spec.id,
      'svc.org_id': host.auth.orgId,
      'svc.request_id': host.requestId,
      'svc.model': spec.engines.llm.id,
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

  /** Runs `fn` under a span of its own (a child of the response's), ended when `fn` settles. */
  async traced<T>(name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
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

  /** A held answer goes live: what it has made so far is sent now, in order, the rest as it comes. */
  release(): void {
    const held = this.held;
    if (!held || this.discarded) return;
    this.held = null;
    for (const out of held) out();
    this.goLive();
  }

  /** A held answer is not wanted: it stops, nothing of it is ever sent (what it generated is billed). */
  discard(): void {
    if (!this.held || this.discarded) return;
    this.discarded = true;
    this.held = [];
    this.cancel('client_cancelled');
    this.goLive();
  }

  /** Still held, or dropped: not (yet) the client's. */
  get isHeld(): boolean {
    return this.held !== null;
  }

  get isDiscarded(): boolean {
    return this.discarded;
  }

  /** Resolves when the answer is live (at once, unless held) or discarded. */
  get released(): Promise<void> {
    return this.live;
  }

  /** Sends now, or once released (held), or never (discarded). */
  private send(event: ServerEvent): void {
    this.whenLive(() => this.host.send(event));
  }

  private whenLive(out: () => void): void {
    if (this.discarded) return;
    if (!this.held) return out();
    if (this.held.length >= MAX_HELD_EVENTS) return this.discard();
    this.held.push(out);
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

  /** What the answer said so far (its transcript or text), for the request log. */
  transcript(): string | undefined {
    const part = this.message?.content[0];
    if (part?.type === 'output_audio') return part.transcript;
    return part?.type === 'output_text' ? part.text : undefined;
  }

  /** Milliseconds of the answer's audio the client may have played by now: sent, and no faster than real time. */
  playedMs(): number {
    if (this.firstAudioAt === undefined) return 0;
    return Math.min(this.audioMs, performance.now() - this.firstAudioAt);
  }

  private base(): { response_id: string } {
    return { response_id: this.spec.id };
  }

  private responseObject(status: ResponseStatus | 'in_progress'): ResponseObject {
    const done = status !== 'in_progress';
    const { spec } = this;
    return responseObject({ ...spec, status, statusDetails: this.statusDetails, output: this.output, usage: done ? this.usage : null, timings: this.timings });
  }

  private async run(): Promise<void> {
    const { host, spec } = this;
    this.send({ type: 'response.created', response: this.responseObject('in_progress') });
    let llm: LlmRun | null = null;
    let ttsHold: CreditHold | null = null;
    try {
      const { ctx, auth } = host;
      const options = { ...spec.chat, stream: true, stream_options: { include_usage: true } };
      llm = await LlmRun.reserve(ctx, { auth, requestId: host.requestId }, spec.engines.llm, 'realtime', options, spec.promptBytes);
      if (spec.engines.tts) ttsHold = await ctx.core.reserve(auth, 0n);
      const body = { messages: spec.messages(), ...options };
      const raw = Buffer.from(JSON.stringify(body));
      await this.traced('realtime.llm', { 'svc.model': spec.engines.llm.id }, () => this.stream(body, raw, llm!, ttsHold));
    } catch (e) {
      if (!this.cancelReason) {
        this.status = 'failed';
        const error = isServiceError(e)
          ? { type: ERROR_TABLE[e.code].status >= 500 ? 'server_error' : 'invalid_request_error', code: e.code, message: e.message }
          : { type: 'server_error', code: 'server_error', message: 'The response failed.' };
        if (!isServiceError(e)) host.log.warn({ err: e }, 'realtime response failed');
        this.statusDetails = { type: 'failed', error };
        this.send({ type: 'error', error: { ...error, param: null, event_id: null } });
      }
    } finally {
      if (this.cancelReason) {
        this.status = 'cancelled';
        this.statusDetails = { type: 'cancelled', reason: this.cancelReason };
      }
      // A failed answer says nothing after response.done: what it was still speaking stops first.
      if (this.status === 'failed') await this.silence();
      llm?.release();
      ttsHold?.release();
      this.finishItems();
      this.send({ type: 'response.done', response: this.responseObject(this.status) });
    }
  }

  /** The LLM's stream: text deltas to the message (spoken when audio), tool calls to function_call items. */
  private async stream(body: Record<string, unknown>, raw: Buffer, llm: LlmRun, ttsHold: CreditHold | null): Promise<void> {
    const { host, spec } = this;
    const { ctx } = host;
    const call = { signal: this.abort.signal, timeoutMs: ctx.config.upstreamTimeoutMs, ref: { orgId: host.auth.orgId, requestId: host.requestId } };
    // The answer survives its engine: the next upstream takes over before or after the first token (gateway/llm/chat-failover.ts).
    const failover = new ChatFailover(
      llm,
      call,
      host.log,
      (upstream) => {
        const sent = { ...body, model: upstream.upstreamModel };
        return { raw: upstream.upstreamModel === spec.engines.llm.id ? raw : Buffer.from(JSON.stringify(sent)), body: sent };
      },
      true,
    );
    const events = failover.events(await failover.open());

    const speaker = spec.engines.tts ? responseSpeaker(this, host, spec.engines.tts, ttsHold!, this.abort.signal) : null;
    this.speech = speaker;
    const calls = new Map<number, ConversationItem & { type: 'function_call' }>();
    let text = '';
    let finish: string | null = null;
    try {
      for await (const event of events) {
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
    if (speaker) await speaker.end().catch((e: unknown) => (speechError = e));
    if (this.message) {
      const part = this.message.content[0]!;
      const full = part.type === 'output_audio' ? part.transcript : text;
      const where = { ...this.base(), item_id: this.message.id, output_index: this.output.indexOf(this.message), content_index: 0 };
      if (speaker) {
        this.send({ type: 'response.output_audio.done', ...where });
        this.send({ type: 'response.output_audio_transcript.done', ...where, transcript: full });
      } else this.send({ type: 'response.output_text.done', ...where, text: full });
      this.send({ type: 'response.content_part.done', ...where, part: partWire(part) });
    }
    for (const item of calls.values()) {
      item.status = 'completed';
      this.send({
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

  /** Stops the answer's speech and waits until nothing more of it can be sent. */
  private async silence(): Promise<void> {
    if (!this.speech) return;
    if (!this.abort.signal.aborted) this.abort.abort(new DOMException('failed', 'AbortError'));
    await this.speech.end().catch(() => {});
  }

  private addItem(item: ConversationItem): void {
    const previous = this.output.at(-1)?.id ?? null;
    this.output.push(item);
    this.send({ type: 'response.output_item.added', ...this.base(), output_index: this.output.length - 1, item: { ...item } });
    this.whenLive(() => this.host.onItem(item, previous));
  }

  private textDelta(content: string, speaker: SpanSpeaker | null): void {
    if (!this.message) {
      this.message = { id: this.spec.newItemId(), object: 'realtime.item', type: 'message', role: 'assistant', status: 'in_progress', content: [] };
      this.addItem(this.message);
      const part = speaker ? ({ type: 'output_audio', transcript: '' } as const) : ({ type: 'output_text', text: '' } as const);
      this.message.content.push({ ...part });
      this.send({
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
    this.send({
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
    this.send({
      type: 'response.function_call_arguments.delta',
      ...this.base(),
      item_id: item.id,
      output_index: this.output.indexOf(item),
      call_id: item.call_id,
      delta: piece,
    });
  }

  /** Sends a span's transcript (with its first audio) and its audio (the speaker's sink); waits while the client is behind. */
  async spoke(span: string, audio: Buffer, millis: number): Promise<void> {
    const m = this.message!;
    const part = m.content[0] as { type: 'output_audio'; transcript: string };
    const index = this.output.indexOf(m);
    if (span) {
      this.spans.push({ text: span, startMs: this.audioMs, endMs: this.audioMs });
      const piece = part.transcript ? ` ${span}` : span;
      part.transcript += piece;
      this.send({ type: 'response.output_audio_transcript.delta', ...this.base(), item_id: m.id, output_index: index, content_index: 0, delta: piece });
    }
    if (audio.length === 0) return;
    // A held answer's audio waits here (the span speaker behind it waits too): its timings start when it is sent.
    if (this.held) await this.live;
    if (this.discarded) return;
    if (this.firstAudioAt === undefined) {
      // The engine's lead-in silence is not sent: the answer starts where it can be heard.
      const from = this.audibleFrom(audio);
      if (from === null) return;
      audio = audio.subarray(from);
      millis = (millis * audio.length) / (audio.length + from);
    }
    if (this.firstAudioAt === undefined) {
      this.firstAudioAt = performance.now();
      this.timings.ttsFirstAudio = this.firstAudioAt - this.startedAt;
    }
    this.findAudible(audio);
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

  /** The byte the answer's audio starts at, a little before its first audible sample; null while `audio` is all silence. */
  private audibleFrom(audio: Buffer): number | null {
    const { encoding, sampleRate } = FORMAT_AUDIO[this.spec.engines.tts!.format];
    const at = firstAudibleSample(decodeSamples(audio, encoding));
    if (at < 0) return null;
    const bytesPerSample = encoding === 'pcm_s16le' ? 2 : 1;
    return Math.max(0, at - Math.round((LEAD_IN_KEPT_MS * sampleRate) / 1000)) * bytesPerSample;
  }

  /** The first audible sample, as a listener who plays the answer from its first byte hears it (ms since the run started). */
  private findAudible(audio: Buffer): void {
    const tts = this.spec.engines.tts;
    if (!tts) return;
    const { encoding, sampleRate } = FORMAT_AUDIO[tts.format];
    const heardAt = this.audible.sentBytes(audio, encoding, sampleRate);
    if (heardAt === undefined) return;
    this.timings.firstAudible = heardAt - this.startedAt;
    this.trace?.span.setAttribute('svc.first_audible_ms', Math.round(this.timings.firstAudible));
  }

  /** Item statuses at the end, and conversation.item.done for each (in the conversation's order). */
  private finishItems(): void {
    for (const [index, item] of this.output.entries()) {
      if (item.type !== 'function_call_output') item.status = this.status === 'completed' ? 'completed' : 'incomplete';
      this.send({ type: 'response.output_item.done', ...this.base(), output_index: index, item: { ...item } });
      if (this.spec.conversation === 'auto') this.send({ type: 'conversation.item.done', item: { ...item } });
    }
  }
}
