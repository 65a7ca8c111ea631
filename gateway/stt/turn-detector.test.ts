import { describe, expect, it } from 'vitest';
import { END_OF_TURN_SILENCE_MS, TurnDetector, type TurnDetection, type TurnEvent } from './turn-detector.js';

const RATE = 16000;
const tone = (seconds: number, amp = 0.3) => Float32Array.from({ length: Math.round(RATE * seconds) }, (_, i) => amp * Math.sin((2 * Math.PI * 220 * i) / RATE));
const silence = (seconds: number, noise = 0) => Float32Array.from({ length: Math.round(RATE * seconds) }, () => (Math.random() * 2 - 1) * noise);

function run(mode: TurnDetection, parts: Float32Array[], chunk = 1600): TurnEvent[] {
  const d = new TurnDetector(RATE, mode);
  const events: TurnEvent[] = [];
  for (const p of parts) for (let i = 0; i < p.length; i += chunk) events.push(...d.push(p.subarray(i, i + chunk)));
  return events;
}

describe('TurnDetector', () => {
  it('finds a turn start and end around a burst of speech', () => {
    const events = run('balanced', [silence(0.5), tone(1), silence(1.5)]);
    expect(events.map((e) => e.type)).toEqual(['turn.start', 'turn.end']);
    expect(events[0]!.atSeconds).toBeCloseTo(0.5, 1);
    expect(events[1]!.atSeconds).toBeCloseTo(1.5, 1);
  });

  it('does not end a turn on a pause shorter than the mode allows', () => {
    const pause = 0.5;
    expect(run('patient', [tone(0.5), silence(pause), tone(0.5), silence(2)]).map((e) => e.type)).toEqual(['turn.start', 'turn.end']);
    expect(run('responsive', [tone(0.5), silence(pause), tone(0.5), silence(2)]).map((e) => e.type)).toEqual(['turn.start', 'turn.end', 'turn.start', 'turn.end']);
  });

  it('reports end of turn later for patient than for responsive, by the documented hangover', () => {
    const detectAt = (mode: TurnDetection) => {
      const d = new TurnDetector(RATE, mode);
      d.push(tone(1));
      // Feed silence 20 ms at a time and note when the turn ends.
      for (let ms = 20; ms <= 3000; ms += 20) if (d.push(silence(0.02)).some((e) => e.type === 'turn.end')) return ms;
      return Infinity;
    };
    const r = detectAt('responsive');
    const b = detectAt('balanced');
    const p = detectAt('patient');
    expect(r).toBeLessThan(b);
    expect(b).toBeLessThan(p);
    expect(r).toBeGreaterThanOrEqual(END_OF_TURN_SILENCE_MS.responsive);
    expect(p).toBeGreaterThanOrEqual(END_OF_TURN_SILENCE_MS.patient);
    expect(p).toBeLessThan(END_OF_TURN_SILENCE_MS.patient + 100);
  });

  it('adapts to background noise: steady noise is not speech, speech over it is', () => {
    const events = run('balanced', [silence(1, 0.02), tone(1, 0.3), silence(1.5, 0.02)]);
    expect(events.map((e) => e.type)).toEqual(['turn.start', 'turn.end']);
  });

  it('gives the same events whatever the chunk size', () => {
    const parts = [silence(0.3), tone(0.7), silence(1), tone(0.4), silence(1)];
    const a = run('balanced', parts, 160);
    const b = run('balanced', parts, 4096);
    expect(b).toEqual(a);
  });
});
