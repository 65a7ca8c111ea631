// Cloning through a real-cloning engine's protocol (an OpenAI-compatible speech server with
// POST /audio/voices), against a scripted server: the clip reaches the engine, the engine's
// voice id becomes the profile and is what synthesis sends; an engine that is offline gives
// 202 and a job that ends `failed` with model_offline; an expired profile is refused by TTS
// (409) and re-prepared by POST /voices/{id}/profiles; deleting the voice deletes the engine's
// copy (DELETE /audio/voices/{id}, developers.openai.com/api/reference/resources/audio/subresources/voices/methods/delete).
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { deadUrl, expectError, pcmTone, post, startTtsGateway, ttsBody } from '../../test/support/tts-routes.ts';
import { until } from '../../test/support/poll.ts';
import { call, cloneMultipart, speak, waitForJob } from '../../test/support/voice-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const XTTS_KEY = 'sk_xtts_clone_secret_3f1d';
process.env.XTTS_CLONE_KEY = XTTS_KEY;
let h: GatewayHarness;
let server: Server;
let clip: Buffer;
const clones: { contentType: string; bytes: number; body: string }[] = [];
const speechVoices: string[] = [];
const deletes: { path: string; authorization: string | undefined }[] = [];
let nextVoice = 0;

const read = (req: IncomingMessage) =>
  new Promise<Buffer>((resolve) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts)));
  });

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const body = await read(req);
    if (req.url === '/v1/models') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[]}');
    if (req.url === '/v1/audio/voices' && req.method === 'POST') {
      clones.push({ contentType: req.headers['content-type'] ?? '', bytes: body.length, body: body.toString('latin1') });
      return res
        .writeHead(201, { 'content-type': 'application/json' })
        .end(JSON.stringify({ id: `spk_${++nextVoice}`, expires_at: Math.floor(Date.now() / 1000) + 3600 }));
    }
    if (req.url?.startsWith('/v1/audio/voices/') && req.method === 'DELETE') {
      deletes.push({ path: req.url, authorization: req.headers.authorization });
      const id = decodeURIComponent(req.url.slice('/v1/audio/voices/'.length));
      return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id, deleted: true, object: 'audio.voice.deleted' }));
    }
    if (req.url === '/v1/audio/speech') {
      speechVoices.push((JSON.parse(body.toString()) as { voice: string }).voice);
      return res.writeHead(200, { 'content-type': 'audio/pcm' }).end(pcmTone(0.5));
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  h = await startTtsGateway({ env: { SVC_JOB_POLL_MS: '50', SVC_JOB_OFFLINE_GIVE_UP_SECONDS: '1' } });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: 'xtts',
    modality: 'tts',
    prices: { picoPerChar: 1_000_000n },
    upstream: { url, protocol: 'openai', apiKeyEnv: 'XTTS_CLONE_KEY' },
  });
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: 'xtts-offline',
    modality: 'tts',
    prices: { picoPerChar: 1_000_000n },
    upstream: { url: await deadUrl(), protocol: 'openai' },
  });
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
  clip = speak('flite', 'slt');
}, 60_000);

afterAll(async () => {
  await h?.close();
  server?.close();
  delete process.env.XTTS_CLONE_KEY;
});

describe('cloning on an OpenAI-compatible cloning server', () => {
  it('sends the clip to the engine and synthesizes with the engine voice id', async () => {
    const r = await cloneMultipart(h, clip, { name: 'Engine clone', model_id: 'xtts', transcript: 'hello' });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(clones.at(-1)!.contentType).toMatch(/^multipart\/form-data/);
    expect(clones.at(-1)!.body).toContain('name="audio_sample"');
    expect(clones.at(-1)!.body).toContain('RIFF');
    expect(clones.at(-1)!.bytes).toBeGreaterThan(clip.length);
    const profile = r.body.profiles[0];
    expect(profile).toMatchObject({ model_id: 'xtts', upstream_id: 'spk_1', status: 'ready' });
    expect(Date.parse(profile.expires_at)).toBeGreaterThan(Date.now());
    const tts = await post(h, '/tts/bytes', ttsBody({ model_id: 'xtts', voice: { mode: 'id', id: r.body.id } }));
    expect(tts.status).toBe(200);
    expect(speechVoices.at(-1)).toBe('spk_1');
  });

  it('re-prepares an expired profile: TTS says 409 until POST /voices/{id}/profiles has run', async () => {
    const r = await cloneMultipart(h, clip, { name: 'Expiring', model_id: 'xtts' });
    await h.testDb.db.prisma.voiceProfile.updateMany({ where: { voiceId: r.body.id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    await expectError(await post(h, '/tts/bytes', ttsBody({ model_id: 'xtts', voice: { mode: 'id', id: r.body.id } })), {
      status: 409,
      code: 'voice_profile_missing',
      param: 'voice.id',
    });
    const prep = await call(h, 'POST', `/voices/${r.body.id}/profiles`, { model_id: 'xtts' });
    expect(prep.status).toBe(202);
    const job = await waitForJob(h, prep.body.job_id);
    expect(job.status).toBe('succeeded');
    expect(job.result.profile.upstream_id).not.toBe(r.body.profiles[0].upstream_id);
    expect((await post(h, '/tts/bytes', ttsBody({ model_id: 'xtts', voice: { mode: 'id', id: r.body.id } }))).status).toBe(200);
    expect(speechVoices.at(-1)).toBe(job.result.profile.upstream_id);
  });

  it('answers 202 when the cloning engine is offline; the job fails with model_offline', async () => {
    const r = await cloneMultipart(h, clip, { name: 'Offline', model_id: 'xtts-offline' });
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ job_id: expect.any(String), voice_id: expect.any(String), status: 'queued' });
    const voice = (await call(h, 'GET', `/voices/${r.body.voice_id}`)).body;
    expect(voice.profiles).toEqual([expect.objectContaining({ model_id: 'xtts-offline', status: 'queued' })]);
    const job = await waitForJob(h, r.body.job_id);
    expect(job).toMatchObject({ status: 'failed', error: 'model_offline', kind: 'instant_clone' });
    expect(job.result).toBeUndefined();
    expect((await call(h, 'GET', `/voices/${r.body.voice_id}`)).body.profiles[0].status).toBe('failed');
  });

  it('deleting the voice deletes the engine\u2019s copy: DELETE /audio/voices/{engine id} with the engine key', async () => {
    const r = await cloneMultipart(h, clip, { name: 'Short-lived', model_id: 'xtts' });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const upstreamId = r.body.profiles[0].upstream_id as string;
    const deleted = await call(h, 'DELETE', `/voices/${r.body.id}`);
    expect(deleted).toMatchObject({ status: 200, body: { id: r.body.id, deleted: true } });
    await until('the engine copy deleted', () => deletes.some((d) => d.path === `/v1/audio/voices/${upstreamId}`));
    expect(deletes.find((d) => d.path === `/v1/audio/voices/${upstreamId}`)!.authorization).toBe(`Bearer ${XTTS_KEY}`);
  });
});
