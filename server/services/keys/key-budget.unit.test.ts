import { describe, expect, it } from 'vitest';
import {
  allowedModelsOf,
  budgetLeft,
  checkModelAllowed,
  countSpend,
  isExpired,
  keyBudgetExceeded,
  keyExpiredError,
  spentInWindow,
  windowEndOf,
  windowStartOf,
  type KeyBudget,
} from './key-budget.ts';

const at = (iso: string) => Date.parse(iso);

describe('spend windows (UTC)', () => {
  it('a day starts at midnight UTC and ends at the next', () => {
    expect(windowStartOf('day', at('2026-12-05T23:59:59.999Z'))).toBe(at('2026-12-05T00:00:00Z'));
    expect(windowEndOf('day', at('2026-12-05T23:59:59.999Z'))).toBe(at('2026-12-06T00:00:00Z'));
    expect(windowStartOf('day', at('2026-12-06T00:00:00Z'))).toBe(at('2026-12-06T00:00:00Z'));
    expect(windowEndOf('day', at('2026-12-31T12:00:00Z'))).toBe(at('2027-01-01T00:00:00Z'));
  });

  it('a month starts on the first at midnight UTC, whatever its length', () => {
    expect(windowStartOf('month', at('2026-02-28T23:00:00Z'))).toBe(at('2026-02-01T00:00:00Z'));
    expect(windowEndOf('month', at('2026-02-28T23:00:00Z'))).toBe(at('2026-03-01T00:00:00Z'));
    expect(windowEndOf('month', at('2026-12-15T00:00:00Z'))).toBe(at('2027-01-01T00:00:00Z'));
  });
});

describe('what a key may still reserve', () => {
  const dec5 = at('2026-12-05T00:00:00Z');
  const budget = (over: Partial<KeyBudget>): KeyBudget => ({
    limitMicros: 1_000n,
    window: 'day',
    windowStartedAt: dec5,
    spentMicros: 300n,
    heldMicros: 200n,
    ...over,
  });

  it('is the limit less the spend of the current window and what running requests hold', () => {
    expect(budgetLeft(1_000n, budget({}), dec5)).toBe(500n);
  });

  it('a count of an earlier window is no spend in this one; reservations still count', () => {
    const dec6 = at('2026-12-06T00:00:00Z');
    expect(spentInWindow(budget({}), dec6)).toBe(0n);
    expect(budgetLeft(1_000n, budget({}), dec6)).toBe(800n);
    expect(budgetLeft(1_000n, budget({ windowStartedAt: null, spentMicros: 0n }), dec6)).toBe(800n);
  });

  it('a count of a later window (a replica whose clock is ahead) is not forgotten', () => {
    expect(spentInWindow(budget({ windowStartedAt: at('2026-12-06T00:00:00Z') }), dec5)).toBe(300n);
  });

  it('can be negative: debits past the reservation (an LLM prompt estimate) are counted in full', () => {
    expect(budgetLeft(1_000n, budget({ spentMicros: 1_100n, heldMicros: 0n }), dec5)).toBe(-100n);
  });

  it('a debit counts in its window; one of a later window starts the count over; one of an earlier window adds to the current count', () => {
    const state = { windowStartedAt: null, spentMicros: 0n, heldMicros: 0n };
    countSpend(state, dec5, 40n);
    countSpend(state, dec5, 2n);
    expect(state).toMatchObject({ windowStartedAt: dec5, spentMicros: 42n });
    const dec6 = at('2026-12-06T00:00:00Z');
    countSpend(state, dec6, 7n);
    expect(state).toMatchObject({ windowStartedAt: dec6, spentMicros: 7n });
    // A replica whose clock is behind: its debit still counts, in the newer window.
    countSpend(state, dec5, 3n);
    expect(state).toMatchObject({ windowStartedAt: dec6, spentMicros: 10n });
  });

  it('402 key_budget_exceeded says the limit, the spend, the reservations, the need and when it resets', () => {
    const e = keyBudgetExceeded(budget({}), at('2026-12-05T10:00:00Z'), 700n);
    expect(e.code).toBe('key_budget_exceeded');
    expect(e.message).toBe(
      "This API key's spend limit is 0.001000 USD per day (UTC); it has spent 0.000300 USD of it, and 0.000200 USD is reserved by its requests still running. This request needs up to 0.000700 USD. The limit resets at 2026-12-06T00:00:00.000Z.",
    );
  });
});

describe('expiry', () => {
  it('a key expires at its time exactly; null never', () => {
    const t = at('2026-12-05T12:00:00Z');
    expect(isExpired(t, t - 1)).toBe(false);
    expect(isExpired(t, t)).toBe(true);
    expect(isExpired(null, Number.MAX_SAFE_INTEGER)).toBe(false);
    expect(keyExpiredError(t)).toMatchObject({ code: 'api_key_expired', message: expect.stringContaining('2026-12-05T12:00:00.000Z') });
  });
});

describe('model scope', () => {
  it('null allows every model; a list only its own, 403 model_not_allowed naming them', () => {
    expect(() => checkModelAllowed(null, 'anything')).not.toThrow();
    const allowed = allowedModelsOf(['local-flite', 'local-llm']);
    expect(() => checkModelAllowed(allowed, 'local-flite')).not.toThrow();
    expect(() => checkModelAllowed(allowed, 'local-espeak', 'model_id')).toThrow(
      expect.objectContaining({
        code: 'model_not_allowed',
        param: 'model_id',
        message: "This API key may not use the model 'local-espeak'; it may use: local-flite, local-llm.",
      }),
    );
  });

  it('reads the stored list as Prisma or a raw SQLite read gives it', () => {
    expect(allowedModelsOf(null)).toBeNull();
    expect([...allowedModelsOf('["a","b"]')!]).toEqual(['a', 'b']);
  });
});
