import { describe, expect, it } from 'vitest';
import { LATENCY_BOUNDS_MS, quantileOf } from './request-log-stats.ts';

const counts = (at: Record<number, number>) => Array.from({ length: LATENCY_BOUNDS_MS.length + 1 }, (_, i) => at[i] ?? 0);

describe('quantileOf', () => {
  it('is null with nothing measured, never 0', () => {
    expect(quantileOf(counts({}), 0.5)).toBeNull();
  });

  it('interpolates within the bucket the rank falls in', () => {
    // 100 requests in (10, 25] ms: the median halfway through it.
    const i = LATENCY_BOUNDS_MS.indexOf(25);
    expect(quantileOf(counts({ [i]: 100 }), 0.5)).toBeCloseTo(17.5);
    // 90 fast (<= 1 ms) and 10 in (500, 1000]: p50 under 1 ms, p95 in the slow bucket.
    const slow = LATENCY_BOUNDS_MS.indexOf(1000);
    const mixed = counts({ 0: 90, [slow]: 10 });
    expect(quantileOf(mixed, 0.5)).toBeLessThanOrEqual(1);
    expect(quantileOf(mixed, 0.95)).toBeCloseTo(750);
  });

  it('the open bucket past the last bound reads as that bound', () => {
    expect(quantileOf(counts({ [LATENCY_BOUNDS_MS.length]: 3 }), 0.99)).toBe(LATENCY_BOUNDS_MS.at(-1));
  });
});
