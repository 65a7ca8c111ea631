import type { HotStore, KeyAuthRecord } from '../../db/hot-store.ts';
import { ServiceError } from '../errors.ts';
import { hashApiKey, isWellFormedApiKey } from './api-key-format.ts';
import { isExpired, keyExpiredError } from './key-budget.ts';

/**
 * Verifies a presented key against the database's current state on every call: the store
 * answers with the key and its org's balance together (which the credit check needs anyway),
 * from one indexed read on PostgreSQL, and on SQLite from memory for as long as no other
 * connection has committed since it last read (server/db/sqlite-commit-watch.ts), so a
 * revocation from any process is seen on the very next request. The lookup is by SHA-256 of
 * the key, so its timing says nothing about stored keys.
 */
export async function verifyApiKey(store: HotStore, presented: string | undefined, nowMs = Date.now()): Promise<KeyAuthRecord> {
  if (!presented) {
    throw new ServiceError('invalid_api_key', 'You did not provide an API key. Pass it in the Authorization header as "Bearer sk_svc_...".');
  }
  if (!isWellFormedApiKey(presented)) throw incorrectKey(presented);
  return verifyKeyHash(store, hashApiKey(presented), { unknown: () => incorrectKey(presented), nowMs });
}

/**
 * The key a credential stands for, by its stored hash, as current as verifyApiKey's: a phone
 * number's token or a WebRTC client secret is bound to a key and lives only as long as it does.
 * A key past its expiry (at `nowMs`) is refused as a revoked one is, with its own code.
 */
export async function verifyKeyHash(store: HotStore, hash: string, options: { unknown?: () => ServiceError; nowMs?: number } = {}): Promise<KeyAuthRecord> {
  let record: KeyAuthRecord | null;
  try {
    record = await store.findKeyByHash(hash);
  } catch {
    throw new ServiceError('verify_unavailable', 'API key verification is temporarily unavailable; retry within a few seconds. Your key is fine.');
  }
  if (!record) throw (options.unknown ?? unknownKey)();
  if (record.status !== 'active') throw new ServiceError('api_key_disabled', 'This API key has been disabled.');
  if (record.expiresAt !== null && isExpired(record.expiresAt, options.nowMs ?? Date.now())) throw keyExpiredError(record.expiresAt);
  return record;
}

const unknownKey = () => new ServiceError('invalid_api_key', 'The API key this credential was issued for no longer exists.');
const incorrectKey = (presented: string) => new ServiceError('invalid_api_key', `Incorrect API key provided: ${redactKey(presented)}.`);

/** Shows enough of a key to recognise it in an error message, never enough to use it. */
export function redactKey(key: string): string {
  const printable = key.replace(/[^\x20-\x7e]/g, '?');
  // Short strings would be shown whole by prefix + suffix: show none of them.
  if (printable.length < 24) return '*'.repeat(8);
  return `${printable.slice(0, 11)}${'*'.repeat(8)}${printable.slice(-4)}`;
}
