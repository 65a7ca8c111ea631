// Migration 0004 moves usage from the UsageEvent table onto the usage debits of the ledger:
// an existing database keeps what each request consumed. Runs on the database TEST_DB picks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseBefore, type DatabaseBefore } from '../../test/support/database-before.ts';
import { TEST_DIALECT } from '../../test/support/test-database.ts';
import { openDatabase, type Database } from './database.ts';
import { migrate } from './migrate.ts';

const BEFORE = '0004_usage_on_ledger';

let url: string;
/** Runs SQL on the test database (the schema as it was before 0004). */
let exec: (sql: string) => Promise<void>;
let before: DatabaseBefore;

beforeAll(async () => {
  before = await databaseBefore(BEFORE);
  ({ url, exec } = before);
});

afterAll(async () => {
  await before?.drop();
});

describe('migration 0004: usage on the ledger', () => {
  let db: Database;
  afterAll(async () => {
    await db?.close();
  });

  it('copies each usage row onto its debit and drops UsageEvent', async () => {
    const at = TEST_DIALECT === 'sqlite' ? "'2026-01-02T03:04:05.678+00:00'" : "'2026-01-02 03:04:05.678'";
    const other = TEST_DIALECT === 'sqlite' ? "'2026-01-02T03:04:06.000+00:00'" : "'2026-01-02 03:04:06'";
    const now = TEST_DIALECT === 'sqlite' ? "'2026-01-01T00:00:00.000+00:00'" : "'2026-01-01 00:00:00'";
    await exec(`
      INSERT INTO "Org" (id, name, "balanceMicros", "updatedAt") VALUES ('org_m', 'm', 1000, ${now});
      INSERT INTO "LedgerEntry" (id, "orgId", kind, "amountMicros", "balanceAfterMicros", description, "requestId", "createdAt") VALUES
        ('led_grant', 'org_m', 'grant', 1100, 1100, 'grant', NULL, ${now}),
        ('led_a', 'org_m', 'usage', -60, 1040, 'llm m', 'req_a', ${at}),
        ('led_b', 'org_m', 'usage', -40, 1000, 'stt s', 'req_b', ${other});
      INSERT INTO "UsageEvent" (id, "orgId", "apiKeyId", "modelId", modality, route, "requestId", "inputTokens", "outputTokens", characters, "audioMillis", "costMicros", "createdAt") VALUES
        ('use_a', 'org_m', NULL, 'm', 'llm', 'chat.completions', 'req_a', 12, 7, 0, 0, 60, ${at}),
        ('use_b', 'org_m', NULL, 's', 'stt', 'stt.websocket', 'req_b', 0, 0, 0, 2500, 40, ${other});
    `);

    expect(await migrate(url)).toContain(BEFORE);
    db = openDatabase(url);
    const rows = await db.prisma.ledgerEntry.findMany({ where: { orgId: 'org_m' }, orderBy: { id: 'asc' } });
    expect(rows.map((r) => [r.id, r.amountMicros, r.modelId, r.modality, r.route, r.inputTokens, r.outputTokens, r.characters, r.audioMillis])).toEqual([
      ['led_a', -60n, 'm', 'llm', 'chat.completions', 12, 7, 0, 0],
      ['led_b', -40n, 's', 'stt', 'stt.websocket', 0, 0, 0, 2500],
      ['led_grant', 1100n, null, null, null, 0, 0, 0, 0],
    ]);
    // The table is gone (and a second run applies nothing).
    await expect(exec(`SELECT 1 FROM "UsageEvent"`)).rejects.toThrow(/UsageEvent/);
    expect(await migrate(url)).toEqual([]);
  });

  it('new debits carry their usage on the same row', async () => {
    const balance = await db.hot.applyLedgerChange({
      orgId: 'org_m',
      amountMicros: -5n,
      kind: 'usage',
      description: 'tts t',
      requestId: 'req_c',
      usage: { modelId: 't', modality: 'tts', route: 'tts.sse', characters: 42 },
    });
    expect(balance).toBe(995n);
    const row = await db.prisma.ledgerEntry.findFirstOrThrow({ where: { requestId: 'req_c' } });
    expect(row).toMatchObject({
      kind: 'usage',
      amountMicros: -5n,
      balanceAfterMicros: 995n,
      modelId: 't',
      modality: 'tts',
      route: 'tts.sse',
      characters: 42,
      inputTokens: 0,
    });
  });
});
