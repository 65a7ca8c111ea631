// /v1/realtime over WebRTC (OpenAI's /v1/realtime/calls, developers.openai.com/api/docs/guides/realtime-webrtc):
// a Node WebRTC client (werift, test/support/webrtc-client.ts) against the real gateway runtime
// with the local recognizer (pocketsphinx), flite for the answers' speech and a scripted
// OpenAI-compatible LLM. The gateway's clock is a manual one: a secret's expiry and a call's
// connect timeout are reached by moving it; the audio itself flows in real time.
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import WebSocket from 'ws';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { manualClock } from '../../test/support/manual-clock.ts';
import { openApiResponseChecker } from '../../test/support/openapi-responses.ts';
import { openRealtime, realtimeUrl, spokenPcm24 } from '../../test/support/realtime-client.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { STT_PRICE, audioCost, settleRecognizers, startSttGateway, transcribe, wavFile } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE, costOf } from '../../test/support/tts-routes.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { makeOffer, openCall, postOffer, type CallEvent } from '../../test/support/webrtc-client.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const PRICE_IN = 150_001n;
const PRICE_OUT = 600_003n;
const REPLY = ['The ', 'weather ', 'is ', 'sunny', '.'];
const REPLY_TEXT = REPLY.join('');
const llmCost = (input: number, output: number): bigint => (BigInt(input) * PRICE_IN + BigInt(output) * PRICE_OUT + 999_999n) / 1_000_000n;

const clock = manualClock(Date.parse('2026-12-05T12:00:00Z'));
let h: GatewayHarness;
let llm: ScriptedUpstream;
let slowLlm: ScriptedUpstream;
/** Every answer of these routes is checked against GET /openapi.json. */
let checker: ReturnType<typeof openApiResponseChecker>;

beforeAll(async () => {
  h = await startSttGateway({ env: { SVC_WEBRTC_CONNECT_TIMEOUT_SECONDS: '15', SVC_WEBRTC_MAX_CALLS: '2' }, clock });
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await seedPlatformVoices(prisma);
  llm = await startScriptedUpstream({ kind: 'stream', chunks: REPLY, usage: { prompt_tokens: 40, completion_tokens: 6 } });
  slowLlm = await startScriptedUpstream({
    kind: 'stream',
    chunks: Array.from({ length: 600 }, (_, i) => `Sentence number ${i} is here. `),
    delayMs: 100,
    usage: { prompt_tokens: 40, completion_tokens: 200 },
  });
  const prices = { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT };
  await upsertModel(prisma, checkProtocol, { id: 'rt-llm', modality: 'llm', prices, upstream: { url: llm.baseUrl, protocol: 'openai' } });
  await upsertModel(prisma, checkProtocol, { id: 'rt-slow', modality: 'llm', prices, upstream: { url: slowLlm.baseUrl, protocol: 'openai' } });
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
  checker = openApiResponseChecker((await (await fetch(`${h.url}/openapi.json`)).json()) as Record<string, unknown>);
}, 60_000);

function documented(path: string, res: Response, json: unknown): void {
  expect(checker.problems({ method: 'POST', path, status: res.status, contentType: res.headers.get('content-type'), json })).toEqual([]);
}

afterAll(async () => {
  await Promise.allSettled([llm?.close(), slowLlm?.close()]);
  await settleRecognizers();
  await h?.close();
});

async function orgWithKey(credit = 10_000_000n) {
  const org = await createOrg(h.testDb.db, { name: 'webrtc', creditsMicros: credit });
  const key = await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k' });
  return { orgId: org.id, key: key.key, keyId: key.id };
}

async function mint(key: string, body: object): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${h.url}/v1/realtime/client_secrets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  documented('/v1/realtime/client_secrets', res, json);
  return { status: res.status, json };
}

async function secretFor(key: string, session: object = { type: 'realtime', model: 'rt-llm' }, seconds?: number): Promise<string> {
  const { status, json } = await mint(key, { session, ...(seconds ? { expires_after: { anchor: 'created_at', seconds } } : {}) });
  expect(status, JSON.stringify(json)).toBe(200);
  return json.value as string;
}

/** Every session's last debit written and committed. */
async function billed(): Promise<void> {
  expect(await h.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
  await h.settled();
}

const types = (events: CallEvent[]) => events.map((e) => e.type);
const samplesOf = (pcm: Buffer) => Float32Array.from({ length: pcm.length / 2 }, (_, i) => pcm.readInt16LE(i * 2) / 32768);
const rms = (x: Float32Array) => Math.sqrt(x.reduce((s, v) => s + v * v, 0) / Math.max(1, x.length));

describe('a call from a browser', () => {
  it('mints a secret with a key, offers with it, hears the question, speaks the answer on the track, and bills each leg', async () => {
    const { key, orgId } = await orgWithKey();
    const minted = await mint(key, {
      expires_after: { anchor: 'created_at', seconds: 600 },
      session: { type: 'realtime', model: 'rt-llm', instructions: 'Answer briefly.' },
    });
    expect(minted.status).toBe(200);
    expect(minted.json).toMatchObject({
      value: expect.stringMatching(/^ek_/),
      expires_at: Math.floor(clock.now() / 1000) + 600,
      session: { type: 'realtime', model: 'rt-llm', instructions: 'Answer briefly.' },
    });
    // The secret carries no key: only the key's hash, signed.
    expect(minted.json.value as string).not.toContain(key.slice(7));
    const call = await openCall(h.url, minted.json.value as string);
    const created = await call.next('session.created');
    expect(created.session).toMatchObject({
      model: 'rt-llm',
      instructions: 'Answer briefly.',
      models: { stt: 'local-stt', llm: 'rt-llm', tts: 'local-flite' },
    });
    // Server VAD is on, as OpenAI's; the audio formats are the track's whatever an update says.
    expect(created.session).toMatchObject({ audio: { input: { turn_detection: { type: 'server_vad' } } } });
    call.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { format: { type: 'audio/pcmu' } } } } });
    expect((await call.next('session.updated')).session).toMatchObject({ audio: { input: { format: { type: 'audio/pcm', rate: 24_000 } } } });

    const question = await spokenPcm24('what is the weather like today');
    const frames = await call.speak(question);
    const heard = await call.until('conversation.item.input_audio_transcription.completed');
    expect(types(heard)).toEqual(expect.arrayContaining(['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped']));
    expect(heard.at(-1)!.transcript).toMatch(/weather/);
    const answer = await call.until('output_audio_buffer.stopped');
    const done = answer.find((e) => e.type === 'response.done')!.response as { id: string; status: string; usage: { svc: { tts_characters: number } } };
    expect(done.status).toBe('completed');
    // Over WebRTC the audio is on the track only; the data channel says when it starts and stops.
    expect(types(answer)).not.toContain('response.output_audio.delta');
    expect(answer.find((e) => e.type === 'output_audio_buffer.started')).toMatchObject({ response_id: done.id });
    expect(answer.at(-1)).toMatchObject({ response_id: done.id });
    const transcript = answer
      .filter((e) => e.type === 'response.output_audio_transcript.delta')
      .map((e) => e.delta)
      .join('');
    expect(transcript).toBe(REPLY_TEXT);

    // The answer's audio as the track brought it: speech of plausible length, heard back as the words.
    const { pcm, packets } = call.received();
    expect(pcm.length).toBe(packets * 960);
    const seconds = pcm.length / 2 / 24_000;
    expect(seconds).toBeGreaterThan(0.6);
    expect(seconds).toBeLessThan(5);
    expect(rms(samplesOf(pcm))).toBeGreaterThan(0.02);
    const res = await transcribe(h, wavFile([samplesOf(pcm)], 24_000), { model: 'local-stt' });
    expect(((await res.json()) as { text: string }).text).toMatch(/weather/);

    await call.close();
    await vi.waitFor(() => expect(h.runtime.ctx.admission.openStreams).toBe(0), { timeout: 10_000, interval: 20 });
    await billed();
    const rows = await usageRows(h.testDb.db.prisma, { orgId });
    const stt = rows.filter((r) => r.modality === 'stt');
    // Every 20 ms frame sent, decoded on the gateway and billed by the millisecond.
    expect(stt.reduce((n, r) => n + r.audioMillis, 0)).toBe(frames * 20);
    expect(stt.reduce((n, r) => n + r.costMicros, 0n)).toBe(audioCost(frames * 20, STT_PRICE));
    expect(rows.filter((r) => r.modality === 'llm').map((r) => [r.inputTokens, r.outputTokens, r.costMicros])).toEqual([[40, 6, llmCost(40, 6)]]);
    const tts = rows.filter((r) => r.modality === 'tts');
    expect(tts.reduce((n, r) => n + r.characters, 0)).toBe(REPLY_TEXT.length);
    expect(done.usage.svc.tts_characters).toBe(REPLY_TEXT.length);
    expect(tts.reduce((n, r) => n + r.costMicros, 0n)).toBe(tts.reduce((n, r) => n + costOf(r.characters, FLITE_PRICE), 0n));
    expect(rows.every((r) => r.route === 'realtime')).toBe(true);
    // One request-log row for the call, a session's, with its turn.
    const [row] = await vi.waitFor(
      async () => {
        await h.runtime.ctx.requestLog!.flush();
        const found = await h.testDb.db.prisma.requestLog.findMany({ where: { orgId, route: '/v1/realtime/calls' } });
        expect(found).toHaveLength(1);
        return found;
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(row).toMatchObject({ kind: 'session', status: 201, modelId: 'rt-llm' });
    expect(await h.testDb.db.prisma.requestLogTurn.count({ where: { requestLogId: row!.id } })).toBe(1);
  }, 90_000);

  it('speaking over the answer stops its audio on the track and truncates the item at what was played', async () => {
    const { key } = await orgWithKey();
    const call = await openCall(h.url, await secretFor(key, { type: 'realtime', model: 'rt-slow' }));
    // Closed however the test ends: a call left open would hold a stream place the next tests count.
    onTestFinished(() => call.close());
    await call.next('session.created');
    await call.speak(await spokenPcm24('tell me a long story', 0.8));
    const started = await call.next('output_audio_buffer.started');
    // A second of the answer heard, then the user speaks over it.
    await vi.waitFor(() => expect(call.received().packets).toBeGreaterThanOrEqual(50), { timeout: 30_000, interval: 20 });
    await call.speak(await spokenPcm24('stop please', 0.8));
    const cut = await call.until('conversation.item.truncated');
    expect(types(cut)).toContain('input_audio_buffer.speech_started');
    expect(cut.find((e) => e.type === 'output_audio_buffer.cleared')).toMatchObject({ response_id: started.response_id });
    const done = cut.find((e) => e.type === 'response.done')!.response as { status: string; status_details: { reason: string } };
    expect(done).toMatchObject({ status: 'cancelled', status_details: { reason: 'turn_detected' } });
    const truncated = cut.at(-1)!;
    // What the gateway played of the item: at least the second heard, no more than the track brought.
    expect(truncated.audio_end_ms).toBeGreaterThanOrEqual(1000);
    await vi.waitFor(() => expect(call.received().packets * 20).toBeGreaterThanOrEqual(truncated.audio_end_ms as number), { timeout: 5000, interval: 20 });
    call.send({ type: 'conversation.item.retrieve', item_id: truncated.item_id });
    const item = (await call.next('conversation.item.retrieved')).item as { status: string; content: { transcript: string }[] };
    expect(item.status).toBe('incomplete');
    // The text of what was heard: the answer's first words (how many depends on when the barge-in was heard).
    expect(item.content[0]!.transcript).toMatch(/^Sentence number/);
  }, 90_000);
});

describe('refused before any media', () => {
  /** A refusal of an offer: its status and envelope, and no call (no SDP answer, no session). */
  async function refused(bearer: string | undefined, sdp?: string, options = {}) {
    const offer = sdp ?? (await makeOffer());
    const res = await postOffer(h.url, bearer, typeof offer === 'string' ? offer : offer.sdp, options);
    if (typeof offer !== 'string') await offer.pc.close();
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    expect(res.headers.get('location')).toBeNull();
    expect(h.runtime.ctx.admission.openStreams).toBe(0);
    const json = (await res.json()) as { error: { code: string; message: string; param: string | null } };
    documented('/v1/realtime/calls', res, json);
    return { status: res.status, error: json.error };
  }

  it('a wrong, an altered or an expired secret is 401; a revoked key refuses its secrets', async () => {
    const { key, keyId } = await orgWithKey();
    expect(await refused('ek_' + 'x'.repeat(40))).toMatchObject({
      status: 401,
      error: { code: 'invalid_api_key', message: expect.stringMatching(/not issued by this server/) },
    });
    const secret = await secretFor(key, { type: 'realtime', model: 'rt-llm' }, 10);
    // One character of the signed settings changed.
    const dot = secret.indexOf('.');
    const altered = `${secret.slice(0, dot - 2)}${secret[dot - 2] === 'A' ? 'B' : 'A'}${secret.slice(dot - 1)}`;
    expect(await refused(altered)).toMatchObject({ status: 401, error: { code: 'invalid_api_key' } });
    // Its mac on another secret's settings.
    const other = await secretFor(key, { type: 'realtime', model: 'rt-slow' });
    expect(await refused(`${other.slice(0, other.indexOf('.'))}${secret.slice(dot)}`)).toMatchObject({ status: 401 });
    clock.advance(10_000);
    expect(await refused(secret)).toMatchObject({ status: 401, error: { code: 'invalid_api_key', message: expect.stringMatching(/expired/) } });
    await revokeApiKey(h.testDb.db.prisma, { id: keyId });
    expect(await refused(other)).toMatchObject({ status: 401, error: { code: 'api_key_disabled' } });
  });

  it('no credential, or an offer that is not one, is refused', async () => {
    const { key } = await orgWithKey();
    expect(await refused(undefined)).toMatchObject({ status: 401, error: { code: 'invalid_api_key' } });
    const secret = await secretFor(key);
    expect(await refused(secret, 'hello')).toMatchObject({ status: 400, error: { param: 'sdp' } });
    const { pc, sdp } = await makeOffer();
    await pc.close();
    const noChannel = sdp.replace(/m=application[\s\S]*$/, '');
    expect(await refused(secret, noChannel)).toMatchObject({ status: 400, error: { param: 'sdp', message: expect.stringMatching(/data channel/) } });
    expect(await refused(secret, sdp.replace(/opus/gi, 'speex'))).toMatchObject({ status: 400, error: { message: expect.stringMatching(/Opus/) } });
    // Settings that do not read, given with the offer.
    expect(await refused(secret, undefined, { session: { type: 'realtime', audio: { output: { speed: 9 } } } })).toMatchObject({
      status: 400,
      error: { param: 'session.audio.output.speed' },
    });
  });

  it('a page of any origin may offer and hang up (CORS), not mint', async () => {
    const preflight = await fetch(`${h.url}/v1/realtime/calls`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
    });
    expect(preflight.status).toBe(204);
    expect(Object.fromEntries([...preflight.headers].filter(([k]) => k.startsWith('access-control-')))).toMatchObject({
      'access-control-allow-origin': '*',
      'access-control-allow-methods': 'POST',
      'access-control-allow-headers': 'authorization, content-type',
      'access-control-expose-headers': expect.stringContaining('location'),
    });
    expect((await fetch(`${h.url}/v1/realtime/calls/rtc_x/hangup`, { method: 'OPTIONS' })).status).toBe(204);
    const refusedOffer = await postOffer(h.url, 'ek_wrong', 'v=0\r\n');
    expect(refusedOffer.status).toBe(401);
    expect(refusedOffer.headers.get('access-control-allow-origin')).toBe('*');
    const mintPreflight = await fetch(`${h.url}/v1/realtime/client_secrets`, { method: 'OPTIONS' });
    expect(mintPreflight.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('minting takes a key, a bounded lifetime and settings that resolve', async () => {
    const { key } = await orgWithKey();
    const secret = await secretFor(key);
    expect(await mint(secret, {})).toMatchObject({ status: 401, json: { error: { code: 'invalid_api_key', message: expect.stringMatching(/cannot mint/) } } });
    expect(await mint(key, { expires_after: { anchor: 'created_at', seconds: 5 } })).toMatchObject({
      status: 400,
      json: { error: { param: 'expires_after.seconds' } },
    });
    expect(await mint(key, { expires_after: { anchor: 'created_at', seconds: 7201 } })).toMatchObject({ status: 400 });
    expect(await mint(key, { session: { type: 'realtime', model: 'no-such-model' } })).toMatchObject({
      status: 404,
      json: { error: { code: 'model_not_found' } },
    });
    expect(await mint(key, { session: { type: 'realtime', model: 'rt-llm', tools: 'x' } })).toMatchObject({
      status: 400,
      json: { error: { param: 'session.tools' } },
    });
    expect(await mint(key, { session: { type: 'realtime', model: 'rt-llm', instructions: 'x'.repeat(20_000) } })).toMatchObject({
      status: 400,
      json: { error: { param: 'session', message: expect.stringMatching(/session.update/) } },
    });
    // The default lifetime is OpenAI's: ten minutes.
    expect((await mint(key, { session: { type: 'realtime', model: 'rt-llm' } })).json.expires_at).toBe(Math.floor(clock.now() / 1000) + 600);
  });
});

describe('the call and its server', () => {
  it('a control socket (?call_id=, the same org) sees the call’s events and sends its own; a hang-up ends the call', async () => {
    const { key } = await orgWithKey();
    const other = await orgWithKey();
    // A server may offer with its key and the settings in the multipart body.
    const call = await openCall(h.url, key, { session: { type: 'realtime', model: 'rt-llm', instructions: 'From the server.' } });
    expect((await call.next('session.created')).session).toMatchObject({ instructions: 'From the server.' });
    const refusedUpgrade = await new Promise<number>((resolve) => {
      const ws = new WebSocket(realtimeUrl(h, { call_id: call.id }), { headers: { authorization: `Bearer ${other.key}` } });
      ws.once('unexpected-response', (_req, res) => resolve(res.statusCode!));
      ws.once('open', () => resolve(101));
    });
    expect(refusedUpgrade).toBe(404);
    const control = await openRealtime(h, key, { call_id: call.id });
    control.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Changed by the server.' } });
    const fromControl = await control.next('session.updated');
    expect(fromControl.session).toMatchObject({ instructions: 'Changed by the server.' });
    expect((await call.next('session.updated')).session).toMatchObject({ instructions: 'Changed by the server.' });
    // What the client sends, the server sees answered.
    call.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] } });
    expect((await control.next('conversation.item.done')).item).toMatchObject({ role: 'user' });
    const hangup = await fetch(`${h.url}/v1/realtime/calls/${call.id}/hangup`, { method: 'POST', headers: { authorization: `Bearer ${other.key}` } });
    expect(hangup.status).toBe(404);
    expect((await fetch(`${h.url}/v1/realtime/calls/${call.id}/hangup`, { method: 'POST', headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    expect(await control.closed).toEqual({ code: 1000, reason: 'hangup' });
    await call.closed;
    await vi.waitFor(() => expect(h.runtime.ctx.admission.openStreams).toBe(0), { timeout: 10_000, interval: 20 });
    await call.close();
  }, 60_000);

  it('a revoked key ends the call: an error event, then the connection closes', async () => {
    const { key, keyId } = await orgWithKey();
    const call = await openCall(h.url, await secretFor(key));
    await call.next('session.created');
    await revokeApiKey(h.testDb.db.prisma, { id: keyId });
    expect((await call.next('error')).error).toMatchObject({ code: 'api_key_disabled' });
    await call.closed;
    await vi.waitFor(() => expect(h.runtime.ctx.admission.openStreams).toBe(0), { timeout: 10_000, interval: 20 });
    await call.close();
  }, 30_000);

  it('a call whose connection never completes gives its place and its credit back after the connect timeout', async () => {
    const { key, orgId } = await orgWithKey();
    const { pc, sdp } = await makeOffer();
    const res = await postOffer(h.url, await secretFor(key), sdp);
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toMatch(/^\/v1\/realtime\/calls\/rtc_[0-9a-f]{32}$/);
    documented('/v1/realtime/calls', res, undefined);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(await res.text()).toMatch(/^v=0\r\n[\s\S]*a=candidate:/);
    // The client goes away without applying the answer: no ICE, no DTLS.
    await pc.close();
    expect(h.runtime.ctx.admission.openStreams).toBe(1);
    clock.advance(15_000);
    await vi.waitFor(() => expect(h.runtime.ctx.admission.openStreams).toBe(0), { timeout: 10_000, interval: 20 });
    await billed();
    expect(await usageRows(h.testDb.db.prisma, { orgId })).toEqual([]);
    expect((await h.testDb.db.prisma.org.findUniqueOrThrow({ where: { id: orgId } })).balanceMicros).toBe(10_000_000n);
  }, 30_000);

  it('past the calls a process takes, an offer is 503 until one ends', async () => {
    const { key } = await orgWithKey();
    const secret = await secretFor(key);
    for (let i = 0; i < 2; i++) {
      const { pc, sdp } = await makeOffer();
      expect((await postOffer(h.url, secret, sdp)).status).toBe(201);
      await pc.close();
    }
    const { pc, sdp } = await makeOffer();
    const full = await postOffer(h.url, secret, sdp);
    expect(full.status).toBe(503);
    expect(full.headers.get('retry-after')).toBe('1');
    expect(((await full.json()) as { error: { code: string } }).error.code).toBe('temporarily_unavailable');
    clock.advance(15_000);
    await vi.waitFor(() => expect(h.runtime.ctx.admission.openStreams).toBe(0), { timeout: 10_000, interval: 20 });
    const again = await postOffer(h.url, secret, sdp);
    expect(again.status).toBe(201);
    await pc.close();
    clock.advance(15_000);
    await vi.waitFor(() => expect(h.runtime.ctx.admission.openStreams).toBe(0), { timeout: 10_000, interval: 20 });
  }, 30_000);
});
