// Calibrates the local "cloning" mapping (gateway/upstreams/local-tts/derive-local-voice.ts): synthesises a
// fixed ~10 s English text with each base voice at several pitch and rate settings, measures the
// results with analyzeVoice (gateway/audio/voice-analysis.ts), and fits
//   - pitch: flite: measured median F0 = a + b · int_f0_target_mean (least squares; it is linear
//     to ~1 Hz). espeak-ng -p 0-99 is not linear (convex), so its measured F0 at -p 0, 10, ..., 90,
//     99 is printed as a table that derive-local-voice.ts interpolates.
//   - rate:  ln(syllables/s) = ln(r0) - g · ln(stretch)   (flite duration_stretch), or
//            ln(syllables/s) = ln(r0) + g · ln(wpm / 175)  (espeak-ng -s),
// and the natural (unset) median F0 and rate of each voice. The printed constants are what
// derive-local-voice.ts hard-codes; re-run after an engine upgrade:
//
//   npx tsx bench/voice-calibration.ts
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { analyzeVoice, type VoiceAnalysis } from '../gateway/audio/voice-analysis.ts';
import { toFloat32 } from '../gateway/audio/pcm.ts';
import { parseWav } from '../gateway/audio/wav.ts';

const TEXT =
  'The quick brown fox jumps over the lazy dog. Yesterday afternoon we walked along the river and talked about the weather, ' +
  'the garden, and the long summer holidays that were coming. Nobody expected the rain to stop before evening.';

const dir = mkdtempSync(join(tmpdir(), 'voice-cal-'));
let n = 0;

function measure(command: string, args: (out: string) => string[]): VoiceAnalysis {
  const out = join(dir, `${n++}.wav`);
  execFileSync(command, args(out), { stdio: 'ignore' });
  const wav = parseWav(readFileSync(out));
  return analyzeVoice(toFloat32(wav.samples), wav.sampleRate);
}

function flite(voice: string, settings: { pitchHz?: number; stretch?: number }): VoiceAnalysis {
  return measure('flite', (out) => [
    '-voice',
    voice,
    '--setf',
    `duration_stretch=${(settings.stretch ?? 1).toFixed(4)}`,
    ...(settings.pitchHz === undefined ? [] : ['--setf', `int_f0_target_mean=${settings.pitchHz.toFixed(1)}`]),
    '-t',
    TEXT,
    '-o',
    out,
  ]);
}

function espeak(voice: string, settings: { pitch?: number; wpm?: number }): VoiceAnalysis {
  return measure('espeak-ng', (out) => [
    '-v',
    voice,
    '-s',
    String(settings.wpm ?? 175),
    ...(settings.pitch === undefined ? [] : ['-p', String(settings.pitch)]),
    '-w',
    out,
    TEXT,
  ]);
}

function fitLine(points: [number, number][]): { a: number; b: number; maxResidual: number } {
  const m = points.length;
  const mx = points.reduce((s, [x]) => s + x, 0) / m;
  const my = points.reduce((s, [, y]) => s + y, 0) / m;
  const sxy = points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0);
  const sxx = points.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  const b = sxy / sxx;
  const a = my - b * mx;
  const maxResidual = Math.max(...points.map(([x, y]) => Math.abs(y - (a + b * x))));
  return { a, b, maxResidual };
}

const rows: string[] = [];
function report(
  name: string,
  natural: VoiceAnalysis,
  pitch: ReturnType<typeof fitLine> | null,
  rate: ReturnType<typeof fitLine>,
  pitchPoints: [number, number][],
  ratePoints: [number, number][],
): void {
  rows.push(`${name}: natural median F0 ${natural.medianF0Hz} Hz, ${natural.syllablesPerSecond} syllables/s, gender ${natural.gender}`);
  if (pitch)
    rows.push(
      `  pitch: F0 = ${pitch.a.toFixed(2)} + ${pitch.b.toFixed(4)} * setting   (max residual ${pitch.maxResidual.toFixed(1)} Hz; points ${pitchPoints.map(([x, y]) => `${x}->${y.toFixed(1)}`).join(' ')})`,
    );
  rows.push(
    `  rate: ln(syl/s) = ${rate.a.toFixed(4)} + ${rate.b.toFixed(4)} * ln(x)  i.e. r0 ${Math.exp(rate.a).toFixed(3)}, exponent ${rate.b.toFixed(3)}   (max residual ${rate.maxResidual.toFixed(3)}; points ${ratePoints.map(([x, y]) => `${Math.exp(x).toFixed(2)}->${Math.exp(y).toFixed(2)}`).join(' ')})`,
  );
}

try {
  {
    // Speed: one rendering repeated to 60 s (the cost grows with length and with how much of
    // it is voiced speech; second run timed, after warm-up).
    const one = join(dir, 'speed.wav');
    execFileSync('flite', ['-voice', 'slt', '-t', TEXT, '-o', one], { stdio: 'ignore' });
    const wav = parseWav(readFileSync(one));
    const clip = toFloat32(wav.samples);
    const long = new Float32Array(wav.sampleRate * 60);
    for (let i = 0; i < long.length; i += clip.length) long.set(clip.subarray(0, Math.min(clip.length, long.length - i)), i);
    analyzeVoice(long, wav.sampleRate);
    const started = performance.now();
    analyzeVoice(long, wav.sampleRate);
    rows.push(`analyzeVoice: 60 s of ${wav.sampleRate} Hz speech in ${(performance.now() - started).toFixed(0)} ms`);
  }
  for (const voice of ['slt', 'awb', 'rms']) {
    const natural = flite(voice, {});
    const pitchSettings = voice === 'slt' ? [120, 150, 180, 210, 240, 270] : [70, 90, 110, 130, 150, 170];
    const pitchPoints = pitchSettings.map((p) => [p, flite(voice, { pitchHz: p }).medianF0Hz!] as [number, number]);
    const ratePoints = [0.6, 0.75, 0.9, 1, 1.15, 1.3, 1.5].map(
      (s) => [Math.log(s), Math.log(flite(voice, { stretch: s }).syllablesPerSecond!)] as [number, number],
    );
    // rms ignores int_f0_target_mean (its output is byte-identical at any setting): no pitch fit.
    const pitchFit = voice === 'rms' ? null : fitLine(pitchPoints);
    report(`flite ${voice}`, natural, pitchFit, fitLine(ratePoints), pitchPoints, ratePoints);
  }
  for (const voice of ['en-us', 'en-us+f3', 'fr+f3', 'de']) {
    const natural = espeak(voice, {});
    const pitchPoints = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 99].map((p) => [p, espeak(voice, { pitch: p }).medianF0Hz!] as [number, number]);
    // Above ~250 wpm the analysis starts merging syllables (espeak-ng's fastest speech), so the
    // fit stops there; derive-local-voice.ts clamps its output accordingly.
    const ratePoints = [100, 125, 150, 175, 200, 225, 250].map(
      (w) => [Math.log(w / 175), Math.log(espeak(voice, { wpm: w }).syllablesPerSecond!)] as [number, number],
    );
    report(`espeak-ng ${voice}`, natural, null, fitLine(ratePoints), pitchPoints, ratePoints);
    rows.push(`  pitch table (-p 0, 10, ..., 90, 99 -> median F0 Hz): [${pitchPoints.map(([, y]) => y.toFixed(1)).join(', ')}]`);
  }
  console.log(rows.join('\n'));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
