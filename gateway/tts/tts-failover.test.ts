// TTS failover (gateway/tts/tts-failover.ts, docs/failover.md "TTS"): one model with a scripted
// Cartesia engine first and a scripted ElevenLabs engine second, the same voice mapped on each.
// Cartesia fails a chosen sentence — reset, 5xx, no audio, closed or silent half-way, a body that
// is not audio — at the start, in the middle and at the end of the text; the client gets all the
// audio and no error, each engine's completed texts put together are the input exactly once, the
// audio is as long as those texts (none of the failed attempt's audio leaks), and the request is
// billed once per character. The stalls are the gateway's clock moved past the allowance.
// Hedging (model `duo-hedged`, capabilities.hedge): the first sentence is asked of both engines at
// once; the one that holds back its audio (headers, then nothing) sees its connection closed as soon
// as the other's audio comes, the other speaks the whole text, billed once; without hedging only
// one engine is asked.
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { mapVoiceToEngine } from '../../server/services/voices/engine-voices.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { manualClock } from '../../test/support/manual-clock.ts';
import { makeTestCertificate, type TestCertificate } from '../../test/support/tls.ts';
import { startScriptedCartesia, type ScriptedCartesia, type TtsFault } from '../../test/support/scripted-cartesia.ts';
import { startScriptedElevenLabs, type ScriptedElevenLabs } from '../../test/support/scripted-elevenlabs.ts';
import { bytesOf, codePoints, costOf, post, requestId, startTtsGateway } from '../../test/support/tts-routes.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { failoverSpans } from './tts-failover.ts';
import { firstAudibleMs } from '../audio/first-audible.ts';
import { upstreamLabel } from '../metrics/gateway-metrics.ts';

const require = createRequire(import.meta.url);
const { Cartesia } = require('@cartesia/cartesia-js') as typeof import('@cartesia/cartesia-js');

const CARTESIA_KEY = 'sk_car_failover_3f1a';
const ELEVEN_KEY = 'xi_failover_77c2';
process.env.CARTESIA_FAILOVER_KEY = CARTESIA_KEY;
process.env.ELEVEN_FAILOVER_KEY = ELEVEN_KEY;

const PRICE = 1_000_000n;
const MS_PER_CHAR = 20;
const OUT_RATE = 24_000;
const STALL_SECONDS = 1;
const TEXT = 'The first sentence starts here. A second one follows it closely. And the third one ends the text.';
const SPANS = failoverSpans(TEXT);
const CARTESIA_VOICE = 'car-voice-0001';
const ELEVEN_VOICE = 'JBFqnCBsd6RMkjVDRZzb';

const clock = manualClock(Date.now());
const METRICS_TOKEN = 'metrics-token-of-the-failover-test';
let h: GatewayHarness;
/** The same over TLS, for cartesia-js (its sockets are wss:). */
let tls: GatewayHarness;
let cert: TestCertificate;
let cartesia: ScriptedCartesia;
let eleven: ScriptedElevenLabs;

/** Model `duo`: Cartesia first (its weight makes it the first choice but once in a million), ElevenLabs second; flite-slt mapped on each. */
async function addDuo(g: GatewayHarness): Promise<void> {
  const prisma = g.testDb.db.prisma;
  const model = { id: 'duo', modality: 'tts' as const, prices: { picoPerChar: PRICE } };
  await upsertModel(prisma, checkProtocol, {
    ...model,
    upstream: { url: cartesia.url, protocol: 'cartesia', upstreamModel: 'sonic-3', apiKeyEnv: 'CARTESIA_FAILOVER_KEY', weight: 1_000_000 },
  });
  await upsertModel(prisma, checkProtocol, {
    ...model,
    // At another rate than Cartesia's 24 kHz: its spans are resampled to the stream's rate.
    upstream: {
      url: eleven.url,
      protocol: 'elevenlabs',
      upstreamModel: 'eleven_flash_v2_5',
      apiKeyEnv: 'ELEVEN_FAILOVER_KEY',
      weight: 1,
      settings: { output_sample_rate: 16000 },
    },
  });
  await mapVoiceToEngine(prisma, { voiceId: 'flite-slt', modelId: 'duo', upstreamId: CARTESIA_VOICE, upstreamUrl: cartesia.url });
  await mapVoiceToEngine(prisma, { voiceId: 'flite-slt', modelId: 'duo', upstreamId: ELEVEN_VOICE, upstreamUrl: eleven.url });
  // A voice ElevenLabs alone has: Cartesia is never asked for it.
  await mapVoiceToEngine(prisma, { voiceId: 'flite-rms', modelId: 'duo', upstreamId: ELEVEN_VOICE, upstreamUrl: eleven.url });
  // The same two engines, hedged.
  const hedged = { ...model, id: 'duo-hedged', hedge: true };
  await upsertModel(prisma, checkProtocol, {
    ...hedged,
    upstream: { url: cartesia.url, protocol: 'cartesia', upstreamModel: 'sonic-3', apiKeyEnv: 'CARTESIA_FAILOVER_KEY', weight: 1_000_000 },
  });
  await upsertModel(prisma, checkProtocol, {
    ...hedged,
    upstream: {
      url: eleven.url,
      protocol: 'elevenlabs',
      upstreamModel: 'eleven_flash_v2_5',
      apiKeyEnv: 'ELEVEN_FAILOVER_KEY',
      weight: 1,
      settings: { output_sample_rate: 16000 },
    },
  });
  await mapVoiceToEngine(prisma, { voiceId: 'flite-slt', modelId: 'duo-hedged', upstreamId: CARTESIA_VOICE, upstreamUrl: cartesia.url });
  await mapVoiceToEngine(prisma, { voiceId: 'flite-slt', modelId: 'duo-hedged', upstreamId: ELEVEN_VOICE, upstreamUrl: eleven.url });
  await g.runtime.ctx.registry.refresh();
}

beforeAll(async () => {
  cert = await makeTestCertificate();
  [cartesia, eleven] = await Promise.all([
    startScriptedCartesia({ apiKey: CARTESIA_KEY, msPerChar: MS_PER_CHAR }),
    startScriptedElevenLabs({ apiKey: ELEVEN_KEY, msPerCharacter: MS_PER_CHAR }),
  ]);
  const env = { SVC_TTS_FIRST_AUDIO_SECONDS: String(STALL_SECONDS), SVC_TTS_STALL_SECONDS: String(STALL_SECONDS), SVC_METRICS_TOKEN: METRICS_TOKEN };
  [h, tls] = await Promise.all([
    startTtsGateway({ clock, env }),
    startTtsGateway({ clock, env: { ...env, SVC_TLS_CERT: cert.certPath, SVC_TLS_KEY: cert.keyPath } }),
  ]);
  await Promise.all([addDuo(h), addDuo(tls)]);
}, 60_000);

afterAll(async () => {
  await Promise.all([h?.close(), tls?.close()]);
  await Promise.allSettled([cartesia?.close(), eleven?.close(), cert?.remove()]);
  delete process.env.CARTESIA_FAILOVER_KEY;
  delete process.env.ELEVEN_FAILOVER_KEY;
});

const duo = (g = h, id = 'duo') => g.runtime.ctx.registry.resolve(id, 'tts', null);
const cartesiaDown = (g = h, id = 'duo') => g.runtime.ctx.registry.healthyUpstreams(duo(g, id)).every((u) => u.url !== cartesia.url);

/** Both engines up and fresh; Cartesia fails the `at`th span with `fault` (once); resolves when that fault is being served. */
function arm(fault: TtsFault | null, at: number, g = h): Promise<void> {
  const ctx = g.runtime.ctx;
  for (const u of duo(g).upstreams) ctx.health.record(u, { ok: true });
  cartesia.spoken.length = 0;
  eleven.spoken.length = 0;
  let served!: () => void;
  const serving = new Promise<void>((resolve) => (served = resolve));
  let spent = false;
  cartesia.ttsFault = (text) => {
    if (spent || fault === null || text !== SPANS[at]) return null;
    spent = true;
    served();
    return fault;
  };
  return serving;
}

/** A stall is seen once the gateway's clock passes the allowance: moved once the engine is stalling (a timer is always running during an attempt). */
async function passStall(fault: TtsFault | null, serving: Promise<void>): Promise<void> {
  if (fault !== 'stall_first' && fault !== 'stall_mid') return;
  await serving;
  clock.advance(STALL_SECONDS * 1000);
}

/** The texts the engines completed, in order: Cartesia's until it failed, then ElevenLabs'. */
const completedTexts = () => [...cartesia.spoken, ...eleven.spoken].join('');

/** Samples of `text` at OUT_RATE as the scripted engines make it (MS_PER_CHAR a character), within a few per span for resampling. */
function expectAudioOf(samples: number, text: string): void {
  const expected = (codePoints(text) * MS_PER_CHAR * OUT_RATE) / 1000;
  expect(Math.abs(samples - expected)).toBeLessThanOrEqual(4 * SPANS.length);
}

async function expectBilledOnce(id: string, route: string): Promise<void> {
  await h.settled();
  const rows = await usageRows(h.testDb.db.prisma, { requestId: id });
  expect(rows.map((r) => [r.route, r.characters, r.costMicros])).toEqual([[route, codePoints(TEXT), costOf(codePoints(TEXT), PRICE)]]);
}

const body = (over: Record<string, unknown> = {}) => ({
  model_id: 'duo',
  transcript: TEXT,
  voice: { mode: 'id', id: 'flite-slt' },
  output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: OUT_RATE },
  ...over,
});

const FAULTS: TtsFault[] = ['reset', 'status_500', 'stall_first', 'close_mid', 'stall_mid', 'malformed'];
const PLACES = [
  { name: 'start', at: 0 },
  { name: 'middle', at: 1 },
  { name: 'end', at: SPANS.length - 1 },
];

describe('the text is spoken sentence by sentence, each sentence by the engine that completes it', () => {
  it('cuts the text into three sentences that put back together are the text', () => {
    expect(SPANS).toHaveLength(3);
    expect(SPANS.join('')).toBe(TEXT);
  });

  it('without a fault: every sentence on Cartesia with its own voice id, none on ElevenLabs', async () => {
    arm(null, 0);
    const before = cartesia.received.length;
    const res = await post(h, '/tts/bytes', body());
    expect(res.status).toBe(200);
    expectAudioOf((await bytesOf(res)).length / 2, TEXT);
    expect(cartesia.spoken).toEqual(SPANS);
    expect(eleven.spoken).toEqual([]);
    const sent = cartesia.received.slice(before).map((r) => (JSON.parse(r.body.toString()) as { voice: { id: string } }).voice.id);
    expect(new Set(sent)).toEqual(new Set([CARTESIA_VOICE]));
  });
});

describe('the voice on each engine', () => {
  it('a voice with an id on ElevenLabs only: Cartesia is skipped for it (no failover), ElevenLabs speaks it all', async () => {
    arm(null, 0);
    const before = cartesia.received.length;
    const res = await post(h, '/tts/bytes', body({ voice: { mode: 'id', id: 'flite-rms' } }));
    expect(res.status).toBe(200);
    expectAudioOf((await bytesOf(res)).length / 2, TEXT);
    expect(cartesia.received.length).toBe(before);
    expect(eleven.spoken).toEqual(SPANS);
    expect(cartesiaDown()).toBe(false);
  });

  it('svc voices map --upstream refuses a URL that is not an upstream of the model', async () => {
    await expect(
      mapVoiceToEngine(h.testDb.db.prisma, { voiceId: 'flite-rms', modelId: 'duo', upstreamId: 'x', upstreamUrl: 'http://127.0.0.1:9/nowhere' }),
    ).rejects.toMatchObject({ code: 'invalid_request', param: 'upstream' });
  });
});

describe('the request log', () => {
  it('keeps the first audio time, the first audible sample and the failover reason with its phase', async () => {
    const log = h.runtime.ctx.requestLog!;
    const rowOf = async (id: string) => {
      await log.flush();
      return h.testDb.db.prisma.requestLog.findFirstOrThrow({ where: { requestId: id } });
    };
    arm('close_mid', 1);
    const mid = requestId('failover-log-mid');
    const midAudio = await bytesOf(await post(h, '/tts/bytes', body(), { requestId: mid }));
    arm('status_500', 0);
    const start = requestId('failover-log-start');
    const startAudio = await bytesOf(await post(h, '/tts/bytes', body(), { requestId: start }));
    const [midRow, startRow] = [await rowOf(mid), await rowOf(start)];
    expect(midRow.failoverReason).toBe('closed (mid stream)');
    expect(startRow.failoverReason).toBe('http_status (before first output)');
    expect(midRow.firstAudioMs).toBeGreaterThanOrEqual(0);
    expect(startRow.firstAudioMs).toBeGreaterThanOrEqual(0);
    // The first audible sample: played from the first audio on, no sooner than where the sound begins in the audio sent (1 ms of rounding).
    for (const [row, audio] of [
      [midRow, midAudio],
      [startRow, startAudio],
    ] as const) {
      const within = firstAudibleMs(audio, 'pcm_s16le', OUT_RATE)!;
      expect(within).toBeDefined();
      expect(row.firstAudibleMs! - row.firstAudioMs!).toBeGreaterThanOrEqual(within - 1);
    }
  });
});

describe.each(PLACES)('Cartesia fails at the $name of the text', ({ at }) => {
  it.each(FAULTS)('%s: POST /tts/bytes gets all the audio, each sentence once, billed once', async (fault) => {
    const serving = arm(fault, at);
    const id = requestId(`failover-${fault}-${at}`);
    const response = post(h, '/tts/bytes', body(), { requestId: id });
    await passStall(fault, serving);
    const res = await response;
    const audio = await bytesOf(res);
    expect(res.status).toBe(200);
    expect(completedTexts()).toBe(TEXT);
    expect(cartesia.spoken).toEqual(SPANS.slice(0, at));
    expect(eleven.spoken).toEqual(SPANS.slice(at));
    expect(eleven.received.at(-1)!.path).toBe(`/v1/text-to-speech/${ELEVEN_VOICE}/stream`);
    expect(eleven.received.at(-1)!.query.output_format).toBe('pcm_16000');
    expectAudioOf(audio.length / 2, TEXT);
    expect(cartesiaDown()).toBe(true);
    await expectBilledOnce(id, 'tts.bytes');
  });
});

describe('every route survives a failure half-way', () => {
  it('POST /tts/sse: chunks and done, no error event; billed once', async () => {
    arm('close_mid', 1);
    const id = requestId('failover-sse');
    const res = await post(h, '/tts/sse', body(), { requestId: id });
    const events = (await res.text())
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => JSON.parse(e.slice(6)) as { type: string; data?: string });
    expect(events.filter((e) => e.type === 'error')).toEqual([]);
    expect(events.at(-1)!.type).toBe('done');
    const samples = events.filter((e) => e.type === 'chunk').reduce((n, e) => n + Buffer.from(e.data!, 'base64').length / 2, 0);
    expectAudioOf(samples, TEXT);
    expect(completedTexts()).toBe(TEXT);
    await expectBilledOnce(id, 'tts.sse');
  });

  it('POST /v1/audio/speech (pcm): the whole audio; billed once', async () => {
    arm('status_500', 2);
    const id = requestId('failover-openai');
    const res = await post(h, '/v1/audio/speech', { model: 'duo', input: TEXT, voice: 'flite-slt', response_format: 'pcm' }, { requestId: id });
    expect(res.status).toBe(200);
    expectAudioOf((await bytesOf(res)).length / 2, TEXT);
    expect(completedTexts()).toBe(TEXT);
    await expectBilledOnce(id, 'audio.speech');
  });

  it('the failover is counted with its reason and phase (svc_failovers_total)', async () => {
    const metrics = await (await fetch(`${h.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    expect(metrics).toMatch(/svc_failovers_total\{[^}]*model="duo"[^}]*reason="stall"[^}]*phase="before_first_output"[^}]*\} [1-9]/);
    expect(metrics).toMatch(/svc_failovers_total\{[^}]*model="duo"[^}]*reason="closed"[^}]*phase="mid_stream"[^}]*\} [1-9]/);
  });
});

/** An org of its own and its key: its usage is one test's alone. */
async function orgWithKey(g: GatewayHarness) {
  const org = await createOrg(g.testDb.db, { name: 'failover test', creditsMicros: 10_000_000n });
  return { orgId: org.id, key: (await createApiKey(g.testDb.db.prisma, { orgId: org.id, name: 'k' })).key };
}

describe('WS /tts/websocket through @cartesia/cartesia-js', () => {
  it.each(['close_mid', 'stall_mid'] as TtsFault[])('%s in the middle: the context ends with done, no error, all the audio; billed once', async (fault) => {
    const serving = arm(fault, 1, tls);
    const { orgId, key } = await orgWithKey(tls);
    const client = new Cartesia({ apiKey: key, baseURL: tls.url, maxRetries: 0 });
    const ws = await client.tts.websocket({ ca: cert.ca });
    const errors: Error[] = [];
    ws.on('error', (e: Error) => errors.push(e));
    const context = ws.context({
      model_id: 'duo',
      voice: { mode: 'id', id: 'flite-slt' },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: OUT_RATE },
    });
    const events: { type: string; audio?: Uint8Array }[] = [];
    const received = (async () => {
      for await (const e of context.receive()) events.push(e as unknown as (typeof events)[number]);
    })();
    await context.push({ transcript: TEXT });
    await context.no_more_inputs();
    await passStall(fault, serving);
    await received;
    ws.close();
    expect(errors).toEqual([]);
    expect(events.at(-1)!.type).toBe('done');
    const bytes = events.filter((e) => e.type === 'chunk').reduce((n, e) => n + e.audio!.length, 0);
    expectAudioOf(bytes / 2, TEXT);
    expect(completedTexts()).toBe(TEXT);
    expect(cartesiaDown(tls)).toBe(true);
    // Each span debited once at its first audio: the debits add up to the text, once the session let go of its hold.
    await vi.waitFor(
      async () => {
        const org = await tls.testDb.db.prisma.org.findUniqueOrThrow({ where: { id: orgId } });
        expect(org.heldMicros).toBe(0n);
        const rows = await usageRows(tls.testDb.db.prisma, { orgId });
        expect(rows.every((r) => r.route === 'tts.websocket' && r.modelId === 'duo')).toBe(true);
        expect(rows.reduce((n, r) => n + r.characters, 0)).toBe(codePoints(TEXT));
      },
      { timeout: 10_000, interval: 25 },
    );
  });
});

// ---------------------------------------------------------------------------------------
// Hedging

type Engine = 'cartesia' | 'eleven';
const peer = (e: Engine) => (e === 'cartesia' ? cartesia : eleven);
const other = (e: Engine): Engine => (e === 'cartesia' ? 'eleven' : 'cartesia');

/**
 * Both engines of `model` up, nothing spoken yet; the `slow` one holds back the audio of the first
 * request it gets after this (headers, then nothing: slower than any engine that answers). Returns
 * each engine's request count before.
 */
function armHedge(slow: Engine, g = h, model = 'duo-hedged') {
  const ctx = g.runtime.ctx;
  for (const u of ctx.registry.resolve(model, 'tts', null).upstreams) ctx.health.record(u, { ok: true });
  cartesia.spoken.length = 0;
  eleven.spoken.length = 0;
  cartesia.ttsFault = null;
  eleven.ttsFault = null;
  let held = false;
  peer(slow).ttsFault = () => (held ? null : ((held = true), 'stall_first'));
  return { cartesia: cartesia.received.length, eleven: eleven.received.length };
}

/** The requests an engine got since `before`. */
const since = (e: Engine, before: { cartesia: number; eleven: number }) => peer(e).received.slice(before[e]);

/** The one debit of a request: one ledger entry and one usage row, for every character once. */
async function expectOneDebit(g: GatewayHarness, id: string, route: string): Promise<void> {
  await g.settled();
  const prisma = g.testDb.db.prisma;
  const cost = costOf(codePoints(TEXT), PRICE);
  expect((await prisma.ledgerEntry.findMany({ where: { requestId: id } })).map((l) => l.amountMicros)).toEqual([-cost]);
  const rows = await usageRows(prisma, { requestId: id });
  expect(rows.map((r) => [r.route, r.characters, r.costMicros])).toEqual([[route, codePoints(TEXT), cost]]);
}

describe('hedging (capabilities.hedge): the first audio asked of both engines', () => {
  const ROUTES = [
    { route: 'tts.bytes', send: (id: string) => post(h, '/tts/bytes', body({ model_id: 'duo-hedged' }), { requestId: id }), audio: bytesOf },
    {
      route: 'tts.sse',
      send: (id: string) => post(h, '/tts/sse', body({ model_id: 'duo-hedged' }), { requestId: id }),
      audio: async (res: Response) => {
        const events = (await res.text())
          .split('\n\n')
          .filter((e) => e.startsWith('data: '))
          .map((e) => JSON.parse(e.slice(6)) as { type: string; data?: string });
        expect(events.filter((e) => e.type === 'error')).toEqual([]);
        expect(events.at(-1)!.type).toBe('done');
        return Buffer.concat(events.filter((e) => e.type === 'chunk').map((e) => Buffer.from(e.data!, 'base64')));
      },
    },
    {
      route: 'audio.speech',
      send: (id: string) => post(h, '/v1/audio/speech', { model: 'duo-hedged', input: TEXT, voice: 'flite-slt', response_format: 'pcm' }, { requestId: id }),
      audio: bytesOf,
    },
  ];
  const CASES = (['cartesia', 'eleven'] as Engine[]).flatMap((slow) => ROUTES.map((r) => ({ ...r, slow, fast: other(slow) })));

  it.each(CASES)(
    '$route, $slow slower: $fast speaks the whole text, $slow sees its request closed; billed once',
    async ({ route, send, audio, slow, fast }) => {
      const before = armHedge(slow);
      const id = requestId(`hedge-${route}-${slow}`);
      const res = await send(id);
      expect(res.status).toBe(200);
      expectAudioOf((await audio(res)).length / 2, TEXT);
      // The fast engine spoke every sentence (it won the first; an upstream stays once it spoke); the slow one was asked the first only.
      expect(peer(fast).spoken).toEqual(SPANS);
      expect(peer(slow).spoken).toEqual([]);
      expect(since(fast, before)).toHaveLength(SPANS.length);
      const asked = since(slow, before);
      expect(asked).toHaveLength(1);
      // Cancelled: its connection closed (the scripted engine would hold it open for ever).
      await asked[0]!.closed;
      // Losing a race is no failure: both stay in service.
      expect(h.runtime.ctx.registry.healthyUpstreams(h.runtime.ctx.registry.resolve('duo-hedged', 'tts', null))).toHaveLength(2);
      await expectOneDebit(h, id, route);
    },
  );

  it('each hedge is counted by the upstream that won (svc_hedges_total), and none as a failover', async () => {
    const metrics = await (await fetch(`${h.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    const wins = (url: string) => metrics.split('\n').find((l) => l.startsWith(`svc_hedges_total{model="duo-hedged",upstream="${upstreamLabel(url)}"} `));
    expect(wins(cartesia.url)).toMatch(new RegExp(` ${ROUTES.length}$`));
    expect(wins(eleven.url)).toMatch(new RegExp(` ${ROUTES.length}$`));
    expect(metrics).not.toContain('svc_failovers_total{model="duo-hedged"');
  });

  it('the winner failing half-way through the first sentence: the engine that lost the race is asked again and speaks it all; billed once', async () => {
    const before = armHedge('eleven');
    // Cartesia's audio comes first (ElevenLabs holds its back), then Cartesia drops the connection half-way.
    let asked = 0;
    cartesia.ttsFault = () => (++asked === 1 ? 'close_mid' : null);
    const id = requestId('hedge-winner-fails');
    const res = await post(h, '/tts/bytes', body({ model_id: 'duo-hedged' }), { requestId: id });
    expect(res.status).toBe(200);
    expectAudioOf((await bytesOf(res)).length / 2, TEXT);
    expect(eleven.spoken).toEqual(SPANS);
    expect(cartesia.spoken).toEqual([]);
    // ElevenLabs: the race's request (cancelled), then every sentence.
    const elevenAsked = since('eleven', before);
    expect(elevenAsked).toHaveLength(SPANS.length + 1);
    expect(await elevenAsked[0]!.closed).toBe(true);
    expect(since('cartesia', before)).toHaveLength(1);
    expect(cartesiaDown(h, 'duo-hedged')).toBe(true);
    await expectOneDebit(h, id, 'tts.bytes');
  });

  it('off (the default): one engine asked for the first audio', async () => {
    const before = armHedge('eleven', h, 'duo');
    const res = await post(h, '/tts/bytes', body());
    expect(res.status).toBe(200);
    expectAudioOf((await bytesOf(res)).length / 2, TEXT);
    expect(since('cartesia', before)).toHaveLength(SPANS.length);
    expect(since('eleven', before)).toEqual([]);
  });

  it('WS /tts/websocket through @cartesia/cartesia-js, Cartesia slower: the context is spoken by ElevenLabs, no error; each span billed once', async () => {
    const before = armHedge('cartesia', tls);
    const { orgId, key } = await orgWithKey(tls);
    const client = new Cartesia({ apiKey: key, baseURL: tls.url, maxRetries: 0 });
    const ws = await client.tts.websocket({ ca: cert.ca });
    const errors: Error[] = [];
    ws.on('error', (e: Error) => errors.push(e));
    const context = ws.context({
      model_id: 'duo-hedged',
      voice: { mode: 'id', id: 'flite-slt' },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: OUT_RATE },
    });
    const events: { type: string; audio?: Uint8Array }[] = [];
    const received = (async () => {
      for await (const e of context.receive()) events.push(e as unknown as (typeof events)[number]);
    })();
    await context.push({ transcript: TEXT });
    await context.no_more_inputs();
    await received;
    ws.close();
    expect(errors).toEqual([]);
    expect(events.at(-1)!.type).toBe('done');
    expectAudioOf(events.filter((e) => e.type === 'chunk').reduce((n, e) => n + e.audio!.length, 0) / 2, TEXT);
    expect(eleven.spoken.join('')).toBe(TEXT);
    expect(cartesia.spoken).toEqual([]);
    // Only the context's first audio is raced: Cartesia was asked once, and that request was cancelled.
    const asked = since('cartesia', before);
    expect(asked).toHaveLength(1);
    await asked[0]!.closed;
    const prisma = tls.testDb.db.prisma;
    await vi.waitFor(
      async () => {
        expect((await prisma.org.findUniqueOrThrow({ where: { id: orgId } })).heldMicros).toBe(0n);
        const rows = await usageRows(prisma, { orgId });
        expect(rows.every((r) => r.route === 'tts.websocket' && r.modelId === 'duo-hedged')).toBe(true);
        expect(rows.reduce((n, r) => n + r.characters, 0)).toBe(codePoints(TEXT));
        // One debit a span: the ledger holds exactly the usage rows' costs.
        const ledger = await prisma.ledgerEntry.findMany({ where: { orgId, kind: 'usage' } });
        expect(ledger.map((l) => -l.amountMicros).sort()).toEqual(rows.map((r) => r.costMicros).sort());
      },
      { timeout: 10_000, interval: 25 },
    );
  });
});
