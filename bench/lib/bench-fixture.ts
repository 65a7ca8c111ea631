// A throw-away SQLite database with one org (ample credit), one key with a limit high enough
// for load (the limiter still runs on every request), and the bench model on `upstreamUrl`.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../server/db/database.ts';
import { migrate } from '../../server/db/migrate.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { checkProtocol } from '../../gateway/upstreams/protocols/index.ts';
import type { RequestSpec } from './load.ts';

export async function benchFixture(upstreamUrl: string) {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-'));
  const databaseUrl = `file:${join(dataDir, 'svc.db')}`;
  await migrate(databaseUrl);
  const db = openDatabase(databaseUrl);
  const org = await createOrg(db, { name: 'bench', creditsMicros: 1_000_000_000_000n });
  const key = await createApiKey(db.prisma, { orgId: org.id, name: 'bench', rateLimitRpm: 1_000_000_000 });
  await upsertModel(db.prisma, checkProtocol, {
    id: 'bench-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: 150_000n, outputPicoPerToken: 600_000n },
    upstream: { url: upstreamUrl, protocol: 'openai' },
  });
  await db.close();
  // keyId and orgId: for the pass-through core (BENCH_CORE=off), which admits every request as this key.
  return { dataDir, databaseUrl, key: key.key, keyId: key.id, orgId: org.id };
}

export const CHAT_BODY = JSON.stringify({ model: 'bench-llm', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 });

/** The non-streaming chat request every LLM-path bench sends, as the fixture's key. */
export function chatSpec(key: string): RequestSpec & { method: 'POST' } {
  return { path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: CHAT_BODY };
}
