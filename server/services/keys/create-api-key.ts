import type { Prisma } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { formatUsd } from '../../money.ts';
import { ServiceError } from '../errors.ts';
import { displayPrefix, generateApiKey, hashApiKey } from './api-key-format.ts';
import { MAX_KEY_MODELS, SPEND_WINDOWS, type SpendWindow } from './key-budget.ts';

export interface CreatedApiKey {
  id: string;
  /** The full key: returned once, never stored. */
  key: string;
  prefix: string;
  name: string;
  orgId: string;
}

/** The most one key's spend limit may be: $1,000,000 per window. */
export const MAX_SPEND_LIMIT_MICROS = 1_000_000n * 1_000_000n;

/** A key's budget and scope (docs/api-conventions.md, "Key budgets and scopes"); each absent or null: none. */
export interface KeyLimitsInput {
  /** At most this much usage per window (micro-USD, more than 0). */
  spendLimitMicros?: bigint | null;
  /** The window the limit counts over (UTC); month when a limit is given without one. */
  spendWindow?: SpendWindow | null;
  /** The key is refused from this time on; must be in the future. */
  expiresAt?: Date | null;
  /** The ids of the models the key may use (every one must exist). */
  models?: string[] | null;
}

export async function createApiKey(
  prisma: Prisma,
  input: { orgId: string; name?: string; rateLimitRpm?: number | null; isTrial?: boolean; now?: Date } & KeyLimitsInput,
): Promise<CreatedApiKey> {
  const org = await prisma.org.findUnique({ where: { id: input.orgId }, select: { id: true } });
  if (!org) throw new ServiceError('org_not_found', `No organization with id ${input.orgId}.`);
  if (input.rateLimitRpm != null && (!Number.isInteger(input.rateLimitRpm) || input.rateLimitRpm < 1)) {
    throw new ServiceError('invalid_request', 'rateLimitRpm must be a positive integer.', 'rpm');
  }
  const limits = await checkKeyLimits(prisma, input, input.now ?? new Date());
  const key = generateApiKey();
  const row = await prisma.apiKey.create({
    data: {
      id: newId('key'),
      orgId: input.orgId,
      name: input.name ?? '',
      hash: hashApiKey(key),
      prefix: displayPrefix(key),
      rateLimitRpm: input.rateLimitRpm ?? null,
      isTrial: input.isTrial ?? false,
      ...limits,
    },
  });
  return { id: row.id, key, prefix: row.prefix, name: row.name, orgId: row.orgId };
}

/** The key's budget and scope as stored, or 400 invalid_request naming the field that is wrong. */
async function checkKeyLimits(prisma: Prisma, input: KeyLimitsInput, now: Date) {
  const limit = checkSpendLimit(input.spendLimitMicros ?? null);
  const window = checkSpendWindow(input.spendWindow ?? null, limit);
  const expiresAt = checkExpiry(input.expiresAt ?? null, now);
  const models = input.models == null ? null : await checkModels(prisma, input.models);
  return {
    spendLimitMicros: limit,
    spendWindow: limit === null ? null : (window ?? 'month'),
    expiresAt,
    // Prisma's Json null is Prisma.DbNull; undefined leaves the column null.
    ...(models ? { allowedModels: models } : {}),
  };
}

/** A spend limit (micro-USD; null: none), or 400 when it is not more than 0 or over the most a key may have. */
export function checkSpendLimit(limit: bigint | null): bigint | null {
  if (limit !== null && (limit <= 0n || limit > MAX_SPEND_LIMIT_MICROS)) {
    throw new ServiceError('invalid_request', `The spend limit must be more than 0 and at most ${formatUsd(MAX_SPEND_LIMIT_MICROS)} USD.`, 'spendLimit');
  }
  return limit;
}

/** A spend window (null: none given), or 400 when it is not day or month, or comes without a limit. */
export function checkSpendWindow(window: SpendWindow | null, limit: bigint | null): SpendWindow | null {
  if (window !== null && !SPEND_WINDOWS.includes(window)) throw new ServiceError('invalid_request', 'The spend window must be day or month.', 'spendWindow');
  if (window !== null && limit === null) throw new ServiceError('invalid_request', 'A spend window needs a spend limit.', 'spendWindow');
  return window;
}

/** An expiry (null: never), or 400 when it is not in the future. */
export function checkExpiry(expiresAt: Date | null, now: Date): Date | null {
  if (expiresAt !== null && !(expiresAt.getTime() > now.getTime())) {
    throw new ServiceError('invalid_request', `The expiry must be in the future (it is ${now.toISOString()} now).`, 'expiresAt');
  }
  return expiresAt;
}

/** A key's model list, each once, or 400 when it is empty, too long or names a model the registry does not have. */
export async function checkModels(prisma: Prisma, input: string[]): Promise<string[]> {
  const models = [...new Set(input.map((m) => m.trim()))].filter((m) => m !== '');
  if (models.length === 0) throw new ServiceError('invalid_request', 'Name at least one model, or none to allow every model.', 'models');
  if (models.length > MAX_KEY_MODELS) throw new ServiceError('invalid_request', `A key may name at most ${MAX_KEY_MODELS} models.`, 'models');
  const found = new Set((await prisma.model.findMany({ where: { id: { in: models } }, select: { id: true } })).map((m) => m.id));
  const unknown = models.filter((m) => !found.has(m));
  if (unknown.length > 0) throw new ServiceError('invalid_request', `No model ${unknown.map((m) => `'${m}'`).join(', ')} in the registry.`, 'models');
  return models;
}
