// A key's budget and scope (docs/api-conventions.md, "Key budgets and scopes"): the one place
// for what counts as its spend in the current window, what it may still reserve, when it has
// expired and which models it may use. The gateway decides with these at admission, the hot
// stores keep the counts (server/db/hot-store-*.ts), the dashboard and the CLI show them.
import { formatUsd } from '../../money.ts';
import { ServiceError } from '../errors.ts';

export const SPEND_WINDOWS = ['day', 'month'] as const;
export type SpendWindow = (typeof SPEND_WINDOWS)[number];

/** At most this many models on one key's list. */
export const MAX_KEY_MODELS = 100;

/** Where a key with a spend limit stands, as its row keeps it. */
export interface KeySpendState {
  /** The start of the window `spentMicros` counts (ms since the epoch); null: nothing spent yet. */
  windowStartedAt: number | null;
  spentMicros: bigint;
  /** Reserved by its running requests (every process's). */
  heldMicros: bigint;
}

/** A key's spend limit, with where it stands. */
export interface KeyBudget extends KeySpendState {
  limitMicros: bigint;
  window: SpendWindow;
}

/** The start of the window that contains `nowMs`: midnight UTC, or midnight UTC on the first of the month. */
export function windowStartOf(window: SpendWindow, nowMs: number): number {
  const d = new Date(nowMs);
  return window === 'day' ? Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()) : Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

/** When the window that contains `nowMs` ends (the next one starts). */
export function windowEndOf(window: SpendWindow, nowMs: number): number {
  const d = new Date(windowStartOf(window, nowMs));
  return window === 'day' ? Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1) : Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/**
 * What the key spent in the window that starts at `windowStart`: its count when the count is of
 * that window, nothing when it is of an earlier one. A count of a later window (a replica whose
 * clock is ahead wrote it) is taken as it is: spend is never forgotten early.
 */
export function spentInWindow(state: KeySpendState, windowStart: number): bigint {
  return state.windowStartedAt !== null && state.windowStartedAt >= windowStart ? state.spentMicros : 0n;
}

/**
 * Counts a debit of `micros` made in the window that starts at `windowStart` (a count of an
 * earlier window starts over). The PostgreSQL store says the same in SQL (hot-store-postgres.ts).
 */
export function countSpend(state: KeySpendState, windowStart: number, micros: bigint): void {
  if (state.windowStartedAt === null || state.windowStartedAt < windowStart) {
    state.windowStartedAt = windowStart;
    state.spentMicros = micros;
  } else state.spentMicros += micros;
}

/** What the key may still reserve in the window that starts at `windowStart`: its limit less its spend there and what its running requests hold. */
export function budgetLeft(limitMicros: bigint, state: KeySpendState, windowStart: number): bigint {
  return limitMicros - spentInWindow(state, windowStart) - state.heldMicros;
}

/** 402 key_budget_exceeded: the key's limit, less its spend and reservations, cannot cover `neededMicros` (0: nothing is left). */
export function keyBudgetExceeded(budget: KeyBudget, nowMs: number, neededMicros = 0n): ServiceError {
  const start = windowStartOf(budget.window, nowMs);
  const spent = spentInWindow(budget, start);
  const held = budget.heldMicros > 0n ? `, and ${formatUsd(budget.heldMicros)} USD is reserved by its requests still running` : '';
  const needs = neededMicros > 0n ? ` This request needs up to ${formatUsd(neededMicros)} USD.` : '';
  const resets = new Date(windowEndOf(budget.window, nowMs)).toISOString();
  return new ServiceError(
    'key_budget_exceeded',
    `This API key's spend limit is ${formatUsd(budget.limitMicros)} USD per ${budget.window} (UTC); it has spent ${formatUsd(spent)} USD of it${held}.${needs} The limit resets at ${resets}.`,
  );
}

export function isExpired(expiresAt: number | null, nowMs: number): boolean {
  return expiresAt !== null && nowMs >= expiresAt;
}

/** 401 api_key_expired, for a request with the key or a session it had open. */
export function keyExpiredError(expiresAt: number, sessionEnded = false): ServiceError {
  const at = new Date(expiresAt).toISOString();
  return new ServiceError(
    'api_key_expired',
    sessionEnded ? `This API key expired at ${at}; the session was ended.` : `This API key expired at ${at}. Create a new key in the dashboard.`,
  );
}

/** 403 model_not_allowed unless the key's list (null: every model) names `modelId`. */
export function checkModelAllowed(allowed: ReadonlySet<string> | null, modelId: string, param: string | null = 'model'): void {
  if (allowed === null || allowed.has(modelId)) return;
  const list = [...allowed].sort().join(', ');
  throw new ServiceError('model_not_allowed', `This API key may not use the model '${modelId}'; it may use: ${list}.`, param);
}

/** A key row's `allowedModels` (Json) as the set the gateway checks; null: every model. */
export function allowedModelsOf(stored: unknown): ReadonlySet<string> | null {
  if (typeof stored === 'string') stored = JSON.parse(stored) as unknown; // SQLite's raw reads give the JSON text
  return Array.isArray(stored) ? new Set(stored.filter((m): m is string => typeof m === 'string')) : null;
}
