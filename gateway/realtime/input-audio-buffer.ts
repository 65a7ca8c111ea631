// The user's audio in a /v1/realtime session: `input_audio_buffer.append` / `.commit` / `.clear`,
// and its transcription. The audio goes to a transcription leg (stt-leg.ts: the /stt/websocket
// session in process, with the gateway's turn detector; opened at the first audio, metered by the
// second). With turn detection on, a turn's start is `speech_started` (the session may interrupt
// its answer: barge-in) and its end commits the turn; without it the client commits. A commit
// hands the session the item id and the words heard; the session makes the item of them.
import type { FastifyBaseLogger } from 'fastify';
import { perSecondCostMicros } from '../../server/services/credits/pricing.ts';
import { ServiceError, isServiceError } from '../../server/services/errors.ts';
import type { GatewayContext } from '../context.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import type { ModelEntry } from '../registry/model-registry.ts';
import type { SendOptions } from '../sessions/outbox.ts';
import type { SessionPlan } from '../stt/open-session.ts';
import { METER_EVERY_MS, type SttSession } from '../stt/stt-session.ts';
import type { TurnSettings } from '../stt/turn-detector.ts';
import { presetSettings } from '../stt/turn-params.ts';
import type { EventError, ServerEvent } from './server-events.ts';
import { FORMAT_AUDIO, type RealtimeConfig } from './session-config.ts';
import { startSttLeg, type LegEvent } from './stt-leg.ts';

/** Audio the leg has not taken yet (it is opening): at most this many bytes wait. */
const MAX_WAITING_AUDIO = 4 * 1024 * 1024;

/** What the buffer needs of its session. */
export interface InputAudioSession {
  readonly ctx: GatewayContext;
  readonly auth: RequestAuth;
  readonly requestId: string;
  readonly log: FastifyBaseLogger;
  readonly revoked: AbortSignal;
  readonly closed: boolean;
  config(): RealtimeConfig;
  sttModel(): ModelEntry;
  newItemId(): string;
  send(event: ServerEvent, options?: SendOptions): void;
  sendError(e: EventError): void;
  close(code: number, reason: string, error?: EventError): void;
  /** The user started speaking `agoMs` of audio before the last received (turn detection on; `interrupt`: its interrupt_response). */
  speechStarted(interrupt: boolean, agoMs: number): void;
  /** The user stopped speaking (turn detection on) at `audioEndMs` of the input audio, `agoMs` of audio before the last received; the commit follows once the turn's final transcript is in. */
  speechStopped(agoMs: number, audioEndMs: number): void;
  /** The turn may be over (the detector's eager end; preemptive answers): `transcript` is every word of it, final. */
  mayBeOver(itemId: string, transcript: string): void;
  /** The user spoke again after an eager end. */
  speechResumed(): void;
  /** An answer is prepared for the item with exactly these words: the turn is committed at its end, without waiting for the final of the silence after them. */
  answerPrepared(itemId: string, transcript: string): boolean;
  /** The buffer was committed: its audio is the item `itemId`, `transcript` what was heard; `respond`: the turn's end asks for a response. */
  committed(itemId: string, transcript: string, audioMs: number, respond: boolean): void;
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
  /** A turn ended and its final transcript is awaited (turn_final): the item it will be committed as. */
  awaitingFinal?: string;
  /** That turn's end of speech (audio seconds): its last eager end, should it come after the end, has the same. */
  awaitingSpeechEnd?: number;
  /** A turn committed at its end (an answer was prepared for its words): what is heard until its turn_final is its silence's, not the next turn's. */
  inTail?: boolean;
}

export class InputAudioBuffer {
  private leg: Leg | null = null;
  private legOpening: Promise<Leg> | null = null;
  private waitingAudio: Buffer[] = [];
  private waitingBytes = 0;
  /** Input audio received over the session, in ms (audio_start_ms / audio_end_ms). */
  private inputSamples = 0;
  /** The item the user's current audio will become. */
  private inputItemId: string | null = null;
  private speaking = false;

  constructor(
    private readonly session: InputAudioSession,
    /** The first second of the leg's audio, reserved before the upgrade. */
    private firstHold: CreditHold | null,
  ) {}

  /** Ends the leg and gives back what is held (the session is over). */
  end(): void {
    this.firstHold?.release();
    this.firstHold = null;
    this.endLeg();
    void this.legOpening?.then((leg) => leg.stt.close());
  }

  /** The session's configuration changed: a new format, model or language needs a new leg; new turn settings go to the running one. */
  reconfigure(before: RealtimeConfig, next: RealtimeConfig): void {
    if (next.inputFormat !== before.inputFormat || next.transcriptionModel !== before.transcriptionModel || next.language !== before.language) this.endLeg();
    else if (JSON.stringify(next.turnDetection) !== JSON.stringify(before.turnDetection) || next.preemptive !== before.preemptive)
      this.leg?.stt.command({ type: 'configure', turns: this.turnSettings() });
  }

  private turnSettings(): TurnSettings {
    const { turnDetection: t, preemptive } = this.session.config();
    if (!t) return presetSettings('balanced', { eager: false });
    // Eager ends only where they are used: to prepare the answer a turn's end asks for, on the words made final at it.
    const eager = preemptive && t.createResponse;
    // Every field set, even to undefined: a running leg's detector takes these as changes to what it has.
    const settings =
      t.type === 'server_vad'
        ? { ...presetSettings('balanced', { eager, fixedSilenceMs: t.silenceDurationMs }), speechThreshold: t.threshold ?? 0.5 }
        : { ...presetSettings(t.preset, { eager }), fixedSilenceMs: undefined };
    return { ...settings, finalizeOnEagerEnd: eager };
  }

  append(audio: string): void {
    const bytes = Buffer.from(audio, 'base64');
    if (bytes.length === 0) return;
    const { encoding } = FORMAT_AUDIO[this.session.config().inputFormat];
    this.inputSamples += bytes.length / (encoding === 'pcm_s16le' ? 2 : 1);
    this.inputItemId ??= this.session.newItemId();
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
        this.session.sendError({ code: e.code, message: e.message, param: e.param });
        if (e.code === 'insufficient_quota' || e.code === 'key_budget_exceeded') this.session.close(1008, e.code);
      } else this.session.log.warn({ err: e }, 'realtime transcription did not start');
    });
  }

  private inputMs(): number {
    return Math.round((this.inputSamples * 1000) / FORMAT_AUDIO[this.session.config().inputFormat].sampleRate);
  }

  private openLeg(): Promise<Leg> {
    this.legOpening ??= (async () => {
      const { ctx, auth } = this.session;
      const config = this.session.config();
      const model = this.session.sttModel();
      const { sampleRate, encoding } = FORMAT_AUDIO[config.inputFormat];
      const hold = this.firstHold ?? (await ctx.core.reserve(auth, perSecondCostMicros(model.prices.picoPerSecond, METER_EVERY_MS)));
      this.firstHold = null;
      const plan: SessionPlan = {
        model,
        sampleRate,
        encoding,
        turnSource: 'gateway',
        turns: this.turnSettings(),
        keyterms: [],
        language: config.language,
      };
      const { requestId, log, revoked } = this.session;
      const leg: Leg = {
        stt: startSttLeg(ctx, { plan, auth, requestId, log, hold, revoked, usageRoute: 'realtime' }, (e) => this.onLegEvent(leg, e)),
        bufferBytes: 0,
        finals: [],
        sentDelta: '',
        afterFlush: [],
      };
      // Closed while the credit was reserved: the leg ends at once (it bills nothing and gives the credit back).
      if (this.session.closed) {
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

  commit(): void {
    const leg = this.leg;
    if (!leg || leg.bufferBytes === 0) {
      if (this.waitingBytes > 0)
        return void this.openLeg()
          .then(() => this.commit())
          .catch((e: unknown) => this.failed(e));
      throw new ServiceError('invalid_request', 'input_audio_buffer: the buffer is empty; append audio before committing.', 'input_audio_buffer');
    }
    leg.afterFlush.push('commit');
    leg.bufferBytes = 0;
    leg.stt.command({ type: 'finalize' });
  }

  clear(): void {
    const leg = this.leg;
    this.waitingAudio = [];
    this.waitingBytes = 0;
    if (leg && leg.bufferBytes > 0) {
      leg.afterFlush.push('clear');
      leg.bufferBytes = 0;
      leg.stt.command({ type: 'finalize' });
    }
    this.inputItemId = null;
    this.session.send({ type: 'input_audio_buffer.cleared' });
  }

  private failed(e: unknown): void {
    if (isServiceError(e)) this.session.sendError({ code: e.code, message: e.message, param: e.param });
    else this.session.log.warn({ err: e }, 'realtime commit failed');
  }

  private onLegEvent(leg: Leg, e: LegEvent): void {
    if (this.session.closed && e.type !== 'closed') return;
    switch (e.type) {
      case 'transcript': {
        if (leg.afterFlush.at(-1) === 'clear' || leg.inTail) return;
        if (e.isFinal) {
          leg.finals.push(e.text);
          leg.sentDelta = '';
          return;
        }
        // Deltas only ever add to what was sent (OpenAI's do; clients append them): a revised interim waits for the final.
        if (!e.text.startsWith(leg.sentDelta) || e.text === leg.sentDelta) return;
        const delta = (leg.finals.length && !leg.sentDelta ? ' ' : '') + e.text.slice(leg.sentDelta.length);
        leg.sentDelta = e.text;
        // Until its final is in, what is heard belongs to the ended turn's item.
        const itemId = leg.awaitingFinal ?? (this.inputItemId ??= this.session.newItemId());
        // Droppable: `completed` carries the whole transcript.
        this.session.send({ type: 'conversation.item.input_audio_transcription.delta', item_id: itemId, content_index: 0, delta }, { droppable: true });
        return;
      }
      case 'turn':
        return this.onTurn(leg, e.turn, e.atSeconds);
      case 'turn_final':
        return this.onTurnFinal(leg);
      case 'flushed': {
        const what = leg.afterFlush.shift();
        if (what === 'commit') this.commitItem(leg, false);
        else if (what === 'clear') leg.finals = [];
        return;
      }
      case 'error':
        // The leg ends after it (its close follows): the session says why and goes on.
        if (e.code !== 'idle_timeout') this.session.sendError({ code: e.code, message: e.message });
        return;
      case 'closed':
        if (this.leg === leg) this.leg = null;
        if (e.reason === 'insufficient_quota' || e.reason === 'key_budget_exceeded') this.session.close(1008, e.reason);
        else if (e.reason === 'shutdown' || e.reason === 'api_key_disabled' || e.reason === 'api_key_expired')
          this.session.close(e.reason === 'shutdown' ? 1001 : 1008, e.reason);
        return;
    }
  }

  private onTurn(leg: Leg, turn: string, atSeconds: number): void {
    const t = this.session.config().turnDetection;
    if (!t) return;
    if (turn === 'turn.start') {
      this.speaking = true;
      this.inputItemId ??= this.session.newItemId();
      const audioStartMs = Math.max(0, Math.round(atSeconds * 1000) - t.prefixPaddingMs);
      this.session.send({ type: 'input_audio_buffer.speech_started', audio_start_ms: audioStartMs, item_id: this.inputItemId });
      this.session.speechStarted(t.interruptResponse, Math.max(0, this.inputMs() - atSeconds * 1000));
      return;
    }
    // Every word before the eager end is final by now (finalizeOnEagerEnd): the answer is prepared on exactly them -- also
    // when the turn's end came first (it goes out at once; the eager end waits for its words' final), its own final still awaited.
    if (turn === 'turn.eager_end' && this.session.config().preemptive) {
      const itemId = this.speaking ? this.inputItemId : leg.awaitingFinal;
      if (!itemId) return;
      this.session.mayBeOver(itemId, heard(leg));
      // The ended turn's last eager end (no speech after it: the same end of speech): its words are all the turn's, and
      // the turn is committed on them now, as when the eager end comes first -- not after the final of the silence after them.
      // (An earlier eager end, taken back by a resume still on its way, has an earlier end of speech.)
      if (!this.speaking && t.createResponse && atSeconds === leg.awaitingSpeechEnd && this.session.answerPrepared(itemId, heard(leg))) {
        leg.awaitingFinal = undefined;
        leg.awaitingSpeechEnd = undefined;
        leg.inTail = true;
        this.commitItem(leg, true, itemId);
      }
      return;
    }
    if (turn === 'turn.resume') return this.session.speechResumed();
    if (turn === 'turn.end' && this.speaking) {
      this.speaking = false;
      const audioEndMs = Math.round(atSeconds * 1000);
      this.session.send({ type: 'input_audio_buffer.speech_stopped', audio_end_ms: audioEndMs, item_id: this.inputItemId });
      this.session.speechStopped(Math.max(0, this.inputMs() - atSeconds * 1000), audioEndMs);
      leg.bufferBytes = 0;
      const itemId = this.inputItemId ?? this.session.newItemId();
      this.inputItemId = null;
      // Its answer is ready for exactly the words heard: committed now, the final of the silence after them not awaited.
      if (t.createResponse && this.session.answerPrepared(itemId, heard(leg))) {
        leg.inTail = true;
        return this.commitItem(leg, true, itemId);
      }
      // Committed once the turn's final transcript is in (turn_final), as the item speech_started named -- or at its
      // last eager end, if that comes first (above).
      leg.awaitingFinal = itemId;
      leg.awaitingSpeechEnd = atSeconds;
    }
  }

  /** The ended turn's final is in: its speech is committed (and answered when the turn asks for it). */
  private onTurnFinal(leg: Leg): void {
    if (leg.inTail) {
      // The adopted turn's tail is over: what it heard (the silence after the words) is no one's.
      leg.inTail = false;
      leg.finals = [];
      leg.sentDelta = '';
      return;
    }
    const itemId = leg.awaitingFinal;
    if (itemId === undefined) return;
    leg.awaitingFinal = undefined;
    leg.awaitingSpeechEnd = undefined;
    this.commitItem(leg, this.session.config().turnDetection?.createResponse ?? false, itemId);
  }

  /** The user's speech so far, committed: the session makes an item of it. */
  private commitItem(leg: Leg, respond: boolean, turnItemId?: string): void {
    const transcript = heard(leg);
    leg.finals = [];
    leg.sentDelta = '';
    const itemId = turnItemId ?? this.inputItemId ?? this.session.newItemId();
    if (turnItemId === undefined) this.inputItemId = null;
    this.session.committed(itemId, transcript, this.inputMs(), respond);
  }
}

/** The words of the leg's finals since the last commit. */
const heard = (leg: Leg): string => leg.finals.join(' ').replace(/\s+/g, ' ').trim();
