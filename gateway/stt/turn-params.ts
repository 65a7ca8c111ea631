// Turn-detection settings from request parameters: each route names them as its clients do
// (ours and Cartesia's turn_*_threshold, Deepgram Flux's eot_*, OpenAI's server_vad fields) and
// maps them here, so the ranges and messages are the same everywhere.
import { ServiceError } from '../../server/services/errors.ts';
import { turnSettings, type TurnDetection, type TurnSettings } from './turn-detector.ts';

export const TURN_PRESETS: readonly TurnDetection[] = ['balanced', 'patient', 'responsive'];

export function parsePreset(raw: string | undefined, param: string): TurnDetection {
  const preset = (raw ?? 'balanced') as TurnDetection;
  if (!TURN_PRESETS.includes(preset))
    throw new ServiceError('invalid_turn_detection', `${param} must be balanced, patient or responsive (got ${JSON.stringify(raw)}).`, param);
  return preset;
}

/** A probability in [0, 1] (absent: undefined). */
export function parseThreshold(raw: string | number | undefined, param: string): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const value = typeof raw === 'number' ? raw : Number(raw);
  if (!Number.isFinite(value) || value < 0 || value > 1)
    throw new ServiceError('invalid_request', `${param} must be a number from 0 to 1 (got ${JSON.stringify(raw)}).`, param);
  return value;
}

/** Milliseconds within [min, max] (absent: undefined). */
export function parseMillis(raw: string | number | undefined, param: string, min: number, max: number): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const value = typeof raw === 'number' ? raw : Number(raw);
  if (!Number.isInteger(value) || value < min || value > max)
    throw new ServiceError('invalid_request', `${param} must be a whole number of milliseconds from ${min} to ${max} (got ${JSON.stringify(raw)}).`, param);
  return value;
}

export const MAX_END_TIMEOUT_MS = 60_000;

/**
 * A preset's settings; `eager`: send turn.eager_end / turn.resume at the preset's threshold;
 * `fixedSilenceMs`: a fixed silence ends turns (Deepgram's endpointing, OpenAI server_vad).
 */
export function presetSettings(preset: TurnDetection, options: { eager: boolean; fixedSilenceMs?: number }): TurnSettings {
  const base = turnSettings(preset);
  return {
    ...base,
    eagerEndThreshold: options.eager ? base.eagerEndThreshold : null,
    ...(options.fixedSilenceMs !== undefined ? { fixedSilenceMs: options.fixedSilenceMs } : {}),
  };
}

/**
 * The turn thresholds as Cartesia names them -- the query's `turn_start_threshold`, ... (our
 * /stt/websocket and /stt/turns/websocket) or a config message's `turn.start_threshold`, ... --
 * and means them: on the likelihood that the user is still in a turn. A turn starts above
 * `start_threshold` (the speech probability a frame needs), eagerly ends below
 * `eager_end_threshold` and ends below `end_threshold` (start > eager end > end). The detector
 * weighs P(end of turn) = 1 - that likelihood: the end thresholds are mirrored (1 - x).
 */
export interface TurnThresholdParams {
  start_threshold?: string | number;
  eager_end_threshold?: string | number;
  end_threshold?: string | number;
  end_timeout_ms?: string | number;
}

export const TURN_KEYS = ['start_threshold', 'eager_end_threshold', 'end_threshold', 'end_timeout_ms'] as const;

/**
 * `base` with Cartesia's turn settings applied (absent ones keep the base's); `prefix` is how
 * the parameters are named in errors (`turn_` in the query, `turn.` in a config message).
 * Throws invalid_request naming the parameter when a value is out of range or the eager end
 * would not come before the end.
 */
export function applyTurnThresholds(base: TurnSettings, p: TurnThresholdParams, prefix: string): TurnSettings {
  const name = (key: (typeof TURN_KEYS)[number]) => `${prefix}${key}`;
  const start = parseThreshold(p.start_threshold, name('start_threshold'));
  const eagerEnd = parseThreshold(p.eager_end_threshold, name('eager_end_threshold'));
  const end = parseThreshold(p.end_threshold, name('end_threshold'));
  const endTimeoutMs = parseMillis(p.end_timeout_ms, name('end_timeout_ms'), 100, MAX_END_TIMEOUT_MS);
  const next: TurnSettings = {
    ...base,
    speechThreshold: start ?? base.speechThreshold,
    eagerEndThreshold: eagerEnd !== undefined ? 1 - eagerEnd : base.eagerEndThreshold,
    endThreshold: end !== undefined ? 1 - end : base.endThreshold,
    endTimeoutMs: endTimeoutMs ?? base.endTimeoutMs,
  };
  // In Cartesia's terms: the eager end must be reached (going down) before the end.
  if (next.eagerEndThreshold !== null && next.eagerEndThreshold >= next.endThreshold) {
    const [eagerIn, endIn] = [round(1 - next.eagerEndThreshold), round(1 - next.endThreshold)];
    const param = eagerEnd !== undefined ? name('eager_end_threshold') : name('end_threshold');
    throw new ServiceError(
      'invalid_request',
      `${name('eager_end_threshold')} (${eagerIn}) must be above ${name('end_threshold')} (${endIn}): a turn eagerly ends before it ends.`,
      param,
    );
  }
  return next;
}

const round = (x: number) => Math.round(x * 1000) / 1000;

/** The turn settings of a socket's query: `turn_detection` and Cartesia's `turn_*` thresholds. */
export function turnSettingsFromQuery(one: (name: string) => string | undefined, eager: boolean): TurnSettings {
  return applyTurnThresholds(
    presetSettings(parsePreset(one('turn_detection'), 'turn_detection'), { eager }),
    {
      start_threshold: one('turn_start_threshold'),
      eager_end_threshold: one('turn_eager_end_threshold'),
      end_threshold: one('turn_end_threshold'),
      end_timeout_ms: one('turn_end_timeout_ms'),
    },
    'turn_',
  );
}
