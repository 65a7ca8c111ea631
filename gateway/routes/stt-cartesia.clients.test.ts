// Streaming STT as Cartesia's real clients use it, unmodified but for their base URL:
// - @cartesia/cartesia-js 4.2 `stt.manualFinalize.websocket()` on /stt/websocket (plain-text
//   `finalize` and `close`, waiting for `flush_done` and `done`) and
//   `stt.autoFinalize.websocket()` on /stt/turns/websocket (turn events, `config`, `close`),
//   both from its CommonJS build (its ESM build cannot load `ws` under Node 22's import; its STT
//   sockets connect with ws: to an http base URL);
// - LiveKit's Cartesia STT (@livekit/agents-plugin-cartesia 1.8) on /stt/turns/websocket, which
//   sends its key as X-API-Key and `{"type":"close"}` at the end of its input.
// Real gateway runtime, throw-away database, the local recogniser, speech by flite. Asserted:
// transcripts holding the spoken words, the events each client reads, error paths (bad key,
// zero balance, a bad config), and metering exact.
import { createRequire } from 'node:module';
import { initializeLogger, stt as agentsStt, type APIConnectOptions } from '@livekit/agents';
import * as livekitCartesia from '@livekit/agents-plugin-cartesia';
import { AudioFrame } from '@livekit/rtc-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { EventLog } from '../../test/support/socket-events.ts';
import {
  audioCost,
  concat,
  expectDebited,
  s16le,
  settleRecognizers,
  silence,
  speech,
  startSttGateway,
  trimSilence,
  wer,
} from '../../test/support/stt-routes.ts';

// The CommonJS build, as ENVIRONMENT.md says (its ESM build's bare require('ws') fails under import).
const require = createRequire(import.meta.url);
const { Cartesia } = require('@cartesia/cartesia-js') as typeof import('@cartesia/cartesia-js');
type Event = { type: string; [k: string]: unknown };
type Closed = { code: number; reason: string };

const FOX = 'the quick brown fox jumps over the lazy dog';
const CALL = 'please call me tomorrow morning about the meeting';
const WEATHER = 'the weather today is sunny with a light breeze';

let h: GatewayHarness;

beforeAll(async () => {
  initializeLogger({ pretty: false, level: 'warn' });
  h = await startSttGateway();
  await Promise.all([speech(FOX), speech(CALL, 'rms'), speech(WEATHER)]);
}, 120_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
});

const millisOf = (samples: number) => Math.round(samples / 16);
const pace = () => new Promise((r) => setTimeout(r, 20));

/** An org of its own with `credit`, and its key. */
async function orgWithKey(credit: bigint) {
  const org = await createOrg(h.testDb.db, { name: 'client test', creditsMicros: credit });
  return (await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k' })).key;
}

/** What a cartesia-js socket reports: every API event, the errors it surfaces, and its close. */
function record(ws: { on(event: string, fn: (...args: never[]) => void): unknown }) {
  const log = new EventLog<Event>();
  const errors: { message: string; error?: Event }[] = [];
  const closed = new Promise<Closed>((resolve) =>
    ws.on('close', (code: number, reason: string) => {
      log.end(`closed (${code})`);
      resolve({ code, reason: String(reason) });
    }),
  );
  ws.on('event', log.push);
  // Without a listener the client turns every error into an unhandled rejection.
  ws.on('error', (e: { message: string; error?: Event }) => errors.push(e));
  /** The first event matching `pred`; rejects if the socket closes first. */
  const until = (pred: (e: Event) => boolean) => log.first(pred);
  return { events: log.events, errors, closed, until };
}

/** Sends s16 audio in 100 ms frames through the client's sendRaw. */
async function sendAudio(ws: { sendRaw(data: Uint8Array): void }, samples: Float32Array): Promise<void> {
  const bytes = s16le(samples);
  for (let at = 0; at < bytes.length; at += 3200) {
    ws.sendRaw(bytes.subarray(at, Math.min(bytes.length, at + 3200)));
    await pace();
  }
}

describe('@cartesia/cartesia-js stt.manualFinalize (CommonJS build) on /stt/websocket', () => {
  it('finalize after each sentence, then close: two finals whose texts join as they are, flush_done, then done; billed exactly', async () => {
    const a = trimSilence((await speech(FOX)).samples);
    const b = trimSilence((await speech(CALL, 'rms')).samples);
    const client = new Cartesia({ apiKey: h.key, baseURL: h.url, maxRetries: 0 });
    const ws = client.stt.manualFinalize.websocket({ model: 'local-stt', encoding: 'pcm_s16le', sample_rate: 16000 });
    const r = record(ws);
    await sendAudio(ws, a);
    ws.send('finalize');
    await r.until((e) => e.type === 'flush_done');
    await sendAudio(ws, b);
    ws.send('close');
    await r.until((e) => e.type === 'done');
    expect((await r.closed).code).toBe(1000);

    expect(r.errors).toEqual([]);
    const id = r.events[0]!.request_id as string;
    expect(id).toMatch(/\S/);
    for (const e of r.events) expect(e.request_id).toBe(id);
    expect(r.events.at(-1)).toEqual({ type: 'done', request_id: id });
    const finals = r.events.filter((e) => e.type === 'transcript' && e.is_final);
    expect(finals).toHaveLength(2);
    // As Cartesia's docs tell clients to: concatenate the finals' texts, adding nothing.
    const transcript = finals.map((f) => f.text as string).join('');
    expect(wer(`${FOX} ${CALL}`, transcript), transcript).toBeLessThanOrEqual(0.25);
    expect(finals.every((f) => typeof f.duration === 'number' && (f.duration as number) > 0 && Array.isArray(f.words))).toBe(true);
    const flush = r.events.findIndex((e) => e.type === 'flush_done');
    expect(r.events.indexOf(finals[0]!)).toBeLessThan(flush);
    expect(r.events.indexOf(finals[1]!)).toBeGreaterThan(flush);
    await expectDebited(h, id, audioCost(millisOf(a.length + b.length)));
  });

  it('keyterm, as the client sends it (repeated), reaches the recogniser: "sunny" rather than "sunday"', async () => {
    const audio = trimSilence((await speech(WEATHER)).samples);
    const client = new Cartesia({ apiKey: h.key, baseURL: h.url, maxRetries: 0 });
    const ws = client.stt.manualFinalize.websocket({ model: 'local-stt', encoding: 'pcm_s16le', sample_rate: 16000, keyterm: ['light breeze', 'sunny'] });
    const r = record(ws);
    await sendAudio(ws, audio);
    ws.send('close');
    await r.until((e) => e.type === 'done');
    const text = r.events
      .filter((e) => e.type === 'transcript' && e.is_final)
      .map((e) => e.text as string)
      .join('');
    expect(text).toMatch(/\bsunny\b/);
    expect(text).not.toMatch(/\bsunday\b/);
    expect(wer(WEATHER, text), text).toBeLessThanOrEqual(0.25);
  });

  it('a bad key and a zero balance: the client reports the refused upgrade (401, 402) and closes', async () => {
    const broke = await orgWithKey(0n);
    for (const [key, status] of [
      ['sk_svc_nope', 401],
      [broke, 402],
    ] as const) {
      const client = new Cartesia({ apiKey: key, baseURL: h.url, maxRetries: 0 });
      const ws = client.stt.manualFinalize.websocket({ model: 'local-stt', encoding: 'pcm_s16le', sample_rate: 16000 });
      const r = record(ws);
      const { code } = await r.closed;
      expect(code).not.toBe(1000);
      expect(r.events).toEqual([]);
      expect(r.errors.map((e) => e.message).join(' | ')).toContain(String(status));
    }
  });
});

describe('@cartesia/cartesia-js stt.autoFinalize (CommonJS build) on /stt/turns/websocket', () => {
  it('connected, two turns with updates and their transcripts at turn.end; a config is taken, a bad one reported with Cartesia\u2019s fields; close; billed exactly', async () => {
    const a = trimSilence((await speech(FOX)).samples);
    const b = trimSilence((await speech(CALL, 'rms')).samples);
    const audio = concat(silence(0.3), a, silence(2), b, silence(2));
    const client = new Cartesia({ apiKey: h.key, baseURL: h.url, maxRetries: 0 });
    const ws = client.stt.autoFinalize.websocket({
      model: 'local-stt',
      encoding: 'pcm_s16le',
      sample_rate: 16000,
      turn_eager_end_threshold: 0.4,
      turn_end_threshold: 0.2,
    });
    const r = record(ws);
    await r.until((e) => e.type === 'connected');
    ws.send({ type: 'config', turn: { end_timeout_ms: 1500 } });
    ws.send({ type: 'config', turn: { eager_end_threshold: 0.1 } });
    await sendAudio(ws, audio);
    ws.send({ type: 'close' });
    expect((await r.closed).code).toBe(1000);

    const id = r.events[0]!.request_id as string;
    expect(r.events[0]).toEqual({ type: 'connected', request_id: id });
    for (const e of r.events) expect(e.request_id).toBe(id);
    // The bad config, and only it, came back as an error the client surfaced with Cartesia's fields.
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]!.error).toMatchObject({ type: 'error', status_code: 400, error_code: 'invalid_message', request_id: id });
    expect(r.errors[0]!.error!.message).toMatch(/eager_end_threshold/);
    const turnEvents = r.events.filter((e) => e.type.startsWith('turn.'));
    const starts = turnEvents.filter((e) => e.type === 'turn.start');
    const ends = turnEvents.filter((e) => e.type === 'turn.end');
    expect(starts, turnEvents.map((e) => e.type).join(' ')).toHaveLength(2);
    expect(ends).toHaveLength(2);
    expect(turnEvents[0]!.type).toBe('turn.start');
    expect(turnEvents.at(-1)!.type).toBe('turn.end');
    expect(turnEvents.filter((e) => e.type === 'turn.update').length).toBeGreaterThanOrEqual(4);
    expect(wer(FOX, ends[0]!.transcript as string), ends[0]!.transcript as string).toBeLessThanOrEqual(0.25);
    expect(wer(CALL, ends[1]!.transcript as string), ends[1]!.transcript as string).toBeLessThanOrEqual(0.25);
    await expectDebited(h, id, audioCost(millisOf(audio.length)));
  }, 60_000);
});

describe('LiveKit Cartesia STT (@livekit/agents-plugin-cartesia) on /stt/turns/websocket', () => {
  const connOptions: APIConnectOptions = { maxRetry: 0, retryIntervalMs: 0, timeoutMs: 10_000 };

  /**
   * Pushes `samples` as 100 ms frames (each its own buffer) while collecting the stream's events,
   * waits until `enough(events)`, then ends the input (the plugin sends close and gives the
   * server 5 s to finish: audio pushed faster than real time must be recognized before that).
   */
  async function recognize(key: string, samples: Float32Array, enough: (events: agentsStt.SpeechEvent[]) => boolean = () => true) {
    const stt = new livekitCartesia.STT({ apiKey: key, baseUrl: h.url, model: 'local-stt', sampleRate: 16000 });
    const errors: Error[] = [];
    stt.on('error', (e: { error: Error }) => errors.push(e.error));
    const stream = stt.stream({ connOptions });
    const events: agentsStt.SpeechEvent[] = [];
    let seen: () => void = () => {};
    const enoughSeen = new Promise<void>((resolve) => (seen = resolve));
    const reading = (async () => {
      for await (const e of stream) {
        events.push(e);
        if (enough(events)) seen();
      }
      seen(); // the stream ended (an error): nothing more will come
    })();
    const pcm = s16le(samples);
    for (let at = 0; at < pcm.length; at += 3200) {
      const chunk = pcm.subarray(at, Math.min(pcm.length, at + 3200));
      const data = new Int16Array(chunk.length / 2);
      for (let i = 0; i < data.length; i++) data[i] = chunk.readInt16LE(i * 2);
      stream.pushFrame(new AudioFrame(data, 16000, 1, data.length));
      await pace();
    }
    if (enough(events)) seen();
    await enoughSeen;
    stream.endInput();
    await reading;
    return { events, errors };
  }

  it('two sentences: START_OF_SPEECH, interim and final transcripts holding the words, END_OF_SPEECH, usage; billed exactly', async () => {
    const a = trimSilence((await speech(FOX)).samples);
    const b = trimSilence((await speech(CALL, 'rms')).samples);
    let audio = concat(silence(0.3), a, silence(2), b, silence(2));
    // The plugin sends 160 ms chunks and drops a last partial one: whole chunks, so all of it is sent.
    audio = concat(audio, silence((2560 - (audio.length % 2560)) / 16000));
    expect(audio.length % 2560).toBe(0);
    const E = agentsStt.SpeechEventType;
    // Both turns ended (so the input ends after them, as a caller hangs up after speaking).
    const { events, errors } = await recognize(h.key, audio, (got) => got.filter((e) => e.type === E.END_OF_SPEECH).length >= 2);
    expect(errors).toEqual([]);
    const types = events.map((e) => e.type);
    expect(types.filter((t) => t === E.START_OF_SPEECH)).toHaveLength(2);
    expect(types.filter((t) => t === E.END_OF_SPEECH)).toHaveLength(2);
    expect(types.filter((t) => t === E.INTERIM_TRANSCRIPT).length).toBeGreaterThanOrEqual(2);
    // The plugin reports usage at a turn's end: the audio it sent since the last report.
    const usage = events.filter((e) => e.type === E.RECOGNITION_USAGE).map((e) => e.recognitionUsage!.audioDuration);
    expect(usage.length).toBeGreaterThanOrEqual(1);
    expect(usage.every((d) => d > 0)).toBe(true);
    expect(usage.reduce((x, y) => x + y, 0)).toBeLessThanOrEqual(audio.length / 16000 + 1e-9);
    const finals = events.filter((e) => e.type === E.FINAL_TRANSCRIPT).map((e) => e.alternatives![0]!.text);
    expect(finals).toHaveLength(2);
    expect(wer(FOX, finals[0]!), finals[0]).toBeLessThanOrEqual(0.25);
    expect(wer(CALL, finals[1]!), finals[1]).toBeLessThanOrEqual(0.25);
    // The request id the plugin read from the events names the session's ledger rows.
    const id = events.find((e) => e.type === E.FINAL_TRANSCRIPT)!.requestId!;
    expect(events.filter((e) => e.requestId !== undefined).every((e) => e.requestId === id)).toBe(true);
    await expectDebited(h, id, audioCost(millisOf(audio.length)));
  }, 60_000);

  it('a bad key (401) and a zero balance (402): the stream fails with the status, nothing recognized', async () => {
    const broke = await orgWithKey(0n);
    for (const [key, status] of [
      ['sk_svc_nope', 401],
      [broke, 402],
    ] as const) {
      const { events, errors } = await recognize(key, silence(0.32));
      expect(events.filter((e) => e.type === agentsStt.SpeechEventType.FINAL_TRANSCRIPT)).toEqual([]);
      expect(errors).toHaveLength(1);
      expect((errors[0] as Error & { statusCode?: number }).statusCode).toBe(status);
    }
  });
});
