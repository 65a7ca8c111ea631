// The energy turn detector the gateway used before Silero VAD, kept as the baseline of
// bench/turn-detection.ts. An energy voice-activity detector over 20 ms
// frames with an adaptive noise floor, and a silence hangover that depends on the session's
// `turn_detection` eagerness. A turn starts at the first voiced frame and ends after the
// hangover of continuous silence.

import type { TurnDetection } from '../../gateway/stt/turn-detector.ts';

/** Silence (ms) that ends a turn: responsive answers fast, patient lets people pause to think. */
export const END_OF_TURN_SILENCE_MS: Record<TurnDetection, number> = {
  responsive: 350,
  balanced: 700,
  patient: 1400,
};

const FRAME_MS = 20;
// Below this RMS a frame is silence whatever the noise floor (about -50 dBFS).
const ABSOLUTE_FLOOR = 0.003;
// A frame is voiced when its RMS is this many times above the noise floor (~12 dB).
const SNR_FACTOR = 4;
// Voiced frames needed in a row to start a turn (filters clicks).
const START_FRAMES = 3;

export type TurnEvent = { type: 'turn.start'; atSeconds: number } | { type: 'turn.end'; atSeconds: number };

export class EnergyTurnDetector {
  private readonly frameSamples: number;
  private readonly hangoverFrames: number;
  private carry: Float32Array = new Float32Array(0);
  private framesSeen = 0;
  private noiseFloor = ABSOLUTE_FLOOR;
  private inTurn = false;
  private voicedRun = 0;
  private silentRun = 0;

  constructor(sampleRate: number, mode: TurnDetection) {
    this.frameSamples = Math.round((sampleRate * FRAME_MS) / 1000);
    this.hangoverFrames = Math.ceil(END_OF_TURN_SILENCE_MS[mode] / FRAME_MS);
  }

  get speaking(): boolean {
    return this.inTurn;
  }

  /** Feeds samples in [-1, 1]; returns the turn events they complete, in order. */
  push(samples: Float32Array): TurnEvent[] {
    const events: TurnEvent[] = [];
    let buf = samples;
    if (this.carry.length) {
      buf = new Float32Array(this.carry.length + samples.length);
      buf.set(this.carry);
      buf.set(samples, this.carry.length);
    }
    let at = 0;
    for (; at + this.frameSamples <= buf.length; at += this.frameSamples) {
      let sum = 0;
      for (let i = at; i < at + this.frameSamples; i++) sum += buf[i]! * buf[i]!;
      const rms = Math.sqrt(sum / this.frameSamples);
      this.framesSeen++;
      const voiced = rms > Math.max(ABSOLUTE_FLOOR, this.noiseFloor * SNR_FACTOR);
      // The floor follows quiet frames quickly and loud ones very slowly.
      this.noiseFloor = voiced ? this.noiseFloor * 1.001 : Math.max(ABSOLUTE_FLOOR / SNR_FACTOR, 0.9 * this.noiseFloor + 0.1 * rms);
      const now = (this.framesSeen * FRAME_MS) / 1000;
      if (voiced) {
        this.voicedRun++;
        this.silentRun = 0;
        if (!this.inTurn && this.voicedRun >= START_FRAMES) {
          this.inTurn = true;
          events.push({ type: 'turn.start', atSeconds: now - (START_FRAMES * FRAME_MS) / 1000 });
        }
      } else {
        this.voicedRun = 0;
        this.silentRun++;
        if (this.inTurn && this.silentRun >= this.hangoverFrames) {
          this.inTurn = false;
          events.push({ type: 'turn.end', atSeconds: now - (this.silentRun * FRAME_MS) / 1000 });
        }
      }
    }
    this.carry = buf.slice(at);
    return events;
  }
}
