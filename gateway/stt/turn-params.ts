// Turn-detection settings from request parameters: each route names them as its clients do
// (ours and Cartesia's turn_*_threshold, Deepgram Flux's eot_*, OpenAI's server_vad fields) and
// maps them here, so the ranges and messages are the same everywhere.
import { ServiceError } from '../../server/services/errors.js';
import { turnSettings, type TurnDetection, type TurnSettings } from './turn-detector.js';

export const TURN_PRESETS: readonly TurnDetection[] = ['balanced', 'patient', 'responsive'];

export function parsePreset(raw: string | undefined, param: string): TurnDetection {
  const preset = (raw ?? 'balanced') as TurnDetection;
  if (!TURN_PRESETS.includes(preset)) throw new ServiceError('invalid_turn_detection', `${param} must be balanced, patient or responsive (got ${JSON.stringify(raw)}).`, param);
  return preset;
}

/** A probability in [0, 1] (absent: undefined). */
export function parseThreshold(raw: string | number | undefined, param: string): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const value = typeof raw === 'number' ? raw : Number(raw);
  if (!Number.isFinite(value) || value < 0 || value > 1) throw new ServiceError('invalid_request', `${param} must be a number from 0 to 1 (got ${JSON.stringify(raw)}).`, param);
  return value;
}

/** Milliseconds within [min, max] (absent: undefined). */
export function parseMillis(raw: string | number | undefined, param: string, min: number, max: number): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const value = typeof raw === 'number' ? raw : Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) throw new ServiceError('invalid_request', `${param} must be a whole number of milliseconds from ${min} to ${max} (got ${JSON.stringify(raw)}).`, param);
  return value;
}

export interface TurnParams {
  preset: TurnDetection;
  /** Send turn.eager_end / turn.resume (with the preset's eager threshold unless one is given). */
  eager: boolean;
  speechThreshold?: number;
  eagerEndThreshold?: number;
  endThreshold?: number;
  endTimeoutMs?: number;
  fixedSilenceMs?: number;
}

export const MAX_END_TIMEOUT_MS = 60_000;

/** The detector's settings; an eager threshold above the end threshold would never fire before the end. */
export function settingsFrom(p: TurnParams, eagerParam: string): TurnSettings {
  const base = turnSettings(p.preset);
  const endThreshold = p.endThreshold ?? base.endThreshold;
  const eager = p.eagerEndThreshold ?? (p.eager ? Math.min(base.eagerEndThreshold!, endThreshold) : undefined);
  if (eager !== undefined && eager > endThreshold) throw new ServiceError('invalid_request', `${eagerParam} (${eager}) must not be above the end threshold (${endThreshold}).`, eagerParam);
  return {
    ...base,
    speechThreshold: p.speechThreshold ?? base.speechThreshold,
    eagerEndThreshold: eager ?? null,
    endThreshold,
    endTimeoutMs: p.endTimeoutMs ?? base.endTimeoutMs,
    ...(p.fixedSilenceMs !== undefined ? { fixedSilenceMs: p.fixedSilenceMs } : {}),
  };
}
