import type { Prisma } from '../../db/database.ts';
import { allowedModelsOf, spentInWindow, windowEndOf, windowStartOf, type SpendWindow } from './key-budget.ts';

export interface ApiKeySummary {
  id: string;
  name: string;
  /** "sk_svc_" plus the next 4 characters; the full key is never stored. */
  prefix: string;
  status: 'active' | 'revoked';
  isTrial: boolean;
  /** Requests per minute for this key; null means the gateway default (SVC_DEFAULT_RPM). */
  rateLimitRpm: number | null;
  /** The key's spend limit and its spend in the current window (UTC); null: none. */
  budget: { limitMicros: bigint; window: SpendWindow; spentMicros: bigint; resetsAt: Date } | null;
  /** Refused from this time on; null: never. */
  expiresAt: Date | null;
  /** The models the key may use; null: every model. */
  models: string[] | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

// A dashboard list, not an export: an org with more keys than this has a different problem.
const MAX_KEYS = 500;

/** An org's keys, newest first. Never returns the hash. */
export async function listApiKeys(prisma: Prisma, input: { orgId: string; now?: Date }): Promise<ApiKeySummary[]> {
  const now = (input.now ?? new Date()).getTime();
  const rows = await prisma.apiKey.findMany({
    where: { orgId: input.orgId },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    take: MAX_KEYS,
    select: {
      id: true,
      name: true,
      prefix: true,
      status: true,
      isTrial: true,
      rateLimitRpm: true,
      spendLimitMicros: true,
      spendWindow: true,
      windowStartedAt: true,
      windowSpentMicros: true,
      heldMicros: true,
      expiresAt: true,
      allowedModels: true,
      createdAt: true,
      lastUsedAt: true,
      revokedAt: true,
    },
  });
  return rows.map(({ spendLimitMicros, spendWindow, windowStartedAt, windowSpentMicros, heldMicros, allowedModels, ...k }) => {
    const window = spendWindow ?? 'month';
    const state = { windowStartedAt: windowStartedAt?.getTime() ?? null, spentMicros: windowSpentMicros, heldMicros };
    const allowed = allowedModelsOf(allowedModels);
    return {
      ...k,
      budget:
        spendLimitMicros === null
          ? null
          : {
              limitMicros: spendLimitMicros,
              window,
              spentMicros: spentInWindow(state, windowStartOf(window, now)),
              resetsAt: new Date(windowEndOf(window, now)),
            },
      models: allowed ? [...allowed] : null,
    };
  });
}
