// End-of-turn detection from the audio (and the transcript so far), used by every streaming
// route whose engine does not find turns itself (and by any session that asks for ours).
//
// Speech: Silero VAD's probability per 32 ms frame (gateway/stt/silero-vad.ts). A turn starts
// after START_FRAMES speech frames in a row that also stand out from the background by
// START_OVER_BACKGROUND_DB (babble and TV are speech to a VAD, but steady; a speaker is louder).
//
// End of turn: once speech stops, the chance that the turn is over grows with the silence,
// P(end) = 1 - 0.5^(silence / halfLife), and the half-life depends on cheap, real evidence:
// - the transcript so far (engines that punctuate) ends in a comma, a dash or "...": longer; in
//   . ? !: shorter; or ends in a word that rarely ends a turn ("and", "the", "um"): longer;
// - the pitch of the last voiced frames fell below the speaker's median in this turn (a
//   statement's final fall): shorter.
// `turn.eager_end` is sent when P(end) reaches the eager threshold (an agent may start its LLM),
// `turn.resume` if speech comes back before the end, `turn.end` at the end threshold (or the
// timeout). The silence is counted to the last sample received, not to the last whole Silero
// frame: once a turn's silence has begun, samples past the last frame that are no louder than the
// background by CONTINUE_OVER_BACKGROUND_DB (a frame that quiet is silence whatever Silero says)
// count as silence, so an end comes with the chunk that reaches its threshold instead of up to a
// frame (32 ms) later; louder ones wait for their frame's probability. The presets set the
// half-life; clients may set the thresholds as Deepgram Flux (eot_threshold, eager_eot_threshold,
// eot_timeout_ms), Cartesia (turn_*_threshold, turn_end_timeout_ms) and OpenAI (server_vad
// threshold and silence_duration_ms) let them.
import { createResampler, type Resampler } from '../audio/resample.ts';
import { SileroVad, VAD_FRAME_SECONDS, VAD_FRAME_SAMPLES, VAD_RATE } from './silero-vad.ts';

export type TurnDetection = 'responsive' | 'balanced' | 'patient';

export interface TurnSettings {
  preset: TurnDetection;
  /** Speech probability (0-1) that counts as speech (OpenAI server_vad `threshold`). */
  speechThreshold: number;
  /** P(end) at which `turn.eager_end` is sent; null: no eager events. */
  eagerEndThreshold: number | null;
  /** P(end) at which the turn ends. */
  endThreshold: number;
  /** Silence that ends a turn whatever the evidence (ms). */
  endTimeoutMs: number;
  /** OpenAI server_vad `silence_duration_ms`: a fixed silence ends the turn, no evidence weighed. */
  fixedSilenceMs?: number;
  /**
   * The words before an eager end are made final before it goes out, so that it carries exactly
   * the turn's words so far (a realtime session prepares its answer on them).
   */
  finalizeOnEagerEnd?: boolean;
}

/** Silence (ms) after which P(end) is one half, when nothing tells either way. */
export const HALF_LIFE_MS: Record<TurnDetection, number> = { responsive: 120, balanced: 250, patient: 500 };
const EAGER_END_THRESHOLD: Record<TurnDetection, number> = { responsive: 0.35, balanced: 0.25, patient: 0.15 };

export function turnSettings(preset: TurnDetection, overrides: Partial<Omit<TurnSettings, 'preset'>> = {}): TurnSettings {
  return {
    preset,
    speechThreshold: 0.5,
    eagerEndThreshold: EAGER_END_THRESHOLD[preset],
    endThreshold: 0.7,
    endTimeoutMs: 5_000,
    ...overrides,
  };
}

/** Half-life factor per kind of evidence at the pause. */
const EVIDENCE_FACTOR = { complete: 0.55, neutral: 1, incomplete: 3 } as const;
type Evidence = keyof typeof EVIDENCE_FACTOR;

const START_FRAMES = 3;
const START_OVER_BACKGROUND_DB = 9;
/** Background level: this percentile of the frame levels over the last BACKGROUND_FRAMES. */
const BACKGROUND_PERCENTILE = 0.1;
const BACKGROUND_FRAMES = 250;
const BACKGROUND_REFRESH_FRAMES = 16;
/** Inside a turn, a frame is speech only this far above the background (less than to start one). */
const CONTINUE_OVER_BACKGROUND_DB = 6;
/** Speech frames in a row that end a pause (one is a click or a breath). */
const RESUME_FRAMES = 2;
/** Below the speech threshold by this much, a frame inside a turn is silence (hysteresis). */
const SILENCE_MARGIN = 0.15;
/** Continuation rise: the last voiced frames' pitch over this share of the turn's median. */
const RISING_PITCH = 1.07;
const RECENT_PITCH_FRAMES = 5;

/** Words after which people pause mid-turn (fillers, conjunctions, articles, prepositions). */
const CONTINUATION_WORDS = new Set(
  'um uh er erm hmm and or but so because the a an to of with for from in on at by that which who if when while then my your our their his her its is are was were i we you like about than as into'.split(
    ' ',
  ),
);

const SUBORDINATORS = new Set('when if because although though while since after before unless once whenever'.split(' '));
const QUESTION_STARTS = new Set('can could would will do does did is are was were should shall may have has what who why how which'.split(' '));

export type TurnEvent = {
  type: 'turn.start' | 'turn.eager_end' | 'turn.resume' | 'turn.end';
  /** Audio time of the event: speech start (start, resume) or the last speech (eager_end, end). */
  atSeconds: number;
  /** Audio time at which it was decided: the end of the audio that decided it, a frame's or the last sample's (what comes after was not judged). */
  decidedAtSeconds: number;
};

export class TurnDetector {
  private readonly vad = new SileroVad();
  private readonly resampler: Resampler | null;
  private frames = 0;
  private readonly levels = new Float32Array(BACKGROUND_FRAMES);
  private background = -Infinity;
  private backgroundUntil = 0;
  private inTurn = false;
  private speechRun = 0;
  private silentFrames = 0;
  private eagerSent = false;
  private lastSpeechEnd = 0;
  private transcript = '';
  private turnPitch: number[] = [];
  private recentPitch: number[] = [];

  constructor(
    sampleRate: number,
    private current: TurnSettings,
  ) {
    this.resampler = sampleRate === VAD_RATE ? null : createResampler(sampleRate, VAD_RATE);
  }

  get settings(): TurnSettings {
    return this.current;
  }

  /** Changes thresholds mid-session (Cartesia's `config` message): they apply from the next frame. */
  configure(changes: Partial<TurnSettings>): void {
    this.current = { ...this.current, ...changes };
  }

  get speaking(): boolean {
    return this.inTurn;
  }

  /**
   * The earliest audio time (s) at which a turn could end, or an eager end finalize the words so
   * far (`finalizeOnEagerEnd`), given what was judged so far: audio before it can go to the
   * recognizer before the detector has judged it, and no finalize will fall before it. A turn
   * ends at least the shortest silence that can end one (the most favourable evidence, the
   * timeout, a fixed silence), and a whole frame, after its last speech; outside a turn, one must
   * start first (START_FRAMES of speech).
   */
  get earliestEndSeconds(): number {
    const frame = VAD_FRAME_SECONDS;
    const judged = this.frames * frame;
    // An end needs a whole silent frame at least (then quiet samples past it count: pastLastFrame).
    const silence = Math.max(frame, this.shortestEndingSilenceMs() / 1000);
    if (!this.inTurn) return judged + START_FRAMES * frame + silence;
    return Math.max(judged, this.lastSpeechEnd + silence);
  }

  /** The shortest silence after speech (ms) at which the settings can end a turn (or finalize at an eager end). */
  private shortestEndingSilenceMs(): number {
    const s = this.settings;
    const evidence = (threshold: number): number =>
      // P(end) = 1 - 0.5^(silence / halfLife) reaches the threshold at halfLife * log2(1 / (1 - threshold)).
      threshold >= 1 ? Infinity : HALF_LIFE_MS[s.preset] * EVIDENCE_FACTOR.complete * Math.log2(1 / (1 - Math.max(0, threshold)));
    // A fixed silence: P(end) is 0 before it and 1 at it; its eager end comes at its share of it.
    const fixed = s.fixedSilenceMs;
    const end = fixed === undefined ? evidence(s.endThreshold) : s.endThreshold > 0 ? fixed : 0;
    const eager =
      !s.finalizeOnEagerEnd || s.eagerEndThreshold === null
        ? Infinity
        : fixed === undefined
          ? evidence(s.eagerEndThreshold)
          : Math.max(0, s.eagerEndThreshold) * fixed;
    return Math.min(s.endTimeoutMs, end, eager);
  }

  /** The transcript of the current turn so far (interim or final), as evidence for its end. */
  hint(transcript: string): void {
    if (this.inTurn) this.transcript = transcript;
  }

  /** Feeds samples in [-1, 1] at the session's rate; resolves with the turn events they complete, in order. */
  async push(samples: Float32Array): Promise<TurnEvent[]> {
    const at16k = this.resampler ? this.resampler.push(samples) : samples;
    const events: TurnEvent[] = [];
    for (const { probability, frame } of await this.vad.push(at16k)) this.frame(probability, frame, events);
    this.pastLastFrame(this.vad.pending, events);
    return events;
  }

  close(): void {
    this.resampler?.close();
  }

  private frame(p: number, frame: Float32Array, events: TurnEvent[]): void {
    const index = this.frames++;
    this.levels[index % BACKGROUND_FRAMES] = levelDb(frame);
    const start = index * VAD_FRAME_SECONDS;
    const end = start + VAD_FRAME_SECONDS;
    const s = this.settings;
    if (!this.inTurn) {
      this.speechRun = p >= s.speechThreshold ? this.speechRun + 1 : 0;
      if (this.speechRun >= START_FRAMES && this.standsOut(index)) {
        this.inTurn = true;
        this.silentFrames = 0;
        this.eagerSent = false;
        this.lastSpeechEnd = end;
        events.push({ type: 'turn.start', atSeconds: end - START_FRAMES * VAD_FRAME_SECONDS, decidedAtSeconds: end });
      }
    } else if (p >= s.speechThreshold - SILENCE_MARGIN && (this.silentFrames === 0 || p >= s.speechThreshold) && this.audible(index)) {
      // Speech goes on, or comes back after a pause (RESUME_FRAMES in a row).
      this.speechRun = p >= s.speechThreshold ? this.speechRun + 1 : 0;
      if (this.silentFrames === 0 || this.speechRun >= RESUME_FRAMES) {
        if (this.silentFrames > 0 && this.eagerSent) {
          events.push({ type: 'turn.resume', atSeconds: end - this.speechRun * VAD_FRAME_SECONDS, decidedAtSeconds: end });
          this.eagerSent = false;
        }
        this.silentFrames = 0;
        this.lastSpeechEnd = end;
        // Intonation is evidence only where the silence that ends a turn is not fixed.
        if (s.fixedSilenceMs === undefined) this.trackPitch(frame);
      }
    } else {
      this.speechRun = 0;
      this.silentFrames++;
      this.silenceUntil(end, events);
    }
  }

  /**
   * The samples past the last whole frame: while the turn's silence goes on (its last frame was
   * silence), quiet ones extend it to the last sample received, and the eager end or the end may
   * come now. Samples loud enough to be speech wait for their frame.
   */
  private pastLastFrame(samples: Float32Array, events: TurnEvent[]): void {
    if (!this.inTurn || this.silentFrames === 0 || this.speechRun > 0 || samples.length === 0) return;
    if (!(levelDb(samples) < this.background + CONTINUE_OVER_BACKGROUND_DB)) return;
    this.silenceUntil(this.frames * VAD_FRAME_SECONDS + samples.length / VAD_RATE, events);
  }

  /** The turn has been silent from its last speech to `end` (audio seconds): the eager end and the end when their time has come. */
  private silenceUntil(end: number, events: TurnEvent[]): void {
    const s = this.settings;
    const silenceMs = (end - this.lastSpeechEnd) * 1000;
    const pEnd = this.endProbability(silenceMs);
    // A fixed silence ends the turn all at once; its eager end comes at that share of it.
    const pEager = s.fixedSilenceMs !== undefined ? silenceMs / s.fixedSilenceMs : pEnd;
    if (s.eagerEndThreshold !== null && !this.eagerSent && pEager >= s.eagerEndThreshold) {
      this.eagerSent = true;
      events.push({ type: 'turn.eager_end', atSeconds: this.lastSpeechEnd, decidedAtSeconds: end });
    }
    if (pEnd >= s.endThreshold || silenceMs >= s.endTimeoutMs) {
      events.push({ type: 'turn.end', atSeconds: this.lastSpeechEnd, decidedAtSeconds: end });
      this.inTurn = false;
      this.transcript = '';
      this.turnPitch = [];
      this.recentPitch = [];
    }
  }

  /** Inside a turn, speech must be a little louder than the background (babble goes on after the speaker stops). */
  private audible(index: number): boolean {
    if (index >= this.backgroundUntil) {
      this.backgroundUntil = index + BACKGROUND_REFRESH_FRAMES;
      const seen = Math.min(index + 1, BACKGROUND_FRAMES);
      const sorted = this.levels.slice(0, seen).sort();
      this.background = sorted[Math.floor(seen * BACKGROUND_PERCENTILE)]!;
    }
    return this.levels[index % BACKGROUND_FRAMES]! >= this.background + CONTINUE_OVER_BACKGROUND_DB;
  }

  /** Whether the last START_FRAMES frames are louder than the background before them by the margin. */
  private standsOut(index: number): boolean {
    const level = (k: number) => this.levels[k % BACKGROUND_FRAMES]!;
    const first = index - START_FRAMES + 1;
    const history: number[] = [];
    for (let k = Math.max(0, index - BACKGROUND_FRAMES + 1); k < first; k++) history.push(level(k));
    // Speech from the very first frames: nothing to compare with, the VAD alone decides.
    if (history.length === 0) return true;
    history.sort((a, b) => a - b);
    const background = history[Math.floor(history.length * BACKGROUND_PERCENTILE)]!;
    let speech = 0;
    for (let k = first; k <= index; k++) speech += level(k);
    return speech / START_FRAMES >= background + START_OVER_BACKGROUND_DB;
  }

  private endProbability(silenceMs: number): number {
    const s = this.settings;
    if (s.fixedSilenceMs !== undefined) return silenceMs >= s.fixedSilenceMs ? 1 : 0;
    const halfLife = HALF_LIFE_MS[s.preset] * EVIDENCE_FACTOR[this.evidence()];
    return 1 - 0.5 ** (silenceMs / halfLife);
  }

  private evidence(): Evidence {
    const text = this.transcript.trim().toLowerCase();
    // Engines that punctuate say it best: a clause mark means more is coming, a full stop the end.
    if (/([,;:\-–—]|\.\.\.|…)$/.test(text)) return 'incomplete';
    if (/[.?!]$/.test(text)) return 'complete';
    const words = text
      .split(/\s+/)
      .map((w) => w.replace(/[^a-z']/g, ''))
      .filter(Boolean);
    const last = words.at(-1);
    if (last && CONTINUATION_WORDS.has(last)) return 'incomplete';
    // "When I got home, ..." / "If you can, ...": a dependent clause waits for its main clause.
    if (words[0] && SUBORDINATORS.has(words[0]) && words.length < 8) return 'incomplete';
    if (this.recentPitch.length >= 3 && this.turnPitch.length >= 8) {
      // A rise ends a question; anywhere else it says "more is coming". (A final fall is no
      // evidence: speakers fall at commas too, and synthetic voices often do.)
      const ratio = median(this.recentPitch) / median(this.turnPitch);
      if (ratio > RISING_PITCH && !(words[0] && QUESTION_STARTS.has(words[0]))) return 'incomplete';
    }
    return 'neutral';
  }

  private trackPitch(frame: Float32Array): void {
    const f0 = pitchHz(frame);
    if (f0 === 0) return;
    // Octave slips of the estimator are not intonation.
    if (this.turnPitch.length >= 8) {
      const typical = median(this.turnPitch);
      if (f0 < typical * 0.6 || f0 > typical * 1.6) return;
    }
    if (this.turnPitch.length < 1000) this.turnPitch.push(f0);
    this.recentPitch.push(f0);
    if (this.recentPitch.length > RECENT_PITCH_FRAMES) this.recentPitch.shift();
  }
}

function levelDb(frame: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < frame.length; i++) sum += frame[i]! * frame[i]!;
  return 10 * Math.log10(sum / frame.length + 1e-12);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1]!;
}

/**
 * Pitch of a voiced 16 kHz frame by normalized autocorrelation (60-400 Hz), 0 when unvoiced.
 * Coarse on purpose: only its trend at the end of a turn is used.
 */
export function pitchHz(frame: Float32Array): number {
  let bestR = 0;
  let bestLag = 0;
  const n = VAD_FRAME_SAMPLES;
  for (let lag = 40; lag <= 266; lag++) {
    let c = 0;
    let e1 = 0;
    let e2 = 0;
    for (let i = 0; i + lag < n; i += 2) {
      const a = frame[i]!;
      const b = frame[i + lag]!;
      c += a * b;
      e1 += a * a;
      e2 += b * b;
    }
    const r = c / Math.sqrt(e1 * e2 + 1e-12);
    if (r > bestR) {
      bestR = r;
      bestLag = lag;
    }
  }
  return bestR > 0.6 ? VAD_RATE / bestLag : 0;
}
