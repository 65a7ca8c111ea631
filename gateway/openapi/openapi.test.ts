// GET /openapi.json over real HTTP against the real gateway (SQLite, or PostgreSQL with
// TEST_DB=postgresql): served without a key, a valid OpenAPI 3.1 document (checked by an
// OpenAPI validator), naming every route Fastify registers (WebSocket routes as such), and
// describing what the routes really answer.
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { openApiResponseChecker, type OpenApiResponseChecker } from '../../test/support/openapi-responses.ts';
import { registeredRoutes as routesOf } from '../../test/support/registered-routes.ts';
import { settleRecognizers } from '../../test/support/stt-routes.ts';
import { FOX, startTtsGateway, ttsBody } from '../../test/support/tts-routes.ts';
import { LONG_TEXT } from '../../test/support/voice-routes.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createPhoneToken } from '../../server/services/phone/create-phone-token.ts';
import { encodeWav } from '../audio/wav.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import { buildOpenApiDocument } from './openapi-document.ts';

let h: GatewayHarness;
let doc: Record<string, any>;
let checker: OpenApiResponseChecker;

beforeAll(async () => {
  // With a metrics token, so that GET /metrics is registered on this port too; the local
  // engines speak (flite, espeak-ng) and transcribe (pocketsphinx).
  h = await startTtsGateway({ env: { SVC_METRICS_TOKEN: 'metrics-token-of-the-openapi-test' } });
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: 'local-stt',
    modality: 'stt',
    prices: { picoPerSecond: 100_000_000n },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
  const res = await fetch(`${h.url}/openapi.json`);
  expect(res.status).toBe(200);
  doc = (await res.json()) as Record<string, any>;
  checker = openApiResponseChecker(doc);
});
afterAll(async () => {
  await settleRecognizers();
  await h?.close();
});

const registeredRoutes = () => routesOf(h.runtime.app);

const openApiPath = (fastifyPath: string) => fastifyPath.replace(/:(\w+)/g, '{$1}');
const documented = () =>
  Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
  );

async function answer(method: string, path: string, init: RequestInit = {}) {
  const res = await fetch(`${h.url}${path}`, { method, ...init });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    json,
    text,
    problems: checker.problems({ method, path, status: res.status, contentType: res.headers.get('content-type'), json }),
  };
}

describe('GET /openapi.json', () => {
  it('is served without a key, as JSON, and a key that is wrong changes nothing', async () => {
    const bare = await answer('GET', '/openapi.json');
    expect({ status: bare.status, type: bare.contentType }).toEqual({ status: 200, type: 'application/json; charset=utf-8' });
    const withBadKey = await answer('GET', '/openapi.json', { headers: { authorization: 'Bearer sk_svc_not-a-key' } });
    expect(withBadKey.status).toBe(200);
    expect(withBadKey.text).toBe(bare.text);
    expect(bare.problems).toEqual([]);
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    expect(doc.openapi).toMatch(/^3\.1\./);
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('names this gateway as its server', () => {
    expect(doc.servers).toEqual([{ url: h.runtime.ctx.config.publicBaseUrl }]);
  });

  it('has every route Fastify registers, and nothing else', () => {
    // HEAD is Fastify's own companion of each GET.
    const registered = registeredRoutes()
      .filter((r) => r.method !== 'HEAD')
      .map((r) => `${r.method} ${openApiPath(r.path)}`)
      .sort();
    expect(registered.length).toBeGreaterThan(40);
    expect(
      documented()
        .map((d) => `${d.method} ${d.path}`)
        .sort(),
    ).toEqual(registered);
  });

  it('marks exactly the WebSocket routes as such, each with its protocol page and a 101 answer', async () => {
    // A plain (keyed) GET on a WebSocket route is refused with upgrade_required; on any other GET route it is not.
    const refusedAsPlainGet: string[] = [];
    // A phone carrier's stream takes its credential in the path, or in the stream's custom parameters after the upgrade (docs/phone.md).
    const phone = await createPhoneToken(h.testDb.db.prisma, { orgId: h.orgId, apiKeyId: h.keyId, profile: 'openapi' });
    for (const { method, path } of registeredRoutes().filter((r) => r.method === 'GET')) {
      const concrete = path.replace(/^(\/phone\/\w+\/):token$/, `$1${phone.token}`).replace(/:\w+/g, 'x');
      const r = await answer(method, concrete, { headers: { authorization: h.headers.authorization! } });
      expect(r.problems, `${method} ${path}`).toEqual([]);
      if ((r.json as { error?: { code?: string } } | undefined)?.error?.code === 'upgrade_required') refusedAsPlainGet.push(`GET ${openApiPath(path)}`);
    }
    const sockets = documented().filter((d) => d.op['x-websocket'] === true);
    expect(sockets.map((d) => `${d.method} ${d.path}`).sort()).toEqual(refusedAsPlainGet.sort());
    expect(refusedAsPlainGet.sort()).toEqual([
      'GET /phone/exotel',
      'GET /phone/exotel/{token}',
      'GET /phone/plivo',
      'GET /phone/plivo/{token}',
      'GET /phone/telnyx',
      'GET /phone/telnyx/{token}',
      'GET /phone/twilio',
      'GET /phone/twilio/{token}',
      'GET /phone/vonage',
      'GET /phone/vonage/{token}',
      'GET /stt/turns/websocket',
      'GET /stt/websocket',
      'GET /tts/websocket',
      'GET /v1/listen',
      'GET /v1/realtime',
      'GET /v1/responses',
      'GET /v1/speak',
      'GET /v1/text-to-speech/{voice_id}/multi-stream-input',
      'GET /v1/text-to-speech/{voice_id}/stream-input',
      'GET /v2/listen',
    ]);
    for (const { op } of sockets) {
      expect(op.responses['101'].description).toMatch(/WebSocket/);
      expect(op.externalDocs.url).toMatch(/^docs\/[a-z-]+\.md/);
    }
  });

  it('is the document operations.ts describes', () => {
    const { servers, ...served } = doc;
    expect(servers).toHaveLength(1);
    expect(served).toEqual(JSON.parse(JSON.stringify(buildOpenApiDocument())));
  });
});

describe('answers match the document', () => {
  const keyed = () => ({ authorization: h.headers.authorization! });
  const jsonBody = (body: unknown) => ({ headers: h.headers, body: JSON.stringify(body) });

  it('the checker refuses what drifts from the document', () => {
    expect(checker.problems({ method: 'GET', path: '/health', status: 200, contentType: 'application/json', json: { status: 'ok' } })).toEqual([]);
    expect(checker.problems({ method: 'GET', path: '/health', status: 200, contentType: 'application/json', json: { status: 'ok', uptime: 1 } })).toHaveLength(
      1,
    );
    expect(checker.problems({ method: 'GET', path: '/health', status: 200, contentType: 'text/html', json: undefined })).toHaveLength(1);
    expect(checker.problems({ method: 'GET', path: '/v1/models', status: 201, contentType: 'application/json', json: {} })).toHaveLength(1);
    expect(checker.problems({ method: 'GET', path: '/nowhere', status: 200, contentType: 'application/json', json: {} })).toHaveLength(1);
    expect(
      checker.problems({
        method: 'GET',
        path: '/nowhere',
        status: 404,
        contentType: 'application/json',
        json: { error: { message: 'x', type: 'invalid_request_error', code: 'not_found' } },
      }),
    ).toHaveLength(1);
  });

  it('system, models and discovery routes', async () => {
    for (const path of [
      '/health',
      '/ready',
      '/v1/models',
      '/.well-known/oauth-authorization-server',
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-protected-resource/v1',
    ]) {
      const r = await answer('GET', path, { headers: keyed() });
      expect(r.status, path).toBeLessThan(500);
      expect(r.problems, r.text.slice(0, 300)).toEqual([]);
    }
    const metrics = await answer('GET', '/metrics', { headers: { authorization: 'Bearer metrics-token-of-the-openapi-test' } });
    expect({ status: metrics.status, problems: metrics.problems }).toEqual({ status: 200, problems: [] });
  });

  it('voices, jobs, blobs and pronunciation dictionaries, and their errors', async () => {
    const results = [
      await answer('GET', '/voices?limit=5', { headers: keyed() }),
      await answer('GET', '/voices/voice_nope', { headers: keyed() }),
      await answer('GET', '/jobs', { headers: keyed() }),
      await answer('GET', '/jobs/job_nope', { headers: keyed() }),
      await answer('GET', '/pronunciation-dicts', { headers: keyed() }),
      await answer('POST', '/pronunciation-dicts', jsonBody({ name: '' })),
      await answer('PUT', '/pronunciation-dicts/dict_x', { headers: keyed() }),
      await answer('GET', '/v1/models'),
    ];
    expect(results.map((r) => r.status)).toEqual([200, 404, 200, 404, 200, 400, 405, 401]);

    const created = await answer('POST', '/pronunciation-dicts', jsonBody({ name: 'Brands', entries: [{ grapheme: 'svc', alias: 'ess vee see' }] }));
    const id = (created.json as { id: string }).id;
    results.push(
      created,
      await answer('GET', `/pronunciation-dicts/${id}`, { headers: keyed() }),
      await answer('PATCH', `/pronunciation-dicts/${id}`, jsonBody({ name: 'Renamed' })),
      await answer('DELETE', `/pronunciation-dicts/${id}`, { headers: keyed() }),
    );

    const tone = new Float32Array(8000).map((_, i) => 0.3 * Math.sin((2 * Math.PI * 440 * i) / 16000));
    const blob = await answer('POST', '/blobs', {
      headers: { ...keyed(), 'content-type': 'audio/wav' },
      body: new Uint8Array(encodeWav(tone, 16000, 'pcm_s16le')),
    });
    const blobId = (blob.json as { id: string }).id;
    results.push(
      blob,
      await answer('GET', `/blobs/${blobId}`, { headers: keyed() }),
      await answer('GET', `/blobs/${blobId}/content`, { headers: keyed() }),
      await answer('DELETE', `/blobs/${blobId}`, { headers: keyed() }),
    );
    expect(results.slice(8).map((r) => r.status)).toEqual([201, 200, 200, 200, 201, 200, 200, 200]);
    for (const r of results) expect(r.problems, r.text.slice(0, 300)).toEqual([]);
  });
  it('speech, transcription and voices on the local engines', async () => {
    const results = [];
    const speech = await fetch(`${h.url}/tts/bytes`, { method: 'POST', headers: h.headers, body: JSON.stringify(ttsBody()) });
    const wav = Buffer.from(await speech.arrayBuffer());
    results.push({
      status: speech.status,
      problems: checker.problems({
        method: 'POST',
        path: '/tts/bytes',
        status: speech.status,
        contentType: speech.headers.get('content-type'),
        json: undefined,
      }),
    });
    results.push(await answer('POST', '/tts/sse', jsonBody(ttsBody())));
    for (const format of [{ response_format: 'mp3' }, { response_format: 'pcm' }, { response_format: 'wav', stream_format: 'sse' }]) {
      results.push(await answer('POST', '/v1/audio/speech', jsonBody({ model: 'local-flite', input: FOX, voice: 'flite-slt', ...format })));
    }
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);

    const transcribe = (fields: Record<string, string>) => {
      const form = new FormData();
      form.set('file', new Blob([new Uint8Array(wav)], { type: 'audio/wav' }), 'fox.wav');
      for (const [k, v] of Object.entries({ model: 'local-stt', ...fields })) form.set(k, v);
      return answer('POST', '/v1/audio/transcriptions', { headers: keyed(), body: form });
    };
    const transcripts = [
      await transcribe({}),
      await transcribe({ response_format: 'verbose_json', 'timestamp_granularities[]': 'word,segment', language: 'en' }),
      await transcribe({ response_format: 'srt' }),
      await answer('POST', '/v1/listen?model=local-stt&utterances=true&punctuate=true', {
        headers: { ...keyed(), 'content-type': 'audio/wav' },
        body: new Uint8Array(wav),
      }),
      await answer('POST', '/v1/listen?model=nope', { headers: { ...keyed(), 'content-type': 'audio/wav' }, body: new Uint8Array(wav) }),
    ];
    expect(transcripts.map((r) => r.status)).toEqual([200, 200, 200, 200, 404]);
    expect((transcripts[0]!.json as { words: unknown[] }).words.length).toBeGreaterThan(3);
    results.push(...transcripts);

    const clipRes = await fetch(`${h.url}/tts/bytes`, { method: 'POST', headers: h.headers, body: JSON.stringify(ttsBody({ transcript: LONG_TEXT })) });
    const form = new FormData();
    form.set('file', new Blob([new Uint8Array(await clipRes.arrayBuffer())], { type: 'audio/wav' }), 'clip.wav');
    for (const [k, v] of Object.entries({ name: 'Documented', model_id: 'local-flite', tags: 'calm,support' })) form.set(k, v);
    const cloned = await answer('POST', '/voices/clone', { headers: keyed(), body: form });
    const voiceId = (cloned.json as { id: string }).id;
    const voices = [
      cloned,
      await answer('PATCH', `/voices/${voiceId}`, jsonBody({ description: 'Documented voice' })),
      await answer('POST', `/voices/${voiceId}/save`, { headers: keyed() }),
      await answer('DELETE', `/voices/${voiceId}/save`, { headers: keyed() }),
      await answer('POST', `/voices/${voiceId}/profiles`, jsonBody({ model_id: 'local-flite' })),
      await answer('POST', `/voices/${voiceId}/localize`, jsonBody({ language: 'fr' })),
      await answer('POST', '/voices/pro-clone', jsonBody({ name: 'Too short', blob_ids: ['blob_nope'] })),
    ];
    expect(voices.map((r) => r.status)).toEqual([201, 200, 200, 200, 200, 202, 404]);
    const jobId = (voices[5]!.json as { job_id: string }).job_id;
    voices.push(await answer('GET', `/jobs/${jobId}`, { headers: keyed() }), await answer('DELETE', `/voices/${voiceId}`, { headers: keyed() }));
    expect(voices.slice(7).map((r) => r.status)).toEqual([200, 200]);
    results.push(...voices);
    for (const r of results) expect(r.problems, 'text' in r ? String(r.text).slice(0, 300) : '').toEqual([]);
  });
});
