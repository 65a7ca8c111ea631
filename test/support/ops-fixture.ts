// Shared pieces of the operations tests: orgs and keys written straight into the test
// database, and the ledger invariant (every balance change is one ledger row).
import { expect } from 'vitest';
import type { Database } from '../../server/db/database.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';

export async function orgWithKey(db: Database, creditsMicros: bigint, rpm = 1_000_000): Promise<{ orgId: string; keyId: string; key: string }> {
  const org = await createOrg(db, { name: `ops ${creditsMicros}`, creditsMicros });
  const k = await createApiKey(db.prisma, { orgId: org.id, name: 'ops', rateLimitRpm: rpm });
  return { orgId: org.id, keyId: k.id, key: k.key };
}

/** The org's balance equals the sum of its ledger, and the last ledger row's balance-after; returns the balance. */
export async function expectLedgerConsistent(db: Database, orgId: string): Promise<bigint> {
  const org = await db.prisma.org.findUniqueOrThrow({ where: { id: orgId } });
  const rows = await db.prisma.ledgerEntry.findMany({ where: { orgId } });
  const sum = rows.reduce((s, r) => s + r.amountMicros, 0n);
  expect(sum, `sum of the ledger of ${orgId}`).toBe(org.balanceMicros);
  // Every usage debit says what it paid for (usage is stored on the debit's row).
  for (const r of rows.filter((r) => r.kind === 'usage')) expect(r.modelId && r.modality && r.route, `usage of ${r.id}`).toBeTruthy();
  return org.balanceMicros;
}

export function chatBody(model: string, stream: boolean, content = 'hi'): string {
  return JSON.stringify({ model, stream, messages: [{ role: 'user', content }] });
}
