// Route tests of Deepgram-compatible listen over real sockets and HTTP (real gateway runtime,
// throw-away SQLite or PostgreSQL database, the local pocketsphinx recogniser, speech made by
// flite): WS /v1/listen -- refusals before the upgrade (the envelope with Deepgram's err_code /
// err_msg / request_id and the dg-error header), Deepgram's events (Results with is_final /
// speech_final / from_finalize, SpeechStarted, UtteranceEnd, Metadata, Error), its commands
// (KeepAlive, Finalize, CloseStream), its query parameters, the 1008 close at zero balance and
// exact metering -- and POST /v1/listen (raw audio body, Deepgram's pre-recorded answer).
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import type { IncomingMessage } from 'node:http';
import { encodeSamples } from '../audio/sample-encoding.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { A_WINDOW_START, manualClock } from '../../test/support/manual-clock.ts';
import { socketEvents } from '../../test/support/socket-events.ts';
import {
  STT_PRICE,
  audioCost,
  concat,
  expectDebited,
  ledgerOf,
  ledgerRowCount,
  s16le,
  settleRecognizers,
  silence,
  speech,
  startSttGateway,
  toRate,
  trimSilence,
  wavFile,
  wer,
} from '../../test/support/stt-routes.ts';
import { usd } from '../../test/support/tts-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const FOX = 'the quick brown fox jumps over the lazy dog';
const CALL = 'please call me tomorrow morning about the meeting';
const TABLE = 'i would like to book a table for two people tonight';

let h: GatewayHarness;
const keys = { zero: '', revoked: '', limited: '' };
// Rate-limit windows read a clock held 15 s into a minute: the one-request-a-minute key is
// refused with 45 s to wait whenever the test runs.
const clock = manualClock(A_WINDOW_START + 15_000);

beforeAll(async () => {
  h = await startSttGateway({ clock });
  const prisma = h.testDb.db.prisma;
  const zeroOrg = await createOrg(h.testDb.db, { name: 'broke', creditsMicros: 0n });
  keys.zero = (await createApiKey(prisma, { orgId: zeroOrg.id, name: 'zero' })).key;
  const revoked = await createApiKey(prisma, { orgId: h.orgId, name: 'revoked' });
  await revokeApiKey(prisma, { id: revoked.id });
  keys.revoked = revoked.key;
  keys.limited = (await createApiKey(prisma, { orgId: h.orgId, name: 'one per minute', rateLimitRpm: 1 })).key;
  // A Deepgram model name registered in the registry: Deepgram's clients work with their default model.
  await upsertModel(prisma, checkProtocol, {
    id: 'nova-3',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  // A batch-only stt model (ElevenLabs' Scribe: its protocol has no streaming transcription).
  await upsertModel(prisma, checkProtocol, {
    id: 'remote-stt',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: 'http://127.0.0.1:9', protocol: 'elevenlabs', upstreamModel: 'scribe_v1' },
  });
  await h.runtime.ctx.registry.refresh();
  await Promise.all([speech(FOX), speech(CALL), speech(CALL, 'rms'), speech(TABLE, 'awb')]);
}, 120_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
});

// ---------------------------------------------------------------------------------------
// A raw WebSocket client of /v1/listen

type DgEvent = { type: string; [k: string]: unknown };
interface DgWord {
  word: string;
  start: number;
  end: number;
  confidence: number;
  punctuated_word?: string;
}
interface DgResults extends DgEvent {
  start: number;
  duration: number;
  channel: { alternatives: { transcript: string; confidence: number; words: DgWord[] }[] };
}

let rid = 0;
const newRequestId = (label: string) => `listen-${label}-${++rid}-${Date.now()}`;

const listenUrl = (query: Record<string, string | string[]>) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) for (const one of [v].flat()) q.append(k, one);
  return `${h.url.replace(/^http/, 'ws')}/v1/listen?${q}`;
};

interface DgClient {
  ws: WebSocket;
  requestId: string;
  upgrade: IncomingMessage;
  events: DgEvent[];
  closed: Promise<{ code: number; reason: string }>;
  until(pred: (e: DgEvent) => boolean, options?: { from?: number; timeoutMs?: number }): Promise<DgEvent>;
  stream(bytes: Buffer, options?: { frameBytes: number; intervalMs: number }): Promise<void>;
  send(message: unknown): void;
  ofType(type: string): DgEvent[];
}

/** 100 ms frames of 16 kHz s16, sent twice as fast as real time. */
const FAST = { frameBytes: 3200, intervalMs: 50 };

async function connect(query: Record<string, string | string[]>, options: { key?: string; protocols?: string[] } = {}): Promise<DgClient> {
  const requestId = newRequestId('ws');
  const headers: Record<string, string> = { 'x-request-id': requestId };
  if (!options.protocols) headers.authorization = `Token ${options.key ?? h.key}`;
  const ws = new WebSocket(listenUrl(query), options.protocols ?? [], { headers });
  const { log, closed } = socketEvents<DgEvent>(ws, { describe: describeEvent });
  const { events } = log;
  ws.on('error', () => {});
  const upgrade = await new Promise<IncomingMessage>((resolve, reject) => {
    ws.once('upgrade', resolve);
    ws.once('unexpected-response', (req, res) => {
      req.destroy();
      reject(new Error(`upgrade refused: ${res.statusCode}`));
    });
    ws.once('error', reject);
  });
  await new Promise<void>((resolve) => (ws.readyState === WebSocket.OPEN ? resolve() : ws.once('open', () => resolve())));
  return {
    ws,
    requestId,
    upgrade,
    events,
    closed,
    until: (pred, options) => log.first(pred, options),
    async stream(bytes, { frameBytes, intervalMs } = FAST) {
      for (let at = 0; at < bytes.length && ws.readyState === WebSocket.OPEN; at += frameBytes) {
        ws.send(bytes.subarray(at, Math.min(bytes.length, at + frameBytes)));
        if (intervalMs > 0) await new Promise((r) => setTimeout(r, intervalMs));
      }
    },
    send(message) {
      ws.send(typeof message === 'string' ? message : JSON.stringify(message));
    },
    ofType: (type) => events.filter((e) => e.type === type),
  };
}

function summary(events: DgEvent[]): string {
  return events.map(describeEvent).join(', ');
}

function describeEvent(e: DgEvent): string {
  if (e.type !== 'Results') return e.type;
  const r = e as DgResults;
  const flags = [r.is_final ? 'final' : 'interim', r.speech_final ? 'speech_final' : '', r.from_finalize ? 'from_finalize' : ''].filter(Boolean).join(',');
  return `Results(${flags}: ${r.channel.alternatives[0]!.transcript})`;
}

const results = (c: DgClient) => c.ofType('Results') as DgResults[];
const finals = (c: DgClient) => results(c).filter((r) => r.is_final === true);
const textOf = (r: DgResults) => r.channel.alternatives[0]!.transcript;
/** The finals' transcripts joined: what a Deepgram client keeps. */
const finalText = (c: DgClient) => finals(c).map(textOf).filter(Boolean).join(' ');
const millisOf = (samples: number, rate = 16000) => Math.round((samples * 1000) / rate);

/** Sends CloseStream; Metadata is the last event, the close is 1000, the ledger holds exactly the audio's cost. */
async function closeStream(c: DgClient, audioMillis: number): Promise<DgEvent> {
  c.send({ type: 'CloseStream' });
  const { code, reason } = await c.closed;
  expect(code).toBe(1000);
  expect(reason).toBe('client_close');
  return expectMetadataAndBilled(c, audioMillis);
}

async function expectMetadataAndBilled(c: DgClient, audioMillis: number): Promise<DgEvent> {
  const last = c.events.at(-1)!;
  expect(last.type, summary(c.events)).toBe('Metadata');
  expect(c.ofType('Metadata')).toHaveLength(1);
  expect(last).toMatchObject({ request_id: c.requestId, duration: audioMillis / 1000, channels: 1, transaction_key: 'deprecated' });
  expect(new Date(last.created as string).toISOString()).toBe(last.created);
  const cost = audioCost(audioMillis);
  const billed = await expectDebited(h, c.requestId, cost);
  expect(billed.usageMicros).toBe(cost);
  if (cost > 0n) expect(billed.audioMillis).toBe(audioMillis);
  expect(billed.usage.every((u) => u.modality === 'stt' && u.route === 'listen.websocket')).toBe(true);
  return last;
}

/** Results in Deepgram's shape: every field a Deepgram client reads, with consistent values. */
function expectResultsShape(r: DgResults, punctuate: boolean, requestId: string) {
  expect(Object.keys(r).sort()).toEqual(['channel', 'channel_index', 'duration', 'from_finalize', 'is_final', 'metadata', 'speech_final', 'start', 'type']);
  expect(r.channel_index).toEqual([0, 1]);
  expect(r.metadata).toMatchObject({ request_id: requestId, model_info: { name: expect.any(String) } });
  expect(r.start).toBeGreaterThanOrEqual(0);
  expect(r.duration).toBeGreaterThanOrEqual(0);
  const alt = r.channel.alternatives[0]!;
  expect(r.channel.alternatives).toHaveLength(1);
  expect(alt.confidence).toBe(alt.transcript ? 1 : 0);
  let last = 0;
  for (const w of alt.words) {
    expect(Object.keys(w).sort()).toEqual(punctuate ? ['confidence', 'end', 'punctuated_word', 'start', 'word'] : ['confidence', 'end', 'start', 'word']);
    expect(w.word).toMatch(/^[a-z0-9'-]+$/);
    expect(w.start).toBeLessThan(w.end);
    expect(w.start).toBeGreaterThanOrEqual(last);
    // Word times are the session's, within what the result covers.
    expect(w.end).toBeLessThanOrEqual(r.start + r.duration + 1e-6);
    last = w.start;
  }
  if (!punctuate) expect(alt.transcript).toBe(alt.words.map((w) => w.word).join(' '));
}

// ---------------------------------------------------------------------------------------

describe("refusals before the upgrade (HTTP answers with Deepgram's error fields added to the envelope)", () => {
  function refusedUpgrade(
    query: Record<string, string>,
    headers: Record<string, string>,
    protocols: string[] = [],
  ): Promise<{ status: number; headers: IncomingMessage['headers']; body: string }> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(listenUrl(query), protocols, { headers });
      ws.on('open', () => {
        ws.terminate();
        reject(new Error('the upgrade was accepted'));
      });
      ws.on('unexpected-response', (req, res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        });
      });
      ws.on('error', reject);
    });
  }

  async function refused(
    q: Record<string, string>,
    headers: Record<string, string>,
    expected: { status: number; code: string; errCode: string; param: string | null },
    protocols?: string[],
  ) {
    const before = await ledgerRowCount(h);
    const requestId = newRequestId('refused');
    const res = await refusedUpgrade(q, { 'x-request-id': requestId, ...headers }, protocols);
    expect(res.status, res.body).toBe(expected.status);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = JSON.parse(res.body) as {
      err_code: string;
      err_msg: string;
      request_id: string;
      error: { message: string; type: string; code: string; param: string | null };
    };
    expect(Object.keys(body).sort()).toEqual(['err_code', 'err_msg', 'error', 'request_id']);
    expect({ code: body.error.code, param: body.error.param }, body.error.message).toEqual({ code: expected.code, param: expected.param });
    expect(body).toMatchObject({ err_code: expected.errCode, err_msg: body.error.message, request_id: requestId });
    expect(res.headers['dg-error']).toBe(body.err_msg.replace(/[^\x20-\x7e]/g, '?'));
    expect(res.headers['x-request-id']).toBe(requestId);
    expect(await ledgerRowCount(h)).toBe(before);
    return { ...res, body };
  }

  const token = (key: string) => ({ authorization: `Token ${key}` });
  const q = (over: Record<string, string> = {}) => ({ model: 'local-stt', ...over });

  it('401 INVALID_AUTH without a key, with an unknown key (Token, Bearer or the token subprotocol) and with a revoked one', async () => {
    const { body } = await refused(q(), {}, { status: 401, code: 'invalid_api_key', errCode: 'INVALID_AUTH', param: null });
    expect(body.err_msg).toContain('Token');
    await refused(q(), token('sk_svc_nope'), { status: 401, code: 'invalid_api_key', errCode: 'INVALID_AUTH', param: null });
    await refused(q(), {}, { status: 401, code: 'invalid_api_key', errCode: 'INVALID_AUTH', param: null }, ['token', 'sk_svc_nope']);
    // Two different keys (header and subprotocol) are refused, not one of them picked.
    await refused(q(), token(h.key), { status: 401, code: 'invalid_api_key', errCode: 'INVALID_AUTH', param: null }, ['token', 'sk_svc_other']);
    await refused(q(), { authorization: 'Bearer sk_svc_nope' }, { status: 401, code: 'invalid_api_key', errCode: 'INVALID_AUTH', param: null });
    await refused(q(), token(keys.revoked), { status: 401, code: 'api_key_disabled', errCode: 'INVALID_AUTH', param: null });
  });

  it('402 ASR_PAYMENT_REQUIRED for an org with a zero balance', async () => {
    await refused(q(), token(keys.zero), { status: 402, code: 'insufficient_quota', errCode: 'ASR_PAYMENT_REQUIRED', param: null });
  });

  it('429 TOO_MANY_REQUESTS with Retry-After once the key has used its one request of the minute', async () => {
    const c = await connect(q(), { key: keys.limited });
    await closeStream(c, 0);
    const { headers } = await refused(q(), token(keys.limited), { status: 429, code: 'rate_limit_exceeded', errCode: 'TOO_MANY_REQUESTS', param: null });
    expect(headers['retry-after']).toBe('45');
  });

  it('400 for parameters the gateway cannot honour, naming the parameter', async () => {
    const cases: [Record<string, string>, string, string][] = [
      [{ channels: '2' }, 'channels', 'invalid_request'],
      [{ encoding: 'opus' }, 'encoding', 'invalid_request'],
      [{ encoding: 'linear32' }, 'encoding', 'invalid_request'],
      [{ endpointing: 'soon' }, 'endpointing', 'invalid_request'],
      [{ endpointing: '-5' }, 'endpointing', 'invalid_request'],
      [{ utterance_end_ms: '500' }, 'utterance_end_ms', 'invalid_request'],
      [{ interim_results: 'yes' }, 'interim_results', 'invalid_request'],
      [{ vad_events: '1' }, 'vad_events', 'invalid_request'],
      [{ sample_rate: '11025' }, 'sample_rate', 'invalid_sample_rate'],
    ];
    for (const [params, param, code] of cases) {
      await refused(q(params), token(h.key), { status: 400, code, errCode: code.toUpperCase(), param });
    }
    await refused({}, token(h.key), { status: 400, code: 'invalid_request', errCode: 'INVALID_REQUEST', param: 'model' });
  });

  it('404 for a model the registry does not hold (a Deepgram name not registered), saying how to use that name; 503 for a batch-only model', async () => {
    const { body } = await refused({ model: 'nova-2-general' }, token(h.key), {
      status: 404,
      code: 'model_not_found',
      errCode: 'MODEL_NOT_FOUND',
      param: 'model',
    });
    expect(body.err_msg).toContain("register a model with the id 'nova-2-general'");
    await refused({ model: 'chat-model' }, token(h.key), { status: 404, code: 'model_not_found', errCode: 'MODEL_NOT_FOUND', param: 'model' });
    await refused({ model: 'remote-stt' }, token(h.key), { status: 503, code: 'model_offline', errCode: 'MODEL_OFFLINE', param: null });
  });

  it("errors answered before any route is reached carry Deepgram's fields too: a path that does not decode, an id longer than the router takes, a method the path does not have", async () => {
    const cases: [method: string, path: string, status: number, code: string][] = [
      ['GET', '/v1/listen/%zz', 400, 'invalid_request'],
      ['PUT', '/v1/listen', 405, 'method_not_allowed'],
      ['DELETE', '/v1/speak', 405, 'method_not_allowed'],
      ['GET', `/v2/listen/${'x'.repeat(101)}`, 404, 'not_found'],
    ];
    for (const [method, path, status, code] of cases) {
      const requestId = newRequestId('unrouted');
      const res = await fetch(`${h.url}${path}`, { method, headers: { ...token(h.key), 'x-request-id': requestId } });
      const body = (await res.json()) as { err_code: string; err_msg: string; request_id: string; error: { code: string; message: string } };
      expect({ status: res.status, code: body.error.code }, `${method} ${path}`).toEqual({ status, code });
      expect(body, `${method} ${path}`).toMatchObject({ err_code: code.toUpperCase(), err_msg: body.error.message });
      expect(res.headers.get('dg-error')).toBe(body.err_msg);
    }
  });

  it('a plain GET is 400 upgrade_required', async () => {
    const res = await fetch(`${h.url}/v1/listen?model=local-stt`, { headers: token(h.key) });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { err_code: string; error: { code: string } };
    expect(body).toMatchObject({ err_code: 'UPGRADE_REQUIRED', error: { code: 'upgrade_required' } });
  });
});

describe('live session', () => {
  it("Authorization: Token, or the subprotocols token + key (Deepgram's browser clients); dg-request-id on the 101; nothing is sent before audio; CloseStream ends with Metadata, free without audio", async () => {
    const viaHeader = await connect({ model: 'local-stt' });
    const viaProtocol = await connect({ model: 'nova-3' }, { protocols: ['token', h.key] });
    expect(viaProtocol.ws.protocol).toBe('token');
    for (const c of [viaHeader, viaProtocol]) {
      expect(c.upgrade.headers['dg-request-id']).toBe(c.requestId);
      c.send({ type: 'KeepAlive' });
      await closeStream(c, 0);
      expect(c.events.map((e) => e.type)).toEqual(['Metadata']);
    }
    expect(viaProtocol.events[0]).toMatchObject({ models: ['nova-3'] });
    expect((await ledgerOf(h, viaHeader.requestId)).ledger).toHaveLength(0);
  });

  it('what LiveKit sends (interim_results, vad_events, endpointing=300, utterance_end_ms, punctuate): SpeechStarted, interim then final Results, speech_final at the end of the utterance, UtteranceEnd; CloseStream bills exactly', async () => {
    const s = await speech(FOX);
    const audio = concat(s.samples, silence(1.5));
    const c = await connect({
      model: 'local-stt',
      encoding: 'linear16',
      sample_rate: '16000',
      channels: '1',
      interim_results: 'true',
      vad_events: 'true',
      endpointing: '300',
      utterance_end_ms: '1000',
      punctuate: 'true',
      smart_format: 'true',
      no_delay: 'true',
      language: 'en-US',
    });
    await c.stream(s16le(audio));
    await c.until((e) => e.type === 'UtteranceEnd');
    const metadata = await closeStream(c, millisOf(audio.length));
    expect(metadata).toMatchObject({ models: ['local-stt'] });

    const started = c.ofType('SpeechStarted');
    expect(started.length, summary(c.events)).toBeGreaterThanOrEqual(1);
    expect(c.events.indexOf(started[0]!)).toBeLessThan(c.events.indexOf(finals(c)[0]!));
    expect(Object.keys(started[0]!).sort()).toEqual(['channel', 'timestamp', 'type']);
    expect(started[0]).toMatchObject({ channel: [0, 1] });
    expect(started[0]!.timestamp as number).toBeLessThan(s.samples.length / 16000);

    const interims = results(c).filter((r) => r.is_final === false);
    expect(interims.length, summary(c.events)).toBeGreaterThanOrEqual(3);
    for (const r of results(c)) expectResultsShape(r, true, c.requestId);
    for (const r of interims) expect(r).toMatchObject({ speech_final: false, from_finalize: false });

    const speechFinal = finals(c).filter((r) => r.speech_final);
    expect(speechFinal.length, summary(c.events)).toBeGreaterThanOrEqual(1);
    expect(finals(c).every((r) => r.from_finalize === false)).toBe(true);
    expect(wer(FOX, finalText(c)), finalText(c)).toBeLessThanOrEqual(0.25);
    // Finals cover the audio in order, each starting where the one before ended.
    let end = 0;
    for (const r of finals(c)) {
      expect(r.start).toBeCloseTo(end, 3);
      end = r.start + r.duration;
    }
    // UtteranceEnd follows the last speech_final, at the end of the last word.
    const utteranceEnd = c.ofType('UtteranceEnd');
    expect(utteranceEnd).toHaveLength(1);
    expect(Object.keys(utteranceEnd[0]!).sort()).toEqual(['channel', 'last_word_end', 'type']);
    const lastSpeechFinal = speechFinal.at(-1)!;
    expect(c.events.indexOf(lastSpeechFinal)).toBeLessThan(c.events.indexOf(utteranceEnd[0]!));
    const lastWord = finals(c)
      .flatMap((r) => r.channel.alternatives[0]!.words)
      .at(-1)!;
    expect(utteranceEnd[0]!.last_word_end).toBeCloseTo(lastWord.end, 3);
    expect(c.ofType('Error')).toHaveLength(0);
  }, 60_000);

  it("Deepgram's defaults (no interim_results, vad_events, utterance_end_ms or punctuate; endpointing 10 ms, so 200 here): one speech_final final per sentence, plain words, no SpeechStarted or UtteranceEnd", async () => {
    const s = await speech(CALL, 'rms');
    const audio = concat(s.samples, silence(1));
    const c = await connect({ model: 'local-stt' });
    await c.stream(s16le(audio));
    await c.until((e) => e.type === 'Results' && e.speech_final === true);
    await closeStream(c, millisOf(audio.length));
    expect(results(c).every((r) => r.is_final)).toBe(true);
    // Not cut between words: the pauses inside the sentence are shorter than 200 ms.
    expect(finals(c), summary(c.events)).toHaveLength(1);
    expect(finals(c)[0]!.speech_final).toBe(true);
    for (const r of results(c)) expectResultsShape(r, false, c.requestId);
    expect(c.ofType('SpeechStarted')).toHaveLength(0);
    expect(c.ofType('UtteranceEnd')).toHaveLength(0);
    expect(wer(CALL, finalText(c)), finalText(c)).toBeLessThanOrEqual(0.25);
  });

  it("endpointing=false: finals come (the gateway's own turn detection cuts them) but none is speech_final; booleans in any case (Python clients send False)", async () => {
    const s = await speech(TABLE, 'awb');
    const audio = concat(s.samples, silence(1.5));
    const c = await connect({ model: 'local-stt', endpointing: 'False', interim_results: 'False' });
    await c.stream(s16le(audio));
    await c.until((e) => e.type === 'Results' && e.is_final === true);
    await closeStream(c, millisOf(audio.length));
    expect(finals(c).length).toBeGreaterThanOrEqual(1);
    expect(results(c).every((r) => r.is_final)).toBe(true);
    expect(finals(c).every((r) => r.speech_final === false)).toBe(true);
    expect(wer(TABLE, finalText(c)), finalText(c)).toBeLessThanOrEqual(0.35);
  });

  it('Finalize: a from_finalize final with what was heard; a Finalize with nothing pending gets an empty from_finalize final; KeepAlive is silent; bad messages get an Error event and the session carries on', async () => {
    const a = trimSilence((await speech(FOX)).samples);
    const c = await connect({ model: 'local-stt', endpointing: 'false' });
    for (const m of ['hello', '{"type":"Dance"}', '[1]', '{"type":"finalize"}x']) c.send(m);
    await vi.waitFor(() => expect(c.ofType('Error')).toHaveLength(4), { timeout: 10_000, interval: 20 });
    for (const e of c.ofType('Error')) {
      expect(Object.keys(e).sort()).toEqual(['code', 'description', 'type']);
      expect(e.code).toBe('invalid_message');
    }
    c.send({ type: 'Finalize' });
    const empty = (await c.until((e) => e.type === 'Results')) as DgResults;
    expect(empty).toMatchObject({ is_final: true, from_finalize: true, speech_final: false });
    expect(textOf(empty)).toBe('');
    c.send({ type: 'KeepAlive' });
    await c.stream(s16le(a));
    c.send({ type: 'Finalize' });
    const flushed = (await c.until((e) => e.type === 'Results' && e.from_finalize === true && textOf(e as DgResults) !== '')) as DgResults;
    expect(wer(FOX, textOf(flushed)), textOf(flushed)).toBeLessThanOrEqual(0.25);
    expect(flushed).toMatchObject({ is_final: true, speech_final: false });
    await closeStream(c, millisOf(a.length));
    expect(c.ofType('Error')).toHaveLength(4);
    // One answer per Finalize: the empty one, then the one with words.
    expect(results(c).filter((r) => r.from_finalize)).toHaveLength(2);
  });

  it('encoding=mulaw at 8 kHz transcribes the words', async () => {
    const s = await speech(CALL, 'rms');
    const audio = toRate(concat(s.samples, silence(1)), 8000);
    const c = await connect({ model: 'local-stt', encoding: 'mulaw', sample_rate: '8000', endpointing: '300' });
    await c.stream(encodeSamples(audio, 'pcm_mulaw'), { frameBytes: 800, intervalMs: 50 });
    await c.until((e) => e.type === 'Results' && e.speech_final === true);
    await closeStream(c, millisOf(audio.length, 8000));
    expect(wer(CALL, finalText(c)), finalText(c)).toBeLessThanOrEqual(0.35);
  });

  it('an org that runs out of credit mid-session gets an Error event, Metadata and a 1008 close before the audio it cannot pay for; the ledger holds exactly what was accepted', async () => {
    const prisma = h.testDb.db.prisma;
    // 0.000250 USD at 0.0001 USD/s: the third second cannot be reserved, so exactly 2 s are taken.
    const org = await createOrg(h.testDb.db, { name: 'short of credit', creditsMicros: 250n });
    const key = (await createApiKey(prisma, { orgId: org.id, name: 'k' })).key;
    const audio = concat((await speech(FOX)).samples, (await speech(TABLE, 'awb')).samples);
    const c = await connect({ model: 'local-stt' }, { key });
    void c.stream(s16le(audio), { frameBytes: 3200, intervalMs: 100 });
    const { code, reason } = await c.closed;
    expect(code).toBe(1008);
    expect(reason).toBe('insufficient_quota');
    const errors = c.ofType('Error');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: 'insufficient_quota' });
    expect(c.events.indexOf(errors[0]!)).toBe(c.events.length - 2);
    await expectMetadataAndBilled(c, 2000);
    expect((await prisma.org.findUniqueOrThrow({ where: { id: org.id } })).balanceMicros).toBe(250n - audioCost(2000));
    await expect.poll(async () => (await prisma.org.findUniqueOrThrow({ where: { id: org.id } })).heldMicros).toBe(0n);
  });
});

describe('pre-recorded POST /v1/listen', () => {
  const post = (query: Record<string, string>, body: BodyInit | null, headers: Record<string, string> = {}) =>
    fetch(`${h.url}/v1/listen?${new URLSearchParams(query)}`, {
      method: 'POST',
      headers: { authorization: `Token ${h.key}`, 'content-type': 'audio/wav', ...headers },
      body,
    });

  interface Prerecorded {
    metadata: Record<string, unknown>;
    results: {
      channels: { alternatives: { transcript: string; confidence: number; words: DgWord[] }[] }[];
      utterances?: { start: number; end: number; transcript: string; words: DgWord[]; channel: number }[];
    };
  }

  it("a WAV body: Deepgram's answer (metadata, results.channels[0].alternatives[0] with words), the spend headers, the ledger exact", async () => {
    const s = await speech(FOX);
    const requestId = newRequestId('batch');
    const res = await post({ model: 'nova-3', punctuate: 'true' }, new Uint8Array(s.wav), { 'x-request-id': requestId });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(res.headers.get('dg-request-id')).toBe(requestId);
    const body = (await res.json()) as Prerecorded;
    expect(Object.keys(body).sort()).toEqual(['metadata', 'results']);
    const millis = millisOf(s.samples.length);
    expect(body.metadata).toMatchObject({ request_id: requestId, channels: 1, models: ['nova-3'], duration: s.samples.length / 16000 });
    expect(body.metadata.sha256).toMatch(/^[0-9a-f]{64}$/);
    const alt = body.results.channels[0]!.alternatives[0]!;
    expect(wer(FOX, alt.transcript), alt.transcript).toBeLessThanOrEqual(0.25);
    expect(alt.words.length).toBeGreaterThanOrEqual(6);
    for (const w of alt.words) expect(Object.keys(w).sort()).toEqual(['confidence', 'end', 'punctuated_word', 'start', 'word']);
    expect(body.results.utterances).toBeUndefined();
    const cost = audioCost(millis);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    const billed = await expectDebited(h, requestId, cost);
    expect(billed.usage).toHaveLength(1);
    expect(billed.usage[0]).toMatchObject({ route: 'listen', modality: 'stt', modelId: 'nova-3', audioMillis: millis });
  });

  it('raw linear16 (application/octet-stream, as the SDK sends) with utterances=true: one utterance per sentence', async () => {
    const a = trimSilence((await speech(FOX)).samples);
    const b = trimSilence((await speech(CALL, 'rms')).samples);
    const audio = concat(a, silence(1.5), b);
    const res = await post({ model: 'local-stt', encoding: 'linear16', sample_rate: '16000', utterances: 'true' }, new Uint8Array(s16le(audio)), {
      'content-type': 'application/octet-stream',
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const body = (await res.json()) as Prerecorded;
    expect(body.metadata.duration).toBe(audio.length / 16000);
    const utterances = body.results.utterances!;
    expect(
      utterances.map((u) => u.transcript),
      JSON.stringify(utterances),
    ).toHaveLength(2);
    expect(wer(FOX, utterances[0]!.transcript), utterances[0]!.transcript).toBeLessThanOrEqual(0.25);
    expect(wer(CALL, utterances[1]!.transcript), utterances[1]!.transcript).toBeLessThanOrEqual(0.25);
    expect(utterances[0]!.end).toBeLessThanOrEqual(a.length / 16000 + 0.05);
    expect(utterances[1]!.start).toBeGreaterThanOrEqual((a.length + 24000) / 16000 - 0.05);
    for (const u of utterances) {
      expect(u.channel).toBe(0);
      expect(u.transcript).toBe(u.words.map((w) => w.word).join(' '));
    }
  });

  it('raw mulaw at 8 kHz is decoded as declared', async () => {
    const s = await speech(CALL);
    const audio = toRate(s.samples, 8000);
    const requestId = newRequestId('mulaw');
    const res = await post({ model: 'local-stt', encoding: 'mulaw', sample_rate: '8000' }, new Uint8Array(encodeSamples(audio, 'pcm_mulaw')), {
      'content-type': 'audio/basic',
      'x-request-id': requestId,
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const body = (await res.json()) as Prerecorded;
    expect(body.metadata.duration).toBe(audio.length / 8000);
    const transcript = body.results.channels[0]!.alternatives[0]!.transcript;
    expect(wer(CALL, transcript), transcript).toBeLessThanOrEqual(0.25);
    await expectDebited(h, requestId, audioCost(millisOf(audio.length, 8000)));
  });

  it("refusals carry Deepgram's fields and cost nothing: a URL to fetch, no body, a compressed file, no key, a zero balance, an unknown model", async () => {
    const before = await ledgerRowCount(h);
    const wav = new Uint8Array(wavFile([silence(0.5)], 16000));
    const cases: [Promise<Response>, number, string, string][] = [
      [
        post({ model: 'local-stt' }, JSON.stringify({ url: 'https://example.com/a.wav' }), { 'content-type': 'application/json' }),
        400,
        'invalid_request',
        'INVALID_REQUEST',
      ],
      [post({ model: 'local-stt' }, null), 400, 'invalid_request', 'INVALID_REQUEST'],
      [
        post({ model: 'local-stt' }, new Uint8Array(Buffer.concat([Buffer.from('ID3'), Buffer.alloc(400)]))),
        400,
        'unsupported_audio_format',
        'UNSUPPORTED_AUDIO_FORMAT',
      ],
      [post({ model: 'local-stt' }, wav, { authorization: 'Token sk_svc_nope' }), 401, 'invalid_api_key', 'INVALID_AUTH'],
      [post({ model: 'local-stt' }, wav, { authorization: `Token ${keys.zero}` }), 402, 'insufficient_quota', 'ASR_PAYMENT_REQUIRED'],
      [post({ model: 'nova-2' }, wav), 404, 'model_not_found', 'MODEL_NOT_FOUND'],
      [post({ model: 'local-stt', channels: '2' }, wav), 400, 'invalid_request', 'INVALID_REQUEST'],
    ];
    for (const [pending, status, code, errCode] of cases) {
      const res = await pending;
      const body = (await res.json()) as { err_code: string; err_msg: string; request_id: string; error: { code: string; message: string } };
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(body).toMatchObject({ err_code: errCode, err_msg: body.error.message, error: { code } });
      expect(body.request_id).toBe(res.headers.get('x-request-id'));
    }
    expect(await ledgerRowCount(h)).toBe(before);
  });
});
