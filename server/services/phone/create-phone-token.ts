import { z } from 'zod';
import type { Prisma } from '../../db/database.ts';
import { newId } from '../../db/ids.ts';
import { ServiceError } from '../errors.ts';
import { invalidInput } from '../parse-input.ts';
import { generatePhoneToken, hashPhoneToken, phoneTokenPrefix } from './phone-token-format.ts';

/** A realtime profile or LLM id, as `/v1/realtime?model=` names one (checked against the gateway's profiles when a call connects). */
export const PhoneProfileId = z
  .string()
  .trim()
  .min(1, 'name a realtime profile (or an LLM of the registry)')
  .max(128, 'must be at most 128 characters')
  .regex(/^[A-Za-z0-9._:/-]+$/, 'must be a profile or model id (letters, digits and . _ : / -)');

const CreateInput = z.object({
  orgId: z.string().min(1),
  apiKeyId: z.string().min(1).max(100),
  profile: PhoneProfileId,
  name: z.string().trim().max(100, 'must be at most 100 characters').default(''),
});

export interface CreatedPhoneToken {
  id: string;
  /** The full token: returned once, never stored. */
  token: string;
  prefix: string;
  name: string;
  orgId: string;
  apiKeyId: string;
  profile: string;
}

/**
 * A token for one phone number (or one carrier account): its calls are admitted, billed and
 * logged as the API key `apiKeyId` of the same org, and talk to `profile`. The key must be
 * the org's and active; another org's key is "not found".
 */
export async function createPhoneToken(prisma: Prisma, raw: z.input<typeof CreateInput>): Promise<CreatedPhoneToken> {
  const parsed = CreateInput.safeParse(raw);
  if (!parsed.success) throw invalidInput(parsed.error);
  const input = parsed.data;
  const key = await prisma.apiKey.findFirst({ where: { id: input.apiKeyId, orgId: input.orgId }, select: { status: true } });
  if (!key) throw new ServiceError('key_not_found', `No API key with id ${input.apiKeyId} in this organization.`, 'apiKeyId');
  if (key.status !== 'active')
    throw new ServiceError('invalid_request', `API key ${input.apiKeyId} is revoked; a phone token needs an active key.`, 'apiKeyId');
  const token = generatePhoneToken();
  const row = await prisma.phoneToken.create({
    data: {
      id: newId('ptok'),
      orgId: input.orgId,
      apiKeyId: input.apiKeyId,
      profile: input.profile,
      name: input.name,
      hash: hashPhoneToken(token),
      prefix: phoneTokenPrefix(token),
    },
  });
  return { id: row.id, token, prefix: row.prefix, name: row.name, orgId: row.orgId, apiKeyId: row.apiKeyId, profile: row.profile };
}
