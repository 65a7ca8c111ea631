// Credit reserved by a gateway that dies does not stay reserved: a real `svc gateway` holding
// a streaming session's reservation is killed with SIGKILL; another gateway on the same
// database releases what the dead one held once its reservations expire (they are renewed
// only by a living owner). SQLite and PostgreSQL (TEST_DB).
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../support/gateway-harness.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-database.ts';
import { orgWithKey } from '../support/ops-fixture.ts';
import { startSvcGateway, type SvcProcess } from '../support/svc-process.ts';
import { checkProtocol } from '../../gateway/upstreams/protocols/index.ts';

vi.setConfig({ testTimeout: 120_000 });

let t: TestDatabase;
let dead: SvcProcess | undefined;
let survivor: GatewayHarness | undefined;

beforeAll(async () => {
  t = await createTestDatabase();
  // 0.0001 USD per second of audio: a session reserves 100 micro-USD before its upgrade.
  await upsertModel(t.db.prisma, checkProtocol, {
    id: 'local-stt',
    modality: 'stt',
    prices: { picoPerSecond: 100_000_000n },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
});

afterAll(async () => {
  dead?.child.kill('SIGKILL');
  await survivor?.close();
  await t?.drop();
});

it('a gateway killed with SIGKILL leaves its reservations behind only until they expire; a living gateway then releases them', async () => {
  const { orgId, key } = await orgWithKey(t.db, 1_000_000n);
  dead = await startSvcGateway('doomed', { SVC_DATA_DIR: t.dataDir, DATABASE_URL: t.url, SVC_CREDIT_HOLD_TTL_SECONDS: '2' });
  const ws = new WebSocket(`${dead.base.replace(/^http/, 'ws')}/stt/websocket?model=local-stt&api_key=${key}`);
  ws.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    ws.once('message', () => resolve()); // session.started
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
  const held = async () => (await t.db.prisma.org.findUniqueOrThrow({ where: { id: orgId } })).heldMicros;
  // Committed (on SQLite within the turn's commit): the session's first second is reserved.
  await expect.poll(held, { timeout: 10_000 }).toBe(100n);
  expect(await t.db.prisma.creditHold.count({ where: { orgId } })).toBe(1);

  dead.child.kill('SIGKILL');
  await dead.exited;
  ws.terminate();
  // Nobody renews it now; it is still held until it expires.
  expect(await held()).toBe(100n);

  survivor = await startGateway({ env: { DATABASE_URL: t.url, SVC_DATA_DIR: t.dataDir, SVC_CREDIT_HOLD_TTL_SECONDS: '2' } });
  await expect.poll(held, { timeout: 15_000, interval: 200 }).toBe(0n);
  expect(await t.db.prisma.creditHold.count({ where: { orgId } })).toBe(0);
  // Nothing was debited: the dead session received no audio.
  expect((await t.db.prisma.org.findUniqueOrThrow({ where: { id: orgId } })).balanceMicros).toBe(1_000_000n);
});
