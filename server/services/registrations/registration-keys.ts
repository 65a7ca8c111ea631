import { newId } from '../../db/ids.ts';
import { displayPrefix, generateApiKey, hashApiKey } from '../keys/api-key-format.ts';
import type { Tx } from './registration-rules.ts';

export interface NewKey {
  id: string;
  key: string;
}

/** A key made before its transaction opens, so that it can be sealed without waiting on the transaction. */
export function newApiKey(): NewKey {
  return { id: newId('key'), key: generateApiKey() };
}

/** Inserts the key's row (hash and display prefix only) inside a registration's transaction. */
export async function insertApiKey(tx: Tx, { id, key }: NewKey, input: { orgId: string; name: string; isTrial: boolean; createdAt: Date }): Promise<void> {
  await tx.apiKey.create({
    data: { id, orgId: input.orgId, name: input.name, hash: hashApiKey(key), prefix: displayPrefix(key), isTrial: input.isTrial, createdAt: input.createdAt },
  });
}

/** Thrown inside a transaction that lost a race to issue a key; the transaction rolls back. */
export class LostIssueRace extends Error {}
