// Deepgram's own client, @deepgram/sdk 5.13.0 unmodified, pointed at the gateway by its `baseUrl`
// option only (it sends `Authorization: Token <key>`): live transcription (`listen.v1.connect`)
// of flite speech streamed as a LiveKit agent streams it, pre-recorded transcription
// (`listen.v1.media.transcribeFile`, run in a child process: see BATCH_SCRIPT), and the error
// paths (bad key, zero balance, credit running out mid-session) as the SDK reports them. Real
// gateway, real database, local pocketsphinx.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeepgramClient } from '@deepgram/sdk';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { EventLog } from '../../test/support/socket-events.ts';
import {
  STT_PRICE,
  audioCost,
  concat,
  expectDebited,
  s16le,
  settleRecognizers,
  silence,
  speech,
  startSttGateway,
  wer,
  words,
} from '../../test/support/stt-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const FOX = 'the quick brown fox jumps over the lazy dog';
const CALL = 'please call me tomorrow morning about the meeting';

let h: GatewayHarness;
let zeroKey = '';

beforeAll(async () => {
  h = await startSttGateway();
  const prisma = h.testDb.db.prisma;
  // The SDK's and the plugins' default model, registered as a model of this gateway.
  await upsertModel(prisma, checkProtocol, {
    id: 'nova-3',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  await h.runtime.ctx.registry.refresh();
  const broke = await createOrg(h.testDb.db, { name: 'broke', creditsMicros: 0n });
  zeroKey = (await createApiKey(prisma, { orgId: broke.id, name: 'zero' })).key;
  await Promise.all([speech(FOX), speech(CALL)]);
}, 120_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
});

const deepgram = (apiKey: string) => new DeepgramClient({ apiKey, baseUrl: h.url });

type Message = { type: string; [k: string]: unknown };
type Results = Message & { is_final?: boolean; speech_final?: boolean; channel: { alternatives: { transcript: string }[] } };

/** A live connection with its messages, its errors and its close, as the SDK reports them. */
async function liveSession(apiKey: string, args: Parameters<DeepgramClient['listen']['v1']['connect']>[0]) {
  const connection = await deepgram(apiKey).listen.v1.connect(args);
  const log = new EventLog<Message>();
  const errors: Error[] = [];
  const closed = new Promise<{ code: number; reason?: string }>((resolve) =>
    connection.on('close', (event) => {
      log.end(`closed (${event.code})`);
      resolve({ code: event.code, reason: (event as { reason?: string }).reason });
    }),
  );
  connection.on('message', (message) => log.push(message as unknown as Message));
  connection.on('error', (error) => errors.push(error));
  connection.connect();
  /** Resolves once a message matches (rejects if the connection closes first). */
  const until = (pred: (m: Message) => boolean) => log.first(pred);
  return { connection, messages: log.events, errors, closed, until };
}

/** Sends audio as LiveKit's Deepgram plugin does: 100 ms frames of 16 kHz linear16 (here twice as fast as real time). */
async function sendAudio(connection: { sendMedia(data: ArrayBuffer | Blob | ArrayBufferView): void; readyState: number }, bytes: Buffer) {
  for (let at = 0; at < bytes.length && connection.readyState === 1; at += 3200) {
    connection.sendMedia(bytes.subarray(at, at + 3200));
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('@deepgram/sdk live (listen.v1.connect)', () => {
  it('transcribes streamed speech: interim and final Results, speech_final, SpeechStarted, UtteranceEnd, Metadata after CloseStream; billed exactly', async () => {
    const s = await speech(FOX);
    const audio = concat(s.samples, silence(1.5));
    const live = await liveSession(h.key, {
      model: 'nova-3',
      language: 'en-US',
      encoding: 'linear16',
      sample_rate: 16000,
      channels: 1,
      interim_results: 'true',
      punctuate: 'true',
      smart_format: 'true',
      vad_events: 'true',
      endpointing: 300,
      utterance_end_ms: 1000,
    });
    await live.connection.waitForOpen();
    await sendAudio(live.connection, s16le(audio));
    await live.until((m) => m.type === 'UtteranceEnd');
    live.connection.sendCloseStream({ type: 'CloseStream' });
    const { code } = await live.closed;
    expect(code).toBe(1000);
    expect(live.errors).toEqual([]);

    const results = live.messages.filter((m): m is Results => m.type === 'Results');
    const finals = results.filter((r) => r.is_final);
    expect(results.some((r) => r.is_final === false)).toBe(true);
    expect(finals.some((r) => r.speech_final === true)).toBe(true);
    expect(live.messages.some((m) => m.type === 'SpeechStarted')).toBe(true);
    const transcript = finals.map((r) => r.channel.alternatives[0]!.transcript).join(' ');
    expect(wer(FOX, transcript), transcript).toBeLessThanOrEqual(0.25);
    for (const word of ['quick', 'fox', 'lazy', 'dog']) expect(words(transcript)).toContain(word);

    const metadata = live.messages.at(-1)!;
    expect(metadata.type).toBe('Metadata');
    const millis = Math.round((audio.length * 1000) / 16000);
    expect(metadata.duration).toBe(millis / 1000);
    const requestId = metadata.request_id as string;
    expect(results.every((r) => (r.metadata as { request_id: string }).request_id === requestId)).toBe(true);
    const billed = await expectDebited(h, requestId, audioCost(millis));
    expect(billed.audioMillis).toBe(millis);
    expect(billed.usage.every((u) => u.route === 'listen.websocket' && u.modelId === 'nova-3')).toBe(true);
  });

  it('Finalize gets the words so far as a from_finalize final', async () => {
    const s = await speech(CALL);
    const live = await liveSession(h.key, { model: 'nova-3', encoding: 'linear16', sample_rate: 16000, interim_results: 'true' });
    await live.connection.waitForOpen();
    await sendAudio(live.connection, s16le(s.samples));
    live.connection.sendFinalize({ type: 'Finalize' });
    const flushed = (await live.until((m) => m.type === 'Results' && m.from_finalize === true)) as Results;
    const transcript = live.messages
      .filter((m): m is Results => m.type === 'Results' && m.is_final === true)
      .map((r) => r.channel.alternatives[0]!.transcript)
      .join(' ');
    expect(flushed.is_final).toBe(true);
    expect(wer(CALL, transcript), transcript).toBeLessThanOrEqual(0.25);
    live.connection.sendCloseStream({ type: 'CloseStream' });
    expect((await live.closed).code).toBe(1000);
  });

  it('a bad key: the SDK reports the refused upgrade (401) and does not retry it', async () => {
    const live = await liveSession('sk_svc_not_a_key', { model: 'nova-3' });
    await live.closed;
    expect(live.errors.map((e) => e.message)).toEqual([expect.stringContaining('401')]);
    expect(live.messages).toEqual([]);
  });

  it('a zero balance: the SDK reports the refused upgrade (402)', async () => {
    const live = await liveSession(zeroKey, { model: 'nova-3' });
    await live.closed;
    expect(live.errors.map((e) => e.message)).toEqual([expect.stringContaining('402')]);
  });

  it('credit running out mid-session: an Error message, Metadata, then the close 1008 insufficient_quota', async () => {
    const prisma = h.testDb.db.prisma;
    const org = await createOrg(h.testDb.db, { name: 'short of credit', creditsMicros: 150n });
    const key = (await createApiKey(prisma, { orgId: org.id, name: 'k' })).key;
    const live = await liveSession(key, { model: 'nova-3', encoding: 'linear16', sample_rate: 16000 });
    await live.connection.waitForOpen();
    void sendAudio(live.connection, s16le(concat((await speech(FOX)).samples, (await speech(CALL)).samples)));
    const { code, reason } = await live.closed;
    // The SDK would reconnect after a close other than 1000 (and be refused: 402); a client done with it closes it.
    live.connection.close();
    expect(code).toBe(1008);
    expect(reason).toBe('insufficient_quota');
    const [error, metadata] = live.messages.slice(-2);
    expect(error).toMatchObject({ type: 'Error', code: 'insufficient_quota' });
    expect(metadata).toMatchObject({ type: 'Metadata', duration: 1 });
    // 0.000150 USD at 0.0001 USD/s: the second second cannot be reserved, so exactly 1 s is billed.
    await expectDebited(h, metadata!.request_id as string, audioCost(1000));
    expect((await prisma.org.findUniqueOrThrow({ where: { id: org.id } })).balanceMicros).toBe(150n - audioCost(1000));
  });
});

/**
 * The SDK's pre-recorded call, run in a process of its own: in this one the gateway has loaded
 * undici 8 from npm, whose global dispatcher breaks Node 22's built-in fetch for a request with
 * an explicit Content-Length ("invalid content-length header"), which the SDK sets on uploads.
 * A user's process holds no gateway; neither does the child.
 */
const BATCH_SCRIPT = `
import { DeepgramClient, DeepgramError } from '@deepgram/sdk';
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const [baseUrl, apiKey, options] = process.argv.slice(-3);
try {
  const data = await new DeepgramClient({ apiKey, baseUrl }).listen.v1.media.transcribeFile(Buffer.concat(chunks), JSON.parse(options));
  console.log(JSON.stringify({ data }));
} catch (e) {
  if (!(e instanceof DeepgramError)) throw e;
  console.log(JSON.stringify({ error: { name: e.constructor.name, statusCode: e.statusCode, body: e.body, requestId: e.requestId } }));
}
`;

interface BatchOutcome {
  data?: {
    metadata: { request_id: string; duration: number };
    results: { channels: { alternatives: { transcript: string; words: unknown[] }[] }[]; utterances?: { transcript: string; id: string }[] };
  };
  error?: { name: string; statusCode: number; body: Record<string, unknown>; requestId: string };
}

function transcribeFile(apiKey: string, audio: Buffer, options: Record<string, unknown>): Promise<BatchOutcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', BATCH_SCRIPT, '--', h.url, apiKey, JSON.stringify(options)], {
      cwd: process.cwd(),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`the SDK's process exited with ${code}: ${err}`));
      resolve(JSON.parse(out) as BatchOutcome);
    });
    child.stdin.end(audio);
  });
}

describe('@deepgram/sdk pre-recorded (listen.v1.media.transcribeFile)', () => {
  it('transcribes a WAV file: results.channels[0].alternatives[0] and utterances; billed exactly', async () => {
    const s = await speech(FOX);
    const { data, error } = await transcribeFile(h.key, s.wav, { model: 'nova-3', punctuate: true, utterances: true });
    expect(error).toBeUndefined();
    const alt = data!.results.channels[0]!.alternatives[0]!;
    expect(wer(FOX, alt.transcript), alt.transcript).toBeLessThanOrEqual(0.25);
    expect(alt.words.length).toBeGreaterThanOrEqual(6);
    expect(data!.results.utterances).toHaveLength(1);
    expect(data!.results.utterances![0]!.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(data!.metadata.duration).toBe(s.samples.length / 16000);
    const billed = await expectDebited(h, data!.metadata.request_id, audioCost(Math.round((s.samples.length * 1000) / 16000)));
    expect(billed.usage.every((u) => u.route === 'listen' && u.modelId === 'nova-3')).toBe(true);
  });

  it("a bad key and a zero balance throw DeepgramError with the status and Deepgram's err_code", async () => {
    const s = await speech(CALL);
    for (const [key, status, errCode] of [
      ['sk_svc_not_a_key', 401, 'INVALID_AUTH'],
      [zeroKey, 402, 'ASR_PAYMENT_REQUIRED'],
    ] as const) {
      const { data, error } = await transcribeFile(key, s.wav, { model: 'nova-3' });
      expect(data).toBeUndefined();
      expect(error).toMatchObject({ name: 'DeepgramError', statusCode: status, body: { err_code: errCode } });
      expect(error!.body.request_id).toBe(error!.requestId);
    }
  });
});
