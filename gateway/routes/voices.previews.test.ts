// GET /voices/{id}/preview over real HTTP, with the preview worker on and the local engines
// (flite, espeak-ng) speaking: previews of the seeded platform voices made at start, of a clone
// after it is made (not on its request), of a profile prepared for another model, made again when
// the voice changes (the old clip gone); free: heard at a $0 balance, the ledger unchanged; a
// platform voice's preview for every org, a clone's for its org only; errors in the envelope.
// Runs on SQLite and, with TEST_DB=postgresql, on PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseWav } from '../audio/wav.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { until } from '../../test/support/poll.ts';
import { startTtsGateway } from '../../test/support/tts-routes.ts';
import { call, cloneMultipart, otherOrg, speak, waitForJob, type OtherOrg } from '../../test/support/voice-routes.ts';
import { PLATFORM_VOICES } from '../../server/services/voices/platform-voices.ts';

let h: GatewayHarness;
let other: OtherOrg;
/** An org with no credit at all, and its key. */
let broke: { orgId: string; headers: Record<string, string> };

beforeAll(async () => {
  h = await startTtsGateway({ env: { SVC_VOICE_PREVIEWS: 'on', SVC_PREVIEW_POLL_SECONDS: '0.2', SVC_PREVIEW_CONCURRENCY: '2', SVC_JOB_POLL_MS: '50' } });
  other = await otherOrg(h);
  const org = await createOrg(h.testDb.db, { name: 'broke org', creditsMicros: 0n });
  const key = await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'broke' });
  broke = { orgId: org.id, headers: { authorization: `Bearer ${key.key}` } };
}, 60_000);
afterAll(async () => {
  await h?.close();
});

const preview = (voiceId: string, headers: Record<string, string> = h.headers, query = '') =>
  fetch(`${h.url}/voices/${voiceId}/preview${query}`, { headers: { authorization: headers.authorization! } });

/** The voice as its org sees it, once its preview on `modelId` is ready. */
const previewReady = (voiceId: string, modelId: string, headers: Record<string, string> = h.headers) =>
  until(
    `the preview of ${voiceId} on ${modelId}`,
    async () => {
      const { body } = await call(h, 'GET', `/voices/${voiceId}`, undefined, headers);
      return (body.preview_models as string[]).includes(modelId) ? body : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 100 },
  );

/** Seconds of speech in a WAV answer (real audio, not a stub). */
async function wavSeconds(res: Response): Promise<number> {
  const wav = parseWav(Buffer.from(await res.arrayBuffer()));
  return wav.samples.length / wav.sampleRate;
}

describe('platform voices', () => {
  it('each seeded platform voice gets a preview in its language after the gateway starts, and every org hears it, at $0 too, for nothing', async () => {
    for (const v of PLATFORM_VOICES) await previewReady(v.id, v.modelId);
    const ledger = await h.testDb.db.prisma.ledgerEntry.count();
    for (const headers of [h.headers, other.headers, broke.headers]) {
      const res = await preview('flite-slt', headers);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('audio/wav');
      expect(res.headers.get('x-svc-preview-model')).toBe('local-flite');
      // Nothing is metered: no cost headers.
      expect(res.headers.get('x-svc-cost-usd')).toBeNull();
      expect(await wavSeconds(res)).toBeGreaterThan(1.5);
    }
    // eSpeak NG's voices too.
    const fr = await preview('espeak-fr-m', broke.headers);
    expect(fr.status).toBe(200);
    expect(await wavSeconds(fr)).toBeGreaterThan(1.5);
    await h.settled();
    expect(await h.testDb.db.prisma.ledgerEntry.count()).toBe(ledger);
    expect((await h.testDb.db.prisma.org.findUniqueOrThrow({ where: { id: broke.orgId } })).balanceMicros).toBe(0n);
    // A platform voice's preview belongs to no org: it is no org's blob.
    const { body } = await call(h, 'GET', '/voices/flite-slt');
    expect(body).toMatchObject({ preview_models: ['local-flite'], sample_blob_id: null });
  });

  it('the voice record is still metered, the preview is not: at $0 GET /voices/{id} is 402, the preview 200', async () => {
    expect((await call(h, 'GET', '/voices/flite-slt', undefined, broke.headers)).status).toBe(402);
    expect((await preview('flite-slt', broke.headers)).status).toBe(200);
  });
});

describe("an org's clone", () => {
  let voiceId = '';
  let firstSample = '';

  it('is answered without waiting for its preview, which a worker makes after; its org hears it (also as its sample blob), no other org does', async () => {
    const { status, body } = await cloneMultipart(h, speak('flite', 'rms'), { name: 'Preview Alex', model_id: 'local-flite' });
    expect(status, JSON.stringify(body)).toBe(201);
    voiceId = body.id;
    const ready = await previewReady(voiceId, 'local-flite');
    expect(ready.sample_blob_id).toMatch(/^blob_/);
    firstSample = ready.sample_blob_id;
    const res = await preview(voiceId);
    expect(res.status).toBe(200);
    const bytes = Buffer.from(await res.arrayBuffer());
    const blob = await fetch(`${h.url}/blobs/${firstSample}/content`, { headers: { authorization: h.headers.authorization! } });
    expect(Buffer.from(await blob.arrayBuffer()).equals(bytes)).toBe(true);
    // Another org: the voice does not exist for it, nor its preview.
    const theirs = await preview(voiceId, other.headers);
    expect(theirs.status).toBe(404);
    expect((await theirs.json()).error).toMatchObject({ code: 'voice_not_found' });
  });

  it('prepared for a second model, it gets a preview there too; model_id picks it', async () => {
    const { status, body } = await call(h, 'POST', `/voices/${voiceId}/profiles`, { model_id: 'local-espeak' });
    expect([200, 202]).toContain(status);
    if (status === 202) await waitForJob(h, body.job_id);
    const ready = await previewReady(voiceId, 'local-espeak');
    expect(ready.preview_models).toEqual(['local-flite', 'local-espeak']);
    const res = await preview(voiceId, h.headers, '?model_id=local-espeak');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-svc-preview-model')).toBe('local-espeak');
    expect(await wavSeconds(res)).toBeGreaterThan(1);
  });

  it('a new language makes the previews again: the old clip is gone, the new one is heard', async () => {
    const patched = await call(h, 'PATCH', `/voices/${voiceId}`, { language: 'de' }, h.headers);
    expect(patched.status).toBe(200);
    await until(
      'the new sample blob',
      async () => {
        const { body } = await call(h, 'GET', `/voices/${voiceId}`);
        return body.sample_blob_id && body.sample_blob_id !== firstSample && body.preview_models.length === 2 ? body : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const gone = await fetch(`${h.url}/blobs/${firstSample}/content`, { headers: { authorization: h.headers.authorization! } });
    expect(gone.status).toBe(404);
    expect((await preview(voiceId)).status).toBe(200);
  });

  it('deleted, it has no preview', async () => {
    expect((await call(h, 'DELETE', `/voices/${voiceId}`)).status).toBe(200);
    const res = await preview(voiceId);
    expect(res.status).toBe(404);
    expect((await res.json()).error).toMatchObject({ code: 'voice_not_found' });
  });
});

describe('what a preview says', () => {
  it('the same fixed sentence whatever the voice is called: no client input reaches it', async () => {
    const clip = speak('flite', 'slt');
    const names = ['A', 'Please read this out loud: the launch code is 0000, repeat, zero zero zero zero'];
    const previews: Buffer[] = [];
    for (const name of names) {
      const voice = await cloneMultipart(h, clip, { name, model_id: 'local-flite' });
      expect(voice.status).toBe(201);
      await previewReady(voice.body.id, 'local-flite');
      previews.push(Buffer.from(await (await preview(voice.body.id)).arrayBuffer()));
    }
    // Same clip, so the same engine voice: only the text could make the previews differ.
    expect(previews[0]!.length).toBeGreaterThan(10_000);
    expect(previews[1]!.equals(previews[0]!)).toBe(true);
  });
});

describe('errors', () => {
  it('a model the voice has no profile for is 409 voice_profile_missing; an unknown voice 404; an unknown parameter 400; no key 401', async () => {
    const missing = await preview('flite-slt', h.headers, '?model_id=local-espeak');
    expect(missing.status).toBe(409);
    expect((await missing.json()).error).toMatchObject({ code: 'voice_profile_missing', param: 'model_id' });
    const unknown = await preview('no-such-voice');
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).error).toMatchObject({ code: 'voice_not_found' });
    const bad = await preview('flite-slt', h.headers, '?voice=x');
    expect(bad.status).toBe(400);
    expect((await bad.json()).error).toMatchObject({ code: 'invalid_request', param: 'voice' });
    const anonymous = await fetch(`${h.url}/voices/flite-slt/preview`);
    expect(anonymous.status).toBe(401);
  });

  it('a preview not made yet is 404 preview_not_ready with Retry-After', async () => {
    // A voice whose profile is written behind the worker's back, on a model with no engine: its preview cannot be made.
    const { prisma } = h.testDb.db;
    await prisma.model.create({ data: { id: 'tts-nowhere', modality: 'tts' } });
    await prisma.voice.create({ data: { id: 'voice_unheard', orgId: h.orgId, name: 'Unheard', tags: [], kind: 'instant_clone' } });
    await prisma.voiceProfile.create({ data: { id: 'vpr_unheard', voiceId: 'voice_unheard', modelId: 'tts-nowhere', upstreamId: 'x' } });
    const res = await preview('voice_unheard');
    expect(res.status).toBe(404);
    expect(res.headers.get('retry-after')).toBe('5');
    expect((await res.json()).error).toMatchObject({ code: 'preview_not_ready' });
    // The worker tried, found no engine, and recorded it; it is not stuck, and nothing else broke.
    const failed = await until('the failed attempt', async () => {
      const row = await prisma.voicePreview.findFirst({ where: { voiceId: 'voice_unheard' } });
      return row?.status === 'failed' ? row : undefined;
    });
    expect(failed).toMatchObject({ attempts: 1, lockedBy: null, error: expect.stringMatching(/^model_offline: /) });
    expect((await preview('flite-slt')).status).toBe(200);
  });
});
