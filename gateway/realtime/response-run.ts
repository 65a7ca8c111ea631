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
import { llmCostMicros } from '../../server/services/credits/pricing.ts';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import { formatUsd } from '../../server/money.ts';
import { ERROR_TABLE } from '../errors.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import type { GatewayContext } from '../context.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import { estimateTokens, reservationFor } from '../routes/chat-completions.ts';
import { SseSplitter, sseData } from '../sse.ts';
import { SpanCredit } from '../tts/span-credit.ts';
import { SpanSpeaker } from '../tts/span-speaker.ts';
import type { ResolvedVoice } from '../tts/synthesize.ts';
import { statusError } from '../upstreams/engine-http.ts';
import { clientErrorFor, tryUpstreams } from '../upstreams/try-upstreams.ts';
import { upstreamEnvelope } from '../upstream-envelope.ts';
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

/** Words waiting this long without a sentence's end are spoken anyway. */
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
    let llmHold: CreditHold | null = null;
    let ttsHold: CreditHold | null = null;
    try {
      const { ctx, auth } = host;
      const body = { ...spec.chat, stream: true, stream_options: { include_usage: true } };
      const raw = Buffer.from(JSON.stringify(body));
      llmHold = await ctx.core.reserve(auth, reservationFor(spec.legs.llm, body, raw.length, ctx.config.limits.llmReserveMaxTokens));
      if (spec.legs.tts) ttsHold = await ctx.core.reserve(auth, 0n);
      await this.leg('realtime.llm', { 'svc.model': spec.legs.llm.id }, () => this.stream(body, raw, llmHold!, ttsHold));
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
      llmHold?.release();
      ttsHold?.release();
      this.finishItems();
      host.send({ type: 'response.done', response: this.responseObject(this.status) });
    }
  }

  /** The LLM's stream: text deltas to the message (spoken when audio), tool calls to function_call items. */
  private async stream(body: Record<string, unknown>, raw: Buffer, llmHold: CreditHold, ttsHold: CreditHold | null): Promise<void> {
    const { host, spec } = this;
    const { ctx } = host;
    const call = { signal: this.abort.signal, timeoutMs: ctx.config.upstreamTimeoutMs };
    const answer = await tryUpstreams(ctx, spec.legs.llm, call, async (upstream) => {
      const chat = ctx.protocols.get(upstream.protocol)?.chat;
      if (!chat) throw new ServiceError('model_offline', `The upstream of '${spec.legs.llm.id}' (protocol ${upstream.protocol}) cannot chat.`);
      const sent = { ...body, model: upstream.upstreamModel };
      const res = await chat(upstream, {
        raw: upstream.upstreamModel === spec.legs.llm.id ? raw : Buffer.from(JSON.stringify(sent)),
        body: sent,
        signal: call.signal,
        timeoutMs: call.timeoutMs,
      });
      return { res, upstream };
    });
    const { res, upstream } = answer;
    if (res.statusCode >= 300) throw upstreamEnvelope(statusError(res.statusCode, await res.text().catch(() => ''), upstream.apiKey), call.timeoutMs);

    const speaker = spec.legs.tts ? this.speaker(spec.legs.tts, ttsHold!) : null;
    const calls = new Map<number, ConversationItem & { type: 'function_call' }>();
    let text = '';
    let deltas = 0;
    let usage: { prompt_tokens?: number; completion_tokens?: number } | undefined;
    let finish: string | null = null;
    const splitter = new SseSplitter();
    try {
      for await (const chunk of res.body) {
        for (const event of splitter.push(chunk as Buffer)) {
          const data = sseData(event);
          if (data === null || data === '[DONE]') continue;
          let parsed: {
            choices?: { delta?: { content?: string | null; tool_calls?: ToolCallDelta[] }; finish_reason?: string | null }[];
            usage?: typeof usage;
          };
          try {
            parsed = JSON.parse(data) as typeof parsed;
          } catch {
            continue;
          }
          if (parsed.usage) usage = parsed.usage;
          const choice = parsed.choices?.[0];
          if (!choice) continue;
          if (choice.finish_reason) finish = choice.finish_reason;
          const content = choice.delta?.content;
          if (content) {
            if (deltas++ === 0) this.timings.llmFirstToken = performance.now() - this.startedAt;
            text += content;
            this.textDelta(content, speaker);
          }
          for (const t of choice.delta?.tool_calls ?? []) {
            if (deltas++ === 0) this.timings.llmFirstToken = performance.now() - this.startedAt;
            this.toolCallDelta(calls, t);
          }
        }
      }
    } catch (e) {
      if (!this.cancelReason) throw clientErrorFor(e, call);
    } finally {
      // Billed once, for what was generated: the engine's count, else one token per delta.
      this.usage.inputTokens = usage?.prompt_tokens ?? estimateTokens(raw.length);
      this.usage.outputTokens = usage?.completion_tokens ?? deltas;
      this.usage.llmMicros = llmCostMicros(spec.legs.llm.prices, this.usage.inputTokens, this.usage.outputTokens);
      const remaining = await ctx.core.charge(
        host.auth,
        host.requestId,
        this.usage.llmMicros,
        { modelId: spec.legs.llm.id, modality: 'llm', route: 'realtime', inputTokens: this.usage.inputTokens, outputTokens: this.usage.outputTokens },
        llmHold,
      );
      host.onBalance(remaining);
    }
    // The parts already out are closed with their .done events even when the speech failed (no credit for the next span).
    let speechError: unknown;
    if (speaker) await speaker.end().catch((e: unknown) => (speechError = e));
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

  private textDelta(content: string, speaker: SpanSpeaker | null): void {
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

  private toolCallDelta(calls: Map<number, ConversationItem & { type: 'function_call' }>, t: ToolCallDelta): void {
    const index = t.index ?? 0;
    let item = calls.get(index);
    if (!item) {
      if (calls.size >= MAX_TOOL_CALLS) return;
      item = {
        id: this.spec.newItemId(),
        object: 'realtime.item',
        type: 'function_call',
        status: 'in_progress',
        call_id: t.id ?? `call_${randomBytes(8).toString('hex')}`,
        name: t.function?.name ?? '',
        arguments: '',
      };
      calls.set(index, item);
      this.addItem(item);
    }
    const piece = t.function?.arguments ?? '';
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

  /**
   * The TTS of this response: the text spoken as it arrives (gateway/tts/span-speaker.ts), each
   * span paid for before its engine starts; the response's cancel stops it at once.
   */
  private speaker(tts: NonNullable<ResponseLegs['tts']>, hold: CreditHold): SpanSpeaker {
    const { ctx, auth, requestId } = this.host;
    const speaker = new SpanSpeaker({
      ctx,
      model: tts.model,
      voice: tts.voice,
      language: tts.language,
      speed: tts.speed,
      output: { container: 'raw', ...FORMAT_AUDIO[tts.format] },
      route: 'realtime',
      credit: new SpanCredit({
        ctx,
        auth,
        requestId,
        hold,
        refusal: () => new ServiceError('insufficient_quota', "The organization's credit does not cover the answer's speech; add credits to continue."),
        onBalance: (remaining) => this.host.onBalance(remaining),
      }),
      cutting: { delayMs: SPAN_DELAY_MS, wholeAfterDelay: false, joinUpToChars: 0, trim: true },
      sink: {
        started: (span) => {
          this.usage.ttsCharacters += span.characters;
          this.usage.ttsMicros += span.costMicros;
          void this.spoke(span.text, Buffer.alloc(0), 0);
        },
        audio: (chunk, ms) => this.spoke('', chunk, ms),
      },
      around: (span, speak) => this.leg('realtime.tts', { 'svc.model': tts.model.id, 'svc.characters': span.characters }, speak),
    });
    if (this.abort.signal.aborted) speaker.cancel();
    else this.abort.signal.addEventListener('abort', () => speaker.cancel(), { once: true });
    return speaker;
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

interface ToolCallDelta {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}
