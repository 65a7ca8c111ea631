import type { Prisma } from '../../db/database.ts';
import { ServiceError } from '../errors.ts';

/** The highest per-key limit the dashboard lets an operator set, in requests per minute. */
export const MAX_KEY_RATE_LIMIT_RPM = 1_000_000;

/**
 * Gives a key its own rate limit (requests per fixed one-minute window), or with rpm null
 * puts it back on the gateway default (SVC_DEFAULT_RPM, 600 unless configured). Any key, of
 * any org: callers decide who may do this (the dashboard allows platform admins only).
 * Effective on the key's next request: the gateway reads the limit with the key on every
 * request (server/db/hot-store-*.ts; the SQLite cache is emptied by any other writer).
 */
export async function setKeyRateLimit(prisma: Prisma, input: { id: string; rpm: number | null }): Promise<{ id: string; rateLimitRpm: number | null }> {
  const { rpm } = input;
  if (rpm !== null && (!Number.isInteger(rpm) || rpm < 1 || rpm > MAX_KEY_RATE_LIMIT_RPM)) {
    throw new ServiceError(
      'invalid_request',
      `The rate limit must be a whole number of requests per minute from 1 to ${MAX_KEY_RATE_LIMIT_RPM.toLocaleString('en')}.`,
      'rpm',
    );
  }
  const { count } = await prisma.apiKey.updateMany({ where: { id: input.id }, data: { rateLimitRpm: rpm } });
  if (count === 0) throw new ServiceError('key_not_found', `No API key with id ${input.id}.`);
  return { id: input.id, rateLimitRpm: rpm };
}
