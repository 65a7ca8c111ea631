// The SQLite hot store's deferred usage debits: a debit answers with the balance at once and
// is committed at the end of the turn, or after the previous commit by 25 ms once 128 changes wait, 50 ms while
// fewer do. What that must keep: every balance-after
// exact, changes made by other connections counted, and a commit that fails neither loses
// nor doubles a debit while metered admission is paused. Always SQLite (the PostgreSQL store
// commits before it answers).
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createGatewayCore } from '../../gateway/core/gateway-core.ts';
import { createMemoryRateLimiter } from '../rate-limit/rate-limiter.ts';
import { hashApiKey } from '../services/keys/api-key-format.ts';
import { createApiKey } from '../services/keys/create-api-key.ts';
import type { ServiceError } from '../services/errors.ts';
import { createOrg } from '../services/orgs/create-org.ts';
import { envelope } from '../error-envelope.ts';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database.ts';
import { sqlitePath } from './dialect.ts';
import { newId } from './ids.ts';

let t: TestDatabase;
/** Another connection to the same file, as the dashboard, the CLI or a replica would have. */
let other: Database.Database;
const limiter = createMemoryRateLimiter();

beforeAll(async () => {
  t = await createTestDatabase('sqlite');
  other = new Database(sqlitePath(t.url), { timeout: 10_000 });
  other.defaultSafeIntegers(true);
});
afterAll(async () => {
  other?.close();
  await limiter.close();
  await t?.drop();
});

const usage = { modelId: 'm', modality: 'llm' as const, route: 'chat.completions', inputTokens: 3, outputTokens: 4 };
const debit = (orgId: string, amount: bigint, requestId = newId('req')) =>
  t.db.hot.applyUsageDebit({ orgId, amountMicros: -amount, kind: 'usage', description: 'llm m', requestId, usage });

async function newOrg(credits: bigint) {
  const org = await createOrg(t.db, { name: 'deferred', creditsMicros: credits });
  const key = await createApiKey(t.db.prisma, { orgId: org.id, name: 'k' });
  return { orgId: org.id, key: key.key };
}

/** A grant written by the other connection, ledger row and balance in one transaction. */
function grantFromElsewhere(orgId: string, amount: bigint): void {
  other
    .transaction(() => {
      const { b } = other.prepare(`UPDATE "Org" SET balanceMicros = balanceMicros + ? WHERE id = ? RETURNING balanceMicros AS b`).get(amount, orgId) as {
        b: bigint;
      };
      other
        .prepare(`INSERT INTO "LedgerEntry" (id, orgId, kind, amountMicros, balanceAfterMicros, createdAt) VALUES (?, ?, 'grant', ?, ?, ?)`)
        .run(newId('led'), orgId, amount, b, new Date().toISOString().replace('Z', '+00:00'));
    })
    .immediate();
}

async function ledgerOf(orgId: string) {
  await t.db.hot.settle();
  const org = await t.db.prisma.org.findUniqueOrThrow({ where: { id: orgId } });
  const rows = await t.db.prisma.ledgerEntry.findMany({ where: { orgId }, orderBy: { balanceAfterMicros: 'desc' } });
  expect(rows.reduce((s, r) => s + r.amountMicros, 0n)).toBe(org.balanceMicros);
  return { balance: org.balanceMicros, rows };
}

describe('deferred usage debits (SQLite)', () => {
  it('answer at once with the balance that their committed ledger row then carries', async () => {
    const { orgId } = await newOrg(1_000n);
    const answered = [await debit(orgId, 100n, 'req_d1'), await debit(orgId, 30n, 'req_d2')];
    expect(answered).toEqual([900n, 870n]);
    const { balance, rows } = await ledgerOf(orgId);
    expect(balance).toBe(870n);
    expect(rows.filter((r) => r.kind === 'usage').map((r) => [r.requestId, r.amountMicros, r.balanceAfterMicros, r.modelId, r.inputTokens])).toEqual([
      ['req_d1', -100n, 900n, 'm', 3],
      ['req_d2', -30n, 870n, 'm', 3],
    ]);
  });

  it('commit at most once per 25 ms: debits made turn after turn share commits', async () => {
    const { orgId } = await newOrg(1_000_000n);
    const started = performance.now();
    for (let i = 0; i < 60; i++) {
      await debit(orgId, 1n);
      await new Promise((r) => setImmediate(r)); // each debit in a turn of its own
    }
    const elapsed = performance.now() - started;
    const { rows } = await ledgerOf(orgId);
    const usageRows = rows.filter((r) => r.kind === 'usage');
    expect(usageRows).toHaveLength(60);
    // The rows of one commit share its timestamp: there were at most 1 + elapsed/25 commits
    // (the last one may come after the loop), not one per turn.
    const commits = new Set(usageRows.map((r) => r.createdAt.getTime())).size;
    expect(commits).toBeLessThanOrEqual(2 + Math.floor(elapsed / 25));
    expect(commits).toBeLessThan(60);
  });

  it('while few debits come, commits are at least 50 ms apart: a trickle of debits shares them', async () => {
    const { orgId } = await newOrg(1_000_000n);
    const started = performance.now();
    // One debit every 3 ms or more for ~300 ms: fewer than 128 wait at any time.
    for (let i = 0; i < 100; i++) {
      await debit(orgId, 1n);
      await new Promise((r) => setTimeout(r, 3));
    }
    const elapsed = performance.now() - started;
    const { rows } = await ledgerOf(orgId);
    const usageRows = rows.filter((r) => r.kind === 'usage');
    expect(usageRows).toHaveLength(100);
    expect(usageRows.at(-1)!.balanceAfterMicros).toBe(1_000_000n - 100n);
    // The first may be at once (nothing committed lately), the last after the loop.
    const commits = new Set(usageRows.map((r) => r.createdAt.getTime())).size;
    expect(commits).toBeLessThanOrEqual(2 + Math.floor(elapsed / 50));
  });

  it('count a grant made by another connection, also while debits of this turn are not yet committed', async () => {
    const { orgId, key } = await newOrg(1_000n);
    expect(await debit(orgId, 100n)).toBe(900n);
    await t.db.hot.settle();
    grantFromElsewhere(orgId, 500n);
    expect(await debit(orgId, 50n)).toBe(1_350n);
    // Not committed yet: a grant lands in between, and a key lookup reloads the balance.
    grantFromElsewhere(orgId, 10n);
    const record = await t.db.hot.findKeyByHash(hashApiKey(key));
    expect(record?.balanceMicros).toBe(1_360n);
    expect(await t.db.hot.getBalance(orgId)).toBe(1_360n);
    const { balance, rows } = await ledgerOf(orgId);
    expect(balance).toBe(1_360n);
    // Every row's balance-after is exact, whichever connection wrote it.
    const ordered = [...rows].sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
    expect(ordered.at(-1)!.balanceAfterMicros).toBe(1_360n);
  });

  it('commit a turn of many debits across orgs in one transaction, each row with its exact balance-after', async () => {
    const a = await newOrg(10_000n);
    const b = await newOrg(5_000n);
    // 70 debits in one turn (more than one multi-row INSERT), interleaved across two orgs and
    // one org that does not exist; answered before anything is committed.
    const plan = Array.from({ length: 70 }, (_v, i) => ({
      orgId: i % 7 === 3 ? 'org_missing' : i % 2 ? b.orgId : a.orgId,
      amount: BigInt(i + 1),
      requestId: `req_batch_${i}`,
    }));
    const answered = await Promise.all(plan.map((p) => debit(p.orgId, p.amount, p.requestId)));
    const expected: (bigint | null)[] = [];
    const running = new Map([
      [a.orgId, 10_000n],
      [b.orgId, 5_000n],
    ]);
    for (const p of plan) {
      const before = running.get(p.orgId);
      if (before === undefined) expected.push(null);
      else {
        running.set(p.orgId, before - p.amount);
        expected.push(before - p.amount);
      }
    }
    expect(answered).toEqual(expected);
    for (const org of [a, b]) {
      const { balance, rows } = await ledgerOf(org.orgId);
      expect(balance).toBe(running.get(org.orgId));
      const byRequest = new Map(rows.filter((r) => r.kind === 'usage').map((r) => [r.requestId, r.balanceAfterMicros]));
      const mine = plan.map((p, i) => [p, expected[i]] as const).filter(([p]) => p.orgId === org.orgId);
      expect(byRequest.size).toBe(mine.length);
      for (const [p, after] of mine) expect(byRequest.get(p.requestId)).toBe(after);
    }
    expect(await t.db.prisma.ledgerEntry.count({ where: { orgId: 'org_missing' } })).toBe(0);
  });

  it('count a grant made elsewhere before answering a debit at or below zero (the answer that ends a session)', async () => {
    const { orgId, key } = await newOrg(100n);
    expect(await debit(orgId, 60n)).toBe(40n);
    await t.db.hot.settle();
    // The balance is cached (a key lookup), then credit arrives from another process.
    expect((await t.db.hot.findKeyByHash(hashApiKey(key)))?.balanceMicros).toBe(40n);
    grantFromElsewhere(orgId, 500n);
    // Without the grant this debit would leave -10: it must see the 540 instead.
    expect(await debit(orgId, 50n)).toBe(490n);
    expect((await ledgerOf(orgId)).balance).toBe(490n);
  });

  it('a commit that fails keeps the answered debits queued and pauses metered admission until they are written', async () => {
    const { orgId, key } = await newOrg(1_000n);
    const core = createGatewayCore({ store: t.db.hot, limiter, defaultRpm: 1_000, onKeyUsed: () => {} });
    const errors: number[] = [];
    t.db.hot.onDeferredWriteError = (_err, queued) => errors.push(queued);
    // The database refuses this one request's row (as a full disk or an I/O error would).
    other.exec(
      `CREATE TRIGGER refuse_debit BEFORE INSERT ON "LedgerEntry" WHEN NEW.requestId = 'req_refused' BEGIN SELECT RAISE(ABORT, 'refused by test'); END`,
    );
    try {
      const auth = await core.admit(key, true);
      expect(await core.charge(auth, 'req_refused', 200n, usage)).toBe(800n);
      await vi.waitFor(() => expect(t.db.hot.debitsFailing()).toBe(true), { timeout: 5_000, interval: 5 });
      expect(errors[0]).toBe(1);
      await expect(t.db.hot.settle()).rejects.toThrow(/refused by test/);
      // Metered work is refused while it stays unwritten; the balance still counts it.
      const refused = await core.admit(key, true).then(
        () => null,
        (e: unknown) => envelope(e as ServiceError),
      );
      expect(refused).toMatchObject({ status: 503, body: { error: { code: 'temporarily_unavailable' } } });
      expect((await core.admit(key, false)).balanceMicros).toBe(800n);
      expect(await t.db.prisma.ledgerEntry.count({ where: { requestId: 'req_refused' } })).toBe(0);
    } finally {
      other.exec(`DROP TRIGGER refuse_debit`);
    }
    // Retried by itself: written once, and admission resumes.
    await vi.waitFor(() => expect(t.db.hot.debitsFailing()).toBe(false), { timeout: 10_000, interval: 20 });
    const { balance, rows } = await ledgerOf(orgId);
    expect(balance).toBe(800n);
    expect(rows.filter((r) => r.requestId === 'req_refused').map((r) => [r.amountMicros, r.balanceAfterMicros])).toEqual([[-200n, 800n]]);
    expect((await core.admit(key, true)).balanceMicros).toBe(800n);
    t.db.hot.onDeferredWriteError = undefined;
  });

  // Timers run in the order they expire: one set 11 ms after a debit runs after the debit's
  // commit was tried (at the end of its turn, the previous commit being older than the spacing). SQLite's busy handler would have
  // slept the thread instead (the other connection, on this same thread, could then never let go
  // of its lock, and the commit would fail after 10 s).
  const afterTheCommitWasTried = () => new Promise((resolve) => setTimeout(resolve, 11));

  it("wait for another connection's write lock without holding up the thread, and commit once it is free", async () => {
    const { orgId } = await newOrg(1_000n);
    other.exec('BEGIN IMMEDIATE');
    try {
      expect(await debit(orgId, 100n, 'req_locked')).toBe(900n);
      await afterTheCommitWasTried();
      expect(t.db.hot.debitsFailing()).toBe(false);
      expect(other.prepare(`SELECT count(*) AS n FROM "LedgerEntry" WHERE requestId = 'req_locked'`).get()).toEqual({ n: 0n });
      // Writes on timers (reservations' upkeep) wait the same way.
      let upkeepDone = false;
      const upkeep = t.db.hot.maintainHolds(60_000).then(() => (upkeepDone = true));
      await afterTheCommitWasTried();
      expect(upkeepDone).toBe(false);
      other.exec('COMMIT');
      await upkeep;
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK');
    }
    const { balance, rows } = await ledgerOf(orgId);
    expect(balance).toBe(900n);
    expect(rows.filter((r) => r.requestId === 'req_locked').map((r) => [r.amountMicros, r.balanceAfterMicros])).toEqual([[-100n, 900n]]);
  });
});

describe('key checks (SQLite)', () => {
  const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

  it('see a revocation and a grant made by another connection on the very next check, in the same turn or a later one', async () => {
    const { orgId, key } = await newOrg(100n);
    const hash = hashApiKey(key);
    const sameTurn = await Promise.all([1, 2, 3].map(() => t.db.hot.findKeyByHash(hash)));
    expect(sameTurn.map((r) => [r?.status, r?.balanceMicros])).toEqual([
      ['active', 100n],
      ['active', 100n],
      ['active', 100n],
    ]);
    grantFromElsewhere(orgId, 50n);
    other.prepare(`UPDATE "ApiKey" SET status = 'revoked' WHERE hash = ?`).run(hash);
    expect(await t.db.hot.findKeyByHash(hash)).toMatchObject({ status: 'revoked', balanceMicros: 150n });
    other.prepare(`UPDATE "ApiKey" SET status = 'active' WHERE hash = ?`).run(hash);
    await nextTurn();
    expect((await t.db.hot.findKeyByHash(hash))?.status).toBe('active');
  });
});
