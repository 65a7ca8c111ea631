import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatPico, formatUsd, parseUsdToMicros, parseUsdToPico, picoToMicrosCeil } from './money.ts';
import { llmCostMicros } from './services/credits/pricing.ts';
import { perMTokToPico } from './services/models/seed-registry.ts';

describe('formatUsd', () => {
  it.each([
    [0n, '0.000000'],
    [1n, '0.000001'],
    [-1n, '-0.000001'],
    [6n, '0.000006'],
    [999_999n, '0.999999'],
    [1_000_000n, '1.000000'],
    [-1_500_000n, '-1.500000'],
    [5_000_000n, '5.000000'],
    [123_456_789n, '123.456789'],
    [-123_456_789n, '-123.456789'],
    [10n ** 18n + 7n, '1000000000000.000007'],
  ])('%s micros -> %s', (micros, text) => {
    expect(formatUsd(micros)).toBe(text);
  });

  it('always has exactly six decimals and an optional leading minus', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }), (micros) => {
        expect(formatUsd(micros)).toMatch(/^-?\d+\.\d{6}$/);
      }),
    );
  });
});

describe('parseUsdToMicros', () => {
  it.each([
    ['0', 0n],
    ['-0', 0n],
    ['12', 12_000_000n],
    ['5', 5_000_000n],
    ['0.5', 500_000n],
    ['-0.5', -500_000n],
    ['3.141592', 3_141_592n],
    ['0.000001', 1n],
    ['-0.000001', -1n],
    ['0.10', 100_000n],
    ['  7.25  ', 7_250_000n],
    ['999999999999.999999', 999_999_999_999_999_999n],
  ])('%j -> %s micros', (text, micros) => {
    expect(parseUsdToMicros(text)).toBe(micros);
  });

  it.each([
    [''],
    ['   '],
    ['abc'],
    ['0.0000001'], // seven decimals: not representable, must not be rounded silently
    ['1.'],
    ['.5'],
    ['+1'],
    ['--1'],
    ['1,5'],
    ['1e3'],
    ['0x10'],
    ['1 000'],
    ['NaN'],
    ['Infinity'],
    ['1000000000000'], // 13 integer digits
    ['-'],
  ])('rejects %j with a RangeError', (text) => {
    expect(() => parseUsdToMicros(text)).toThrow(RangeError);
  });

  it('round-trips with formatUsd for every amount up to 12 integer digits', () => {
    const bound = 10n ** 18n - 1n;
    fc.assert(
      fc.property(fc.bigInt({ min: -bound, max: bound }), (micros) => {
        expect(parseUsdToMicros(formatUsd(micros))).toBe(micros);
      }),
    );
  });
});

describe('parseUsdToPico', () => {
  it.each([
    ['0', 0n],
    ['1', 1_000_000_000_000n],
    ['0.15', 150_000_000_000n],
    ['0.000000000001', 1n],
    ['0.00000015', 150_000n],
    ['2.5', 2_500_000_000_000n],
    ['123456789.123456789012', 123_456_789_123_456_789_012n],
  ])('%j -> %s pico', (text, pico) => {
    expect(parseUsdToPico(text)).toBe(pico);
  });

  it.each([[''], ['-0.15'], ['-1'], ['0.0000000000001'], ['1e-6'], ['abc'], ['.1'], ['1.'], ['1234567890']])(
    'rejects %j with a RangeError (prices are non-negative, at most 12 decimals)',
    (text) => {
      expect(() => parseUsdToPico(text)).toThrow(RangeError);
    },
  );

  it('round-trips with formatPico', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 21n - 1n }), (pico) => {
        expect(parseUsdToPico(formatPico(pico))).toBe(pico);
      }),
    );
  });
});

describe('picoToMicrosCeil', () => {
  it.each([
    [0n, 0n],
    [-1n, 0n],
    [-1_000_000n, 0n],
    [1n, 1n],
    [999_999n, 1n],
    [1_000_000n, 1n],
    [1_000_001n, 2n],
    [2_000_000n, 2n],
    [6_000_000n, 6n],
    [6_000_001n, 7n],
  ])('%s pico -> %s micros (rounded up, never negative)', (pico, micros) => {
    expect(picoToMicrosCeil(pico)).toBe(micros);
  });

  it('is the smallest whole micro-USD amount that covers the exact cost', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: 10n ** 24n }), (pico) => {
        const micros = picoToMicrosCeil(pico);
        expect(micros * 1_000_000n >= pico).toBe(true);
        expect((micros - 1n) * 1_000_000n < pico).toBe(true);
      }),
    );
  });
});

describe('LLM prices per million tokens', () => {
  it('converts USD per MTok to pico-USD per token exactly', () => {
    expect(perMTokToPico('0.15')).toBe(150_000n);
    expect(perMTokToPico('0.6')).toBe(600_000n);
    expect(perMTokToPico('15')).toBe(15_000_000n);
  });

  it.each([
    // prompt, completion, input $/MTok, output $/MTok, cost USD
    [12, 7, '0.15', '0.6', '0.000006'],
    [0, 0, '0.15', '0.6', '0.000000'],
    [1, 0, '0.15', '0.6', '0.000001'], // 0.15 micro-USD, rounded up to one
    [1_000_000, 1_000_000, '0.15', '0.6', '0.750000'],
    [13, 7, '0.15', '0.6', '0.000007'], // 6.15 micro-USD rounds up to 7
  ])('%i prompt + %i completion tokens at %s/%s per MTok cost %s USD', (input, output, inPrice, outPrice, usd) => {
    const cost = llmCostMicros({ inputPicoPerToken: perMTokToPico(inPrice), outputPicoPerToken: perMTokToPico(outPrice) }, input, output);
    expect(formatUsd(cost)).toBe(usd);
  });
});
