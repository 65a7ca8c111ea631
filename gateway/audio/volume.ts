// Output volume (generation_config.volume, 0.5-2) with a soft limiter instead of hard clipping:
// below the knee (0.9 of full scale) samples are scaled exactly; above it they bend along a
// tanh curve that meets the line with the same slope and approaches full scale without
// reaching past it. Applied to the final samples (after resampling), so nothing downstream
// can push them over full scale again.
const KNEE = 0.9;
const HEADROOM = 1 - KNEE;

/** One sample after gain and soft limiting; |result| <= 1 for any finite input. */
export function softLimit(x: number): number {
  const a = x < 0 ? -x : x;
  if (a <= KNEE) return x;
  if (!(a < Infinity)) return Number.isNaN(x) ? 0 : Math.sign(x);
  const y = KNEE + HEADROOM * Math.tanh((a - KNEE) / HEADROOM);
  return x < 0 ? -y : y;
}

/**
 * Multiplies by `gain` and soft-limits, into a new array. With gain 1, samples within
 * +-0.9 come out unchanged; louder ones (or overshoot from resampling) are limited.
 */
export function applyVolume(samples: Float32Array, gain: number): Float32Array {
  const out = new Float32Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const v = samples[i]! * gain;
    out[i] = v <= KNEE && v >= -KNEE ? v : softLimit(v);
  }
  return out;
}
