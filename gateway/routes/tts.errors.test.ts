// Route tests of the errors of POST /tts/sse, POST /tts/bytes and POST /v1/audio/speech over
// real HTTP (real gateway runtime, throw-away SQLite or PostgreSQL database): every code the
// routes answer with, with its exact status, code and param, and no debit for any of them.
// Upstream failures come from a scripted OpenAI-compatible speech server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../server/db/ids.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { A_WINDOW_START, manualClock } from '../../test/support/manual-clock.ts';
import {
  FLITE_PRICE,
  FOX,
  billingOf,
  checkTtsEvents,
  codePoints,
  costOf,
  deadUrl,
  decodeRaw,
  expectError,
  expectNotBilled,
  pcmTone,
  post,
  requestId,
  sseData,
  startSpeechServer,
  startTtsGateway,
  ttsBody,
  usd,
  type SpeechServer,
} from '../../test/support/tts-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

let h: GatewayHarness; // default 300 s deadline
let hd: GatewayHarness; // SVC_UPSTREAM_TIMEOUT_SECONDS=1
const servers: SpeechServer[] = [];

const ids = {
  orgB: '',
  keyB: '',
  zeroKey: '',
  revokedKey: '',
  voiceB: '', // org B's own voice, ready for local-flite
  dictB: '', // org B's dictionary
  deletedVoice: '', // org A's, soft-deleted
  deletedDict: '', // org A's, soft-deleted
  queuedVoice: '', // org A's, profile for local-flite still queued
  expiredVoice: '', // org A's, profile for local-flite expired
  longDict: '', // x -> 8 letters: 'x ' x 2500 expands to 22,500 characters
  edgeDict: '', // x -> 7 letters: 'x ' x 2500 expands to exactly 20,000 characters
};

const prisma = (g: GatewayHarness = h) => g.testDb.db.prisma;

async function voice(
  g: GatewayHarness,
  orgId: string | null,
  profile: { modelId: string; upstreamId: string; status?: 'ready' | 'queued' | 'failed'; expiresAt?: Date } | null,
  extra: { deletedAt?: Date } = {},
) {
  const id = newId('voice');
  await prisma(g).voice.create({
    data: {
      id,
      orgId,
      name: `voice ${id}`,
      tags: [],
      ...extra,
      ...(profile && {
        profiles: {
          create: {
            id: newId('vpr'),
            modelId: profile.modelId,
            upstreamId: profile.upstreamId,
            status: profile.status ?? 'ready',
            expiresAt: profile.expiresAt ?? null,
          },
        },
      }),
    },
  });
  return id;
}

async function dict(g: GatewayHarness, orgId: string, entries: { grapheme: string; alias: string }[], extra: { deletedAt?: Date } = {}) {
  const id = newId('pdict');
  await prisma(g).pronunciationDict.create({
    data: {
      id,
      orgId,
      name: `dict ${id}`,
      ...extra,
      entries: { create: entries.map((e, position) => ({ id: newId('pent'), position, grapheme: e.grapheme, alias: e.alias })) },
    },
  });
  return id;
}

/** A tts model served by a scripted speech server, with a ready org-A voice for it. */
async function scriptedModel(g: GatewayHarness, server: SpeechServer, modelId: string) {
  await upsertModel(prisma(g), checkProtocol, {
    id: modelId,
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: server.baseUrl, protocol: 'openai', upstreamModel: `${modelId}-upstream` },
  });
  const voiceId = await voice(g, g.orgId, { modelId, upstreamId: 'alloy' });
  await g.runtime.ctx.registry.refresh();
  return voiceId;
}

let scripted: { server: SpeechServer; voiceId: string }; // answers 24 kHz PCM
let failing: { server: SpeechServer; voiceId: string }; // answers 500
let hanging: { server: SpeechServer; voiceId: string }; // on hd: never answers
let dying: { server: SpeechServer; voiceId: string }; // part of the audio, then drops the connection
let stalling: { server: SpeechServer; voiceId: string }; // on hd: part of the audio, then silence
let offlineVoice = '';
// Rate-limit windows on h read a clock held 15 s into a minute: a one-request-a-minute key is
// refused with 45 s to wait whenever the test runs.
const clock = manualClock(A_WINDOW_START + 15_000);

beforeAll(async () => {
  [h, hd] = await Promise.all([startTtsGateway({ clock }), startTtsGateway({ env: { SVC_UPSTREAM_TIMEOUT_SECONDS: '1' } })]);
  const db = h.testDb.db;

  const orgB = await createOrg(db, { name: 'org B', creditsMicros: 10_000_000n });
  ids.orgB = orgB.id;
  ids.keyB = (await createApiKey(db.prisma, { orgId: orgB.id, name: 'b', rateLimitRpm: 100_000 })).key;
  const zero = await createOrg(db, { name: 'broke org' });
  ids.zeroKey = (await createApiKey(db.prisma, { orgId: zero.id, name: 'zero', rateLimitRpm: 100_000 })).key;
  const revoked = await createApiKey(db.prisma, { orgId: h.orgId, name: 'revoked', rateLimitRpm: 100_000 });
  await revokeApiKey(db.prisma, { id: revoked.id });
  ids.revokedKey = revoked.key;

  ids.voiceB = await voice(h, orgB.id, { modelId: 'local-flite', upstreamId: 'rms' });
  ids.dictB = await dict(h, orgB.id, [{ grapheme: 'fox', alias: 'wolf' }]);
  ids.deletedVoice = await voice(h, h.orgId, { modelId: 'local-flite', upstreamId: 'rms' }, { deletedAt: new Date() });
  ids.deletedDict = await dict(h, h.orgId, [{ grapheme: 'fox', alias: 'wolf' }], { deletedAt: new Date() });
  ids.queuedVoice = await voice(h, h.orgId, { modelId: 'local-flite', upstreamId: 'rms', status: 'queued' });
  ids.expiredVoice = await voice(h, h.orgId, { modelId: 'local-flite', upstreamId: 'rms', expiresAt: new Date(Date.now() - 60_000) });
  ids.longDict = await dict(h, h.orgId, [{ grapheme: 'x', alias: 'y'.repeat(8) }]);
  ids.edgeDict = await dict(h, h.orgId, [{ grapheme: 'x', alias: 'y'.repeat(7) }]);

  // An llm model (wrong modality) and a disabled tts model.
  await upsertModel(db.prisma, checkProtocol, { id: 'some-llm', modality: 'llm', upstream: { url: await deadUrl(), protocol: 'openai' } });
  await upsertModel(db.prisma, checkProtocol, { id: 'disabled-tts', modality: 'tts', status: 'disabled', upstream: { url: 'local:flite', protocol: 'flite' } });

  const start = async (b: Parameters<typeof startSpeechServer>[0]) => {
    const s = await startSpeechServer(b);
    servers.push(s);
    return s;
  };
  const ok = await start({ kind: 'pcm', pcm: pcmTone(1.5) });
  scripted = { server: ok, voiceId: await scriptedModel(h, ok, 'scripted-tts') };
  const bad = await start({ kind: 'error', status: 500, body: { error: { message: 'CUDA out of memory', type: 'server_error' } } });
  failing = { server: bad, voiceId: await scriptedModel(h, bad, 'failing-tts') };
  const hang = await start({ kind: 'hang' });
  hanging = { server: hang, voiceId: await scriptedModel(hd, hang, 'hanging-tts') };
  const die = await start({ kind: 'pcm', pcm: pcmTone(3), stopAfterBytes: 48_000, then: 'die' });
  dying = { server: die, voiceId: await scriptedModel(h, die, 'dying-tts') };
  const stall = await start({ kind: 'pcm', pcm: pcmTone(3), stopAfterBytes: 48_000, then: 'hang' });
  stalling = { server: stall, voiceId: await scriptedModel(hd, stall, 'stalling-tts') };

  // model_offline: the only upstream is down after a health check.
  await upsertModel(db.prisma, checkProtocol, { id: 'offline-tts', modality: 'tts', upstream: { url: await deadUrl(), protocol: 'openai' } });
  offlineVoice = await voice(h, h.orgId, { modelId: 'offline-tts', upstreamId: 'alloy' });
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
}, 120_000);

/** A fresh tts model whose upstream refuses connections and was never health-checked (unknown counts as usable). */
async function unreachableModel(): Promise<{ modelId: string; voiceId: string }> {
  const modelId = newId('unreachable').replace('_', '-');
  await upsertModel(prisma(), checkProtocol, { id: modelId, modality: 'tts', upstream: { url: await deadUrl(), protocol: 'openai' } });
  const voiceId = await voice(h, h.orgId, { modelId, upstreamId: 'alloy' });
  await h.runtime.ctx.registry.refresh();
  return { modelId, voiceId };
}

afterAll(async () => {
  await Promise.allSettled(servers.map((s) => s.close()));
  await Promise.allSettled([h?.close(), hd?.close()]);
});

type Expected = { status: number; code: string; param: string | null; type?: string };
const E = (status: number, code: string, param: string | null = null, type?: string): Expected => ({ status, code, param, type });

/** Sends, checks the exact error, and that nothing was debited. */
async function rejects(path: string, body: unknown, expected: Expected, options: { headers?: Record<string, string>; g?: GatewayHarness } = {}) {
  const g = options.g ?? h;
  const id = requestId('err');
  const before = await g.balanceMicros();
  const res = await post(g, path, body, { requestId: id, headers: options.headers });
  const err = await expectError(res, expected);
  expect(res.headers.get('x-svc-request-cost-usd')).toBeNull();
  await expectNotBilled(g, id);
  expect(await g.balanceMicros()).toBe(before);
  return { res, err };
}

const NATIVE = ['/tts/sse', '/tts/bytes'] as const;
const raw = (container: string, extra: object = {}) => ({ container, sample_rate: 16000, ...extra });

describe.each(NATIVE)('%s: request errors', (path) => {
  const body = (over: object = {}) => ttsBody({ output_format: raw('raw', { encoding: 'pcm_s16le' }), ...over });

  it.each([
    ['not JSON', '{"model_id": "local-flite", ', E(400, 'invalid_json')],
    ['a JSON array', JSON.stringify([ttsBody()]), E(400, 'invalid_json')],
    ['a JSON string', '"hello"', E(400, 'invalid_json')],
    ['JSON null', 'null', E(400, 'invalid_json')],
    ['an empty body', '', E(400, 'invalid_json')],
  ])('%s -> invalid_json', async (_name, payload, expected) => {
    await rejects(path, payload, expected);
  });

  it.each([
    ['no key', { authorization: '' }, E(401, 'invalid_api_key', null, 'invalid_request_error')],
    ['an unknown key', { authorization: `Bearer sk_svc_${'A'.repeat(43)}` }, E(401, 'invalid_api_key', null, 'invalid_request_error')],
    ['not a Bearer key', { authorization: 'Basic dXNlcjpwYXNz' }, E(401, 'invalid_api_key', null, 'invalid_request_error')],
    ['a revoked key', () => ({ authorization: `Bearer ${ids.revokedKey}` }), E(401, 'api_key_disabled', null, 'invalid_request_error')],
    ['a key of an org with a zero balance', () => ({ authorization: `Bearer ${ids.zeroKey}` }), E(402, 'insufficient_quota', null, 'insufficient_quota')],
  ])('%s -> %j', async (_name, headers, expected) => {
    const hdrs = typeof headers === 'function' ? headers() : headers;
    const res = await post(h, path, body(), { headers: hdrs.authorization === '' ? { authorization: '' } : hdrs });
    await expectError(res, expected);
  });

  it.each([
    ['empty transcript', { transcript: '' }, E(400, 'invalid_request', 'transcript')],
    ['5001-character transcript', { transcript: 'a'.repeat(5001) }, E(400, 'invalid_request', 'transcript')],
    ['5001 code points of emoji (10,002 UTF-16 units)', { transcript: '\u{1F600}'.repeat(5001) }, E(400, 'invalid_request', 'transcript')],
    ['no transcript', { transcript: undefined }, E(400, 'invalid_request', 'transcript')],
    ['transcript not a string', { transcript: 42 }, E(400, 'invalid_request', 'transcript')],
    ['no model_id', { model_id: undefined }, E(400, 'invalid_request', 'model_id')],
    ['no voice', { voice: undefined }, E(400, 'invalid_request', 'voice')],
    ['voice.mode embedding', { voice: { mode: 'embedding', id: 'flite-slt' } }, E(400, 'invalid_request', 'voice.mode')],
    ['voice without id', { voice: { mode: 'id' } }, E(400, 'invalid_request', 'voice.id')],
    ['voice as an empty string', { voice: '' }, E(400, 'invalid_request', 'voice.id')],
    ['voice as a number', { voice: 42 }, E(400, 'invalid_request', 'voice')],
    ['language "english"', { language: 'english' }, E(400, 'invalid_request', 'language')],
    ['language "e"', { language: 'e' }, E(400, 'invalid_request', 'language')],
    ['language "en_US"', { language: 'en_US' }, E(400, 'invalid_request', 'language')],
    ['language "en-"', { language: 'en-' }, E(400, 'invalid_request', 'language')],
    ['empty pronunciation_dict_id', { pronunciation_dict_id: '' }, E(400, 'invalid_request', 'pronunciation_dict_id')],
    ['stream not a boolean', { stream: 'yes' }, E(400, 'invalid_request', 'stream')],
  ])('%s -> invalid_request', async (_name, over, expected) => {
    await rejects(path, body(over), expected);
  });

  it('a voice as {id} without mode (cartesia-js 4 sends it) is the voice with that id', async () => {
    const res = await post(h, path, body({ voice: { id: 'flite-slt' } }));
    expect(res.status).toBe(200);
    expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(0);
  });

  it.each([
    ['no output_format', { output_format: undefined }, E(400, 'invalid_output_format', 'output_format')],
    ['container ogg', { output_format: raw('ogg') }, E(400, 'invalid_output_format', 'output_format.container')],
    ['sample_rate 11025', { output_format: raw('wav', { sample_rate: 11025 }) }, E(400, 'invalid_output_format', 'output_format.sample_rate')],
    ['sample_rate "16000" (a string)', { output_format: raw('wav', { sample_rate: '16000' }) }, E(400, 'invalid_output_format', 'output_format.sample_rate')],
    ['no sample_rate', { output_format: { container: 'wav' } }, E(400, 'invalid_output_format', 'output_format.sample_rate')],
    ['encoding pcm_s24le', { output_format: raw('raw', { encoding: 'pcm_s24le' }) }, E(400, 'invalid_output_format', 'output_format.encoding')],
    ['bit_rate with wav', { output_format: raw('wav', { bit_rate: 128000 }) }, E(400, 'invalid_output_format', 'output_format.bit_rate')],
    ['bit_rate with raw', { output_format: raw('raw', { encoding: 'pcm_s16le', bit_rate: 64000 }) }, E(400, 'invalid_output_format', 'output_format.bit_rate')],
  ])('%s -> invalid_output_format', async (_name, over, expected) => {
    await rejects(path, body(over), expected);
  });

  it.each([
    ['speed 0.5', { generation_config: { speed: 0.5 } }, E(400, 'invalid_generation_config', 'generation_config.speed')],
    ['speed 1.6', { generation_config: { speed: 1.6 } }, E(400, 'invalid_generation_config', 'generation_config.speed')],
    ['volume 2.5', { generation_config: { volume: 2.5 } }, E(400, 'invalid_generation_config', 'generation_config.volume')],
    ['volume 0.4', { generation_config: { volume: 0.4 } }, E(400, 'invalid_generation_config', 'generation_config.volume')],
    ['speed "fast"', { generation_config: { speed: 'fast' } }, E(400, 'invalid_generation_config', 'generation_config.speed')],
  ])('%s -> invalid_generation_config', async (_name, over, expected) => {
    await rejects(path, body(over), expected);
  });

  it.each([
    ['an unknown model', { model_id: 'no-such-model' }, E(404, 'model_not_found', 'model_id')],
    ['an llm model', { model_id: 'some-llm' }, E(404, 'model_not_found', 'model_id')],
    ['a disabled tts model', { model_id: 'disabled-tts' }, E(404, 'model_not_found', 'model_id')],
    ['an unknown voice', { voice: { mode: 'id', id: 'voice_does_not_exist' } }, E(404, 'voice_not_found', 'voice.id')],
    ['another org\u2019s voice', () => ({ voice: { mode: 'id', id: ids.voiceB } }), E(404, 'voice_not_found', 'voice.id')],
    ['a deleted voice of the org', () => ({ voice: { mode: 'id', id: ids.deletedVoice } }), E(404, 'voice_not_found', 'voice.id')],
    ['an unknown dictionary', { pronunciation_dict_id: 'pdict_nope' }, E(404, 'dict_not_found', 'pronunciation_dict_id')],
    ['another org\u2019s dictionary', () => ({ pronunciation_dict_id: ids.dictB }), E(404, 'dict_not_found', 'pronunciation_dict_id')],
    ['a deleted dictionary of the org', () => ({ pronunciation_dict_id: ids.deletedDict }), E(404, 'dict_not_found', 'pronunciation_dict_id')],
    [
      'an espeak voice with the flite model',
      { voice: { mode: 'id', id: 'espeak-en-us-m' } },
      E(409, 'voice_profile_missing', 'voice.id', 'invalid_request_error'),
    ],
    [
      'a flite voice with the espeak model',
      { model_id: 'local-espeak', voice: { mode: 'id', id: 'flite-slt' } },
      E(409, 'voice_profile_missing', 'voice.id', 'invalid_request_error'),
    ],
    [
      'a voice whose profile is still queued',
      () => ({ voice: { mode: 'id', id: ids.queuedVoice } }),
      E(409, 'voice_profile_missing', 'voice.id', 'invalid_request_error'),
    ],
    [
      'a voice whose profile expired',
      () => ({ voice: { mode: 'id', id: ids.expiredVoice } }),
      E(409, 'voice_profile_missing', 'voice.id', 'invalid_request_error'),
    ],
    [
      'a model whose only upstream is down',
      () => ({ model_id: 'offline-tts', voice: { mode: 'id', id: offlineVoice } }),
      E(503, 'model_offline', null, 'api_error'),
    ],
    ['an upstream answering 500', () => ({ model_id: 'failing-tts', voice: { mode: 'id', id: failing.voiceId } }), E(502, 'upstream_error', null, 'api_error')],
  ])('%s -> %j', async (_name, over, expected) => {
    await rejects(path, body(typeof over === 'function' ? over() : over), expected);
  });

  it('a model whose upstream refuses connections -> 502 upstream_unavailable, then 503 model_offline (marked down)', async () => {
    const { modelId, voiceId } = await unreachableModel();
    await rejects(path, body({ model_id: modelId, voice: { mode: 'id', id: voiceId } }), E(502, 'upstream_unavailable', null, 'api_error'));
    await rejects(path, body({ model_id: modelId, voice: { mode: 'id', id: voiceId } }), E(503, 'model_offline', null, 'api_error'));
  });

  it('dictionary expansion past 20,000 characters -> transcript_too_long', async () => {
    const transcript = 'x '.repeat(2500); // 5,000 characters: at the submit cap, accepted as such
    expect(codePoints(transcript)).toBe(5000);
    await rejects(path, body({ transcript, pronunciation_dict_id: ids.longDict }), E(400, 'transcript_too_long', 'pronunciation_dict_id'));
  });

  it('an upstream that does not answer within the deadline -> 504 upstream_timeout', async () => {
    const before = hanging.server.received.length;
    await rejects(path, body({ model_id: 'hanging-tts', voice: { mode: 'id', id: hanging.voiceId } }), E(504, 'upstream_timeout', null, 'api_error'), {
      g: hd,
    });
    expect(hanging.server.received.length).toBe(before + 1);
  });
});

describe('boundaries that are accepted', () => {
  it('exactly 5000 code points (10,000 UTF-16 units) pass validation: the next check answers', async () => {
    // An unknown voice is checked after validation, so 404 proves the transcript was accepted.
    await rejects(
      '/tts/bytes',
      ttsBody({ transcript: '\u{1F600}'.repeat(5000), voice: { mode: 'id', id: 'voice_does_not_exist' } }),
      E(404, 'voice_not_found', 'voice.id'),
    );
  });

  it('expansion to exactly 20,000 characters is synthesised (the engine receives all of it)', async () => {
    const before = scripted.server.received.length;
    const res = await post(
      h,
      '/tts/bytes',
      ttsBody({ model_id: 'scripted-tts', voice: { mode: 'id', id: scripted.voiceId }, transcript: 'x '.repeat(2500), pronunciation_dict_id: ids.edgeDict }),
    );
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const sent = JSON.parse(scripted.server.received[before]!.body) as { input: string };
    expect(sent.input).toBe('yyyyyyy '.repeat(2500));
    expect(sent.input.length).toBe(20_000);
  });

  it('voice as a plain id string (what Cartesia\u2019s clients may send) is the same as {mode: "id", id}', async () => {
    const output_format = { container: 'raw', sample_rate: 16000, encoding: 'pcm_s16le' };
    const [a, b] = await Promise.all([
      post(h, '/tts/bytes', ttsBody({ voice: 'flite-rms', output_format })),
      post(h, '/tts/bytes', ttsBody({ voice: { mode: 'id', id: 'flite-rms' }, output_format })),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const [x, y] = [Buffer.from(await a.arrayBuffer()), Buffer.from(await b.arrayBuffer())];
    expect(x.length).toBeGreaterThan(16000);
    expect(x.equals(y)).toBe(true);
  });

  it('speed 0.6 and 1.5, volume 0.5 and 2 are accepted on batch', async () => {
    for (const generation_config of [{ speed: 0.6 }, { speed: 1.5 }, { volume: 0.5 }, { volume: 2 }]) {
      const res = await post(h, '/tts/bytes', ttsBody({ transcript: 'Yes.', generation_config }));
      expect(res.status, JSON.stringify(generation_config)).toBe(200);
      await res.arrayBuffer();
    }
  });

  it('org B itself can use its own voice and dictionary (the 404s above are about visibility)', async () => {
    const res = await post(h, '/tts/bytes', ttsBody({ voice: { mode: 'id', id: ids.voiceB }, pronunciation_dict_id: ids.dictB }), {
      headers: { authorization: `Bearer ${ids.keyB}` },
    });
    expect(res.status).toBe(200);
    expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(1000);
  });
});

describe('streaming-only rules', () => {
  it.each([
    ['/tts/sse', { output_format: { container: 'mp3', sample_rate: 44100 } }, E(400, 'invalid_output_format', 'output_format.container')],
    ['/tts/sse', { output_format: { container: 'mp3', sample_rate: 44100, bit_rate: 128000 } }, E(400, 'invalid_output_format', 'output_format.container')],
    ['/tts/bytes', { stream: true, output_format: { container: 'mp3', sample_rate: 44100 } }, E(400, 'invalid_output_format', 'output_format.container')],
    ['/tts/sse', { generation_config: { speed: 0.8 } }, E(400, 'invalid_generation_config', 'generation_config.speed')],
    ['/tts/sse', { generation_config: { speed: 1.5 } }, E(400, 'invalid_generation_config', 'generation_config.speed')],
    ['/tts/bytes', { stream: true, generation_config: { speed: 1.2 } }, E(400, 'invalid_generation_config', 'generation_config.speed')],
    [
      '/tts/bytes',
      { output_format: { container: 'mp3', sample_rate: 44100, encoding: 'pcm_s16le' } },
      E(400, 'invalid_output_format', 'output_format.encoding'),
    ],
    ['/tts/bytes', { output_format: { container: 'mp3', sample_rate: 44100, bit_rate: 100000 } }, E(400, 'invalid_output_format', 'output_format.bit_rate')],
  ])('%s %j -> %j', async (path, over, expected) => {
    const { err } = await rejects(path, ttsBody(over), expected);
    if (expected.param === 'output_format.container') expect(err.message).toMatch(/stream/i);
  });

  it('mp3 is fine on /tts/bytes without stream, and speed 1 is fine when streaming', async () => {
    const a = await post(h, '/tts/bytes', ttsBody({ transcript: 'Yes.', output_format: { container: 'mp3', sample_rate: 44100 } }));
    const b = await post(h, '/tts/sse', ttsBody({ transcript: 'Yes.', generation_config: { speed: 1, volume: 1.5 } }));
    expect([a.status, b.status]).toEqual([200, 200]);
    await Promise.all([a.arrayBuffer(), b.arrayBuffer()]);
  });
});

describe('Content-Type on /tts/bytes and /tts/sse', () => {
  // A Buffer body: fetch gives it no Content-Type of its own (a string would be text/plain).
  const send = (path: string, body: string, contentType?: string) =>
    fetch(`${h.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}`, ...(contentType ? { 'content-type': contentType } : {}) },
      body: Buffer.from(body),
    });

  it.each(NATIVE)('%s: a JSON body without a Content-Type is read as JSON (LiveKit\u2019s Cartesia plugin sends none) and billed as usual', async (path) => {
    const transcript = 'Sent without a content type.';
    const before = await h.balanceMicros();
    const res = await send(path, JSON.stringify(ttsBody({ transcript })));
    expect(res.status, await res.clone().text()).toBe(200);
    const cost = costOf(codePoints(transcript), FLITE_PRICE);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    if (path === '/tts/bytes') {
      expect(res.headers.get('content-type')).toBe('audio/wav');
      const wav = Buffer.from(await res.arrayBuffer());
      expect(wav.subarray(0, 4).toString('latin1')).toBe('RIFF');
      expect(wav.length).toBeGreaterThan(44 + 16000); // more than half a second at 16 kHz
    } else {
      expect(checkTtsEvents(await res.text()).audio.length).toBeGreaterThan(16000);
    }
    expect(await h.balanceMicros()).toBe(before - cost);
  });

  it.each(NATIVE)('%s: without a Content-Type a body that is not JSON is 400 invalid_json; a type that is not JSON keeps its 415', async (path) => {
    await expectError(await send(path, 'model_id=local-flite'), E(400, 'invalid_json'));
    await expectError(await send(path, JSON.stringify(ttsBody()), 'application/x-www-form-urlencoded'), E(415, 'unsupported_media_type'));
    await expectError(await send(path, JSON.stringify(ttsBody()), 'audio/wav'), E(415, 'unsupported_media_type'));
  });
});

describe('429 rate_limit_exceeded', () => {
  it.each(NATIVE)('%s: over the key\u2019s limit, with Retry-After', async (path) => {
    const key = await createApiKey(prisma(), { orgId: h.orgId, name: 'slow', rateLimitRpm: 1 });
    const headers = { authorization: `Bearer ${key.key}` };
    const first = await post(h, path, ttsBody({ transcript: 'Yes.' }), { headers });
    expect(first.status).toBe(200);
    await first.arrayBuffer();
    const { res, err } = await rejects(path, ttsBody({ transcript: 'Yes.' }), E(429, 'rate_limit_exceeded', null, 'rate_limit_error'), { headers });
    expect(res.headers.get('retry-after')).toBe('45');
    expect(err.message).toMatch(/45s?$/);
  });
});

describe('POST /v1/audio/speech: errors', () => {
  const speech = (over: object = {}) => ({ model: 'local-flite', input: FOX, voice: 'flite-slt', response_format: 'pcm', ...over });

  it.each([
    ['not JSON', '{"model": ', E(400, 'invalid_json')],
    ['a JSON array', '[]', E(400, 'invalid_json')],
    ['empty input', speech({ input: '' }), E(400, 'invalid_request', 'input')],
    ['5001-character input', speech({ input: 'a'.repeat(5001) }), E(400, 'invalid_request', 'input')],
    ['no model', speech({ model: undefined }), E(400, 'invalid_request', 'model')],
    ['no voice', speech({ voice: undefined }), E(400, 'invalid_request', 'voice')],
    ['response_format opus', speech({ response_format: 'opus' }), E(400, 'invalid_request', 'response_format')],
    ['response_format aac', speech({ response_format: 'aac' }), E(400, 'invalid_request', 'response_format')],
    ['response_format flac', speech({ response_format: 'flac' }), E(400, 'invalid_request', 'response_format')],
    ['response_format ogg', speech({ response_format: 'ogg' }), E(400, 'invalid_request', 'response_format')],
    ['speed 4', speech({ speed: 4 }), E(400, 'invalid_request', 'speed')],
    ['stream_format sse with mp3', speech({ response_format: 'mp3', stream_format: 'sse' }), E(400, 'invalid_output_format', 'response_format')],
    ['stream_format sse with speed 1.2', speech({ stream_format: 'sse', speed: 1.2 }), E(400, 'invalid_generation_config', 'speed')],
    ['an unknown model', speech({ model: 'no-such-model' }), E(404, 'model_not_found', 'model')],
    ['an unknown voice', speech({ voice: 'nobody' }), E(404, 'voice_not_found', 'voice')],
    ['an espeak voice with the flite model', speech({ voice: 'espeak-fr-f' }), E(409, 'voice_profile_missing', 'voice', 'invalid_request_error')],
    ['an unknown dictionary', speech({ pronunciation_dict_id: 'pdict_nope' }), E(404, 'dict_not_found', 'pronunciation_dict_id')],
  ])('%s -> %j', async (_name, body, expected) => {
    await rejects('/v1/audio/speech', body, expected);
  });

  it.each([
    ['no key', { authorization: '' }, E(401, 'invalid_api_key', null, 'invalid_request_error')],
    ['a zero balance', () => ({ authorization: `Bearer ${ids.zeroKey}` }), E(402, 'insufficient_quota', null, 'insufficient_quota')],
  ])('%s -> %j', async (_name, headers, expected) => {
    const res = await post(h, '/v1/audio/speech', speech(), { headers: typeof headers === 'function' ? headers() : headers });
    await expectError(res, expected);
  });

  it('an upstream answering 500 -> 502 upstream_error', async () => {
    await rejects('/v1/audio/speech', speech({ model: 'failing-tts', voice: failing.voiceId }), E(502, 'upstream_error', null, 'api_error'));
  });

  it('a hanging upstream -> 504 upstream_timeout', async () => {
    await rejects('/v1/audio/speech', speech({ model: 'hanging-tts', voice: hanging.voiceId }), E(504, 'upstream_timeout', null, 'api_error'), { g: hd });
  });
});

describe('OpenAI-compatible speech upstream', () => {
  it('gets the expanded text, the profile\u2019s voice and pcm; its 24 kHz PCM comes back converted and billed', async () => {
    const dictId = await dict(h, h.orgId, [{ grapheme: 'fox', alias: 'wolf' }]);
    const before = scripted.server.received.length;
    const id = requestId('scripted');
    const res = await post(
      h,
      '/tts/bytes',
      ttsBody({
        model_id: 'scripted-tts',
        voice: { mode: 'id', id: scripted.voiceId },
        language: 'en-US',
        pronunciation_dict_id: dictId,
        output_format: { container: 'raw', sample_rate: 24000, encoding: 'pcm_s16le' },
      }),
      { requestId: id },
    );
    expect(res.status).toBe(200);
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes.equals(pcmTone(1.5))).toBe(true);
    expect(scripted.server.received).toHaveLength(before + 1);
    expect(JSON.parse(scripted.server.received[before]!.body)).toEqual({
      model: 'scripted-tts-upstream',
      input: 'The quick brown wolf jumps over the lazy dog.',
      voice: 'alloy',
      response_format: 'pcm',
      speed: 1,
      language: 'en-US',
    });
    const cost = costOf(codePoints(FOX), FLITE_PRICE);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    const { usage } = await billingOf(h, id);
    expect(usage[0]).toMatchObject({ modelId: 'scripted-tts', characters: codePoints(FOX), costMicros: cost });
  });

  it('an engine that sends a WAV whatever was asked (Kokoro-FastAPI): its header is read, not played; its own rate is used', async () => {
    // 22.05 kHz in a streamed WAV (placeholder sizes, as a streaming server writes them), in odd-sized chunks.
    const pcm = pcmTone(1.5);
    const header = Buffer.alloc(44);
    header.write('RIFF', 0, 'latin1');
    header.writeUInt32LE(0xffffffff, 4);
    header.write('WAVEfmt ', 8, 'latin1');
    header.writeUInt32LE(16, 16);
    header.writeUInt16LE(1, 20);
    header.writeUInt16LE(1, 22);
    header.writeUInt32LE(22050, 24);
    header.writeUInt32LE(44100, 28);
    header.writeUInt16LE(2, 32);
    header.writeUInt16LE(16, 34);
    header.write('data', 36, 'latin1');
    header.writeUInt32LE(0xffffffff, 40);
    const wavServer = await startSpeechServer({ kind: 'pcm', pcm: Buffer.concat([header, pcm]), chunkBytes: 31, contentType: 'audio/wav' });
    servers.push(wavServer);
    const voiceId = await scriptedModel(h, wavServer, 'wav-tts');
    const res = await post(
      h,
      '/tts/bytes',
      ttsBody({ model_id: 'wav-tts', voice: { mode: 'id', id: voiceId }, output_format: { container: 'raw', sample_rate: 22050, encoding: 'pcm_s16le' } }),
    );
    expect(res.status).toBe(200);
    // At the engine's own rate nothing is resampled: exactly the samples after the header.
    expect(Buffer.from(await res.arrayBuffer()).equals(pcm)).toBe(true);
  });

  it('resampled to 8 kHz mu-law: a third of the samples, the same tone', async () => {
    const res = await post(
      h,
      '/tts/bytes',
      ttsBody({
        model_id: 'scripted-tts',
        voice: { mode: 'id', id: scripted.voiceId },
        output_format: { container: 'raw', sample_rate: 8000, encoding: 'pcm_mulaw' },
      }),
    );
    expect(res.status).toBe(200);
    const samples = decodeRaw(Buffer.from(await res.arrayBuffer()), 'pcm_mulaw');
    expect(samples.length).toBe(12000);
    let crossings = 0;
    for (let i = 1; i < samples.length; i++) if (samples[i - 1]! < 0 && samples[i]! >= 0) crossings++;
    expect(Math.abs(crossings - 440 * 1.5)).toBeLessThanOrEqual(2);
  });

  it('an upstream that drops the connection mid-stream: /tts/sse ends with an error event instead of done; the request was debited', async () => {
    const id = requestId('die');
    const res = await post(
      h,
      '/tts/sse',
      ttsBody({
        model_id: 'dying-tts',
        voice: { mode: 'id', id: dying.voiceId },
        output_format: { container: 'raw', sample_rate: 24000, encoding: 'pcm_s16le' },
      }),
      { requestId: id },
    );
    expect(res.status).toBe(200);
    const events = sseData(await res.text()).map((d) => JSON.parse(d) as Record<string, unknown>);
    const last = events.at(-1)!;
    expect(last).toMatchObject({ type: 'error', done: true, status_code: 502, error_code: 'upstream_error', request_id: id });
    expect(events.filter((e) => e.type === 'done')).toHaveLength(0);
    const audio = Buffer.concat(events.slice(0, -1).map((e) => Buffer.from(e.data as string, 'base64')));
    expect(audio.length).toBeGreaterThan(0);
    expect(audio.length).toBeLessThanOrEqual(48_000);
    // Debited at the first audio, as documented: the cost header was sent with the 200.
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(costOf(codePoints(FOX), FLITE_PRICE)));
    await billingOf(h, id);
  });

  it('the same upstream failure on batch /tts/bytes is a 502 upstream_error, not a 500, and costs nothing', async () => {
    // A whole file is debited only once all its audio is made.
    const before = await h.balanceMicros();
    const id = requestId('die-batch');
    const res = await post(h, '/tts/bytes', ttsBody({ model_id: 'dying-tts', voice: { mode: 'id', id: dying.voiceId } }), { requestId: id });
    await expectError(res, E(502, 'upstream_error', null, 'api_error'));
    expect(res.headers.get('x-svc-request-cost-usd')).toBeNull();
    expect(await h.balanceMicros()).toBe(before);
    expect(await h.testDb.db.prisma.ledgerEntry.count({ where: { requestId: id } })).toBe(0);
  });

  it('an upstream that stalls mid-stream past the deadline: an error event with 504 upstream_timeout on /tts/sse, a 504 on batch', async () => {
    const body = ttsBody({
      model_id: 'stalling-tts',
      voice: { mode: 'id', id: stalling.voiceId },
      output_format: { container: 'raw', sample_rate: 24000, encoding: 'pcm_s16le' },
    });
    const sse = await post(hd, '/tts/sse', body);
    expect(sse.status).toBe(200);
    const events = sseData(await sse.text()).map((d) => JSON.parse(d) as Record<string, unknown>);
    expect(events.at(-1)).toMatchObject({ type: 'error', done: true, status_code: 504, error_code: 'upstream_timeout' });
    expect(events.slice(0, -1).every((e) => e.type === 'chunk')).toBe(true);
    const batch = await post(hd, '/tts/bytes', body);
    await expectError(batch, E(504, 'upstream_timeout', null, 'api_error'));
  });

  it('checkTtsEvents itself rejects a stream without done (guards the happy-path checks)', () => {
    expect(() => checkTtsEvents('data: {"type":"chunk","data":"AAAA"}\n\n')).toThrow();
    expect(() => checkTtsEvents('data: {"type":"chunk","data":"AAAA"}\n\ndata: {"type":"done"}\n\ndata: {"type":"done"}\n\n')).toThrow();
  });
});
