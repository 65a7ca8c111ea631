// WS /tts/websocket as the official clients use it, unmodified but for their base URL:
// - @cartesia/cartesia-js 4.2 `tts.websocket()`: its CommonJS build (the ESM build cannot load
//   `ws` under Node 22's import), over TLS (it always connects with wss:) to a gateway serving a
//   self-signed certificate the client is told to trust (its `ca` socket option);
// - LiveKit's Cartesia TTS (@livekit/agents-plugin-cartesia 1.8) in stream mode, which sends its
//   key as X-API-Key and each sentence as a piece with max_buffer_delay_ms 0.
// Real gateway runtime, throw-away database, flite. Asserted: decoded non-silent audio of the
// expected length, the events each client reads, error paths, and metering exact.
import { createRequire } from 'node:module';
import { initializeLogger, tts as agentsTts } from '@livekit/agents';
import * as livekitCartesia from '@livekit/agents-plugin-cartesia';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { makeTestCertificate, type TestCertificate } from '../../test/support/tls.ts';
import { FLITE_PRICE, FOX, codePoints, costOf, decodeRaw, expectSpeechLevel, expectWithin, natural, startTtsGateway } from '../../test/support/tts-routes.ts';
import { usageRows } from '../../test/support/usage-rows.ts';

// The CommonJS build, as ENVIRONMENT.md says (its ESM build's bare require('ws') fails under import).
const require = createRequire(import.meta.url);
const { Cartesia } = require('@cartesia/cartesia-js') as typeof import('@cartesia/cartesia-js');
const { TTSWS } = require('@cartesia/cartesia-js/resources/tts/ws') as typeof import('@cartesia/cartesia-js/resources/tts/ws');
type WsEvent = { type: string; audio?: Uint8Array; flush_id?: number | null; [k: string]: unknown };

const CALL = 'Please call me tomorrow morning about the meeting.';

let cert: TestCertificate;
/** The gateway over TLS (cartesia-js), and one over plain HTTP (LiveKit's stream connects with ws: to an http base URL). */
let tls: GatewayHarness;
let plain: GatewayHarness;

beforeAll(async () => {
  initializeLogger({ pretty: false, level: 'warn' });
  cert = await makeTestCertificate();
  [tls, plain] = await Promise.all([startTtsGateway({ env: { SVC_TLS_CERT: cert.certPath, SVC_TLS_KEY: cert.keyPath } }), startTtsGateway()]);
}, 60_000);

afterAll(async () => {
  await Promise.all([tls?.close(), plain?.close()]);
  await cert?.remove();
});

/** An org of its own with `credit`, and its key: its usage is this test's alone. */
async function orgWithKey(h: GatewayHarness, credit = 10_000_000n) {
  const org = await createOrg(h.testDb.db, { name: 'client test', creditsMicros: credit });
  const key = (await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k' })).key;
  return { orgId: org.id, key };
}

/** Every debit of the org written (its holds given back) and adding up to `characters` at flite's price, span by span. */
async function expectOrgBilled(h: GatewayHarness, orgId: string, characters: number, credit = 10_000_000n): Promise<void> {
  const prisma = h.testDb.db.prisma;
  await vi.waitFor(
    async () => {
      const org = await prisma.org.findUniqueOrThrow({ where: { id: orgId } });
      expect(org.heldMicros).toBe(0n);
      expect((await usageRows(prisma, { orgId })).reduce((n, r) => n + r.characters, 0)).toBe(characters);
    },
    { timeout: 10_000, interval: 25 },
  );
  const rows = await usageRows(prisma, { orgId });
  const cost = rows.reduce((n, r) => n + costOf(r.characters, FLITE_PRICE), 0n);
  expect(rows.reduce((n, r) => n + r.costMicros, 0n)).toBe(cost);
  expect(rows.every((r) => r.route === 'tts.websocket' && r.modality === 'tts' && r.modelId === 'local-flite')).toBe(true);
  expect((await prisma.org.findUniqueOrThrow({ where: { id: orgId } })).balanceMicros).toBe(credit - cost);
}

describe('@cartesia/cartesia-js tts.websocket() (CommonJS build, wss:)', () => {
  const context = (ws: InstanceType<typeof TTSWS>, contextId?: string) =>
    ws.context({
      model_id: 'local-flite',
      voice: { mode: 'id', id: 'flite-slt' },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 },
      language: 'en',
      contextId,
    });

  async function connect(key: string): Promise<{ ws: InstanceType<typeof TTSWS>; errors: Error[] }> {
    const client = new Cartesia({ apiKey: key, baseURL: tls.url, maxRetries: 0 });
    const ws = await client.tts.websocket({ ca: cert.ca });
    const errors: Error[] = [];
    // Without a listener the client turns every error event into an unhandled rejection.
    ws.on('error', (e: Error) => errors.push(e));
    return { ws, errors };
  }

  async function receiveAll(ctx: ReturnType<typeof context>): Promise<WsEvent[]> {
    const events: WsEvent[] = [];
    for await (const e of ctx.receive()) events.push(e as unknown as WsEvent);
    return events;
  }

  const audioOf = (events: WsEvent[]) => decodeRaw(Buffer.concat(events.filter((e) => e.type === 'chunk').map((e) => Buffer.from(e.audio!))), 'pcm_s16le');

  it('a context pushed in LLM-sized pieces: the client decodes flite\u2019s speech, ends on done; billed per character', async () => {
    const { orgId, key } = await orgWithKey(tls);
    const { ws, errors } = await connect(key);
    const text = `${FOX} ${CALL}`;
    const ctx = context(ws);
    const received = receiveAll(ctx);
    for (const piece of text.match(/.{1,5}/gs)!) await ctx.push({ transcript: piece });
    await ctx.no_more_inputs();
    const events = await received;
    expect(events.at(-1)).toMatchObject({ type: 'done', done: true, context_id: ctx.contextId });
    const samples = audioOf(events);
    expectWithin(samples.length, natural('flite', 'slt', FOX).samples.length + natural('flite', 'slt', CALL).samples.length, 0.02);
    expectSpeechLevel(samples);
    expect(errors).toEqual([]);
    ws.close();
    await expectOrgBilled(tls, orgId, codePoints(text));
  });

  it('two contexts at once, and a flush: flush_done between the two parts, chunks tagged with their flush_id', async () => {
    const { orgId, key } = await orgWithKey(tls);
    const { ws, errors } = await connect(key);
    const a = context(ws);
    const b = context(ws);
    const [ea, eb] = [receiveAll(a), receiveAll(b)];
    await a.push({ transcript: 'Stay hungry, ', flush: true });
    await b.push({ transcript: FOX });
    await a.push({ transcript: 'stay foolish.' });
    await Promise.all([a.no_more_inputs(), b.no_more_inputs()]);
    const [eventsA, eventsB] = await Promise.all([ea, eb]);
    const flushAt = eventsA.findIndex((e) => e.type === 'flush_done');
    expect(eventsA[flushAt]).toMatchObject({ flush_id: 1, flush_done: true });
    expect(eventsA.slice(0, flushAt).every((e) => e.type === 'chunk' && e.flush_id === 1)).toBe(true);
    expect(eventsA.slice(flushAt + 1, -1).every((e) => e.type === 'chunk' && e.flush_id === 2)).toBe(true);
    expect(audioOf(eventsA.slice(0, flushAt)).length).toBe(natural('flite', 'slt', 'Stay hungry, ').samples.length);
    expect(audioOf(eventsB).length).toBe(natural('flite', 'slt', FOX).samples.length);
    expectSpeechLevel(audioOf(eventsB));
    expect(errors).toEqual([]);
    ws.close();
    await expectOrgBilled(tls, orgId, codePoints('Stay hungry, stay foolish.') + codePoints(FOX));
  });

  it('an unknown voice: receive() throws with the gateway\u2019s message; the error listener gets the event; the socket serves the next context', async () => {
    const { key } = await orgWithKey(tls);
    const { ws, errors } = await connect(key);
    const bad = ws.context({
      model_id: 'local-flite',
      voice: { mode: 'id', id: 'no-such-voice' },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 },
    });
    const failing = receiveAll(bad);
    await bad.push({ transcript: 'Hello.' });
    await expect(failing).rejects.toThrow(/no-such-voice/);
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error & { error?: Record<string, unknown> }).error).toMatchObject({
      type: 'error',
      status_code: 404,
      error_code: 'voice_not_found',
      title: 'voice_not_found',
    });
    const good = context(ws);
    const events = receiveAll(good);
    await good.push({ transcript: 'Hello.' });
    await good.no_more_inputs();
    expect((await events).at(-1)?.type).toBe('done');
    ws.close();
  });

  it('cancel() mid-stream: no more events reach the context; the socket serves the next one', async () => {
    const { key } = await orgWithKey(tls);
    const { ws, errors } = await connect(key);
    const long = context(ws);
    const seen: WsEvent[] = [];
    let firstChunk: () => void;
    const chunked = new Promise<void>((resolve) => (firstChunk = resolve));
    ws.on('event', (event) => {
      const e = event as unknown as WsEvent;
      if (e.context_id !== long.contextId) return;
      seen.push(e);
      if (e.type === 'chunk') firstChunk();
    });
    await long.push({ transcript: Array.from({ length: 6 }, (_, i) => `This is sentence ${i + 1} of a long answer.`).join(' ') });
    await chunked;
    await long.cancel();
    const next = context(ws);
    const events = receiveAll(next);
    await next.push({ transcript: 'Hello.' });
    await next.no_more_inputs();
    await events;
    const after = seen.length;
    const more = context(ws);
    const events2 = receiveAll(more);
    await more.no_more_inputs();
    await events2;
    expect(seen.length).toBe(after);
    expect(seen.some((e) => e.type === 'done')).toBe(false);
    expect(errors).toEqual([]);
    ws.close();
  });

  it('refused before the upgrade: an unknown key (401) and an org without credit (402) fail the connection', async () => {
    // The socket class tts.websocket() builds, made here so that an error listener is on it
    // before it connects (the client also reports a failed connection as an error event).
    const refusal = async (apiKey: string) => {
      const ws = new TTSWS(new Cartesia({ apiKey, baseURL: tls.url, maxRetries: 0 }), { ca: cert.ca });
      const errors: Error[] = [];
      ws.on('error', (e: Error) => errors.push(e));
      const failure = await ws.connect().then(
        () => null,
        (e: Error) => e,
      );
      expect(errors.length).toBeGreaterThanOrEqual(1);
      return failure?.message;
    };
    expect(await refusal('sk_svc_nope')).toMatch(/401/);
    const { key } = await orgWithKey(tls, 0n);
    expect(await refusal(key)).toMatch(/402/);
  });
});

describe('LiveKit Agents: the Cartesia plugin\u2019s TTS stream (X-API-Key, sentences as pieces)', () => {
  it('streams the sentences pushed to it as audio frames; billed for the sentences, not the closing space', async () => {
    const { orgId, key } = await orgWithKey(plain);
    const tts = new livekitCartesia.TTS({ apiKey: key, baseUrl: plain.url, model: 'local-flite', voice: 'flite-slt', sampleRate: 16000, language: 'en' });
    const stream = tts.stream();
    stream.pushText('The quick brown fox jumps over the lazy dog. ');
    stream.pushText(CALL);
    stream.endInput();
    const parts: Int16Array[] = [];
    for await (const audio of stream) {
      if (audio === agentsTts.SynthesizeStream.END_OF_STREAM) break;
      expect(audio.frame.sampleRate).toBe(16000);
      parts.push(new Int16Array(audio.frame.data));
    }
    await tts.close();
    const samples = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) for (const v of p) samples[at++] = v / 32768;
    // Frames are whole 10 ms blocks: the last partial one is padded.
    expectWithin(samples.length, natural('flite', 'slt', FOX).samples.length + natural('flite', 'slt', CALL).samples.length, 0.02);
    expectSpeechLevel(samples);
    // Each sentence is sent with a space after it; the context ends with a lone space (not spoken, not billed).
    await expectOrgBilled(plain, orgId, codePoints(`${FOX} `) + codePoints(`${CALL} `));
  });

  it('a voice the gateway does not have: the stream ends without audio (the error event ends its context) instead of hanging', async () => {
    const { key } = await orgWithKey(plain);
    const tts = new livekitCartesia.TTS({ apiKey: key, baseUrl: plain.url, model: 'local-flite', voice: 'no-such-voice', sampleRate: 16000, language: 'en' });
    const stream = tts.stream({ connOptions: { maxRetry: 0, retryIntervalMs: 0, timeoutMs: 10_000 } });
    stream.pushText('Hello there. ');
    stream.endInput();
    const frames: unknown[] = [];
    for await (const audio of stream) {
      if (audio === agentsTts.SynthesizeStream.END_OF_STREAM) break;
      frames.push(audio);
    }
    await tts.close();
    expect(frames).toEqual([]);
  });
});
