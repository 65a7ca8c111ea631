// Streaming transcription over a batch-only engine (OpenAI-compatible `/audio/transcriptions`:
// whisper.cpp server, faster-whisper/speaches, vLLM). The stream keeps the audio of the current
// utterance; finalize() sends it whole to the engine for the final transcript, and while the
// utterance grows the stream re-sends it now and then for an interim one.
//
// Such engines find no turns: the gateway's own voice-activity detection (or the client) calls
// finalize() at each end of turn. They work at 16 kHz (the gateway resamples before write()) and
// read at most 30 s at once, so an utterance that reaches `maxUtteranceSeconds` without a
// finalize is finalized by the stream itself, which also keeps memory bounded.
//
// Only speech goes to the engine: Whisper answers silence with invented text ("Thank you.") and
// every call is paid for. Once the gateway's voice-activity detection tells the stream who is
// speaking (speaking()), an utterance without speech gets no engine call, interim or final, and
// while none is heard only the last `PRE_ROLL_SECONDS` are kept (the start of speech the detector
// confirms a little late). No engine call starts once the stream is closed.
//
// Interims cost engine calls, never billing: each re-sends the whole utterance so far (a 10 s
// utterance with an interim every second sends ~55 s of audio), but the gateway bills the audio it
// received, once, at its edge (gateway/stt/stt-session.ts). Gateways that bill each re-sent window
// over-bill 2-15x. The engine's load stays bounded: one engine call in flight per stream, and an
// interim only after `interimEverySeconds` more audio.
//
// References: platform.openai.com/docs/api-reference/audio/createTranscription (verbose_json with
// word timestamps, relative to the uploaded file); github.com/ggml-org/whisper.cpp
// examples/server (16 kHz WAV); speaches.ai (faster-whisper behind the same API).
import { s16ToFloat } from '../audio/pcm.ts';
import { AsyncQueue } from './async-queue.ts';
import {
  UpstreamError,
  type StreamingTranscriptionCapability,
  type StreamingTranscriptionOptions,
  type Transcript,
  type TranscriptionCapability,
  type TranscriptionEvent,
  type TranscriptionStream,
  type UpstreamTarget,
  type CallOptions,
} from './contract.ts';
import { asUpstreamError, engineFailure } from './engine-http.ts';

const WHISPER_RATE = 16_000;
/** Shorter utterances are not sent: Whisper invents text for near-silence ("Thank you."). */
const MIN_UTTERANCE_SECONDS = 0.1;
/** Audio kept before speech is heard: the detector declares speech after its first frames. */
const PRE_ROLL_SECONDS = 1;

export interface SegmentLimits {
  /** Audio that must arrive after an interim call before the next one (default 1 s). */
  interimEverySeconds?: number;
  /** The longest utterance sent at once (default 30 s, Whisper's window). */
  maxUtteranceSeconds?: number;
}

/**
 * `probe`: asks the engine at open whether it is there and takes our key (throws UpstreamError
 * otherwise), since nothing else reaches it before the first utterance ends: without it an
 * unreachable upstream would be found only then (no failover at open), and a refused key after
 * the audio was taken.
 */
export function segmentedStreaming(
  transcription: TranscriptionCapability,
  probe: (target: UpstreamTarget, call: CallOptions) => Promise<void>,
  limits: SegmentLimits = {},
): StreamingTranscriptionCapability {
  return {
    engineRate: () => WHISPER_RATE,
    findsTurns: () => false,
    open: async (target, options) => {
      await probe(target, options);
      return new SegmentedStream(transcription, target, options, limits);
    },
  };
}

/** An utterance waiting for (or in) its final engine call. */
interface FinalJob {
  samples: Int16Array;
  /** Samples of the session before it. */
  offset: number;
  /** Ended by finalize() (which is answered with `finalized`), not by the length limit. */
  askedFor: boolean;
  /** Someone spoke in it (as far as the stream was told): else no engine call. */
  speech: boolean;
}

class SegmentedStream implements TranscriptionStream {
  readonly events = new AsyncQueue<TranscriptionEvent>();
  private readonly rate: number;
  private readonly interimEvery: number;
  private readonly maxUtterance: number;
  private readonly minUtterance: number;
  /** The current utterance, in the pieces written. */
  private pieces: Int16Array[] = [];
  private utteranceLength = 0;
  private utteranceOffset = 0;
  /** The utterance's length when its last interim call started. */
  private interimAt = 0;
  private lastInterimText = '';
  private readonly finals: FinalJob[] = [];
  /** Samples written and not yet in a final transcript. */
  private uncovered = 0;
  /** The one engine call in flight; an answer whose call is no longer this one is dropped. */
  private inFlight: { controller: AbortController; interim: boolean } | null = null;
  private over = false;
  /** The gateway reports voice activity (speaking() was called): utterances without speech are not sent. */
  private speechKnown = false;
  private speakingNow = false;
  /** Speech was heard in the current utterance. */
  private utteranceSpeech = false;
  private readonly preRoll: number;

  constructor(
    private readonly transcription: TranscriptionCapability,
    private readonly target: UpstreamTarget,
    private readonly options: StreamingTranscriptionOptions,
    limits: SegmentLimits,
  ) {
    this.rate = options.sampleRate;
    this.interimEvery = Math.round((limits.interimEverySeconds ?? 1) * this.rate);
    this.maxUtterance = Math.max(1, Math.round((limits.maxUtteranceSeconds ?? 30) * this.rate));
    this.minUtterance = Math.round(MIN_UTTERANCE_SECONDS * this.rate);
    this.preRoll = Math.round(PRE_ROLL_SECONDS * this.rate);
    if (options.signal.aborted) this.close();
    else options.signal.addEventListener('abort', this.close, { once: true });
  }

  write(samples: Int16Array): void {
    if (this.over || samples.length === 0) return;
    this.uncovered += samples.length;
    let rest = samples;
    while (this.utteranceLength + rest.length >= this.maxUtterance) {
      const fits = this.maxUtterance - this.utteranceLength;
      this.append(rest.subarray(0, fits));
      rest = rest.subarray(fits);
      this.endUtterance(false);
    }
    this.append(rest);
    if (this.speechKnown && !this.utteranceSpeech) this.keepPreRoll();
    this.pump();
  }

  speaking(active: boolean): void {
    if (this.over) return;
    this.speechKnown = true;
    this.speakingNow = active;
    if (!active || this.utteranceSpeech) return;
    this.utteranceSpeech = true;
    this.pump();
  }

  /**
   * Only backs up when finals wait for a slow engine: the current utterance is held by design
   * (up to maxUtterance), anything beyond it has not been taken yet.
   */
  get pendingSamples(): number {
    return Math.max(0, this.uncovered - this.maxUtterance);
  }

  finalize(): void {
    if (this.over) return;
    this.endUtterance(true);
    this.pump();
  }

  close = (): void => this.stop();

  private stop(error?: UpstreamError): void {
    if (this.over) return;
    this.over = true;
    this.options.signal.removeEventListener('abort', this.close);
    this.inFlight?.controller.abort();
    this.inFlight = null;
    this.pieces = [];
    this.finals.length = 0;
    this.events.end(error);
  }

  private append(samples: Int16Array): void {
    if (samples.length === 0) return;
    // A copy: the caller may reuse its buffer.
    this.pieces.push(samples.slice());
    this.utteranceLength += samples.length;
  }

  /** The current utterance as one array (kept joined, so re-sending it does not join it again). */
  private utterance(): Int16Array {
    if (this.pieces.length !== 1) {
      const joined = new Int16Array(this.utteranceLength);
      let at = 0;
      for (const piece of this.pieces) {
        joined.set(piece, at);
        at += piece.length;
      }
      this.pieces = [joined];
    }
    return this.pieces[0] ?? new Int16Array(0);
  }

  /** Without speech so far, only the utterance's last PRE_ROLL_SECONDS are kept (trimmed at twice that): the rest is silence no engine needs. */
  private keepPreRoll(): void {
    if (this.utteranceLength < 2 * this.preRoll) return;
    const drop = this.utteranceLength - this.preRoll;
    this.pieces = [this.utterance().slice(drop)];
    this.utteranceLength -= drop;
    this.utteranceOffset += drop;
    this.uncovered -= drop;
  }

  private endUtterance(askedFor: boolean): void {
    const samples = this.utterance();
    this.finals.push({ samples, offset: this.utteranceOffset, askedFor, speech: this.utteranceSpeech || !this.speechKnown });
    this.utteranceOffset += samples.length;
    this.pieces = [];
    this.utteranceLength = 0;
    this.interimAt = 0;
    this.lastInterimText = '';
    // Speech going on when the utterance was cut goes on in the next one.
    this.utteranceSpeech = this.speakingNow;
    // An interim of the utterance just ended is of no use any more: stop it so the final goes now.
    if (this.inFlight?.interim) {
      this.inFlight.controller.abort();
      this.inFlight = null;
    }
  }

  /** Starts the next engine call when none is in flight: finals in order first, then an interim if one is due. */
  private pump(): void {
    while (!this.over && this.inFlight === null) {
      const job = this.finals.shift();
      if (job) {
        if (job.samples.length < this.minUtterance || !job.speech) {
          this.uncovered -= job.samples.length;
          if (job.askedFor) this.events.push({ type: 'finalized' });
          continue;
        }
        void this.call(job.samples, job.offset, false, (t) => {
          this.uncovered -= job.samples.length;
          this.events.push({ type: 'transcript', isFinal: true, text: t.text, words: t.words });
          if (job.askedFor) this.events.push({ type: 'finalized' });
        });
        return;
      }
      const speech = this.utteranceSpeech || !this.speechKnown;
      if (speech && this.utteranceLength >= this.minUtterance && this.utteranceLength - this.interimAt >= this.interimEvery) {
        this.interimAt = this.utteranceLength;
        void this.call(this.utterance(), this.utteranceOffset, true, (t) => {
          if (!t.text || t.text === this.lastInterimText) return;
          this.lastInterimText = t.text;
          this.events.push({ type: 'transcript', isFinal: false, text: t.text, words: t.words });
        });
      }
      return;
    }
  }

  /**
   * One engine call with its own deadline. A failed final ends the stream; a failed interim is
   * dropped (the final shows the error if it persists).
   */
  private async call(samples: Int16Array, offset: number, interim: boolean, onTranscript: (t: Transcript) => void): Promise<void> {
    const controller = new AbortController();
    const flight = { controller, interim };
    this.inFlight = flight;
    const { timeoutMs } = this.options;
    const call = { signal: AbortSignal.any([this.options.signal, controller.signal, AbortSignal.timeout(timeoutMs)]), timeoutMs };
    let transcript: Transcript | undefined;
    let failure: UpstreamError | undefined;
    try {
      transcript = await this.transcription.transcribe(this.target, {
        samples: s16ToFloat(samples),
        sampleRate: this.rate,
        language: this.options.language,
        keyterms: this.options.keyterms,
        ...call,
      });
    } catch (e) {
      failure = asUpstreamError(engineFailure(e, call, true), true);
    }
    // Stopped, or an interim superseded by its utterance's end: nobody wants this answer.
    if (this.inFlight !== flight) return;
    this.inFlight = null;
    if (transcript) onTranscript(inSession(transcript, offset / this.rate));
    else if (!interim) return this.stop(failure);
    this.pump();
  }
}

/** Word times from the start of the uploaded utterance to the start of the session. */
function inSession(t: Transcript, offsetSeconds: number): Transcript {
  const at = (seconds: number) => Math.round((seconds + offsetSeconds) * 1000) / 1000;
  return { text: t.text, words: t.words.map((w) => ({ word: w.word, start: at(w.start), end: at(w.end) })) };
}
