// Synthetic signals and measurements shared by the audio tests and bench/audio-pipeline.ts.

export function tone(frequency: number, sampleRate: number, seconds: number, amplitude = 0.5): Float32Array {
  const out = new Float32Array(Math.round(sampleRate * seconds));
  for (let i = 0; i < out.length; i++) out[i] = amplitude * Math.sin((2 * Math.PI * frequency * i) / sampleRate);
  return out;
}

/**
 * Speech-like test audio: a voiced source (harmonics of a pitch gliding 100-220 Hz, shaped by
 * two formant-ish peaks) with a 4 Hz syllable envelope, short pauses and a little noise.
 * Deterministic (seeded noise).
 */
export function speechLike(sampleRate: number, seconds: number): Float32Array {
  const out = new Float32Array(Math.round(sampleRate * seconds));
  let seed = 12345;
  let phase = 0;
  for (let i = 0; i < out.length; i++) {
    const t = i / sampleRate;
    const f0 = 160 + 60 * Math.sin(2 * Math.PI * 0.7 * t);
    phase += (2 * Math.PI * f0) / sampleRate;
    let v = 0;
    for (let h = 1; h <= 12; h++) {
      const f = h * f0;
      const formants = Math.exp(-(((f - 700) / 300) ** 2)) + 0.6 * Math.exp(-(((f - 1800) / 500) ** 2)) + 0.1;
      v += (formants / h) * Math.sin(h * phase);
    }
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    const noise = (seed / 0x7fffffff - 0.5) * 0.02;
    const syllable = Math.max(0, Math.sin(2 * Math.PI * 4 * t)) * (Math.sin(2 * Math.PI * 0.25 * t) > -0.7 ? 1 : 0);
    out[i] = 0.35 * syllable * v + noise;
  }
  return out;
}

/**
 * A voiced burst that a voice-activity detector (Silero VAD) takes for speech, with a known
 * pitch: a fundamental at `f0` (100-160 Hz; higher is less speech-like) that dominates, so the
 * zero-crossing frequency is `f0`, plus harmonics shaped by three formants, a 3 % vibrato and
 * a 4 Hz syllable envelope. Deterministic. What the scripted engines name as one word each.
 */
export function voicedBurst(f0: number, sampleRate: number, seconds: number, amplitude = 0.5): Float32Array {
  const out = new Float32Array(Math.round(sampleRate * seconds));
  let phase = 0;
  for (let i = 0; i < out.length; i++) {
    const t = i / sampleRate;
    const f = f0 * (1 + 0.03 * Math.sin(2 * Math.PI * 5 * t));
    phase += (2 * Math.PI * f) / sampleRate;
    let v = 0;
    for (let h = 1; h <= 20; h++) {
      const fr = h * f;
      const formants = Math.exp(-(((fr - 700) / 250) ** 2)) + 0.7 * Math.exp(-(((fr - 1200) / 300) ** 2)) + 0.4 * Math.exp(-(((fr - 2500) / 400) ** 2));
      v += ((h === 1 ? 1.2 : formants) * Math.sin(h * phase)) / Math.sqrt(h);
    }
    out[i] = amplitude * 0.3 * v * (0.6 + 0.4 * Math.sin(2 * Math.PI * 4 * t));
  }
  return out;
}

export function rms(x: Float32Array): number {
  let s = 0;
  for (let i = 0; i < x.length; i++) s += x[i]! * x[i]!;
  return Math.sqrt(s / Math.max(1, x.length));
}

/** Frequency of a tone from its upward zero crossings (sign change from < 0 to >= 0). */
export function zeroCrossingFrequency(x: Float32Array, sampleRate: number): number {
  let crossings = 0;
  let first = -1;
  let last = -1;
  for (let i = 1; i < x.length; i++) {
    if (x[i - 1]! < 0 && x[i]! >= 0) {
      crossings++;
      if (first < 0) first = i;
      last = i;
    }
  }
  return crossings < 2 ? 0 : ((crossings - 1) * sampleRate) / (last - first);
}
