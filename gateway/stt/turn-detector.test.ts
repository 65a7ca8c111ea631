// The turn detector on real speech (flite and eSpeak NG, test/support/turn-corpus.ts) and the
// real Silero model: event sequences, evidence, noise, presets, many turns, other rates.
import { describe, expect, it } from 'vitest';
import { resample } from '../audio/resample.ts';
import { TurnDetector, turnSettings, type TurnDetection, type TurnEvent, type TurnSettings } from './turn-detector.ts';
import { babble, clicks, concat, CORPUS_RATE, PLAIN_SENTENCES, say, utterance, whiteNoise } from '../../test/support/turn-corpus.ts';

const RATE = CORPUS_RATE;
const quiet = (seconds: number) => new Float32Array(Math.round(seconds * RATE));

interface Timed extends TurnEvent {
  /** Audio time at which the event came out (end of the 20 ms chunk that produced it). */
  out: number;
}

/** Streams `samples` in 20 ms chunks (or `chunkMs`); `hints` gives the transcript to report before the chunk at each time. */
async function detect(
  samples: Float32Array,
  settings: TurnSettings,
  options: { rate?: number; hints?: [number, string][]; chunkMs?: number } = {},
): Promise<Timed[]> {
  const rate = options.rate ?? RATE;
  const d = new TurnDetector(rate, settings);
  const chunk = (rate * (options.chunkMs ?? 20)) / 1000;
  const events: Timed[] = [];
  try {
    for (let at = 0; at < samples.length; at += chunk) {
      for (const [time, text] of options.hints ?? []) if (Math.abs(time - at / rate) < 0.5 / 50) d.hint(text);
      for (const e of await d.push(samples.subarray(at, at + chunk))) events.push({ ...e, out: Math.min(at + chunk, samples.length) / rate });
    }
  } finally {
    d.close();
  }
  return events;
}

const types = (events: TurnEvent[]) => events.map((e) => e.type);

describe('TurnDetector (Silero VAD)', () => {
  it('a sentence: turn.start near its first word, turn.end soon after its last; at = where speech started and ended', async () => {
    const u = await utterance(PLAIN_SENTENCES[1]!, 'flite:slt', 'clean');
    const events = await detect(u.samples, turnSettings('balanced', { eagerEndThreshold: null }));
    expect(types(events)).toEqual(['turn.start', 'turn.end']);
    const [start, end] = events as [Timed, Timed];
    expect(Math.abs(start.atSeconds - u.speechStart)).toBeLessThan(0.15);
    expect(Math.abs(end.atSeconds - u.speechEnd)).toBeLessThan(0.15);
    expect(end.out).toBeGreaterThan(u.speechEnd);
    expect(end.out).toBeLessThan(u.speechEnd + 1);
  });

  it('eager end, resume, eager end, end: a short pause gets an eager end that speech takes back', async () => {
    const u = await utterance(['I would like to order, um,', 'a large pizza with extra cheese.'], 'flite:slt', 'clean', 0.3);
    const events = await detect(u.samples, turnSettings('balanced', { eagerEndThreshold: 0.2, endThreshold: 0.95 }));
    // flite also pauses briefly at the comma before "um": one eager end and resume there too.
    expect(types(events).join(' ')).toMatch(/^turn\.start( turn\.eager_end turn\.resume)+ turn\.eager_end turn\.end$/);
    const resume = events.at(-3)!;
    const eager1 = events.at(-4)!;
    const [eager2, end] = events.slice(-2) as [Timed, Timed];
    // The eager end in the pause, the resume where speech came back, the last ones after the sentence.
    expect(eager1.out).toBeGreaterThan(u.pause!.start);
    expect(eager1.out).toBeLessThan(u.pause!.end);
    expect(resume.atSeconds).toBeGreaterThan(u.pause!.end - 0.1);
    expect(eager2.out).toBeGreaterThan(u.speechEnd);
    expect(eager2.out).toBeLessThan(end.out);
    expect(end.atSeconds).toBe(eager2.atSeconds);
  });

  it('no eager events when the eager threshold is off', async () => {
    const u = await utterance(['I would like to order, um,', 'a large pizza with extra cheese.'], 'flite:slt', 'clean', 0.3);
    expect(types(await detect(u.samples, turnSettings('balanced', { eagerEndThreshold: null, endThreshold: 0.95 })))).toEqual(['turn.start', 'turn.end']);
  });

  it('a transcript ending in "um" holds the turn through a 0.7 s pause that ends it without that evidence', async () => {
    const u = await utterance(['I would like to order, um,', 'a large pizza with extra cheese.'], 'flite:rms', 'clean', 0.7);
    const settings = turnSettings('balanced', { eagerEndThreshold: null });
    const without = await detect(u.samples, settings);
    expect(types(without)).toEqual(['turn.start', 'turn.end', 'turn.start', 'turn.end']);
    expect(without[1]!.out).toBeLessThan(u.pause!.end);
    const held = await detect(u.samples, settings, { hints: [[u.pause!.start, 'i would like to order um']] });
    expect(types(held)).toEqual(['turn.start', 'turn.end']);
    expect(held[1]!.out).toBeGreaterThan(u.speechEnd);
  });

  it('the transcript so far moves the end: a full stop ends the turn sooner than nothing heard; a trailing comma or "and" later', async () => {
    const u = await utterance(PLAIN_SENTENCES[2]!, 'espeak:en-us', 'clean');
    const settings = turnSettings('patient', { eagerEndThreshold: null });
    const endWith = async (text?: string) =>
      (await detect(u.samples, settings, { hints: text ? [[u.speechEnd - 0.3, text]] : [] })).find((e) => e.type === 'turn.end')!.out;
    const text = 'please send the report to my email address';
    const [stop, none, comma, and] = [await endWith(`${text}.`), await endWith(), await endWith(`${text},`), await endWith(`${text} and`)];
    expect(stop).toBeLessThan(none);
    expect(none).toBeLessThan(comma);
    expect(comma).toBe(and);
  });

  it('the presets end the same turn in order: responsive, then balanced, then patient', async () => {
    const u = await utterance(PLAIN_SENTENCES[4]!, 'flite:awb', 'white 20 dB');
    const endOf = async (preset: TurnDetection) => (await detect(u.samples, turnSettings(preset))).find((e) => e.type === 'turn.end')!.out;
    const [r, b, p] = [await endOf('responsive'), await endOf('balanced'), await endOf('patient')];
    expect(r).toBeLessThan(b);
    expect(b).toBeLessThan(p);
  });

  it('the end timeout ends a turn whatever the evidence; a fixed silence (OpenAI server_vad) ignores it', async () => {
    const u = await utterance(['I would like to order, um,', 'a large pizza with extra cheese.'], 'flite:slt', 'clean', 1.5);
    const hints: [number, string][] = [[u.pause!.start, 'i would like to order um']];
    const held = await detect(u.samples, turnSettings('patient', { eagerEndThreshold: null }), { hints });
    expect(types(held)).toEqual(['turn.start', 'turn.end']);
    const timedOut = await detect(u.samples, turnSettings('patient', { eagerEndThreshold: null, endTimeoutMs: 600 }), { hints });
    expect(types(timedOut)).toEqual(['turn.start', 'turn.end', 'turn.start', 'turn.end']);
    const fixed = await detect(u.samples, turnSettings('patient', { eagerEndThreshold: null, fixedSilenceMs: 500 }), { hints });
    expect(types(fixed)).toEqual(['turn.start', 'turn.end', 'turn.start', 'turn.end']);
    expect(fixed[1]!.out - fixed[1]!.atSeconds).toBeGreaterThanOrEqual(0.5);
  });

  it('a fixed silence with eager ends: the eager end at that share of the silence, the end at all of it', async () => {
    const u = await utterance('I would like to order a large pizza with extra cheese.', 'flite:slt', 'clean');
    const events = await detect(u.samples, turnSettings('balanced', { eagerEndThreshold: 0.25, fixedSilenceMs: 500 }));
    expect(types(events)).toEqual(['turn.start', 'turn.eager_end', 'turn.end']);
    const [, eager, end] = events;
    expect(eager!.atSeconds).toBe(end!.atSeconds);
    // Decided after a quarter of the 500 ms (give or take a 32 ms frame), the end after all of it.
    expect(eager!.out - eager!.atSeconds).toBeGreaterThanOrEqual(0.125);
    expect(eager!.out - eager!.atSeconds).toBeLessThan(0.125 + 0.064);
    expect(end!.out - end!.atSeconds).toBeGreaterThanOrEqual(0.5);
  });

  it.each([
    ['balanced, with a full stop heard', turnSettings('balanced', { eagerEndThreshold: null }), 'I would like to order.'],
    ['responsive, eager ends finalizing the words', turnSettings('responsive', { finalizeOnEagerEnd: true }), ''],
    ['a fixed silence of 200 ms', turnSettings('balanced', { fixedSilenceMs: 200, eagerEndThreshold: null }), ''],
  ])(
    '%s: no end (nor finalizing eager end) is decided before earliestEndSeconds said; while someone speaks it is a frame of audio or more ahead',
    async (_name, settings, hint) => {
      const u = await utterance(['I would like to order, um,', 'a large pizza with extra cheese.'], 'flite:slt', 'clean', 0.6);
      const d = new TurnDetector(RATE, settings);
      const chunk = RATE / 50;
      const ends: TurnEvent[] = [];
      let spoke = 0;
      try {
        for (let at = 0; at < u.samples.length; at += chunk) {
          if (hint) d.hint(hint);
          const earliest = d.earliestEndSeconds;
          const pushed = Math.min(at + chunk, u.samples.length) / RATE;
          // While speech goes on, the whole next chunk (20 ms) is before any end: it needs no judging first.
          if (d.speaking && earliest >= pushed) spoke++;
          for (const e of await d.push(u.samples.subarray(at, at + chunk))) {
            if (e.type === 'turn.end' || (e.type === 'turn.eager_end' && settings.finalizeOnEagerEnd)) {
              ends.push(e);
              expect(e.decidedAtSeconds).toBeGreaterThanOrEqual(earliest - 1e-9);
            }
          }
        }
      } finally {
        d.close();
      }
      expect(ends.length).toBeGreaterThan(0);
      expect(spoke).toBeGreaterThan(50);
    },
  );

  it('the silence is counted to the last sample received: the end comes with the chunk that completes it, not at the end of the Silero frame after it', async () => {
    for (const noise of ['clean', 'white 20 dB'] as const) {
      const u = await utterance(PLAIN_SENTENCES[2]!, 'flite:slt', noise);
      // 10 ms chunks: a 32 ms frame ends up to 22 ms after the chunk that completes the 500 ms.
      const events = await detect(u.samples, turnSettings('balanced', { eagerEndThreshold: 0.25, fixedSilenceMs: 500 }), { chunkMs: 10 });
      expect(types(events)).toEqual(['turn.start', 'turn.eager_end', 'turn.end']);
      const [, eager, end] = events as [Timed, Timed, Timed];
      expect(end.out - end.atSeconds).toBeGreaterThanOrEqual(0.5);
      expect(end.out - end.atSeconds).toBeLessThan(0.51);
      expect(eager.out - eager.atSeconds).toBeGreaterThanOrEqual(0.125);
      expect(eager.out - eager.atSeconds).toBeLessThan(0.135);
    }
  });

  it('speech coming back just before the silence is up: the samples past the last frame are not counted as silence, and the turn goes on', async () => {
    const first = await say(PLAIN_SENTENCES[2]!, 'flite:slt');
    const second = await say(PLAIN_SENTENCES[5]!, 'flite:slt');
    const settings = turnSettings('balanced', { eagerEndThreshold: null, fixedSilenceMs: 500 });
    // Where the detector hears the first sentence end, then the second one starting 10 ms before its 500 ms of silence are up.
    const alone = await detect(concat(quiet(0.5), first, quiet(1)), settings, { chunkMs: 10 });
    const lastSpeech = alone.find((e) => e.type === 'turn.end')!.atSeconds;
    const gap = quiet(lastSpeech + 0.49 - 0.5 - first.length / RATE);
    const events = await detect(concat(quiet(0.5), first, gap, second, quiet(1)), settings, { chunkMs: 10 });
    const end = events.find((e) => e.type === 'turn.end')!;
    // Not ended at 500 ms of silence on the chunk holding the second sentence's first samples.
    expect(end.out - lastSpeech).not.toBeLessThan(0.51);
  });

  it('no turn from 10 s of six-voice babble or of white noise at -30 dBFS, nor from clicks, in any preset', async () => {
    const noises = [await babble(10, -30), whiteNoise(10, -30), clicks(10)];
    for (const preset of ['responsive', 'balanced', 'patient'] as const)
      for (const noise of noises) expect(types(await detect(noise, turnSettings(preset)))).toEqual([]);
  });

  it('speech over babble (10 dB above it) still makes a turn', async () => {
    const speech = await say(PLAIN_SENTENCES[0]!, 'flite:slt');
    const noise = await babble(speech.length / RATE + 4, -30);
    const gain = 10 ** (-20 / 20) / Math.sqrt(speech.reduce((s, v) => s + v * v, 0) / speech.length);
    for (let i = 0; i < speech.length; i++) noise[2 * RATE + i]! += gain * speech[i]!;
    const events = await detect(noise, turnSettings('balanced', { eagerEndThreshold: null }));
    expect(types(events)).toEqual(['turn.start', 'turn.end']);
    expect(events[0]!.atSeconds).toBeGreaterThan(1.8);
  });

  it('a session with many turns: twelve sentences in six voices make twelve turns in order, each ending after its speech', async () => {
    const voices = ['flite:slt', 'flite:rms', 'flite:awb', 'flite:kal', 'espeak:en-us', 'espeak:en-gb'] as const;
    const parts: Float32Array[] = [quiet(0.5)];
    const bounds: [number, number][] = [];
    let at = 0.5;
    for (let k = 0; k < 12; k++) {
      const s = await say(PLAIN_SENTENCES[k % PLAIN_SENTENCES.length]!, voices[k % voices.length]!);
      bounds.push([at, at + s.length / RATE]);
      parts.push(s, quiet(1.8));
      at += s.length / RATE + 1.8;
    }
    const events = await detect(concat(...parts), turnSettings('balanced', { eagerEndThreshold: null }));
    expect(types(events)).toEqual(Array.from({ length: 12 }, () => ['turn.start', 'turn.end']).flat());
    bounds.forEach(([from, to], k) => {
      const start = events[2 * k]!;
      const end = events[2 * k + 1]!;
      expect(start.atSeconds).toBeGreaterThan(from - 0.15);
      expect(end.out).toBeGreaterThan(to);
      expect(end.out).toBeLessThan(to + 1.5);
    });
  });

  it('8 kHz and 48 kHz audio find the same turn as 16 kHz', async () => {
    const u = await utterance(PLAIN_SENTENCES[3]!, 'espeak:en-gb', 'clean');
    const settings = turnSettings('balanced', { eagerEndThreshold: null });
    const at16 = await detect(u.samples, settings);
    for (const rate of [8000, 48000]) {
      const events = await detect(resample(u.samples, RATE, rate), settings, { rate });
      expect(types(events)).toEqual(types(at16));
      expect(Math.abs(events[1]!.atSeconds - at16[1]!.atSeconds)).toBeLessThan(0.1);
    }
  });
});
