// The responses of one /v1/realtime session: response.create read into a run (response-run.ts),
// every run tracked, in the conversation or out of band (`conversation: "none"`). At most
// MAX_RUNNING_RESPONSES run at once, one of them the conversation's; each counts against its
// key's cap of requests in flight, as an HTTP chat request would; all of them are cancelled when
// the session ends (its close, the key's revocation, the gateway's shutdown). A response's
// `input` is counted and sized before anything is built from it: item references may name one
// large item many times.
//
// Preemptive answers (`svc_preemptive_answers`, docs/realtime.md#preemptive-answers): on the
// eager end of a turn the answer starts held (response-run.ts: it runs, nothing of it is sent),
// with the words heard so far as the user's message. When the turn is committed with exactly
// those words, after the same conversation and settings, it is released and is the turn's answer;
// otherwise (the user went on, the words differ) it is discarded. What discarded answers cost is
// billed like any cancelled response, and bounded per session.
import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import type { RequestAuth } from '../core/gateway-core.ts';
import { toConversationItem, type ResponseInputEntry, type ResponseOptions } from './client-events.ts';
import { MAX_TEXT, bytesOf, charactersOf, chatMessages, chatToolChoice, chatTools, type Conversation, type ConversationItem } from './conversation.ts';
import type { SessionEngines } from './engines.ts';
import { ResponseRun } from './response-run.ts';
import type { OutputPlayout } from './output-playout.ts';
import type { EventError, ServerEvent } from './server-events.ts';
import { applySessionUpdate, type RealtimeConfig } from './session-config.ts';

/** Responses running at once in one session, out-of-band ones included. */
export const MAX_RUNNING_RESPONSES = 2;
/** Characters a response's own `input` may come to once its item references are expanded (as much as a conversation holds). */
export const MAX_INPUT_CHARACTERS = MAX_TEXT;
/** What each chat message adds to its text in the prompt (role, quotes), for the reservation's estimate. */
const MESSAGE_OVERHEAD_BYTES = 32;

/** What the responses need of their session. */
export interface ResponsesSession {
  readonly ctx: GatewayContext;
  readonly auth: RequestAuth;
  readonly requestId: string;
  readonly log: FastifyBaseLogger;
  readonly closed: boolean;
  readonly engines: SessionEngines;
  readonly conversation: Conversation;
  config(): RealtimeConfig;
  newItemId(): string;
  send(event: ServerEvent): void;
  /** Sends once the client has taken what was sent before (audio). */
  sendPaced(event: ServerEvent): Promise<void>;
  close(code: number, reason: string, error?: EventError): void;
  sendError(e: EventError): void;
  /** Set when the transport plays the answers' audio itself (a WebRTC call). */
  readonly playout?: OutputPlayout;
}

/** An answer being prepared for a turn not yet committed. */
interface Speculation {
  /** Null while its models are looked up. */
  run: ResponseRun | null;
  /** Its run once started (null: it could not start, or the session closed). */
  started: Promise<ResponseRun | null>;
  dropped: boolean;
  /** The user's item it answers, with the words it was given. */
  itemId: string;
  transcript: string;
  /** The conversation's last item and the session's settings when it started: an answer to anything else is not this one. */
  previousId: string | null;
  config: RealtimeConfig;
}

/** The turn a committed user item closes, for a preemptive answer to match. */
export interface CommittedTurn {
  itemId: string;
  transcript: string;
  previousId: string | null;
}

export class Responses {
  private readonly running = new Set<ResponseRun>();
  /** The conversation's response (one at a time); out-of-band ones run beside it. */
  private active: ResponseRun | null = null;
  private speculation: Speculation | null = null;
  /** Spent on preemptive answers discarded in this session (micro-USD). */
  private discardedMicros = 0n;
  /** Told when a response has ended (set when it starts, or when a preemptive answer is adopted). */
  private readonly onDone = new Map<ResponseRun, () => void>();

  constructor(private readonly session: ResponsesSession) {}

  /** Responses running now. */
  get count(): number {
    return this.running.size;
  }

  get activeId(): string | null {
    return this.active?.id ?? null;
  }

  /** A response; `onDone` is told when it has ended (the turn it answers is logged then). */
  async create(options: ResponseOptions = {}, onStart?: (run: ResponseRun) => void, onDone?: () => void): Promise<void> {
    const run = await this.start(options);
    if (!run) return;
    onStart?.(run);
    if (onDone) this.onDone.set(run, onDone);
  }

  /** Starts a response (`heldAfter`: a preemptive one, held, with that user item after the conversation); null when the session closed meanwhile. */
  private async start(options: ResponseOptions, heldAfter?: ConversationItem): Promise<ResponseRun | null> {
    const { session } = this;
    const conversation = options.conversation === 'none' ? 'none' : 'auto';
    this.checkRoom(conversation, '; cancel it or wait for response.done');
    // Per-response overrides, read as session fields are.
    const r = options;
    const c = applySessionUpdate(session.config(), {
      ...(r.instructions !== undefined ? { instructions: r.instructions } : {}),
      ...(r.output_modalities !== undefined ? { output_modalities: r.output_modalities } : r.modalities !== undefined ? { modalities: r.modalities } : {}),
      ...(r.tools !== undefined ? { tools: r.tools } : {}),
      ...(r.tool_choice !== undefined ? { tool_choice: r.tool_choice } : {}),
      ...(r.temperature !== undefined ? { temperature: r.temperature } : {}),
      ...(r.max_output_tokens !== undefined
        ? { max_output_tokens: r.max_output_tokens }
        : r.max_response_output_tokens !== undefined
          ? { max_response_output_tokens: r.max_response_output_tokens }
          : {}),
    });
    const outputVoice = (r.audio as { output?: { voice?: unknown } } | null | undefined)?.output?.voice;
    const voice = typeof outputVoice === 'string' ? outputVoice : typeof r.voice === 'string' ? r.voice : undefined;
    const input = options.input === undefined ? [...session.conversation.all(), ...(heldAfter ? [heldAfter] : [])] : this.input(options.input);
    const engines = await session.engines.forResponse(c, c.outputModalities[0] === 'text', voice);
    // Another response may have started while the models were looked up.
    this.checkRoom(conversation, '');
    if (session.closed) return null;
    const chat: Record<string, unknown> = {};
    if (c.tools.length && c.toolChoice !== 'none') {
      chat.tools = chatTools(c.tools);
      chat.tool_choice = chatToolChoice(c.toolChoice);
    }
    if (c.temperature !== undefined) chat.temperature = c.temperature;
    if (c.maxOutputTokens !== 'inf') chat.max_tokens = c.maxOutputTokens;
    let promptBytes = Buffer.byteLength(c.instructions) + (chat.tools ? JSON.stringify(chat.tools).length : 0);
    for (const item of input) promptBytes += bytesOf(item) + MESSAGE_OVERHEAD_BYTES;
    // Counted as an HTTP chat request is: 429 past the key's cap of requests in flight.
    const ticket = session.ctx.admission.enterRequest(session.auth);
    const run = new ResponseRun(
      {
        ctx: session.ctx,
        auth: session.auth,
        requestId: session.requestId,
        log: session.log,
        send: (e) => session.send(e),
        sendPaced: (e) => session.sendPaced(e),
        onItem: (item, previous) => {
          if (conversation !== 'auto') return;
          const before = session.conversation.add(item);
          session.send({ type: 'conversation.item.added', previous_item_id: previous ?? before, item: { ...item } });
        },
        onBalance: (remaining) => {
          if (remaining <= 0n)
            session.close(1008, 'insufficient_quota', { code: 'insufficient_quota', message: "The organization's credit ran out; add credits to continue." });
        },
      },
      {
        id: `resp_${randomBytes(10).toString('hex')}`,
        chat,
        messages: () => chatMessages(c.instructions, input),
        promptBytes,
        engines,
        conversation,
        metadata: r.metadata,
        newItemId: () => session.newItemId(),
        held: heldAfter !== undefined,
      },
    );
    this.running.add(run);
    if (conversation === 'auto' && !heldAfter) this.active = run;
    // A shutdown waits for its debits before the database closes.
    session.ctx.lifecycle.track(run.done);
    // A held answer that ended before it was adopted or discarded is done once it is one or the other.
    void run.done
      .then(() => run.released)
      .then(() => {
        ticket.release();
        this.running.delete(run);
        if (this.active === run) this.active = null;
        if (run.isDiscarded) this.discardedMicros += run.usage.llmMicros + run.usage.ttsMicros;
        if (run.assistantItemId && !run.isDiscarded) session.conversation.setSpans(run.assistantItemId, run.spans);
        session.conversation.recount();
        session.ctx.metrics.realtimeResponse(run.isDiscarded ? 'discarded' : run.status, run.isDiscarded ? {} : run.timings);
        this.onDone.get(run)?.();
        this.onDone.delete(run);
      });
    return run;
  }

  /** Refuses a response past the session's cap, or a second one in the conversation. */
  private checkRoom(conversation: 'auto' | 'none', advice: string): void {
    if (conversation === 'auto' && this.active)
      throw new ServiceError('invalid_request', `The conversation already has an active response (${this.active.id})${advice}.`, 'response');
    if (this.running.size >= MAX_RUNNING_RESPONSES)
      throw new ServiceError(
        'rate_limit_exceeded',
        `This session already has ${MAX_RUNNING_RESPONSES} responses running (out-of-band ones included), its limit; wait for a response.done.`,
        'response',
        { retryAfterSeconds: 1 },
      );
  }

  /** A response's own input: counted and sized (references expanded in the count only) before a prompt is built from it. */
  private input(entries: ResponseInputEntry[]): ConversationItem[] {
    const { conversation } = this.session;
    let characters = 0;
    const items = entries.map((entry, i) => {
      let item: ConversationItem;
      if (entry.type === 'item_reference') {
        const found = conversation.get(entry.id);
        if (!found)
          throw new ServiceError(
            'invalid_request',
            `response.input[${i}].id: no item with id ${JSON.stringify(entry.id)} in the conversation.`,
            `response.input[${i}].id`,
          );
        item = found;
      } else item = toConversationItem(entry, () => this.session.newItemId());
      characters += charactersOf(item);
      return item;
    });
    if (characters > MAX_INPUT_CHARACTERS)
      throw new ServiceError(
        'invalid_request',
        `response.input: the input comes to ${characters} characters with its item references expanded (each counted every time it is named); at most ${MAX_INPUT_CHARACTERS}.`,
        'response.input',
      );
    return items;
  }

  /** response.cancel: the response named, else the conversation's. */
  cancel(responseId: string | undefined): void {
    const run = responseId === undefined ? this.active : [...this.running].find((r) => r.id === responseId);
    if (!run) throw new ServiceError('invalid_request', 'response_id: there is no active response to cancel.', 'response_id');
    run.cancel('client_cancelled');
  }

  /**
   * The user's turn ended and asks for an answer: now, or once the answer they spoke over has ended.
   * `onStart` and `onDone` are told of the answer's run and its end (or that none started).
   */
  answerTurn(onStart: (run: ResponseRun) => void, onDone: () => void, turn?: CommittedTurn): void {
    if (turn && this.adoptSpeculation(turn, onStart, onDone)) return;
    this.answerNow(onStart, onDone);
  }

  private answerNow(onStart: (run: ResponseRun) => void, onDone: () => void): void {
    const answer = () =>
      this.create(undefined, onStart, onDone).catch((e: unknown) => {
        onDone();
        if (isServiceError(e)) this.session.sendError({ code: e.code, message: e.message, param: e.param });
        else this.session.log.warn({ err: e }, 'realtime response failed to start');
      });
    const active = this.active;
    // The answer the user spoke over ends in a moment (it was cancelled): this turn's follows it.
    if (active?.cancelled) void active.done.then(answer);
    else if (!active) void answer();
    else onDone(); // an answer is still being spoken: this turn gets none
  }

  /**
   * The user spoke over the answer (`turn_detected`), or a WebRTC client cleared its audio
   * (`client_cancelled`, output_audio_buffer.clear): the answer stops now, and its item keeps
   * what was heard of it. A transport that plays the audio itself (a WebRTC call) stops it at
   * once and says how much of which item was heard, which may be an answer that has finished
   * and is still being played; otherwise the audio sent, no faster than real time, is taken as
   * heard.
   */
  interrupt(reason: 'turn_detected' | 'client_cancelled' = 'turn_detected'): void {
    const { session } = this;
    const run = this.active;
    const heard = session.playout?.stop() ?? null;
    if (heard || (session.playout && reason === 'client_cancelled'))
      session.send({ type: 'output_audio_buffer.cleared', response_id: heard?.responseId ?? run?.id ?? null });
    if (heard && heard.itemId !== run?.assistantItemId) this.truncate(heard.itemId, heard.playedMs);
    if (!run) {
      if (heard && reason === 'turn_detected') session.ctx.metrics.realtimeBargeIn();
      return;
    }
    run.cancel(reason);
    if (reason === 'turn_detected') session.ctx.metrics.realtimeBargeIn();
    void run.done.then(() => {
      const id = run.assistantItemId;
      if (!id) return;
      const played = session.playout ? (heard?.itemId === id ? heard.playedMs : 0) : run.playedMs();
      this.truncate(id, played, run.spans);
    });
  }

  /** An assistant's audio item cut at what was heard of it, and the client told where. */
  private truncate(id: string, playedMs: number, spans?: ResponseRun['spans']): void {
    const { session } = this;
    const item = session.conversation.get(id);
    if (!item || item.type !== 'message' || item.content[0]?.type !== 'output_audio') return;
    const played = Math.round(playedMs);
    session.conversation.cutAudio(item, played, spans);
    session.send({ type: 'conversation.item.truncated', item_id: item.id, content_index: 0, audio_end_ms: played });
  }

  /** The session is ending: every response stops now (each is billed for what it made). */
  cancelAll(): void {
    this.dropSpeculation();
    for (const run of this.running) run.cancel('client_cancelled');
  }

  // ---- preemptive answers

  /**
   * The turn may be over (the detector's eager end): its answer is prepared, held, with `transcript`
   * as what the user said -- when the session asks for preemptive answers, nothing else runs in
   * the conversation, and the session has not spent its allowance on discarded ones.
   */
  speculate(itemId: string, transcript: string): void {
    const { session } = this;
    const config = session.config();
    if (!config.preemptive || this.speculation || this.active || this.running.size >= MAX_RUNNING_RESPONSES || transcript === '') return;
    if (this.discardedMicros >= BigInt(session.ctx.config.limits.realtimePreemptiveMaxDiscardedMicros)) return;
    const item: ConversationItem = {
      id: itemId,
      object: 'realtime.item',
      type: 'message',
      role: 'user',
      status: 'completed',
      content: [{ type: 'input_audio', transcript }],
    };
    const speculation: Speculation = {
      run: null,
      started: Promise.resolve(null),
      dropped: false,
      itemId,
      transcript,
      previousId: session.conversation.lastId(),
      config,
    };
    this.speculation = speculation;
    speculation.started = this.start({}, item).then(
      (run) => {
        if (run && speculation.dropped) run.discard();
        else speculation.run = run;
        return run;
      },
      // Not prepared (no credit, a cap, a model offline): the turn is answered as usual when it ends, and says why then.
      () => {
        if (this.speculation === speculation) this.speculation = null;
        return null;
      },
    );
  }

  /** The user went on speaking (or the turn ended otherwise): the prepared answer is discarded. */
  dropSpeculation(): void {
    const speculation = this.speculation;
    if (!speculation) return;
    this.speculation = null;
    speculation.dropped = true;
    speculation.run?.discard();
  }

  /** Whether an answer is being prepared for exactly this turn (running, or its models still looked up: it is adopted once started). */
  prepared(turn: CommittedTurn): boolean {
    const speculation = this.preparing(turn);
    return speculation !== null && !speculation.run?.isDiscarded;
  }

  /** The answer being prepared for exactly this turn (the same item, words, conversation and settings), if any. */
  private preparing(turn: CommittedTurn): Speculation | null {
    const speculation = this.speculation;
    const matches =
      speculation !== null &&
      !this.active &&
      speculation.itemId === turn.itemId &&
      speculation.transcript === turn.transcript &&
      speculation.previousId === turn.previousId &&
      speculation.config === this.session.config();
    return matches ? speculation : null;
  }

  /**
   * The answer prepared for this turn becomes the conversation's response and goes out (once
   * started, if its models were still being looked up); false when there is none (one prepared
   * for anything else is discarded).
   */
  private adoptSpeculation(turn: CommittedTurn, onStart: (run: ResponseRun) => void, onDone: () => void): boolean {
    const speculation = this.preparing(turn);
    if (!speculation) {
      this.dropSpeculation();
      return false;
    }
    this.speculation = null;
    void speculation.started.then((run) => {
      if (run && !run.isDiscarded && !this.active && !this.session.closed) {
        this.active = run;
        run.release();
        onStart(run);
        this.onDone.set(run, onDone);
        return;
      }
      run?.discard();
      this.answerNow(onStart, onDone);
    });
    return true;
  }
}
