// Changing an existing key's budget and scope (docs/api-conventions.md, "Key budgets and scopes"):
// its spend limit and window, its expiry, its models. Each is left as it is (undefined), removed
// (null) or set. The gateway reads them with the key on its next request (the hot stores read the
// key's row every time; SQLite's cache is emptied by any other writer's commit).
//
// A key that is given a spend limit, or whose window changes, has its count of the window taken
// again from the ledger (its usage debits since the window began): a count is kept only while a
// key has a limit, and a day's count is not a month's. It is taken with the org's row locked, the
// lock every debit of the org takes first, so no debit lands between the sum and the write;
// debits still to come count on top of it.
import { DB_NULL, type Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';
import { checkExpiry, checkModels, checkSpendLimit, checkSpendWindow } from './create-api-key.ts';
import { windowStartOf, type SpendWindow } from './key-budget.ts';
import { lockOrg } from '../orgs/org-lock.ts';

/** What to change; a field left out stays as it is, null removes it. */
export interface KeyLimitsChange {
  spendLimitMicros?: bigint | null;
  /** Only with a spend limit (given now or kept); left out: the key's window, or month for a key that had no limit. */
  spendWindow?: SpendWindow;
  expiresAt?: Date | null;
  models?: string[] | null;
}

export interface UpdatedKeyLimits {
  id: string;
  spendLimitMicros: bigint | null;
  spendWindow: SpendWindow | null;
  expiresAt: Date | null;
  models: string[] | null;
}

const keyNotFound = (id: string) => new ServiceError('key_not_found', `No API key with id ${id}.`);

/** `orgId`: the key must be the org's (the dashboard); the operator's CLI leaves it out. */
export async function updateApiKeyLimits(prisma: Prisma, input: { id: string; orgId?: string; now?: Date } & KeyLimitsChange): Promise<UpdatedKeyLimits> {
  const now = input.now ?? new Date();
  const key = await prisma.apiKey.findFirst({ where: { id: input.id, ...(input.orgId ? { orgId: input.orgId } : {}) } });
  if (!key) throw keyNotFound(input.id);
  if (key.status === 'revoked') throw new ServiceError('conflict', 'This key is revoked: its limits no longer apply, and cannot change.', 'id');

  const limit = input.spendLimitMicros === undefined ? key.spendLimitMicros : checkSpendLimit(input.spendLimitMicros);
  const window = checkSpendWindow(input.spendWindow ?? null, limit) ?? (limit === null ? null : (key.spendWindow ?? 'month'));
  // Only a new expiry must be in the future: a key past its own may still have its other limits changed.
  const expiresAt = input.expiresAt === undefined ? key.expiresAt : checkExpiry(input.expiresAt, now);
  const models = input.models === undefined ? undefined : input.models === null ? null : await checkModels(prisma, input.models);
  const recount = limit !== null && (key.spendLimitMicros === null || window !== key.spendWindow);

  await prisma.$transaction(async (tx) => {
    const data = {
      spendLimitMicros: limit,
      spendWindow: window,
      expiresAt,
      ...(models === undefined ? {} : { allowedModels: models ?? DB_NULL }),
    };
    if (!recount) {
      const { count } = await tx.apiKey.updateMany({ where: { id: key.id, status: 'active' }, data });
      if (count === 0) throw keyNotFound(key.id);
      return;
    }
    await lockOrg(tx, key.orgId);
    const since = windowStartOf(window!, now.getTime());
    const debits = await tx.ledgerEntry.aggregate({
      where: { orgId: key.orgId, apiKeyId: key.id, kind: 'usage', createdAt: { gte: new Date(since) } },
      _sum: { amountMicros: true },
    });
    const { count } = await tx.apiKey.updateMany({
      where: { id: key.id, status: 'active' },
      data: {
        ...data,
        windowSpentMicros: -(debits._sum.amountMicros ?? 0n),
        // The start of today (UTC), whichever the window: at or after the start of a month window
        // and of a day window alike, so a debit admitted under the old window still counts on
        // top of this count rather than starting it over (key-budget.ts spentInWindow).
        windowStartedAt: new Date(windowStartOf('day', now.getTime())),
      },
    });
    if (count === 0) throw keyNotFound(key.id);
  });
  const stored = await prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } });
  return {
    id: stored.id,
    spendLimitMicros: stored.spendLimitMicros,
    spendWindow: stored.spendWindow,
    expiresAt: stored.expiresAt,
    models: Array.isArray(stored.allowedModels) ? (stored.allowedModels as string[]) : null,
  };
}
