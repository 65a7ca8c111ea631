// `deepgram`: Deepgram's API (hosted at https://api.deepgram.com, or self-hosted). Live
// transcription over the /v1/listen WebSocket (Nova: interim and final results, turns found by
// Deepgram's endpointing and UtteranceEnd), pre-recorded transcription (POST /v1/listen), Aura
// speech (POST /v1/speak, raw linear16) and Aura's voice list (GET /v1/models).
// Reference:
//   https://developers.deepgram.com/reference/speech-to-text/listen-streaming
//   https://developers.deepgram.com/reference/speech-to-text/listen-pre-recorded
//   https://developers.deepgram.com/docs/finalize  https://developers.deepgram.com/docs/keep-alive
//   https://developers.deepgram.com/docs/close-stream  https://developers.deepgram.com/docs/speech-started
//   https://developers.deepgram.com/reference/text-to-speech/speak-request  https://developers.deepgram.com/docs/tts-voice-controls
//   https://developers.deepgram.com/reference/manage/models/list  https://developers.deepgram.com/reference/manage/projects/list
//   message types: github.com/deepgram/deepgram-js-sdk src/api/resources/listen/resources/v1/types
import { z } from 'zod';
import { s16leView } from '../../audio/pcm.ts';
import { AsyncQueue } from '../async-queue.ts';
import {
  UpstreamError,
  type EngineVoice,
  defineProtocol,
  type SpeechCapability,
  type StreamingTranscriptionCapability,
  type StreamingTranscriptionOptions,
  type TranscriptionCapability,
  type TranscriptionEvent,
  type TranscriptionStream,
  type UpstreamTarget,
  type VoiceCatalogueCapability,
  type Word,
} from '../contract.ts';
import { checkHttpHealth, engineBody, engineJson, engineRequest } from '../engine-http.ts';
import { closeError, connectEngine, WebSocket } from '../engine-ws.ts';
import { readInTurns } from '../loop-turns.ts';
import { boundedSpeech, s16Chunks } from '../pcm-streams.ts';
import { wavOf } from './openai.ts';

const LISTEN_RATES = [8000, 16000, 24000, 44100, 48000];
const TTS_RATES = [8000, 16000, 24000, 48000] as const;

const settings = z
  .object({
    /** Silence (ms) after speech before Deepgram marks a result speech_final (its `endpointing`). */
    endpointing_ms: z.number().int().positive().default(300),
    /** Gap (ms) between words after which Deepgram sends UtteranceEnd (its minimum is 1000). */
    utterance_end_ms: z.number().int().min(1000).default(1000),
    smart_format: z.boolean().default(true),
    /** Sample rate of Aura's linear16 output. */
    tts_sample_rate: z.literal(TTS_RATES).default(24000),
  })
  .strict();

type DeepgramSettings = z.output<typeof settings>;
type DeepgramTarget = UpstreamTarget<DeepgramSettings>;

/** Deepgram closes a socket that got neither audio nor a text message for ~10 s (NET-0001); it asks for a KeepAlive every 3-5 s. */
const KEEPALIVE_MS = 5000;
/** How long a closing socket may take over its close handshake before it is cut. */
const CLOSE_HANDSHAKE_MS = 1000;
/** Deepgram need not answer a Finalize when little audio is pending: past this wait, the finalize counts as done. */
const FINALIZE_ANSWER_MS = 2000;
/** A final ending this close to the audio written before a finalize() covers it (Deepgram's times are rounded). */
const COVERED_SLACK_S = 0.02;

const tokenAuth = (target: UpstreamTarget): Record<string, string> => (target.apiKey ? { authorization: `Token ${target.apiKey}` } : {});
/** The WebSocket origin of an http(s) base URL. */
const wsBase = (url: string) => url.replace(/^http/i, 'ws');

/** The recognition parameters both /v1/listen endpoints take. */
function listenQuery(target: DeepgramTarget, language: string | undefined, keyterms: string[]): URLSearchParams {
  const q = new URLSearchParams({ model: target.upstreamModel, punctuate: 'true', smart_format: String(target.settings.smart_format) });
  if (language) q.set('language', language);
  for (const term of keyterms) q.append('keyterm', term);
  return q;
}

interface DeepgramWord {
  word?: unknown;
  punctuated_word?: unknown;
  start?: unknown;
  end?: unknown;
}

interface DeepgramAlternative {
  transcript?: unknown;
  words?: DeepgramWord[];
}

/** Deepgram's words (seconds from the start of the audio), with their punctuated form where given. */
function wordsOf(words: unknown): Word[] {
  if (!Array.isArray(words)) return [];
  const out: Word[] = [];
  for (const w of words as DeepgramWord[]) {
    const text = typeof w.punctuated_word === 'string' ? w.punctuated_word : w.word;
    if (typeof text === 'string' && typeof w.start === 'number' && typeof w.end === 'number') out.push({ word: text, start: w.start, end: w.end });
  }
  return out;
}

const transcription: TranscriptionCapability<DeepgramSettings> = {
  async transcribe(target, req) {
    const q = listenQuery(target, req.language, req.keyterms);
    const res = await engineRequest(
      target.url,
      target.apiKey,
      { method: 'POST', path: `/v1/listen?${q}`, headers: { ...tokenAuth(target), 'content-type': 'audio/wav' }, body: wavOf(req.samples, req.sampleRate) },
      req,
    );
    const body = await engineJson<{ results?: { channels?: { alternatives?: DeepgramAlternative[] }[] } } | null>(res, req, 'the transcription');
    const best = body?.results?.channels?.[0]?.alternatives?.[0];
    if (!best || typeof best.transcript !== 'string')
      throw new UpstreamError('protocol', 'Deepgram answered the transcription without results.channels[0].alternatives[0].transcript.');
    return { text: best.transcript.trim(), words: wordsOf(best.words) };
  },
};

const speech: SpeechCapability<DeepgramSettings> = {
  formatPhoneme: null,
  async synthesize(target, req) {
    const rate = target.settings.tts_sample_rate;
    // Aura voices are models: the profile's upstream id (aura-2-thalia-en) is the model to ask for.
    const q = new URLSearchParams({ model: req.voice.upstreamId, encoding: 'linear16', sample_rate: String(rate), container: 'none' });
    // Only Aura-2 takes `speed` (0.7-1.5); Aura-1 voices have no rate control, so theirs is ignored.
    if (req.speed !== 1 && req.voice.upstreamId.startsWith('aura-2-')) q.set('speed', String(Math.min(1.5, Math.max(0.7, req.speed))));
    const res = await engineRequest(
      target.url,
      target.apiKey,
      { method: 'POST', path: `/v1/speak?${q}`, headers: tokenAuth(target), json: { text: req.text } },
      req,
    );
    return boundedSpeech({ sampleRate: rate, chunks: s16Chunks(engineBody(res, req)) }, req.text);
  },
};

interface TtsModel {
  name?: unknown;
  canonical_name?: unknown;
  languages?: unknown;
  metadata?: { accent?: unknown; tags?: unknown; use_cases?: unknown };
}

const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);

function engineVoice(model: TtsModel): EngineVoice | null {
  if (typeof model.canonical_name !== 'string' || !model.canonical_name) return null;
  const tags = strings(model.metadata?.tags).map((t) => t.toLowerCase());
  const accent = typeof model.metadata?.accent === 'string' && model.metadata.accent ? `${model.metadata.accent} accent` : '';
  const useCases = strings(model.metadata?.use_cases).join(', ');
  return {
    id: model.canonical_name,
    name: typeof model.name === 'string' && model.name ? model.name : model.canonical_name,
    language: strings(model.languages)[0] ?? 'en',
    gender: tags.includes('feminine') ? 'female' : tags.includes('masculine') ? 'male' : null,
    description: [accent, useCases].filter(Boolean).join('; '),
  };
}

const voiceCatalogue: VoiceCatalogueCapability<DeepgramSettings> = {
  async listVoices(target, call) {
    const res = await engineRequest(target.url, target.apiKey, { method: 'GET', path: '/v1/models', headers: tokenAuth(target) }, call);
    const body = await engineJson<{ tts?: unknown } | null>(res, call, 'the model list');
    if (!body || !Array.isArray(body.tts)) throw new UpstreamError('protocol', 'Deepgram answered the model list without a tts array.');
    return (body.tts as TtsModel[]).map(engineVoice).filter((v): v is EngineVoice => v !== null);
  },
};

interface ListenMessage {
  type?: string;
  is_final?: boolean;
  speech_final?: boolean;
  from_finalize?: boolean;
  start?: number;
  duration?: number;
  channel?: { alternatives?: DeepgramAlternative[] };
  timestamp?: number;
  last_word_end?: number;
}

/** A Finalize sent, waiting for its answer (or a final covering the audio written before it). */
interface PendingFinalize {
  atSeconds: number;
  /** Where the Finalize before this one stood: its answer, even late, ends there, this one's beyond. */
  afterSeconds: number;
  /** finalize() calls it answers (calls with no audio written between share one Finalize). */
  calls: number;
  timer: NodeJS.Timeout;
}

/** One /v1/listen socket as the contract's stream. */
class DeepgramStream implements TranscriptionStream {
  readonly events = new AsyncQueue<TranscriptionEvent>();
  private writtenSamples = 0;
  /** Where the last final ended (seconds of audio). */
  private transcribedUntil = 0;
  private readonly finalizes: PendingFinalize[] = [];
  private lastFinalizeAt = 0;
  private lastInterim = '';
  /** A final with words came since the last end_of_turn. */
  private turnHasWords = false;
  /** An UtteranceEnd that came while words were still interim: the turn ends at their final. */
  private deferredTurnEnd: number | null = null;
  private closed = false;
  private readonly keepAlive: NodeJS.Timeout;
  private readonly finalizeWaitMs: number;

  constructor(
    private readonly socket: WebSocket,
    private readonly sampleRate: number,
    private readonly options: StreamingTranscriptionOptions,
    apiKey: string | undefined,
  ) {
    this.finalizeWaitMs = Math.min(options.timeoutMs, FINALIZE_ANSWER_MS);
    const reading = readInTurns(socket, (data, isBinary) => {
      if (!isBinary) this.onMessage(data.toString('utf8'));
    });
    socket.on('close', (code: number, reason: Buffer) => reading.after(() => this.end(closeError(code, reason, apiKey) ?? undefined)));
    // 'close' follows every error.
    socket.on('error', () => {});
    this.keepAlive = setInterval(() => this.sendJson({ type: 'KeepAlive' }), KEEPALIVE_MS);
    options.signal.addEventListener('abort', this.close, { once: true });
    if (options.signal.aborted) this.close();
  }

  get pendingSamples(): number {
    return this.socket.bufferedAmount / 2;
  }

  write(samples: Int16Array): void {
    // An empty binary message makes Deepgram close the stream.
    if (this.closed || samples.length === 0 || this.socket.readyState !== WebSocket.OPEN) return;
    // A view, not a copy: ws copies the payload as it masks it (engine-ws.ts: no compression).
    this.socket.send(s16leView(samples));
    this.writtenSamples += samples.length;
  }

  finalize(): void {
    if (this.closed) return;
    const atSeconds = this.writtenSamples / this.sampleRate;
    // Nothing written since the last final: Deepgram might never answer a Finalize, and need not be asked.
    if (atSeconds <= this.transcribedUntil + COVERED_SLACK_S) {
      this.events.push({ type: 'finalized' });
      return;
    }
    const last = this.finalizes.at(-1);
    if (last?.atSeconds === atSeconds) {
      last.calls += 1;
      return;
    }
    this.sendJson({ type: 'Finalize' });
    const timer = setTimeout(() => this.finalizeUnanswered(atSeconds), this.finalizeWaitMs);
    this.finalizes.push({ atSeconds, afterSeconds: this.lastFinalizeAt, calls: 1, timer });
    this.lastFinalizeAt = atSeconds;
  }

  /** Sends CloseStream and closes the socket at once; `events` ends. */
  readonly close = (): void => {
    if (this.closed) return;
    this.sendJson({ type: 'CloseStream' });
    this.end(undefined);
  };

  private sendJson(message: { type: string }): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }

  /** Resolves, in order, every finalize() whose audio ends by `coveredUntil`. */
  /**
   * No answer to a Finalize. Deepgram may send none when it holds no words; but words it showed
   * as interim and never settled would be lost silently: that is the engine failing.
   */
  private finalizeUnanswered(atSeconds: number): void {
    if (this.lastInterim)
      this.end(new UpstreamError('timeout', `Deepgram did not answer a Finalize within ${this.finalizeWaitMs / 1000} s with words still pending.`));
    else this.settleFinalizes(atSeconds);
  }

  private settleFinalizes(coveredUntil: number): void {
    while (this.finalizes.length > 0 && this.finalizes[0]!.atSeconds <= coveredUntil) this.settleOldest();
  }

  private settleOldest(): void {
    const done = this.finalizes.shift()!;
    clearTimeout(done.timer);
    for (let i = 0; i < done.calls; i++) this.events.push({ type: 'finalized' });
  }

  private endTurn(atSeconds: number): void {
    this.events.push({ type: 'end_of_turn', atSeconds });
    this.turnHasWords = false;
    this.deferredTurnEnd = null;
  }

  private onMessage(text: string): void {
    let msg: ListenMessage;
    try {
      msg = JSON.parse(text) as ListenMessage;
    } catch {
      this.end(new UpstreamError('protocol', 'Deepgram sent a message that is not JSON.'));
      return;
    }
    switch (msg.type) {
      case 'Results':
        this.onResults(msg);
        return;
      case 'SpeechStarted':
        if (typeof msg.timestamp === 'number') this.events.push({ type: 'speech_started', atSeconds: msg.timestamp });
        return;
      case 'UtteranceEnd':
        if (typeof msg.last_word_end !== 'number') return;
        if (this.lastInterim) this.deferredTurnEnd = msg.last_word_end;
        else if (this.turnHasWords) this.endTurn(msg.last_word_end);
        return;
      default:
      // Metadata (CloseStream's summary) and anything newer: nothing to report.
    }
  }

  private onResults(msg: ListenMessage): void {
    const best = msg.channel?.alternatives?.[0];
    const text = typeof best?.transcript === 'string' ? best.transcript.trim() : '';
    const words = wordsOf(best?.words);
    if (!msg.is_final) {
      if (text !== this.lastInterim) this.events.push({ type: 'transcript', isFinal: false, text, words });
      this.lastInterim = text;
      return;
    }
    const end = (msg.start ?? 0) + (msg.duration ?? 0);
    this.transcribedUntil = Math.max(this.transcribedUntil, end);
    // An empty final is reported only when it withdraws an interim the client was shown.
    if (text || this.lastInterim) this.events.push({ type: 'transcript', isFinal: true, text, words });
    this.lastInterim = '';
    if (text) this.turnHasWords = true;
    if (this.turnHasWords && msg.speech_final) this.endTurn(end);
    else if (this.turnHasWords && this.deferredTurnEnd !== null) this.endTurn(this.deferredTurnEnd);
    this.deferredTurnEnd = null;
    // The answer to the oldest Finalize -- unless it ends where an earlier one stood (a late
    // answer to a Finalize already given up on).
    const oldest = this.finalizes[0];
    if (msg.from_finalize && oldest && end > oldest.afterSeconds + COVERED_SLACK_S) this.settleOldest();
    this.settleFinalizes(end + COVERED_SLACK_S);
  }

  /** Stops everything; `events` ends (with `error`, if the engine failed). */
  private end(error: UpstreamError | undefined): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.keepAlive);
    for (const f of this.finalizes.splice(0)) clearTimeout(f.timer);
    this.options.signal.removeEventListener('abort', this.close);
    const socket = this.socket;
    if (socket.readyState === WebSocket.OPEN) socket.close(1000);
    if (socket.readyState !== WebSocket.CLOSED) {
      const cut = setTimeout(() => socket.terminate(), CLOSE_HANDSHAKE_MS);
      socket.once('close', () => clearTimeout(cut));
    }
    this.events.end(error);
  }
}

const streamingTranscription: StreamingTranscriptionCapability<DeepgramSettings> = {
  engineRate: (inputRate) => (LISTEN_RATES.includes(inputRate) ? inputRate : 16000),
  findsTurns: () => true,
  async open(target, options) {
    const s = target.settings;
    const q = listenQuery(target, options.language, options.keyterms);
    q.set('encoding', 'linear16');
    q.set('sample_rate', String(options.sampleRate));
    q.set('channels', '1');
    q.set('interim_results', 'true');
    if (options.engineTurns) {
      q.set('vad_events', 'true');
      q.set('endpointing', String(s.endpointing_ms));
      q.set('utterance_end_ms', String(s.utterance_end_ms));
    } else q.set('endpointing', 'false');
    const socket = await connectEngine(`${wsBase(target.url)}/v1/listen?${q}`, { headers: tokenAuth(target), apiKey: target.apiKey }, options);
    return new DeepgramStream(socket, options.sampleRate, options, target.apiKey);
  },
};

export const deepgram = defineProtocol({
  name: 'deepgram',
  summary: 'Deepgram: live and pre-recorded speech-to-text (/v1/listen, Nova), Aura speech (/v1/speak) and its voice list (/v1/models)',
  settings,
  capabilities: ['transcription', 'streaming_transcription', 'speech', 'voice_catalogue'],
  create: () => ({
    // GET /v1/projects needs a valid key and is cheap; /v1/models answers without one, so it cannot tell a revoked key.
    health: (target, signal) => checkHttpHealth(target.url, '/v1/projects', tokenAuth(target), signal, target.apiKey),
    transcription,
    streamingTranscription,
    speech,
    voiceCatalogue,
  }),
});
