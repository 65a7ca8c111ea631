import type { Prisma } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';
import { displayPrefix, generateApiKey, hashApiKey } from './api-key-format.ts';

export interface CreatedApiKey {
  id: string;
  /** The full key: returned once, never stored. */
  key: string;
  prefix: string;
  name: string;
  orgId: string;
}

export async function createApiKey(
  prisma: Prisma,
  input: { orgId: string; name?: string; rateLimitRpm?: number | null; isTrial?: boolean },
): Promise<CreatedApiKey> {
  const org = await prisma.org.findUnique({ where: { id: input.orgId }, select: { id: true } });
  if (!org) throw new ServiceError('org_not_found', `No organization with id ${input.orgId}.`);
  if (input.rateLimitRpm != null && (!Number.isInteger(input.rateLimitRpm) || input.rateLimitRpm < 1)) {
    throw new ServiceError('invalid_request', 'rateLimitRpm must be a positive integer.', 'rpm');
  }
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
    },
  });
  return { id: row.id, key, prefix: row.prefix, name: row.name, orgId: row.orgId };
}
