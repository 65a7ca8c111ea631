// Money is integer micro-USD (bigint) everywhere; prices are pico-USD per unit. Strings with
// six decimals exist only at the edges (headers, CLI, dashboard).
export const MICROS_PER_USD = 1_000_000n;
const PICO_PER_MICRO = 1_000_000n;

export function formatUsd(micros: bigint): string {
  const negative = micros < 0n;
  const abs = negative ? -micros : micros;
  const whole = abs / MICROS_PER_USD;
  const frac = (abs % MICROS_PER_USD).toString().padStart(6, '0');
  return `${negative ? '-' : ''}${whole}.${frac}`;
}

/** Parses a decimal USD amount ("12", "-0.5", "3.141592") exactly; more than 6 decimals is an error. */
export function parseUsdToMicros(value: string): bigint {
  const m = /^(-?)(\d{1,12})(?:\.(\d{1,6}))?$/.exec(value.trim());
  if (!m) throw new RangeError(`not a USD amount with at most 6 decimals: ${JSON.stringify(value)}`);
  const micros = BigInt(m[2]!) * MICROS_PER_USD + BigInt((m[3] ?? '').padEnd(6, '0'));
  return m[1] === '-' ? -micros : micros;
}

/** Parses a USD price per unit (up to 12 decimals, e.g. 0.00000015 per token) into pico-USD. */
export function parseUsdToPico(value: string): bigint {
  const m = /^(\d{1,9})(?:\.(\d{1,12}))?$/.exec(value.trim());
  if (!m) throw new RangeError(`not a non-negative USD price with at most 12 decimals: ${JSON.stringify(value)}`);
  return BigInt(m[1]!) * 1_000_000_000_000n + BigInt((m[2] ?? '').padEnd(12, '0'));
}

export function formatPico(pico: bigint): string {
  const whole = pico / 1_000_000_000_000n;
  const frac = (pico % 1_000_000_000_000n).toString().padStart(12, '0').replace(/0+$/, '');
  return frac ? `${whole}.${frac}` : `${whole}`;
}

/** Cost of a request in micro-USD: the exact pico-USD total, rounded up to a whole micro-USD. */
export function picoToMicrosCeil(pico: bigint): bigint {
  if (pico <= 0n) return 0n;
  return (pico + PICO_PER_MICRO - 1n) / PICO_PER_MICRO;
}
