// One WS /v1/realtime session, OpenAI's Realtime protocol (GA event names; beta names read from
// clients, and written back when the client asked for the beta with `OpenAI-Beta: realtime=v1`).
//
// The user's audio (`input_audio_buffer.append`) goes to a transcription leg (stt-leg.ts: the
// /stt/websocket session in process, with the gateway's turn detector). With turn detection on
// (server_vad, semantic_vad), a turn's start is `speech_started` (and interrupts a response being
// spoken: barge-in), its end commits the user's item with its transcript and, in a conversation,
// creates a response; without it the client commits. A response (response-run.ts) runs the LLM
// on the conversation and speaks its text as it arrives. A transcription session
// (`?intent=transcription`) has the audio leg only.
import { randomBytes } from 'node:crypto';
import type { RawData, WebSocket } from 'ws';
import type { FastifyBaseLogger } from 'fastify';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import { perSecondCostMicros } from '../../server/services/credits/pricing.ts';
import { defaultVoiceFor } from '../../server/services/voices/default-voice.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import type { GatewayContext } from '../context.ts';
import { ERROR_TABLE } from '../errors.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import { streamingModel, type SessionPlan } from '../stt/open-session.ts';
import { MAX_SESSION_MS, METER_EVERY_MS, type SttSession } from '../stt/stt-session.ts';
import { presetSettings } from '../stt/turn-params.ts';
import type { TurnSettings } from '../stt/turn-detector.ts';
import { resolveTtsModel, resolveVoice } from '../tts/synthesize.ts';
import { Conversation, MAX_ITEMS, chatMessages, chatToolChoice, chatTools, parseClientItem, type ConversationItem } from './conversation.ts';
import { defaultModel, isOpenAiRealtimeName, isOpenAiSttName, resolveProfile, type RealtimeProfile } from './profiles.ts';
import { ResponseRun, type ResponseLegs } from './response-run.ts';
import { applySessionUpdate, defaultConfig, FORMAT_AUDIO, sessionWire, type RealtimeConfig } from './session-config.ts';
import { startSttLeg, type LegEvent } from './stt-leg.ts';

/** OpenAI's voice names: a client that sends one gets the profile's voice. */
const OPENAI_VOICES = new Set(['alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'onyx', 'nova', 'sage', 'shimmer', 'verse', 'marin', 'cedar']);
/** Audio the leg has not taken yet (it is opening): at most this many bytes wait. */
const MAX_WAITING_AUDIO = 4 * 1024 * 1024;
const PING_INTERVAL_MS = 20_000;
/** Client events waiting to be handled, in bytes (audio included). */
const MAX_QUEUED_BYTES = 8 * 1024 * 1024;
/** Answer audio not yet taken by the client beyond this: the answer waits. */
const HIGH_WATER_BYTES = 1024 * 1024;
/** GA name -> beta name, for clients on the beta protocol. */
const BETA_NAMES: Record<string, string> = {
  'response.output_audio.delta': 'response.audio.delta',
  'response.output_audio.done': 'response.audio.done',
  'response.output_audio_transcript.delta': 'response.audio_transcript.delta',
  'response.output_audio_transcript.done': 'response.audio_transcript.done',
  'response.output_text.delta': 'response.text.delta',
  'response.output_text.done': 'response.text.done',
  'conversation.item.added': 'conversation.item.created',
};

export interface RealtimeSessionOptions {
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
  beta: boolean;
  /** The first second of the audio leg, reserved before the upgrade. */
  hold: CreditHold;
  revoked: AbortSignal;
  /** Per-response figures (metrics, benchmark). */
  onResponseDone?: (r: ResponseRun, legs: ResponseLegs) => void;
}

interface Leg {
  stt: SttSession;
  /** Audio bytes sent since the last commit or clear. */
  bufferBytes: number;
  finals: string[];
  /** The interim transcript's part already sent as deltas (append-only, as OpenAI's deltas). */
  sentDelta: string;
  /** The client asked for a commit (or a clear): done when the leg reports the finalize done. */
  afterFlush: ('commit' | 'clear')[];
}

export class RealtimeSession {
  private readonly id = `sess_${randomBytes(12).toString('hex')}`;
  private config: RealtimeConfig;
  private readonly conversation = new Conversation();
  private readonly spans = new Map<string, { text: string; startMs: number; endMs: number }[]>();
  private leg: Leg | null = null;
  private legOpening: Promise<Leg> | null = null;
  private firstHold: CreditHold | null;
  private waitingAudio: Buffer[] = [];
  private waitingBytes = 0;
  /** Input audio received over the session, in ms (audio_start_ms / audio_end_ms). */
  private inputSamples = 0;
  /** The item the user's current audio will become. */
  private inputItemId: string | null = null;
  private speaking = false;
  private response: ResponseRun | null = null;
  private closed = false;
  private readonly started = Date.now();
  private idle: NodeJS.Timeout | undefined;
  private readonly maxLength: NodeJS.Timeout;
  private readonly ping: NodeJS.Timeout;
  private queue: Promise<void> = Promise.resolve();
  private queuedBytes = 0;
  /** The last legs resolved, and for what (a model lookup per update or response is not repeated). */
  private legsCache: { key: string; legs: Promise<ResponseLegs>; at: number } | null = null;
  private itemCounter = 0;
  private readonly itemPrefix = randomBytes(6).toString('hex');

  constructor(
    private readonly socket: WebSocket,
    private readonly o: RealtimeSessionOptions,
  ) {
    this.firstHold = o.hold;
    this.config = defaultConfig(o.kind, o.profile?.id ?? null);
    if (o.profile?.instructions) this.config.instructions = o.profile.instructions;
    if (o.sttModel) this.config.transcriptionModel = o.sttModel;
    socket.on('message', (data: RawData, isBinary: boolean) => this.onMessage(data, isBinary));
    socket.on('close', () => this.onSocketClose());
    socket.on('error', () => {});
    this.touch();
    this.maxLength = setTimeout(
      () =>
        this.close(1000, 'max_duration', { code: 'max_duration', message: `Sessions last at most ${MAX_SESSION_MS / 60_000} minutes; reconnect to continue.` }),
      MAX_SESSION_MS,
    );
    this.ping = setInterval(() => socket.readyState === socket.OPEN && socket.ping(), PING_INTERVAL_MS);
    const { lifecycle } = o.ctx;
    const onShutdown = () => this.close(1001, 'shutdown', { code: 'temporarily_unavailable', message: 'The gateway is shutting down; reconnect.' });
    if (lifecycle.streamsEnded.aborted) onShutdown();
    else lifecycle.streamsEnded.addEventListener('abort', onShutdown, { once: true });
    const onRevoked = () => {
      const reason = o.revoked.reason as { code?: string; message?: string } | undefined;
      this.close(1008, reason?.code ?? 'api_key_disabled', {
        code: reason?.code ?? 'api_key_disabled',
        message: reason?.message ?? 'This API key has been disabled.',
      });
    };
    if (o.revoked.aborted) onRevoked();
    else o.revoked.addEventListener('abort', onRevoked, { once: true });
    socket.once('close', () => {
      lifecycle.streamsEnded.removeEventListener('abort', onShutdown);
      o.revoked.removeEventListener('abort', onRevoked);
    });
  }

  /** Sends session.created once the models are known. */
  async start(): Promise<void> {
    const type = this.o.kind === 'transcription' && this.o.beta ? 'transcription_session.created' : 'session.created';
    try {
      this.send({ type, session: await this.sessionObject() });
    } catch (e) {
      if (!isServiceError(e)) throw e;
      // The profile's voice (or tts model) cannot be used: the session starts anyway, says why,
      // and a session.update naming a usable one fixes it (text answers work meanwhile).
      const expiresAt = Math.floor((this.started + MAX_SESSION_MS) / 1000);
      this.send({ type, session: sessionWire(this.id, this.config, { stt: this.sttModelId(), expiresAt }) });
      this.sendError({ code: e.code, message: e.message, param: e.param });
    }
  }

  /** The session could not start: the client is told why, and the socket closes. */
  fail(e: unknown): void {
    if (isServiceError(e)) return this.close(1011, 'session_error', { code: e.code, message: e.message });
    this.o.log.warn({ err: e }, 'realtime session failed to start');
    this.close(1011, 'server_error', { code: 'server_error', message: 'The session could not start; reconnect.' });
  }

  // ---- sending

  /** An event as sent: its name in the client's protocol version, an event id. */
  private wire(event: Record<string, unknown>): string {
    const type = this.o.beta ? (BETA_NAMES[event.type as string] ?? event.type) : event.type;
    return JSON.stringify({ ...event, type, event_id: `event_${randomBytes(8).toString('hex')}` });
  }

  private send(event: Record<string, unknown>): void {
    if (this.socket.readyState === this.socket.OPEN) this.socket.send(this.wire(event));
  }

  /** Audio: waits while the client has not taken the megabyte sent before it (a reader that stalls holds the answer, not the memory). */
  private async sendPaced(event: Record<string, unknown>): Promise<void> {
    if (this.socket.readyState !== this.socket.OPEN) return;
    if (this.socket.bufferedAmount < HIGH_WATER_BYTES) return this.send(event);
    // The callback runs once this message (and all before it) is handed to the OS, or the socket closed.
    await new Promise<void>((resolve) => this.socket.send(this.wire(event), () => resolve()));
  }

  private sendError(e: { code: string; message: string; param?: string | null; type?: string }, eventId: string | null = null): void {
    const status = ERROR_TABLE[e.code as keyof typeof ERROR_TABLE]?.status ?? 400;
    const type = e.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
    this.send({ type: 'error', error: { type, code: e.code, message: e.message, param: e.param ?? null, event_id: eventId } });
  }

  private close(code: number, reason: string, error?: { code: string; message: string }): void {
    if (this.closed) return;
    this.closed = true;
    if (error) this.sendError(error);
    this.response?.cancel('client_cancelled');
    this.socket.close(code, reason.slice(0, 120));
  }

  private newItemId = (): string => `item_${this.itemPrefix}${(++this.itemCounter).toString(36).padStart(6, '0')}`;

  // ---- the models behind the legs

  private sttModelId(): string {
    const asked = this.config.transcriptionModel;
    if (asked && !isOpenAiSttName(asked)) return asked;
    return this.o.profile?.stt ?? defaultModel(this.o.ctx.registry, 'stt');
  }

  private sttModel(): ModelEntry {
    return streamingModel(this.o.ctx, this.sttModelId());
  }

  private profile(): RealtimeProfile {
    const model = this.config.model;
    // An OpenAI model name in session.update (a client's default) keeps the session's profile.
    if (!model || model === this.o.profile?.id || (isOpenAiRealtimeName(model) && !this.o.ctx.registry.all().some((m) => m.id === model)))
      return this.o.profile!;
    return resolveProfile(this.o.profiles, this.o.ctx.registry, model);
  }

  /** The LLM and (audio answers) the TTS model and voice a response uses now (looked up again only when one of them changed). */
  private legs(textOnly: boolean, voiceOverride?: string): Promise<ResponseLegs> {
    const c = this.config;
    const key = JSON.stringify([c.model, textOnly, voiceOverride ?? c.voice, c.ttsModel, c.dictId, c.speed, c.language, c.outputFormat]);
    // Kept as long as the registry's own snapshot: a price or an upstream changed there is seen as soon.
    if (this.legsCache?.key !== key || performance.now() - this.legsCache.at > this.o.ctx.config.registryRefreshMs) {
      const legs = this.lookUpLegs(textOnly, voiceOverride);
      this.legsCache = { key, legs, at: performance.now() };
      legs.catch(() => {
        if (this.legsCache?.legs === legs) this.legsCache = null;
      });
    }
    return this.legsCache!.legs;
  }

  private async lookUpLegs(textOnly: boolean, voiceOverride?: string): Promise<ResponseLegs> {
    const { ctx, auth } = this.o;
    const profile = this.profile();
    const llm = ctx.registry.resolve(profile.llm, 'llm');
    if (textOnly) return { llm, tts: null };
    const ttsModel = resolveTtsModel(ctx, this.config.ttsModel ?? profile.tts ?? defaultModel(ctx.registry, 'tts'), 'realtime');
    const asked = voiceOverride ?? this.config.voice;
    let voiceId = asked && !OPENAI_VOICES.has(asked) ? asked : (profile.voice ?? (await defaultVoiceFor(ctx.db.prisma, ttsModel.id)));
    if (!voiceId)
      throw new ServiceError(
        'voice_not_found',
        `No voice has a ready profile for '${ttsModel.id}'; name one in session.audio.output.voice.`,
        'session.audio.output.voice',
      );
    const voice = await resolveVoice(ctx, auth.orgId, ttsModel, { voiceId, dictId: this.config.dictId }, 'realtime');
    voiceId = voice.profile.voiceId;
    return { llm, tts: { model: ttsModel, voice, voiceId, speed: this.config.speed, language: this.config.language, format: this.config.outputFormat } };
  }

  private async sessionObject(): Promise<object> {
    const expiresAt = Math.floor((this.started + MAX_SESSION_MS) / 1000);
    if (this.o.kind === 'transcription') return sessionWire(this.id, this.config, { stt: this.sttModelId(), expiresAt });
    const textOnly = this.config.outputModalities[0] === 'text';
    const legs = await this.legs(textOnly);
    return sessionWire(this.id, this.config, { stt: this.sttModelId(), llm: legs.llm.id, tts: legs.tts?.model.id, voice: legs.tts?.voiceId, expiresAt });
  }

  private turnSettings(): TurnSettings {
    const t = this.config.turnDetection;
    if (!t) return presetSettings('balanced', { eager: false });
    if (t.type === 'server_vad')
      return { ...presetSettings('balanced', { eager: false, fixedSilenceMs: t.silenceDurationMs }), speechThreshold: t.threshold ?? 0.5 };
    return presetSettings(t.preset, { eager: false });
  }

  // ---- client events

  private touch(): void {
    clearTimeout(this.idle);
    this.idle = setTimeout(() => {
      if (this.response) return this.touch();
      this.close(1000, 'idle_timeout', { code: 'idle_timeout', message: `Nothing from the client for ${this.o.ctx.config.limits.realtimeIdleMs / 1000} s.` });
    }, this.o.ctx.config.limits.realtimeIdleMs);
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    this.touch();
    if (isBinary)
      return this.sendError({ code: 'invalid_message', message: 'Send JSON events as text messages; audio goes in input_audio_buffer.append as base64.' });
    const text = (Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data)).toString('utf8');
    let event: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) || typeof (parsed as { type?: unknown }).type !== 'string')
        throw new Error('not an event');
      event = parsed as Record<string, unknown>;
    } catch {
      return this.sendError({ code: 'invalid_message', message: 'Each message must be a JSON object with a string "type".' });
    }
    const eventId = typeof event.event_id === 'string' ? event.event_id : null;
    // Events are handled in order (an update applies to the events after it), one at a time; what
    // waits behind a slow one (a model lookup) is bounded.
    if (this.queuedBytes + text.length > MAX_QUEUED_BYTES) {
      return this.sendError(
        { code: 'rate_limit_exceeded', message: 'Events arrive faster than they can be handled; this one was dropped. Send audio no faster than real time.' },
        eventId,
      );
    }
    this.queuedBytes += text.length;
    this.queue = this.queue
      .then(() => (this.closed ? undefined : this.handle(event)))
      .catch((e: unknown) => {
        if (isServiceError(e)) return this.sendError({ code: e.code, message: e.message, param: e.param }, eventId);
        this.o.log.warn({ err: e }, 'realtime event failed');
        this.sendError({ code: 'server_error', message: 'The event could not be handled.', type: 'server_error' }, eventId);
      })
      .finally(() => {
        this.queuedBytes -= text.length;
      });
  }

  private async handle(event: Record<string, unknown>): Promise<void> {
    switch (event.type) {
      case 'session.update':
      case 'transcription_session.update':
        return this.updateSession(event.session, event.type);
      case 'input_audio_buffer.append':
        return this.append(event.audio);
      case 'input_audio_buffer.commit':
        return this.commitBuffer();
      case 'input_audio_buffer.clear':
        return this.clearBuffer();
      case 'conversation.item.create':
        return this.createItem(event);
      case 'conversation.item.delete':
        return this.deleteItem(event.item_id);
      case 'conversation.item.retrieve': {
        const item = this.conversationItem(event.item_id);
        return this.send({ type: 'conversation.item.retrieved', item });
      }
      case 'conversation.item.truncate':
        return this.truncate(event.item_id, event.content_index, event.audio_end_ms);
      case 'response.create':
        return this.createResponse(event.response);
      case 'response.cancel':
        return this.cancelResponse(event.response_id);
      case 'output_audio_buffer.clear':
        // WebRTC's: over a WebSocket the client holds the audio it has not played.
        return this.send({ type: 'output_audio_buffer.cleared', response_id: this.response?.id ?? null });
      default:
        throw new ServiceError('invalid_request', `Unknown event type ${JSON.stringify(event.type)}.`, 'type');
    }
  }

  private async updateSession(session: unknown, type: string): Promise<void> {
    if (this.o.kind === 'realtime' && type === 'transcription_session.update')
      throw new ServiceError(
        'invalid_request',
        'transcription_session.update is for transcription sessions (?intent=transcription); use session.update.',
        'type',
      );
    const before = this.config;
    const next = applySessionUpdate(before, session);
    this.config = next;
    try {
      // Checked now, not at the next audio or response: a bad model or voice is this event's error.
      if (this.o.kind === 'realtime') this.profile();
      this.sttModel();
      const wire = await this.sessionObject();
      if (next.inputFormat !== before.inputFormat || next.transcriptionModel !== before.transcriptionModel || next.language !== before.language) this.endLeg();
      else if (JSON.stringify(next.turnDetection) !== JSON.stringify(before.turnDetection))
        this.leg?.stt.command({ type: 'configure', turns: this.turnSettings() });
      this.send({ type: type === 'transcription_session.update' ? 'transcription_session.updated' : 'session.updated', session: wire });
    } catch (e) {
      this.config = before;
      throw e;
    }
  }

  // ---- the user's audio

  private append(audio: unknown): void {
    if (typeof audio !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(audio))
      throw new ServiceError('invalid_request', 'audio: must be base64-encoded audio.', 'audio');
    const bytes = Buffer.from(audio, 'base64');
    if (bytes.length === 0) return;
    const { encoding } = FORMAT_AUDIO[this.config.inputFormat];
    this.inputSamples += bytes.length / (encoding === 'pcm_s16le' ? 2 : 1);
    this.inputItemId ??= this.newItemId();
    if (this.leg) {
      this.leg.bufferBytes += bytes.length;
      return this.leg.stt.audio(bytes);
    }
    this.waitingBytes += bytes.length;
    if (this.waitingBytes > MAX_WAITING_AUDIO)
      throw new ServiceError('invalid_request', 'Too much audio arrived while the transcription was starting; send audio no faster than real time.', 'audio');
    this.waitingAudio.push(bytes);
    void this.openLeg().catch((e: unknown) => {
      this.waitingAudio = [];
      this.waitingBytes = 0;
      if (isServiceError(e)) {
        this.sendError({ code: e.code, message: e.message, param: e.param });
        if (e.code === 'insufficient_quota') this.close(1008, 'insufficient_quota');
      } else this.o.log.warn({ err: e }, 'realtime transcription did not start');
    });
  }

  private inputMs(): number {
    return Math.round((this.inputSamples * 1000) / FORMAT_AUDIO[this.config.inputFormat].sampleRate);
  }

  private openLeg(): Promise<Leg> {
    this.legOpening ??= (async () => {
      const { ctx, auth } = this.o;
      const model = this.sttModel();
      const { sampleRate, encoding } = FORMAT_AUDIO[this.config.inputFormat];
      const hold = this.firstHold ?? (await ctx.core.reserve(auth, perSecondCostMicros(model.prices.picoPerSecond, METER_EVERY_MS)));
      this.firstHold = null;
      const plan: SessionPlan = {
        model,
        sampleRate,
        encoding,
        turnSource: 'gateway',
        turns: this.turnSettings(),
        keyterms: [],
        language: this.config.language,
      };
      const leg: Leg = {
        stt: startSttLeg(ctx, { plan, auth, requestId: this.o.requestId, log: this.o.log, hold, revoked: this.o.revoked, usageRoute: 'realtime' }, (e) =>
          this.onLegEvent(leg, e),
        ),
        bufferBytes: 0,
        finals: [],
        sentDelta: '',
        afterFlush: [],
      };
      // Closed while the credit was reserved: the leg ends at once (it bills nothing and gives the credit back).
      if (this.closed) {
        leg.stt.close();
        return leg;
      }
      this.leg = leg;
      for (const bytes of this.waitingAudio) {
        leg.bufferBytes += bytes.length;
        leg.stt.audio(bytes);
      }
      this.waitingAudio = [];
      this.waitingBytes = 0;
      return leg;
    })().finally(() => {
      this.legOpening = null;
    });
    return this.legOpening;
  }

  /** Ends the audio leg (its audio is billed); the next audio opens a new one. */
  private endLeg(): void {
    this.leg?.stt.close();
    this.leg = null;
  }

  private commitBuffer(): void {
    const leg = this.leg;
    if (!leg || leg.bufferBytes === 0) {
      if (this.waitingBytes > 0)
        return void this.openLeg()
          .then(() => this.commitBuffer())
          .catch((e: unknown) => this.failed(e));
      throw new ServiceError('invalid_request', 'input_audio_buffer: the buffer is empty; append audio before committing.', 'input_audio_buffer');
    }
    leg.afterFlush.push('commit');
    leg.bufferBytes = 0;
    leg.stt.command({ type: 'finalize' });
  }

  private clearBuffer(): void {
    const leg = this.leg;
    this.waitingAudio = [];
    this.waitingBytes = 0;
    if (leg && leg.bufferBytes > 0) {
      leg.afterFlush.push('clear');
      leg.bufferBytes = 0;
      leg.stt.command({ type: 'finalize' });
    }
    this.inputItemId = null;
    this.send({ type: 'input_audio_buffer.cleared' });
  }

  private onLegEvent(leg: Leg, e: LegEvent): void {
    if (this.closed && e.type !== 'closed') return;
    switch (e.type) {
      case 'transcript': {
        if (leg.afterFlush.at(-1) === 'clear') return;
        if (e.isFinal) {
          leg.finals.push(e.text);
          leg.sentDelta = '';
          return;
        }
        // Deltas only ever add to what was sent (OpenAI's do; clients append them): a revised interim waits for the final.
        if (!e.text.startsWith(leg.sentDelta) || e.text === leg.sentDelta) return;
        const delta = (leg.finals.length && !leg.sentDelta ? ' ' : '') + e.text.slice(leg.sentDelta.length);
        leg.sentDelta = e.text;
        this.inputItemId ??= this.newItemId();
        this.send({ type: 'conversation.item.input_audio_transcription.delta', item_id: this.inputItemId, content_index: 0, delta });
        return;
      }
      case 'turn':
        return this.onTurn(leg, e.turn, e.atSeconds);
      case 'flushed': {
        const what = leg.afterFlush.shift();
        if (what === 'commit') this.commitItem(leg, false);
        else if (what === 'clear') leg.finals = [];
        return;
      }
      case 'error':
        // The leg ends after it (its close follows): the session says why and goes on.
        if (e.code !== 'idle_timeout') this.sendError({ code: e.code, message: e.message });
        return;
      case 'closed':
        if (this.leg === leg) this.leg = null;
        if (e.reason === 'insufficient_quota') this.close(1008, 'insufficient_quota');
        else if (e.reason === 'shutdown' || e.reason === 'api_key_disabled') this.close(e.reason === 'shutdown' ? 1001 : 1008, e.reason);
        return;
    }
  }

  private onTurn(leg: Leg, turn: string, atSeconds: number): void {
    const t = this.config.turnDetection;
    if (!t) return;
    if (turn === 'turn.start') {
      this.speaking = true;
      this.inputItemId ??= this.newItemId();
      const audioStartMs = Math.max(0, Math.round(atSeconds * 1000) - t.prefixPaddingMs);
      this.send({ type: 'input_audio_buffer.speech_started', audio_start_ms: audioStartMs, item_id: this.inputItemId });
      if (t.interruptResponse && this.response) this.bargeIn(this.response);
      return;
    }
    if (turn === 'turn.end' && this.speaking) {
      this.speaking = false;
      this.send({ type: 'input_audio_buffer.speech_stopped', audio_end_ms: Math.round(atSeconds * 1000), item_id: this.inputItemId });
      leg.bufferBytes = 0;
      this.commitItem(leg, t.createResponse);
    }
  }

  /** The user's speech so far becomes an item with its transcript; in a conversation, a response may follow. */
  private commitItem(leg: Leg, respond: boolean): void {
    const transcript = leg.finals.join(' ').replace(/\s+/g, ' ').trim();
    leg.finals = [];
    leg.sentDelta = '';
    const itemId = this.inputItemId ?? this.newItemId();
    this.inputItemId = null;
    const previous = this.conversation.lastId();
    this.send({ type: 'input_audio_buffer.committed', previous_item_id: previous, item_id: itemId });
    if (this.o.kind === 'realtime') {
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
      usage: { type: 'duration', seconds: this.inputMs() / 1000 },
    });
    // A turn with no words heard (a cough, noise) is not answered.
    if (!respond || this.o.kind !== 'realtime' || !transcript) return;
    const answer = () => this.createResponse(undefined).catch((e: unknown) => this.failed(e));
    const active = this.response;
    // The answer the user spoke over ends in a moment (it was cancelled): this turn's follows it.
    if (active?.cancelled) void active.done.then(answer);
    else if (!active) void answer();
  }

  private failed(e: unknown): void {
    if (isServiceError(e)) this.sendError({ code: e.code, message: e.message, param: e.param });
    else this.o.log.warn({ err: e }, 'realtime response failed to start');
  }

  // ---- the conversation

  private conversationItem(id: unknown): ConversationItem {
    const item = typeof id === 'string' ? this.conversation.get(id) : undefined;
    if (!item) throw new ServiceError('invalid_request', `item_id: no item with id ${JSON.stringify(id)} in the conversation.`, 'item_id');
    return item;
  }

  private createItem(event: Record<string, unknown>): void {
    if (this.o.kind !== 'realtime') throw new ServiceError('invalid_request', 'A transcription session has no conversation.', 'type');
    const item = parseClientItem(event.item, this.newItemId);
    const previousId = event.previous_item_id === undefined ? undefined : (event.previous_item_id as string | null);
    const previous = this.conversation.add(item, previousId);
    this.send({ type: 'conversation.item.added', previous_item_id: previous, item });
    this.send({ type: 'conversation.item.done', previous_item_id: previous, item });
  }

  private deleteItem(id: unknown): void {
    this.conversationItem(id);
    this.conversation.delete(id as string);
    this.spans.delete(id as string);
    this.send({ type: 'conversation.item.deleted', item_id: id });
  }

  /** The assistant's audio item cut at `audio_end_ms` (what the user heard): its transcript keeps the words spoken by then. */
  private truncate(id: unknown, contentIndex: unknown, audioEndMs: unknown): void {
    const item = this.conversationItem(id);
    if (item.type !== 'message' || item.role !== 'assistant' || item.content[0]?.type !== 'output_audio')
      throw new ServiceError('invalid_request', 'item_id: only an assistant message with audio can be truncated.', 'item_id');
    if (typeof audioEndMs !== 'number' || !Number.isFinite(audioEndMs) || audioEndMs < 0)
      throw new ServiceError('invalid_request', 'audio_end_ms: must be a number of milliseconds, 0 or more.', 'audio_end_ms');
    const spans = this.spans.get(item.id) ?? [];
    const total = spans.at(-1)?.endMs ?? 0;
    if (audioEndMs > total + 1) throw new ServiceError('invalid_request', `audio_end_ms: the item has ${Math.round(total)} ms of audio.`, 'audio_end_ms');
    item.content[0].transcript = transcriptUpTo(spans, audioEndMs);
    item.status = 'incomplete';
    this.conversation.recount();
    this.send({
      type: 'conversation.item.truncated',
      item_id: item.id,
      content_index: typeof contentIndex === 'number' ? contentIndex : 0,
      audio_end_ms: audioEndMs,
    });
  }

  // ---- responses

  private async createResponse(options: unknown): Promise<void> {
    if (this.o.kind !== 'realtime') throw new ServiceError('invalid_request', 'A transcription session makes no responses.', 'type');
    if (this.response)
      throw new ServiceError(
        'invalid_request',
        `The conversation already has an active response (${this.response.id}); cancel it or wait for response.done.`,
        'response',
      );
    const r = (options ?? {}) as Record<string, unknown>;
    if (typeof r !== 'object' || Array.isArray(r)) throw new ServiceError('invalid_request', 'response: must be an object.', 'response');
    // Per-response overrides, read as session fields are.
    const c = applySessionUpdate(this.config, {
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
    const conversation = r.conversation === 'none' ? 'none' : 'auto';
    const voice =
      typeof (r.audio as { output?: { voice?: unknown } } | undefined)?.output?.voice === 'string'
        ? (r.audio as { output: { voice: string } }).output.voice
        : typeof r.voice === 'string'
          ? r.voice
          : undefined;
    let input: readonly ConversationItem[] = this.conversation.all();
    if (r.input !== undefined) {
      if (!Array.isArray(r.input)) throw new ServiceError('invalid_request', 'response.input: must be an array of items.', 'response.input');
      input = r.input.map((v, i) => {
        const ref = v as { type?: unknown; id?: unknown };
        if (ref?.type === 'item_reference') return this.conversationItem(ref.id);
        return parseClientItem(v, this.newItemId, `response.input[${i}]`);
      });
    }
    const legs = await this.legs(c.outputModalities[0] === 'text', voice);
    // Another response may have started while the models were looked up.
    const active = this.response as ResponseRun | null;
    if (active) throw new ServiceError('invalid_request', `The conversation already has an active response (${active.id}).`, 'response');
    if (this.closed) return;
    const chat: Record<string, unknown> = { messages: chatMessages(c.instructions, input) };
    if (c.tools.length && c.toolChoice !== 'none') {
      chat.tools = chatTools(c.tools);
      chat.tool_choice = chatToolChoice(c.toolChoice);
    }
    if (c.temperature !== undefined) chat.temperature = c.temperature;
    if (c.maxOutputTokens !== 'inf') chat.max_tokens = c.maxOutputTokens;
    const run = new ResponseRun(
      {
        ctx: this.o.ctx,
        auth: this.o.auth,
        requestId: this.o.requestId,
        log: this.o.log,
        send: (e) => this.send(e),
        sendPaced: (e) => this.sendPaced(e),
        onItem: (item, previous) => {
          if (conversation !== 'auto') return;
          this.conversation.add(item);
          this.send({ type: 'conversation.item.added', previous_item_id: previous ?? this.previousOf(item.id), item: { ...item } });
        },
        onBalance: (remaining) => {
          if (remaining <= 0n)
            this.close(1008, 'insufficient_quota', { code: 'insufficient_quota', message: "The organization's credit ran out; add credits to continue." });
        },
      },
      { id: `resp_${randomBytes(10).toString('hex')}`, chat, legs, conversation, metadata: r.metadata, newItemId: this.newItemId },
    );
    if (conversation === 'auto') this.response = run;
    // A shutdown waits for its debits before the database closes.
    this.o.ctx.lifecycle.track(run.done);
    void run.done.then(() => {
      if (run.assistantItemId) this.spans.set(run.assistantItemId, run.spans);
      // Items the conversation dropped (its oldest, past its bounds) take their spans along.
      if (this.spans.size > MAX_ITEMS) for (const id of this.spans.keys()) if (!this.conversation.get(id)) this.spans.delete(id);
      if (this.response === run) this.response = null;
      this.o.ctx.metrics.realtimeResponse(run.status, run.timings);
      this.o.onResponseDone?.(run, legs);
      this.conversation.recount();
    });
  }

  private previousOf(id: string): string | null {
    const all = this.conversation.all();
    const i = all.findIndex((x) => x.id === id);
    return i > 0 ? all[i - 1]!.id : null;
  }

  private cancelResponse(responseId: unknown): void {
    const run = this.response;
    if (!run || (typeof responseId === 'string' && responseId !== run.id))
      throw new ServiceError('invalid_request', 'response_id: there is no active response to cancel.', 'response_id');
    run.cancel('client_cancelled');
  }

  /** The user spoke over the answer: it stops now, and its item keeps what was heard of it. */
  private bargeIn(run: ResponseRun): void {
    run.cancel('turn_detected');
    this.o.ctx.metrics.realtimeBargeIn();
    void run.done.then(() => {
      const id = run.assistantItemId;
      const item = id ? this.conversation.get(id) : undefined;
      if (!item || item.type !== 'message' || item.content[0]?.type !== 'output_audio') return;
      const played = Math.round(run.playedMs());
      item.content[0].transcript = transcriptUpTo(run.spans, played);
      item.status = 'incomplete';
      this.send({ type: 'conversation.item.truncated', item_id: id, content_index: 0, audio_end_ms: played });
    });
  }

  private onSocketClose(): void {
    this.closed = true;
    clearTimeout(this.idle);
    clearTimeout(this.maxLength);
    clearInterval(this.ping);
    this.response?.cancel('client_cancelled');
    this.firstHold?.release();
    this.firstHold = null;
    this.endLeg();
    void this.legOpening?.then((leg) => leg.stt.close());
  }
}

/** The words of the spans heard by `ms`: whole spans, and of the span being played the share of its words its played audio is. */
export function transcriptUpTo(spans: readonly { text: string; startMs: number; endMs: number }[], ms: number): string {
  const heard: string[] = [];
  for (const s of spans) {
    if (s.startMs >= ms) break;
    if (s.endMs <= ms) {
      heard.push(s.text);
      continue;
    }
    const words = s.text.split(/\s+/);
    const share = Math.floor((words.length * (ms - s.startMs)) / Math.max(1, s.endMs - s.startMs));
    if (share > 0) heard.push(words.slice(0, share).join(' '));
    break;
  }
  return heard.join(' ');
}
