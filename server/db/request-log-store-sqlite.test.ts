// The request log's SQLite writer (a worker thread with its own connection) on a real database
// file: a batch is one transaction whose only writes are its WAL frames. Always SQLite.
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg } from '../services/orgs/create-org.ts';
import { openDatabase } from './database.ts';
import { newTimeOrderedId } from './ids.ts';
import { migrate } from './migrate.ts';
import type { RequestLogRow } from './request-log-store.ts';
import { createSqliteRequestLogStore } from './request-log-store-sqlite.ts';

let dir: string;
let path: string;
let orgId: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-log-writer-'));
  path = join(dir, 'svc.db');
  await migrate(`file:${path}`);
  const db = openDatabase(`file:${path}`);
  orgId = (await createOrg(db, { name: 'writer', creditsMicros: 0n })).id;
  // Closed again: no other connection (and no checkpointer) touches the file while the test counts.
  await db.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Write system calls of this process so far (every thread's, the writer's included). */
const writeCalls = () => Number(/^syscw: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'))![1]);

const row = (i: number): RequestLogRow => ({
  id: newTimeOrderedId('log'),
  orgId,
  requestId: newTimeOrderedId('req'),
  apiKeyId: null,
  apiKeyName: '',
  kind: 'http',
  method: 'POST',
  route: '/v1/chat/completions',
  modelId: 'writer-model',
  status: 200,
  errorCode: null,
  upstreams: `[{"upstreamId":"ups_writer","outcome":"ok","ms":${i % 100}}]`,
  servedBy: 'ups_writer',
  failoverReason: null,
  userAgent: 'writer-test',
  traceId: null,
  ttfbMs: 1.5,
  firstAudioMs: null,
  firstAudibleMs: null,
  totalMs: 2.5,
  inputTokens: 12,
  outputTokens: 7,
  characters: 0,
  audioMillis: 0,
  costMicros: 6n,
  requestContent: null,
  responseContent: null,
  createdAt: Date.now(),
});

describe('the SQLite writer', () => {
  it('writes a batch of thousands of rows as its WAL frames only: no statement journal spilled to a temporary file', async () => {
    const store = createSqliteRequestLogStore(path);
    try {
      await store.insert([row(0)], []);
      const walBefore = statSync(`${path}-wal`).size;
      const callsBefore = writeCalls();
      await store.insert(
        Array.from({ length: 3000 }, (_, i) => row(i)),
        [],
      );
      const calls = writeCalls() - callsBefore;
      // A WAL frame is a 24-byte header and a page, written with one call each; the checkpointer
      // is not running, so the WAL only grows.
      const page = 4096;
      const frames = (statSync(`${path}-wal`).size - walBefore) / (24 + page);
      expect(frames).toBeGreaterThan(50);
      // A statement journal past 64 KiB went to an anonymous file in /var/tmp: one more write per
      // page each insert statement changed (~4 times the frames' calls for a batch like this).
      expect(calls).toBeLessThanOrEqual(2 * frames + 100);
    } finally {
      await store.close();
    }
  });
});
