import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { toFloat32 } from './pcm.ts';
import { analyzeVoice, analyzeVoiceInChunks, type VoiceAnalysis } from './voice-analysis.ts';
import { parseWav } from './wav.ts';
import { countLoopTurns } from '../../test/support/loop-turns.ts';

/** Deterministic noise in [-1, 1). */
function noiseSource(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return (s / 0x7fffffff) * 2 - 1;
  };
}

/**
 * A voiced, syllable-like signal: a glottal-pulse-like source at `f0` (harmonics falling off
 * at 1/h², i.e. a smooth pulse shape rather than a bare sine), amplitude-modulated at
 * `syllableRate` by a raised-cosine envelope, with a 1 s pause every `phraseSeconds` of speech.
 */
function syllables(opts: {
  f0: number;
  syllableRate: number;
  sampleRate: number;
  seconds: number;
  amplitude?: number;
  phraseSeconds?: number;
  noise?: number;
}): Float32Array {
  const { f0, syllableRate, sampleRate, seconds, amplitude = 0.4, phraseSeconds = 3, noise = 0 } = opts;
  const out = new Float32Array(Math.round(sampleRate * seconds));
  const rand = noiseSource(7);
  const cycle = phraseSeconds + 1;
  for (let i = 0; i < out.length; i++) {
    const t = i / sampleRate;
    const inPhrase = t % cycle < phraseSeconds;
    // 0.05 floor between syllables: a consonant, not silence (so the VAD keeps the phrase whole).
    const envelope = inPhrase ? 0.05 + 0.95 * (0.5 - 0.5 * Math.cos(2 * Math.PI * syllableRate * (t % cycle))) : 0;
    let v = 0;
    for (let h = 1; h <= 10; h++) v += Math.sin(2 * Math.PI * h * f0 * t) / (h * h);
    out[i] = amplitude * envelope * v * 0.7 + noise * rand();
  }
  return out;
}

function expectFinite(a: VoiceAnalysis): void {
  for (const value of Object.values(a)) {
    if (typeof value === 'number') expect(Number.isFinite(value)).toBe(true);
  }
}

describe('analyzeVoice on synthetic signals', () => {
  it.each([
    { f0: 110, syllableRate: 4, sampleRate: 16000 },
    { f0: 210, syllableRate: 5, sampleRate: 22050 },
    { f0: 85, syllableRate: 3, sampleRate: 48000 },
    { f0: 300, syllableRate: 6, sampleRate: 44100 },
  ])('recovers F0 $f0 Hz within 5% and $syllableRate syllables/s within 20% ($sampleRate Hz)', ({ f0, syllableRate, sampleRate }) => {
    const a = analyzeVoice(syllables({ f0, syllableRate, sampleRate, seconds: 12 }), sampleRate);
    expect(a.durationMs).toBe(12000);
    expect(a.medianF0Hz).not.toBeNull();
    expect(Math.abs(a.medianF0Hz! - f0) / f0).toBeLessThan(0.05);
    expect(a.f0P10Hz!).toBeLessThanOrEqual(a.medianF0Hz!);
    expect(a.f0P90Hz!).toBeGreaterThanOrEqual(a.medianF0Hz!);
    expect(Math.abs(a.syllablesPerSecond! - syllableRate) / syllableRate).toBeLessThan(0.2);
    // 3 s phrases and 1 s pauses: 9 s of speech in 12 s.
    expect(a.speechMs).toBeGreaterThan(8000);
    expect(a.speechMs).toBeLessThan(10000);
    expect(a.gender).toBe(f0 < 150 ? 'male' : 'female');
  });

  it('reports the speech level in dBFS (full-scale sine = -3 dBFS)', () => {
    const sine = new Float32Array(16000 * 3);
    for (let i = 0; i < sine.length; i++) sine[i] = Math.sin((2 * Math.PI * 200 * i) / 16000);
    const a = analyzeVoice(sine, 16000);
    expect(a.loudnessDbfs).toBeCloseTo(-3, 0);
    expect(a.medianF0Hz!).toBeCloseTo(200, -1);
    // A steady tone is one voiced stretch: all of it is speech.
    expect(a.speechMs).toBeGreaterThan(2800);
    const quieter = analyzeVoice(
      sine.map((v) => v * 0.1),
      16000,
    );
    expect(quieter.loudnessDbfs).toBeCloseTo(-23, 0);
  });

  it('is unaffected by a DC offset and by clipping', () => {
    const clean = syllables({ f0: 140, syllableRate: 4, sampleRate: 16000, seconds: 10 });
    const reference = analyzeVoice(clean, 16000);
    const offset = analyzeVoice(
      clean.map((v) => v + 0.3),
      16000,
    );
    expect(Math.abs(offset.medianF0Hz! - reference.medianF0Hz!)).toBeLessThan(2);
    expect(Math.abs(offset.speechMs - reference.speechMs)).toBeLessThan(300);
    const clipped = analyzeVoice(
      clean.map((v) => Math.max(-0.1, Math.min(0.1, v * 3))),
      16000,
    );
    expect(Math.abs(clipped.medianF0Hz! - 140) / 140).toBeLessThan(0.05);
    expect(clipped.syllablesPerSecond).not.toBeNull();
    // Samples beyond ±1 (a float file with overs) and NaN are clamped / zeroed, not propagated.
    const wild = clean.map((v, i) => (i % 1000 === 0 ? Number.NaN : v * 4));
    const w = analyzeVoice(wild, 16000);
    expectFinite(w);
    expect(Math.abs(w.medianF0Hz! - 140) / 140).toBeLessThan(0.05);
  });

  it('still finds the voice under moderate noise (20 dB SNR)', () => {
    const a = analyzeVoice(syllables({ f0: 180, syllableRate: 4, sampleRate: 16000, seconds: 10, noise: 0.02 }), 16000);
    expect(Math.abs(a.medianF0Hz! - 180) / 180).toBeLessThan(0.05);
    expect(a.syllablesPerSecond).not.toBeNull();
  });
});

describe('analyzeVoice on inputs without speech', () => {
  const nothing = { speechMs: 0, medianF0Hz: null, f0P10Hz: null, f0P90Hz: null, syllablesPerSecond: null, gender: 'unknown' };

  it('digital silence: nulls, unknown, the level floor', () => {
    const a = analyzeVoice(new Float32Array(16000 * 5), 16000);
    expect(a).toEqual({ durationMs: 5000, loudnessDbfs: -100, ...nothing });
  });

  it('white noise, at any level: no voiced speech', () => {
    for (const level of [0.001, 0.1, 0.9]) {
      const rand = noiseSource(42);
      const a = analyzeVoice(
        Float32Array.from({ length: 16000 * 10 }, () => level * rand()),
        16000,
      );
      expect(a).toMatchObject(nothing);
      expect(a.durationMs).toBe(10000);
      expectFinite(a);
    }
  });

  it('bursts of noise with silence between them: no voiced speech', () => {
    const rand = noiseSource(3);
    const x = Float32Array.from({ length: 16000 * 8 }, (_, i) => (Math.floor(i / 4000) % 2 ? 0.3 * rand() : 0));
    expect(analyzeVoice(x, 16000)).toMatchObject(nothing);
  });

  it('empty, very short, and nonsense sample rates: nulls, never a throw or NaN', () => {
    expect(analyzeVoice(new Float32Array(0), 16000)).toMatchObject({ durationMs: 0, ...nothing });
    const short = analyzeVoice(
      Float32Array.from({ length: 100 }, (_, i) => Math.sin(i / 5)),
      16000,
    );
    expect(short).toMatchObject({ durationMs: 6, ...nothing });
    // 200 ms of voice: a pitch, but too little speech for a rate.
    const brief = analyzeVoice(syllables({ f0: 120, syllableRate: 4, sampleRate: 16000, seconds: 0.2, phraseSeconds: 10 }), 16000);
    expect(brief.syllablesPerSecond).toBeNull();
    expectFinite(brief);
    for (const rate of [0, -16000, Number.NaN, Number.POSITIVE_INFINITY, 10, 1e9]) {
      const a = analyzeVoice(new Float32Array(1000).fill(0.5), rate);
      expect(a).toMatchObject(nothing);
      expectFinite(a);
    }
  });
});

describe('analyzeVoice on real speech from the local engines', () => {
  const dir = mkdtempSync(join(tmpdir(), 'voice-analysis-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const text =
    'The quick brown fox jumps over the lazy dog. Yesterday afternoon we walked along the river and talked about the weather, ' +
    'the garden, and the long summer holidays that were coming. Nobody expected the rain to stop before evening.';

  function render(command: 'flite' | 'espeak-ng', voice: string): VoiceAnalysis {
    const out = join(dir, `${command}-${voice}.wav`);
    execFileSync(command, command === 'flite' ? ['-voice', voice, '-t', text, '-o', out] : ['-v', voice, '-w', out, text], { stdio: 'ignore' });
    const wav = parseWav(readFileSync(out));
    return analyzeVoice(toFloat32(wav.samples), wav.sampleRate);
  }

  it.each([
    ['flite', 'slt', 'female'],
    ['flite', 'rms', 'male'],
    ['flite', 'awb', 'male'],
    ['espeak-ng', 'en-us+f3', 'female'],
    ['espeak-ng', 'en-us', 'male'],
    ['espeak-ng', 'fr+f2', 'female'],
  ] as const)('%s %s is estimated %s, with a plausible pitch and rate', (command, voice, gender) => {
    const a = render(command, voice);
    expect(a.durationMs).toBeGreaterThan(10000);
    expect(a.gender).toBe(gender);
    expect(a.medianF0Hz!).toBeGreaterThan(gender === 'female' ? 150 : 80);
    expect(a.medianF0Hz!).toBeLessThan(gender === 'female' ? 260 : 150);
    // The text has 61 syllables; the engines speak 4-5.5 per second of speech.
    expect(a.syllablesPerSecond!).toBeGreaterThan(3.5);
    expect(a.syllablesPerSecond!).toBeLessThan(6);
    expect(a.speechMs).toBeLessThanOrEqual(a.durationMs);
    expect(a.speechMs).toBeGreaterThan(0.8 * a.durationMs);
    expect(a.loudnessDbfs).toBeGreaterThan(-40);
    expect(a.loudnessDbfs).toBeLessThan(-5);
  });

  it('slt pitched into the 150-180 Hz overlap band stays female; awb pitched there stays male (formant cue)', () => {
    const pitched = (voice: string) => {
      const out = join(dir, `pitched-${voice}.wav`);
      execFileSync('flite', ['-voice', voice, '--setf', 'int_f0_target_mean=165', '-t', text, '-o', out], { stdio: 'ignore' });
      const wav = parseWav(readFileSync(out));
      return analyzeVoice(toFloat32(wav.samples), wav.sampleRate);
    };
    const slt = pitched('slt');
    const awb = pitched('awb');
    for (const a of [slt, awb]) {
      expect(a.medianF0Hz!).toBeGreaterThan(150);
      expect(a.medianF0Hz!).toBeLessThan(180);
    }
    expect(slt.gender).toBe('female');
    expect(awb.gender).toBe('male');
  });

  it('measures a faster rendering as faster', () => {
    const at = (wpm: number) => {
      const out = join(dir, `rate-${wpm}.wav`);
      execFileSync('espeak-ng', ['-v', 'en-us', '-s', String(wpm), '-w', out, text], { stdio: 'ignore' });
      const wav = parseWav(readFileSync(out));
      return analyzeVoice(toFloat32(wav.samples), wav.sampleRate).syllablesPerSecond!;
    };
    const slow = at(120);
    const fast = at(240);
    expect(fast / slow).toBeGreaterThan(1.4);
  });
});

// Minutes of audio take seconds to measure: the gateway measures in slices so that its event
// loop keeps serving other requests (docs/voices.md).
describe('analyzeVoiceInChunks', () => {
  it.each([
    { f0: 110, sampleRate: 16000 },
    { f0: 165, sampleRate: 44100 }, // the overlap band: the formant (LPC) pass runs too
    { f0: 230, sampleRate: 8000 },
  ])('measures exactly what analyzeVoice measures (f0 $f0 Hz, $sampleRate Hz)', async ({ f0, sampleRate }) => {
    const clip = syllables({ f0, syllableRate: 4, sampleRate, seconds: 20, noise: 0.01 });
    expect(await analyzeVoiceInChunks(clip.slice(), sampleRate)).toEqual(analyzeVoice(clip.slice(), sampleRate));
    const silence = new Float32Array(sampleRate * 3);
    expect(await analyzeVoiceInChunks(silence.slice(), sampleRate)).toEqual(analyzeVoice(silence.slice(), sampleRate));
  });

  it('pauses at least once per second of audio, and other work runs at every pause', async () => {
    const seconds = 60;
    const clip = syllables({ f0: 120, syllableRate: 4, sampleRate: 22050, seconds });
    let slices = 0;
    // Another task on the same event loop: it only runs when the analysis lets go.
    const loop = countLoopTurns();
    await analyzeVoiceInChunks(clip, 22050, { onSlice: () => slices++ });
    loop.stop();
    expect(slices).toBeGreaterThanOrEqual(seconds);
    expect(loop.turns).toBeGreaterThanOrEqual(slices);
  });

  // Ten clones at once put ten slices in every turn of the event loop (tens of ms before another
  // request was read, /health p99 ~70 ms in bench/abuse.ts --only clones) and held ten sets of
  // working copies: the analyses now take turns.
  it('runs analyses one after another: a turn of the event loop carries at most one slice of one of them', async () => {
    // Another task on the same event loop: once per turn.
    const loop = countLoopTurns();
    const clips = [110, 165, 230].map((f0) => syllables({ f0, syllableRate: 4, sampleRate: 16000, seconds: 8, noise: 0.01 }));
    // The turn of the event loop at each pause and at each end (its last slice of work).
    const marks: { clip: number; tick: number }[] = [];
    const started: number[] = [];
    const results = await Promise.all(
      clips.map((clip, i) =>
        analyzeVoiceInChunks(
          () => {
            started.push(i);
            return clip.slice();
          },
          16000,
          { onSlice: () => marks.push({ clip: i, tick: loop.turns }) },
        ).then((analysis) => {
          marks.push({ clip: i, tick: loop.turns });
          return analysis;
        }),
      ),
    );
    loop.stop();
    expect(results).toEqual(clips.map((clip) => analyzeVoice(clip.slice(), 16000)));
    expect(started).toEqual([0, 1, 2]);
    // In order of arrival, each whole before the next begins, and never two in one turn.
    expect(marks.map((m) => m.clip)).toEqual([...marks.map((m) => m.clip)].sort());
    expect(marks.filter((m) => m.clip === 0).length).toBeGreaterThan(3);
    expect(new Set(marks.map((m) => m.tick)).size).toBe(marks.length);
  });

  it('reads the samples of an analysis waiting its turn only when it starts, and an abort takes it out of the line', async () => {
    const clip = syllables({ f0: 120, syllableRate: 4, sampleRate: 16000, seconds: 6 });
    const order: string[] = [];
    const leaving = new AbortController();
    const first = analyzeVoiceInChunks(clip.slice(), 16000, {
      onSlice: () => {
        if (order.length === 0) leaving.abort(new Error('client went away'));
        order.push('first');
      },
    });
    const gone = analyzeVoiceInChunks(
      () => {
        order.push('gone read');
        return clip.slice();
      },
      16000,
      { signal: leaving.signal },
    );
    const last = analyzeVoiceInChunks(() => {
      order.push('last read');
      return clip.slice();
    }, 16000);
    await expect(gone).rejects.toThrow('client went away');
    expect(await last).toEqual(await first);
    expect(order.filter((o) => o !== 'first')).toEqual(['last read']);
    expect(order.indexOf('last read')).toBe(order.lastIndexOf('first') + 1);
  });

  it('an analysis aborted once handed the turn, before it starts, passes the turn on', async () => {
    const clip = syllables({ f0: 120, syllableRate: 4, sampleRate: 16000, seconds: 3 });
    const leaving = new AbortController();
    const first = analyzeVoiceInChunks(clip.slice(), 16000);
    let read = false;
    const handed = analyzeVoiceInChunks(
      () => {
        read = true;
        return clip.slice();
      },
      16000,
      { signal: leaving.signal },
    );
    const last = analyzeVoiceInChunks(clip.slice(), 16000);
    // The first one's end hands the turn on (at the next turn of the loop); the abort comes in between.
    void first.then(() => leaving.abort(new Error('client went away')));
    await expect(handed).rejects.toThrow('client went away');
    expect(read).toBe(false);
    expect(await last).toEqual(await first);
  });

  it('stops at the next pause when its signal is aborted', async () => {
    const abort = new AbortController();
    const clip = syllables({ f0: 120, syllableRate: 4, sampleRate: 16000, seconds: 30 });
    let slices = 0;
    const run = analyzeVoiceInChunks(clip, 16000, {
      signal: abort.signal,
      onSlice: () => {
        if (++slices === 3) abort.abort(new Error('client went away'));
      },
    });
    await expect(run).rejects.toThrow('client went away');
    expect(slices).toBe(3);
  });
});
