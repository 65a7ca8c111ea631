import { picoToMicrosCeil } from '../../money.ts';

export interface TokenPrices {
  inputPicoPerToken: bigint;
  outputPicoPerToken: bigint;
}

export function llmCostMicros(prices: TokenPrices, inputTokens: number, outputTokens: number): bigint {
  return picoToMicrosCeil(BigInt(inputTokens) * prices.inputPicoPerToken + BigInt(outputTokens) * prices.outputPicoPerToken);
}

export function perUnitCostMicros(picoPerUnit: bigint, units: number): bigint {
  return picoToMicrosCeil(BigInt(units) * picoPerUnit);
}

/** Audio is billed per second with millisecond resolution. */
export function perSecondCostMicros(picoPerSecond: bigint, audioMillis: number): bigint {
  return picoToMicrosCeil((BigInt(Math.round(audioMillis)) * picoPerSecond) / 1000n);
}
