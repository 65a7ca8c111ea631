// The preview worker's bounds on a real database (SQLite; PostgreSQL with TEST_DB=postgresql),
// with a stand-in for the engine that speaks (the local engines speak in
// gateway/routes/voices.previews.test.ts): never more previews at once than its concurrency,
// every wanted preview made in the end, and a stop cuts the running ones short without losing them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../server/db/ids.ts';
import type { ReadyProfile, VoiceClip } from '../../server/services/voices/voice-deps.ts';
import { until } from '../../test/support/poll.ts';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database.ts';
import { PreviewWorker } from './preview-worker.ts';

const VOICES = 7;
const quiet = { warn: () => {}, info: () => {} };

let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase();
  const { prisma } = t.db;
  await prisma.model.create({ data: { id: 'tts-a', modality: 'tts' } });
  for (let i = 0; i < VOICES; i++) {
    const id = `voice-${i}`;
    await prisma.voice.create({ data: { id, orgId: null, kind: 'library', name: `V${i}`, tags: [], modelFamily: 'tts-a' } });
    await prisma.voiceProfile.create({ data: { id: newId('vpr'), voiceId: id, modelId: 'tts-a', upstreamId: `engine-${i}`, status: 'ready' } });
  }
});
afterAll(async () => {
  await t?.drop();
});

/** An engine whose every synthesis waits until the test lets it finish; it counts how many run at once. */
function heldEngine() {
  const waiting: Array<() => void> = [];
  const state = { running: 0, most: 0, spoken: 0 };
  return {
    state,
    waiting,
    engines: {
      async speak(profiles: ReadyProfile[], _text: string, _language: string, signal: AbortSignal): Promise<VoiceClip | null> {
        state.running++;
        state.most = Math.max(state.most, state.running);
        try {
          await new Promise<void>((resolve, reject) => {
            waiting.push(resolve);
            signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
          });
          state.spoken++;
          return { samples: new Float32Array(4), sampleRate: 16_000, durationMs: 1_000, wav: Buffer.from(`RIFF ${profiles[0]!.upstreamId}`) };
        } finally {
          state.running--;
        }
      },
    },
  };
}

describe('PreviewWorker', () => {
  it('makes at most `concurrency` previews at once, and every wanted one in the end', async () => {
    const engine = heldEngine();
    const worker = new PreviewWorker({ prisma: t.db.prisma, dataDir: t.dataDir, engines: engine.engines, concurrency: 2, pollMs: 20, log: quiet });
    worker.start();
    try {
      for (let finished = 0; finished < VOICES; finished++) {
        // Two are being made (fewer at the end); no third starts while they wait.
        await until('two previews waiting for the engine', () => engine.waiting.length === Math.min(2, VOICES - finished));
        expect(worker.running).toBeLessThanOrEqual(2);
        engine.waiting.shift()!();
      }
      await until('every preview ready', async () => (await t.db.prisma.voicePreview.count({ where: { status: 'ready' } })) === VOICES);
      expect(engine.state).toMatchObject({ most: 2, spoken: VOICES });
    } finally {
      await worker.stop();
    }
  });

  it('a stop cuts the previews being made short and records them to be made again; nothing stays locked', async () => {
    await t.db.prisma.voiceProfile.updateMany({ data: { upstreamId: 'engine-changed' } });
    const engine = heldEngine();
    const worker = new PreviewWorker({ prisma: t.db.prisma, dataDir: t.dataDir, engines: engine.engines, concurrency: 3, pollMs: 20, log: quiet });
    worker.start();
    await until('three previews waiting for the engine', () => engine.waiting.length === 3);
    await worker.stop();
    expect(engine.state.running).toBe(0);
    const rows = await t.db.prisma.voicePreview.findMany();
    expect(rows.filter((r) => r.status === 'failed')).toHaveLength(3);
    expect(rows.filter((r) => r.status === 'pending')).toHaveLength(VOICES - 3);
    expect(rows.every((r) => r.lockedBy === null && r.blobId === null)).toBe(true);
  });
});
