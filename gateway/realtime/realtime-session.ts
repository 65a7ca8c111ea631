// One /v1/realtime session, OpenAI's Realtime protocol, whatever carries it: client events come in
// through `receive` (read and checked by client-events.ts), server events go out through an
// Outbox. The WebSocket route (gateway/routes/realtime.ts) binds a socket to it, with the wire
// format of wire.ts (event ids, the beta's names); a WebRTC data channel or a phone's media
// stream would bind the same way. Its life (idle, maximum duration, the gateway's shutdown, the
// key's revocation) runs on the context's clock (gateway/sessions/session-life.ts).
//
// A conversation session (`kind: 'realtime'`) holds the conversation (conversation.ts), the
// user's audio and its transcription (input-audio-buffer.ts: with turn detection, a turn's end
// commits the user's item and asks for a response; its start interrupts the answer being
// spoken), and its responses (responses.ts; one response's LLM and speech: response-run.ts),
// on the models engines.ts resolves. A transcription session (`?intent=transcription`) has the
// audio buffer only.
import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import { ERROR_TABLE } from '../errors.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import type { Outbox, SendOptions } from '../sessions/outbox.ts';
import { SessionLife } from '../sessions/session-life.ts';
import { MAX_SESSION_MS } from '../stt/stt-session.ts';
import { toConversationItem, type ClientEvent, type ClientItem } from './client-events.ts';
import { Conversation, type ConversationItem } from './conversation.ts';
import { SessionEngines } from './engines.ts';
import { InputAudioBuffer, type InputAudioSession } from './input-audio-buffer.ts';
import type { OutputPlayout } from './output-playout.ts';
import type { RealtimeProfile } from './profiles.ts';
import { Responses, type ResponsesSession } from './responses.ts';
import { TurnLog } from './turn-log.ts';
import type { EventError, ServerEvent } from './server-events.ts';
import { applySessionUpdate, defaultConfig, sessionWire, type RealtimeConfig } from './session-config.ts';
import type { ClientMessage } from './wire.ts';

/** Client events waiting to be handled, in bytes (audio included). */
const MAX_QUEUED_BYTES = 8 * 1024 * 1024;

export interface RealtimeSessionSetup {
  ctx: GatewayContext;
  auth: RequestAuth;
  requestId: string;
  log: FastifyBaseLogger;
  kind: 'realtime' | 'transcription';
  /** Conversation sessions: what `?model=` named. */
  profile: RealtimeProfile | null;
  profiles: Map<string, RealtimeProfile>;
  /** Transcription sessions: the stt model `?model=` named, if one of ours. */
  sttModel: string | null;
  /** The first second of the user's audio, reserved before the session was accepted. */
  hold: CreditHold;
  /** Aborted (reason: a ServiceError) when the key is revoked. */
  revoked: AbortSignal;
  /** Session fields applied in order before the session starts (a client secret's settings, then the call's), as session.update would. */
  initial?: Record<string, unknown>[];
  /**
   * The transport plays the answers' audio itself (a WebRTC call): barge-in stops it there and
   * truncates at what it played. Its audio is pcm16 at 24 kHz whatever a session.update says
   * (the transport encodes it, Opus on a WebRTC track).
   */
  playout?: OutputPlayout;
}

export class RealtimeSession implements InputAudioSession, ResponsesSession {
  readonly ctx: GatewayContext;
  readonly auth: RequestAuth;
  readonly requestId: string;
  readonly log: FastifyBaseLogger;
  readonly revoked: AbortSignal;
  readonly playout: OutputPlayout | undefined;
  readonly conversation = new Conversation();
  readonly engines: SessionEngines;
  private readonly kind: RealtimeSessionSetup['kind'];
  private readonly id = `sess_${randomBytes(12).toString('hex')}`;
  private current: RealtimeConfig;
  private readonly audio: InputAudioBuffer;
  private readonly responses: Responses;
  private readonly turns: TurnLog;
  private readonly life: SessionLife;
  private ended = false;
  /** Client events are handled in order, one at a time; what waits behind a slow one (a model lookup) is bounded. */
  private queue: Promise<void> = Promise.resolve();
  private queuedBytes = 0;
  private itemCounter = 0;
  private readonly itemPrefix = randomBytes(6).toString('hex');

  constructor(
    private readonly outbox: Outbox<ServerEvent>,
    setup: RealtimeSessionSetup,
  ) {
    const { ctx, kind, profile } = setup;
    this.ctx = ctx;
    this.auth = setup.auth;
    this.requestId = setup.requestId;
    this.log = setup.log;
    this.revoked = setup.revoked;
    this.playout = setup.playout;
    this.kind = kind;
    this.current = defaultConfig(kind, profile?.id ?? null);
    if (profile?.instructions) this.current.instructions = profile.instructions;
    if (profile?.preemptive) this.current.preemptive = true;
    if (setup.sttModel) this.current.transcriptionModel = setup.sttModel;
    // Checked when the client secret was minted: a setting that no longer reads is an error at start.
    for (const fields of setup.initial ?? []) this.current = applySessionUpdate(this.current, fields);
    this.current = this.withTransportFormats(this.current);
    this.engines = new SessionEngines(ctx, setup.auth, profile, setup.profiles);
    this.audio = new InputAudioBuffer(this, setup.hold);
    this.responses = new Responses(this);
    const ref = { orgId: setup.auth.orgId, requestId: setup.requestId };
    this.turns = new TurnLog(
      (turn) => ctx.requestLog?.turn(ref, turn),
      (t) => {
        if (!this.current.turnLatency || this.ended) return;
        this.send({
          type: 'svc.turn_latency',
          item_id: t.itemId,
          response_id: t.responseId,
          audio_end_ms: t.audioEndMs,
          turn_end_ms: t.turnEnd,
          transcript_final_ms: t.transcriptFinal,
          llm_first_token_ms: t.llmFirstToken,
          tts_first_audio_ms: t.ttsFirstAudio,
          first_audible_ms: t.firstAudible,
        });
      },
    );
    const idleMs = ctx.config.limits.realtimeIdleMs;
    this.life = new SessionLife(
      ctx.clock,
      { idleMs, maxDurationMs: MAX_SESSION_MS },
      { shutdown: ctx.lifecycle.streamsEnded, revoked: setup.revoked },
      {
        // A response running is the session in use, however long the client stays silent.
        idle: () =>
          this.responses.count > 0
            ? this.life.touch()
            : this.close(1000, 'idle_timeout', { code: 'idle_timeout', message: `Nothing from the client for ${idleMs / 1000} s.` }),
        maxDuration: () =>
          this.close(1000, 'max_duration', {
            code: 'max_duration',
            message: `Sessions last at most ${MAX_SESSION_MS / 60_000} minutes; reconnect to continue.`,
          }),
        shutdown: () => this.close(1001, 'shutdown', { code: 'temporarily_unavailable', message: 'The gateway is shutting down; reconnect.' }),
        revoked: (e) => this.close(1008, e.code, { code: e.code, message: e.message }),
      },
    );
  }

  get closed(): boolean {
    return this.ended;
  }

  config(): RealtimeConfig {
    return this.current;
  }

  sttModel(): ModelEntry {
    return this.engines.sttModel(this.current);
  }

  /** Sends session.created once the models are known. */
  async start(): Promise<void> {
    try {
      this.send({ type: 'session.created', session: await this.sessionObject() });
    } catch (e) {
      if (!isServiceError(e)) throw e;
      // The profile's voice (or tts model) cannot be used: the session starts anyway, says why,
      // and a session.update naming a usable one fixes it (text answers work meanwhile).
      this.send({
        type: 'session.created',
        session: sessionWire(this.id, this.current, { stt: this.engines.sttModelId(this.current), expiresAt: this.expiresAt() }),
      });
      this.sendError({ code: e.code, message: e.message, param: e.param });
    }
  }

  /** The session could not start: the client is told why, and the transport closes. */
  fail(e: unknown): void {
    if (isServiceError(e)) return this.close(1011, 'session_error', { code: e.code, message: e.message });
    this.log.warn({ err: e }, 'realtime session failed to start');
    this.close(1011, 'server_error', { code: 'server_error', message: 'The session could not start; reconnect.' });
  }

  /** One message from the client, handled after those before it. */
  receive(message: ClientMessage): void {
    if (this.ended) return;
    this.life.touch();
    const eventId = 'event' in message ? (message.event.event_id ?? null) : message.eventId;
    if (this.queuedBytes + message.size > MAX_QUEUED_BYTES) {
      return this.sendError(
        { code: 'rate_limit_exceeded', message: 'Events arrive faster than they can be handled; this one was dropped. Send audio no faster than real time.' },
        eventId,
      );
    }
    this.queuedBytes += message.size;
    this.queue = this.queue
      .then(() => {
        if (this.ended) return;
        if ('unreadable' in message) return this.sendError(message.unreadable, eventId);
        return this.handle(message.event);
      })
      .catch((e: unknown) => {
        if (isServiceError(e)) return this.sendError({ code: e.code, message: e.message, param: e.param }, eventId);
        this.log.warn({ err: e }, 'realtime event failed');
        this.sendError({ code: 'server_error', message: 'The event could not be handled.', type: 'server_error' }, eventId);
      })
      .finally(() => {
        this.queuedBytes -= message.size;
      });
  }

  /** The transport closed (the client went away, or after close()): everything the session runs ends. */
  transportClosed(): void {
    this.end();
  }

  private async handle(event: ClientEvent): Promise<void> {
    switch (event.type) {
      case 'session.update':
      case 'transcription_session.update':
        return this.updateSession(event.session, event.type);
      case 'input_audio_buffer.append':
        return this.audio.append(event.audio);
      case 'input_audio_buffer.commit':
        return this.audio.commit();
      case 'input_audio_buffer.clear':
        return this.audio.clear();
      case 'conversation.item.create':
        return this.createItem(event.item, event.previous_item_id);
      case 'conversation.item.retrieve':
        return this.send({ type: 'conversation.item.retrieved', item: this.item(event.item_id) });
      case 'conversation.item.delete':
        this.item(event.item_id);
        this.conversation.delete(event.item_id);
        return this.send({ type: 'conversation.item.deleted', item_id: event.item_id });
      case 'conversation.item.truncate':
        return this.truncate(event.item_id, event.audio_end_ms, event.content_index ?? 0);
      case 'response.create':
        if (this.kind !== 'realtime') throw new ServiceError('invalid_request', 'A transcription session makes no responses.', 'type');
        return this.responses.create(event.response);
      case 'response.cancel':
        return this.responses.cancel(event.response_id);
      case 'output_audio_buffer.clear':
        // WebRTC's: the answer stops and its item is cut at what was played. Over a WebSocket the client holds the audio it has not played.
        if (this.playout) return this.responses.interrupt('client_cancelled');
        return this.send({ type: 'output_audio_buffer.cleared', response_id: this.responses.activeId });
    }
  }

  private async updateSession(session: Record<string, unknown>, type: 'session.update' | 'transcription_session.update'): Promise<void> {
    if (this.kind === 'realtime' && type === 'transcription_session.update')
      throw new ServiceError(
        'invalid_request',
        'transcription_session.update is for transcription sessions (?intent=transcription); use session.update.',
        'type',
      );
    const before = this.current;
    const next = this.withTransportFormats(applySessionUpdate(before, session));
    this.current = next;
    try {
      // Checked now, not at the next audio or response: a bad model or voice is this event's error.
      if (this.kind === 'realtime') this.engines.profile(next);
      this.engines.sttModel(next);
      const wire = await this.sessionObject();
      this.audio.reconfigure(before, next);
      // An answer prepared under the settings before is not this session's any more.
      if (this.kind === 'realtime') this.responses.dropSpeculation();
      this.send({ type: type === 'transcription_session.update' ? 'transcription_session.updated' : 'session.updated', session: wire });
    } catch (e) {
      this.current = before;
      throw e;
    }
  }

  /** A transport that carries the audio itself takes and gives pcm16 at 24 kHz, whatever the update says. */
  private withTransportFormats(c: RealtimeConfig): RealtimeConfig {
    return this.playout ? { ...c, inputFormat: this.playout.audioFormat, outputFormat: this.playout.audioFormat } : c;
  }

  private expiresAt(): number {
    return Math.floor((this.life.started + MAX_SESSION_MS) / 1000);
  }

  private async sessionObject(): Promise<object> {
    const c = this.current;
    const stt = this.engines.sttModelId(c);
    if (this.kind === 'transcription') return sessionWire(this.id, c, { stt, expiresAt: this.expiresAt() });
    const engines = await this.engines.forResponse(c, c.outputModalities[0] === 'text');
    return sessionWire(this.id, c, { stt, llm: engines.llm.id, tts: engines.tts?.model.id, voice: engines.tts?.voiceId, expiresAt: this.expiresAt() });
  }

  // ---- what the audio buffer reports

  speechStarted(interrupt: boolean, agoMs: number): void {
    this.turns.speechStarted(interrupt && this.responses.activeId !== null, agoMs);
    if (interrupt) this.responses.interrupt();
  }

  speechStopped(agoMs: number, audioEndMs: number): void {
    this.turns.speechStopped(agoMs, audioEndMs);
  }

  speechResumed(): void {
    this.responses.dropSpeculation();
  }

  mayBeOver(itemId: string, transcript: string): void {
    if (this.kind === 'realtime') this.responses.speculate(itemId, transcript);
  }

  answerPrepared(itemId: string, transcript: string): boolean {
    return this.kind === 'realtime' && this.responses.prepared({ itemId, transcript, previousId: this.conversation.lastId() });
  }

  /** The user's committed audio: in a conversation, an item with its transcript, and an answer when the turn asks for one. */
  committed(itemId: string, transcript: string, audioMs: number, respond: boolean): void {
    const previous = this.conversation.lastId();
    this.send({ type: 'input_audio_buffer.committed', previous_item_id: previous, item_id: itemId });
    if (this.kind === 'realtime') {
      const item: ConversationItem = {
        id: itemId,
        object: 'realtime.item',
        type: 'message',
        role: 'user',
        status: 'completed',
        content: [{ type: 'input_audio', transcript }],
      };
      this.conversation.add(item);
      this.send({ type: 'conversation.item.added', previous_item_id: previous, item: { ...item, content: [{ type: 'input_audio', transcript: null }] } });
      this.send({ type: 'conversation.item.done', previous_item_id: previous, item });
    }
    this.send({
      type: 'conversation.item.input_audio_transcription.completed',
      item_id: itemId,
      content_index: 0,
      transcript,
      usage: { type: 'duration', seconds: audioMs / 1000 },
    });
    // A turn with no words heard (a cough, noise) is not answered.
    const answering = respond && this.kind === 'realtime' && transcript !== '';
    const turn = this.turns.ended(itemId, transcript, answering);
    if (answering)
      this.responses.answerTurn(
        (run) => this.turns.answeredBy(turn, run),
        () => this.turns.answerDone(turn),
        { itemId, transcript, previousId: previous },
      );
    else if (this.kind === 'realtime') this.responses.dropSpeculation();
  }

  // ---- the conversation's items

  private item(id: string): ConversationItem {
    const item = this.conversation.get(id);
    if (!item) throw new ServiceError('invalid_request', `item_id: no item with id ${JSON.stringify(id)} in the conversation.`, 'item_id');
    return item;
  }

  private createItem(clientItem: ClientItem, previousId: string | null | undefined): void {
    if (this.kind !== 'realtime') throw new ServiceError('invalid_request', 'A transcription session has no conversation.', 'type');
    const item = toConversationItem(clientItem, () => this.newItemId());
    const previous = this.conversation.add(item, previousId);
    this.send({ type: 'conversation.item.added', previous_item_id: previous, item });
    this.send({ type: 'conversation.item.done', previous_item_id: previous, item });
  }

  /** The assistant's audio item cut at `audioEndMs` (what the user heard): its transcript keeps the words spoken by then. */
  private truncate(id: string, audioEndMs: number, contentIndex: number): void {
    const item = this.item(id);
    if (item.type !== 'message' || item.role !== 'assistant' || item.content[0]?.type !== 'output_audio')
      throw new ServiceError('invalid_request', 'item_id: only an assistant message with audio can be truncated.', 'item_id');
    const total = this.conversation.audioMs(item.id);
    if (audioEndMs > total + 1) throw new ServiceError('invalid_request', `audio_end_ms: the item has ${Math.round(total)} ms of audio.`, 'audio_end_ms');
    this.conversation.cutAudio(item, audioEndMs);
    this.send({ type: 'conversation.item.truncated', item_id: item.id, content_index: contentIndex, audio_end_ms: audioEndMs });
  }

  // ---- sending, and the end

  newItemId(): string {
    return `item_${this.itemPrefix}${(++this.itemCounter).toString(36).padStart(6, '0')}`;
  }

  send(event: ServerEvent, options?: SendOptions): void {
    this.outbox.send(event, options);
  }

  /** Audio: waits while the client has not taken what was sent before it (a reader that stalls holds the answer, not the memory). */
  async sendPaced(event: ServerEvent): Promise<void> {
    await this.outbox.drained();
    this.outbox.send(event);
  }

  sendError(e: EventError, eventId: string | null = null): void {
    const status = ERROR_TABLE[e.code as keyof typeof ERROR_TABLE]?.status ?? 400;
    const type = e.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
    this.send({ type: 'error', error: { type, code: e.code, message: e.message, param: e.param ?? null, event_id: eventId } });
  }

  /** Ends the session: `error` (if given) is its last event, then the transport closes with `code`. */
  close(code: number, reason: string, error?: EventError): void {
    if (this.ended) return;
    if (error) this.sendError(error);
    this.outbox.close(code, reason);
    this.end();
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.life.dispose();
    this.responses.cancelAll();
    this.audio.end();
    this.turns.close();
  }
}
