// One org's streaming contexts cannot keep the others off a local TTS engine: the engine's pool
// (SVC_TTS_MAX_ENGINES, one process here) gives each org at most half of its waiting line, and
// the orgs waiting take turns for each freed process (gateway/upstreams/slots.ts). A file of its
// own: the pool's size is the process's, set by the gateway this file starts.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { post, sseData, startTtsGateway, ttsBody } from '../../test/support/tts-routes.ts';
import { openTtsSocket, type TtsSocket } from '../../test/support/tts-socket.ts';

let h: GatewayHarness;
let floodKey = '';

beforeAll(async () => {
  h = await startTtsGateway({ env: { SVC_TTS_MAX_ENGINES: '1' } });
  const org = await createOrg(h.testDb.db, { name: 'flood', creditsMicros: 100_000_000n });
  floodKey = (await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'flood' })).key;
}, 60_000);

afterAll(async () => {
  await h?.close();
});

/** Several sentences: flite speaks them in more than one run, so each context comes back to the line. */
const LONG = Array.from({ length: 8 }, (_, i) => `This is sentence number ${i + 1} of a long answer that keeps the engine busy.`).join(' ');

describe('the local TTS engine shared between orgs', () => {
  it('one org floods it with socket contexts (past its half of the line: 503 for its own); another org still gets audio', async () => {
    const sockets: TtsSocket[] = [];
    try {
      // 5 sockets x 16 contexts: more than the whole line (64) and the engine could hold.
      for (let i = 0; i < 5; i++) {
        const s = await openTtsSocket(h, { query: { api_key: floodKey } });
        sockets.push(s);
        for (let c = 0; c < 16; c++) {
          s.send({
            context_id: `flood-${i}-${c}`,
            model_id: 'local-flite',
            voice: { mode: 'id', id: 'flite-slt' },
            output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 },
            transcript: LONG,
            continue: false,
          });
        }
      }
      // The flood is past its share: its contexts beyond it are refused (at least those beyond the whole line), the rest wait their turn.
      const refusals = () => sockets.flatMap((s) => s.events.filter((e) => e.type === 'error'));
      await vi.waitFor(() => expect(refusals().length).toBeGreaterThanOrEqual(80 - 1 - 64), { timeout: 30_000, interval: 10 });
      const refused = refusals()[0]!;
      expect(refused).toMatchObject({ type: 'error', status_code: 503, code: 'temporarily_unavailable' });
      expect(refused.message).toMatch(/as many requests waiting for speech engine processes as one organization may \(32\)/);

      // Another org, while the flood goes on: a place in the line, and the next freed engine is its turn.
      const res = await post(h, '/tts/sse', ttsBody({ output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 } }));
      expect(res.status, await res.clone().text()).toBe(200);
      const events = sseData(await res.text()).map((d) => JSON.parse(d) as { type: string; data?: string });
      expect(events.at(-1)).toMatchObject({ type: 'done' });
      const audio = Buffer.concat(events.filter((e) => e.type === 'chunk').map((e) => Buffer.from(e.data!, 'base64')));
      expect(audio.length).toBeGreaterThan(0);
      // The flood was still going on: some of its contexts had not finished.
      const finished = sockets.flatMap((s) => s.events.filter((e) => e.type === 'done' || e.type === 'error')).length;
      expect(finished).toBeLessThan(80);
    } finally {
      for (const s of sockets) s.ws.close();
      await Promise.all(sockets.map((s) => s.closed));
    }
  }, 120_000);
});
