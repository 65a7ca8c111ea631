// 8 kHz -> 16 kHz for pocketsphinx's en-us model, which only exists at 16 kHz (its feat.params
// pins -upperf 6800, above an 8 kHz signal's Nyquist frequency). Streaming 2x interpolation:
// zero-stuffing then a Kaiser-windowed sinc low-pass at 4 kHz; state carries across chunks so
// chunk boundaries leave no seam.

const HALF_TAPS = 16; // taps per phase: 32-sample (4 ms) support at 8 kHz
const BETA = 6; // Kaiser window: ~ -60 dB stop band

function bessel0(x: number): number {
  let sum = 1;
  let term = 1;
  for (let k = 1; k < 30; k++) {
    term *= (x / (2 * k)) ** 2;
    sum += term;
  }
  return sum;
}

/** Odd-phase coefficients: the sample halfway between input samples n and n+1. */
const ODD_PHASE = (() => {
  const taps = new Float64Array(2 * HALF_TAPS);
  const half = 2 * HALF_TAPS; // half-width of the window, in output samples
  for (let i = 0; i < 2 * HALF_TAPS; i++) {
    // history[i] sits t output samples from the new sample (centre is history[HALF_TAPS - 1])
    const t = 2 * (i - HALF_TAPS + 1) - 1;
    const sinc = Math.sin((Math.PI * t) / 2) / ((Math.PI * t) / 2);
    const w = bessel0(BETA * Math.sqrt(Math.max(0, 1 - (t / half) ** 2))) / bessel0(BETA);
    taps[i] = sinc * w;
  }
  const sum = taps.reduce((a, b) => a + b, 0);
  return taps.map((v) => v / sum);
})();

export class Upsampler2x {
  /** The last 2*HALF_TAPS input samples (zero before the stream starts). */
  private history = new Float64Array(2 * HALF_TAPS);
  /** Input samples still to take in before the first one reaches the filter's centre. */
  private priming = HALF_TAPS;

  /**
   * 16 kHz samples for the given 8 kHz ones, two per input sample, with the filter's latency
   * (HALF_TAPS input samples, 2 ms) held back: `flush` gives those at the end of a stream, so a
   * whole stream comes out exactly twice as long and aligned with the input.
   */
  process(input: Int16Array): Int16Array {
    const skip = Math.min(this.priming, input.length);
    this.priming -= skip;
    const out = new Int16Array((input.length - skip) * 2);
    const h = this.history;
    const n = h.length;
    let o = 0;
    for (let k = 0; k < input.length; k++) {
      h.copyWithin(0, 1);
      h[n - 1] = input[k]!;
      if (k < skip) continue;
      // even phase: the centre input sample as it is
      out[o++] = h[HALF_TAPS - 1]!;
      // odd phase: halfway between the centre sample and the next
      let acc = 0;
      for (let i = 0; i < n; i++) acc += h[i]! * ODD_PHASE[i]!;
      out[o++] = Math.max(-32768, Math.min(32767, Math.round(acc)));
    }
    return out;
  }

  /** The samples still held back by the filter; then the state is as new. */
  flush(): Int16Array {
    const pending = HALF_TAPS - this.priming;
    const tail = pending > 0 ? this.process(new Int16Array(HALF_TAPS)).subarray(0, 2 * pending) : new Int16Array(0);
    this.history.fill(0);
    this.priming = HALF_TAPS;
    return tail;
  }
}
