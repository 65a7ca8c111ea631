// LiveKit Agents' Deepgram plugin (@livekit/agents-plugin-deepgram 1.8.1 with @livekit/agents
// 1.8.1), unmodified but for its base URL and key, against the real gateway runtime (throw-away
// database, flite, the local recogniser):
// - deepgram.TTS (Aura) synthesize(): POST /v1/speak (linear16 at 24 kHz, container none). The
//   plugin sends it with node:https to port 443 of the base URL's host, whatever the URL says:
//   the gateway serves TLS here (a certificate made at test time), and port 443 is routed to its
//   port by the https agent the process's requests use by default (binding 443 needs privileges).
//   What the test stands for: a gateway behind TLS on 443 (docs/use-it-from.md).
// - deepgram.TTS stream(): the /v1/speak socket (a Speak per sentence, Flush, then Flush and Close).
// - deepgram.STT stream(): the /v1/listen socket (its energy filter sends speech and a second of
//   what follows, 100 ms frames; Finalize on flush, CloseStream at the end).
// - deepgram.STTv2 (Flux) stream(): /v2/listen, its turns from the gateway's turn detector.
// Asserted: audio heard back as the words; transcripts holding the spoken words; the events each
// stream gives (Flux: StartOfTurn, EagerEndOfTurn, EndOfTurn as LiveKit's speech events); usage
// rows exact, per character and per millisecond of what the plugin sent; a bad key.
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { initializeLogger, stt as agentsStt, tts as agentsTts, type APIConnectOptions } from '@livekit/agents';
import * as deepgram from '@livekit/agents-plugin-deepgram';
import type { AudioFrame } from '@livekit/rtc-node';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { framesOf, samplesOf, unhandledRejections } from '../../test/support/livekit-agents.ts';
import {
  audioCost,
  concat,
  settleRecognizers,
  silence,
  speech,
  startSttGateway,
  transcribe,
  trimSilence,
  wavFile,
  wer,
} from '../../test/support/stt-routes.ts';
import { makeTestCertificate, type TestCertificate } from '../../test/support/tls.ts';
import { FLITE_PRICE, codePoints, costOf, expectSpeechLevel, expectWithin, natural } from '../../test/support/tts-routes.ts';
import { usageRows, type UsageRow } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const FOX = 'The quick brown fox jumps over the lazy dog.';
const CALL = 'Please call me tomorrow morning about the meeting.';
const CREDIT = 10_000_000n;
/** The plugin's TTS default: linear16 at 24 kHz. */
const TTS_RATE = 24_000;
/** Deepgram names the voice in its model; the gateway takes `<model id>:<voice id>`. */
const SPEAKER = 'local-flite:flite-slt';

let cert: TestCertificate;
/** The gateway over TLS (synthesize()), and one over plain HTTP (the sockets, which honour the base URL). */
let tls: GatewayHarness;
let plain: GatewayHarness;

async function withModels(h: GatewayHarness): Promise<GatewayHarness> {
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await seedPlatformVoices(prisma);
  await h.runtime.ctx.registry.refresh();
  return h;
}

beforeAll(async () => {
  initializeLogger({ pretty: false, level: 'warn' });
  cert = await makeTestCertificate();
  [tls, plain] = await Promise.all([
    startSttGateway({ env: { SVC_TLS_CERT: cert.certPath, SVC_TLS_KEY: cert.keyPath } }).then(withModels),
    startSttGateway().then(withModels),
  ]);
  await Promise.all([speech(FOX), speech(CALL)]);
}, 120_000);

afterAll(async () => {
  await settleRecognizers();
  await Promise.all([tls?.close(), plain?.close()]);
  await cert?.remove();
});

/** An org of its own and its key: the plugin hides response headers, so the org's usage is the test's alone. */
async function orgWithKey(h: GatewayHarness, credit = CREDIT) {
  const org = await createOrg(h.testDb.db, { name: 'livekit deepgram', creditsMicros: credit });
  const key = (await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k' })).key;
  return { orgId: org.id, key };
}

/** The org's usage rows once `done(rows)` and its holds are given back; its balance is the credit less their cost. */
async function settledRows(h: GatewayHarness, orgId: string, done: (rows: UsageRow[]) => boolean): Promise<UsageRow[]> {
  const prisma = h.testDb.db.prisma;
  await vi.waitFor(
    async () => {
      expect((await prisma.org.findUniqueOrThrow({ where: { id: orgId } })).heldMicros).toBe(0n);
      expect(done(await usageRows(prisma, { orgId }))).toBe(true);
    },
    { timeout: 10_000, interval: 25 },
  );
  const rows = await usageRows(prisma, { orgId });
  expect((await prisma.org.findUniqueOrThrow({ where: { id: orgId } })).balanceMicros).toBe(CREDIT - rows.reduce((n, r) => n + r.costMicros, 0n));
  return rows;
}

/** Characters billed to the org: `characters` in all, every row at flite's price on `route`. */
async function expectTtsBilled(h: GatewayHarness, orgId: string, characters: number, route: string): Promise<void> {
  const rows = await settledRows(h, orgId, (rs) => rs.reduce((n, r) => n + r.characters, 0) === characters);
  for (const r of rows)
    expect({ route: r.route, modelId: r.modelId, costMicros: r.costMicros }).toEqual({
      route,
      modelId: 'local-flite',
      costMicros: costOf(r.characters, FLITE_PRICE),
    });
}

/** What the local recogniser hears in `samples` at `rate` (billed to the harness's own org). */
async function heard(h: GatewayHarness, samples: Float32Array, rate: number): Promise<string> {
  const res = await transcribe(h, wavFile([samples], rate), { model: 'local-stt' });
  expect(res.status).toBe(200);
  return ((await res.json()) as { text: string }).text;
}

/** A plugin object closed when the test ends (however it ends). */
function closedAfter<T extends { close(): unknown }>(plugin: T): T {
  onTestFinished(async () => {
    await plugin.close();
  });
  return plugin;
}

const fliteSamples = (...texts: string[]) => texts.reduce((n, t) => n + (natural('flite', 'slt', t).samples.length * TTS_RATE) / 16_000, 0);
const noRetry: APIConnectOptions = { maxRetry: 0, retryIntervalMs: 0, timeoutMs: 30_000 };

/**
 * Port 443 of 127.0.0.1 routed to `port`, with `ca` trusted, for every request of this process
 * that uses the default https agent (LiveKit's Deepgram synthesize() does), until the test ends.
 */
function routePort443To(port: number, ca: string): void {
  class Routed extends https.Agent {
    override createConnection(options: https.RequestOptions, ...rest: unknown[]): Duplex {
      const to = options.port === 443 && options.host === '127.0.0.1' ? { ...options, port } : options;
      return (https.Agent.prototype as unknown as { createConnection(...a: unknown[]): Duplex }).createConnection.call(this, to, ...rest);
    }
  }
  const before = https.globalAgent;
  const routed = new Routed({ ca });
  https.globalAgent = routed;
  onTestFinished(() => {
    https.globalAgent = before;
    routed.destroy();
  });
}

describe('deepgram.TTS (Aura)', { timeout: 60_000 }, () => {
  it('synthesize(): POST /v1/speak over TLS on port 443, the plugin\u2019s 24 kHz linear16 frames of flite\u2019s speech, heard as the words; billed per character', async () => {
    const { orgId, key } = await orgWithKey(tls);
    routePort443To(Number(new URL(tls.url).port), cert.ca);
    // The base URL as a gateway behind TLS on 443 is named; the plugin takes only its host.
    const tts = closedAfter(new deepgram.TTS({ apiKey: key, baseUrl: 'https://127.0.0.1', model: SPEAKER }));
    const errors: Error[] = [];
    tts.on('error', (e: { error: Error }) => errors.push(e.error));
    const events: agentsTts.SynthesizedAudio[] = [];
    for await (const audio of tts.synthesize(CALL, noRetry)) events.push(audio);
    expect(errors.map((e) => `${e.name}: ${e.message} ${String((e as { cause?: unknown }).cause)}`)).toEqual([]);
    expect(events.every((e) => e.frame.sampleRate === TTS_RATE && e.frame.channels === 1)).toBe(true);
    const samples = samplesOf(events.map((e) => e.frame));
    expectSpeechLevel(samples);
    expectWithin(samples.length, fliteSamples(CALL), 0.02);
    const text = await heard(plain, samples, TTS_RATE);
    expect(wer(CALL, text), text).toBeLessThanOrEqual(0.25);
    await expectTtsBilled(tls, orgId, codePoints(CALL), 'deepgram.speak');
  });

  it('stream(): text pushed in pieces, a Speak per sentence and a Flush over the /v1/speak socket; both sentences heard; billed per character of what it sent', async () => {
    const { orgId, key } = await orgWithKey(plain);
    const tts = closedAfter(new deepgram.TTS({ apiKey: key, baseUrl: plain.url, model: SPEAKER }));
    const errors: Error[] = [];
    tts.on('error', (e: { error: Error }) => errors.push(e.error));
    const stream = tts.stream({ connOptions: noRetry });
    onTestFinished(() => stream.close());
    for (const piece of `${FOX} ${CALL}`.match(/.{1,7}/gs)!) stream.pushText(piece);
    stream.endInput();
    const frames: AudioFrame[] = [];
    const finals: boolean[] = [];
    for await (const audio of stream) {
      if (audio === agentsTts.SynthesizeStream.END_OF_STREAM) break;
      frames.push(audio.frame);
      finals.push(audio.final);
    }
    expect(errors).toEqual([]);
    // It ends at the Flushed that answers its Flush, the last frame marked final.
    expect(finals.at(-1)).toBe(true);
    const samples = samplesOf(frames);
    expectSpeechLevel(samples);
    expectWithin(samples.length, fliteSamples(FOX, CALL), 0.02);
    const text = await heard(plain, samples, TTS_RATE);
    expect(wer(`${FOX} ${CALL}`, text), text).toBeLessThanOrEqual(0.25);
    // Each sentence is sent with a space after it.
    await expectTtsBilled(plain, orgId, codePoints(`${FOX} `) + codePoints(`${CALL} `), 'deepgram.speak.websocket');
  });
});

/** 100 ms of audio sent every 20 ms: five times real time, as the other streaming-client tests send it. */
const pace = () => new Promise((r) => setTimeout(r, 20));

/**
 * A speech stream fed `samples` as an agent feeds it (100 ms frames, each its own buffer), then
 * flush() (the plugins report usage and send what they hold) once the audio is in; the input ends
 * once `enough(events)` (or the stream ends first). Returns every event and the errors the STT emitted.
 */
async function recognize(stt: agentsStt.STT, samples: Float32Array, enough: (events: agentsStt.SpeechEvent[]) => boolean) {
  closedAfter(stt);
  const errors: Error[] = [];
  stt.on('error', (e: { error: Error }) => errors.push(e.error));
  const stream = stt.stream({ connOptions: noRetry });
  onTestFinished(() => stream.close());
  const events: agentsStt.SpeechEvent[] = [];
  let seen: () => void = () => {};
  const enoughSeen = new Promise<void>((resolve) => (seen = resolve));
  const reading = (async () => {
    for await (const e of stream) {
      events.push(e);
      if (enough(events)) seen();
    }
    seen(); // the stream ended: nothing more will come
  })();
  for (const frame of framesOf(samples)) {
    stream.pushFrame(frame);
    await pace();
  }
  stream.flush();
  await enoughSeen;
  stream.endInput();
  await reading;
  return { events, errors };
}

const E = agentsStt.SpeechEventType;
const ofType = (events: agentsStt.SpeechEvent[], type: agentsStt.SpeechEventType) => events.filter((e) => e.type === type);
/** The audio the plugin says it sent (its usage events), in milliseconds. */
const reportedMillis = (events: agentsStt.SpeechEvent[]) =>
  Math.round(ofType(events, E.RECOGNITION_USAGE).reduce((n, e) => n + e.recognitionUsage!.audioDuration, 0) * 1000);

describe('deepgram.STT: the /v1/listen socket', { timeout: 90_000 }, () => {
  it('two sentences: START_OF_SPEECH, interim and final transcripts holding the words, END_OF_SPEECH after each; billed per millisecond of what it sent', async () => {
    const { orgId, key } = await orgWithKey(plain);
    const a = trimSilence((await speech(FOX)).samples);
    const b = trimSilence((await speech(CALL)).samples);
    const audio = concat(silence(0.3), a, silence(2), b, silence(2));
    const stt = new deepgram.STT({ apiKey: key, baseUrl: plain.url, model: 'local-stt' });
    // Both sentences ended, and the usage flush() reports.
    const { events, errors } = await recognize(stt, audio, (got) => ofType(got, E.END_OF_SPEECH).length >= 2 && ofType(got, E.RECOGNITION_USAGE).length >= 1);
    expect(errors).toEqual([]);
    const types = events.map((e) => e.type).filter((t) => t !== E.RECOGNITION_USAGE);
    expect(types[0]).toBe(E.START_OF_SPEECH);
    expect(ofType(events, E.START_OF_SPEECH)).toHaveLength(2);
    expect(ofType(events, E.END_OF_SPEECH)).toHaveLength(2);
    expect(ofType(events, E.INTERIM_TRANSCRIPT).length).toBeGreaterThanOrEqual(2);
    const finals = ofType(events, E.FINAL_TRANSCRIPT).map((e) => e.alternatives![0]!.text);
    expect(wer(`${FOX} ${CALL}`, finals.join(' ')), finals.join(' | ')).toBeLessThanOrEqual(0.25);
    // The first sentence's finals come before the first END_OF_SPEECH.
    const firstTurn = events.slice(0, events.indexOf(ofType(events, E.END_OF_SPEECH)[0]!));
    const firstText = ofType(firstTurn, E.FINAL_TRANSCRIPT)
      .map((e) => e.alternatives![0]!.text)
      .join(' ');
    expect(wer(FOX, firstText), firstText).toBeLessThanOrEqual(0.25);
    // Its energy filter kept back most of the silence; what it sent, and only that, is billed.
    const millis = reportedMillis(events);
    expect(millis % 100).toBe(0);
    expect(millis).toBeLessThan(Math.round(audio.length / 16));
    const rows = await settledRows(plain, orgId, (rs) => rs.reduce((n, r) => n + r.audioMillis, 0) === millis);
    expect(rows.reduce((n, r) => n + r.costMicros, 0n)).toBe(audioCost(millis));
    expect(rows.every((r) => r.route === 'listen.websocket' && r.modelId === 'local-stt' && r.modality === 'stt')).toBe(true);
    // One session: one request id on its rows; the plugin's usage reports carry it once it has read it from a result.
    expect(new Set(rows.map((r) => r.requestId)).size).toBe(1);
    for (const e of ofType(events, E.RECOGNITION_USAGE)) expect([rows[0]!.requestId, '']).toContain(e.requestId);
  });
});

describe('deepgram.STTv2 (Flux): /v2/listen', { timeout: 90_000 }, () => {
  it('two turns: START_OF_SPEECH, interim updates, PREFLIGHT at the eager end, FINAL at EndOfTurn with the words, END_OF_SPEECH; billed per millisecond sent', async () => {
    const { orgId, key } = await orgWithKey(plain);
    const a = trimSilence((await speech(FOX)).samples);
    const b = trimSilence((await speech(CALL)).samples);
    const audio = concat(silence(0.3), a, silence(2), b, silence(2));
    // Flux's own model name (the gateway's default stt model), the thresholds of an agent that answers early.
    const stt = new deepgram.STTv2({ apiKey: key, endpointUrl: `${plain.url}/v2/listen`, eagerEotThreshold: 0.4, eotThreshold: 0.7, eotTimeoutMs: 3000 });
    const { events, errors } = await recognize(stt, audio, (got) => ofType(got, E.END_OF_SPEECH).length >= 2 && ofType(got, E.RECOGNITION_USAGE).length >= 1);
    expect(errors).toEqual([]);
    const turns = events
      .filter((e) => e.type !== E.RECOGNITION_USAGE && e.type !== E.INTERIM_TRANSCRIPT && e.type !== E.PREFLIGHT_TRANSCRIPT)
      .map((e) => e.type);
    expect(turns).toEqual([E.START_OF_SPEECH, E.FINAL_TRANSCRIPT, E.END_OF_SPEECH, E.START_OF_SPEECH, E.FINAL_TRANSCRIPT, E.END_OF_SPEECH]);
    expect(ofType(events, E.INTERIM_TRANSCRIPT).length).toBeGreaterThanOrEqual(2);
    // Each turn's eager end came before its end with the words its end has: what an agent starts its answer on.
    let from = 0;
    for (const final of ofType(events, E.FINAL_TRANSCRIPT)) {
      const at = events.indexOf(final);
      const preflight = ofType(events.slice(from, at), E.PREFLIGHT_TRANSCRIPT).at(-1);
      expect(preflight?.alternatives![0]!.text).toBe(final.alternatives![0]!.text);
      from = at;
    }
    const finals = ofType(events, E.FINAL_TRANSCRIPT).map((e) => e.alternatives![0]!.text);
    expect(wer(FOX, finals[0]!), finals[0]).toBeLessThanOrEqual(0.25);
    expect(wer(CALL, finals[1]!), finals[1]).toBeLessThanOrEqual(0.25);
    // Every sample was sent (no energy filter here), in 50 ms frames and the rest at flush().
    const millis = Math.round(audio.length / 16);
    expect(reportedMillis(events)).toBe(millis);
    const rows = await settledRows(plain, orgId, (rs) => rs.reduce((n, r) => n + r.audioMillis, 0) === millis);
    expect(rows.reduce((n, r) => n + r.costMicros, 0n)).toBe(audioCost(millis));
    expect(rows.every((r) => r.route === 'listen.v2.websocket' && r.modelId === 'local-stt')).toBe(true);
    // The request id of its Connected message is on every event and names the session's rows.
    expect(new Set(events.map((e) => e.requestId))).toEqual(new Set([rows[0]!.requestId]));
  });
});

describe('a bad key through the plugin', { timeout: 60_000 }, () => {
  const BAD = 'sk_svc_not_a_real_key_0000000000000000000';

  it('TTS synthesize() and stream(), STT and STTv2: each fails with the 401; nothing billed', async () => {
    const before = await plain.testDb.db.prisma.ledgerEntry.count();
    routePort443To(Number(new URL(tls.url).port), cert.ca);
    const synth = closedAfter(new deepgram.TTS({ apiKey: BAD, baseUrl: 'https://127.0.0.1', model: SPEAKER }));
    const synthErrors: Error[] = [];
    synth.on('error', (e: { error: Error }) => synthErrors.push(e.error));
    const { reasons } = await unhandledRejections(1, async () => {
      for await (const audio of synth.synthesize(CALL, noRetry)) expect(audio).toBeUndefined();
    });
    expect(synthErrors.map((e) => e.message)).toEqual([expect.stringContaining('401')]);
    expect(reasons).toEqual(synthErrors);

    const tts = closedAfter(new deepgram.TTS({ apiKey: BAD, baseUrl: plain.url, model: SPEAKER }));
    const ttsErrors: Error[] = [];
    tts.on('error', (e: { error: Error }) => ttsErrors.push(e.error));
    const stream = tts.stream({ connOptions: noRetry });
    onTestFinished(() => stream.close());
    stream.pushText(CALL);
    stream.endInput();
    for await (const audio of stream) expect(audio).toBe(agentsTts.SynthesizeStream.END_OF_STREAM);
    expect(ttsErrors.map((e) => e.message)).toEqual([expect.stringContaining('401')]);

    for (const stt of [
      new deepgram.STT({ apiKey: BAD, baseUrl: plain.url, model: 'local-stt' }),
      new deepgram.STTv2({ apiKey: BAD, endpointUrl: `${plain.url}/v2/listen` }),
    ]) {
      const { events, errors } = await recognize(stt, silence(0.3), () => false);
      expect(events).toEqual([]);
      expect(errors.map((e) => (e as Error & { statusCode?: number }).statusCode)).toEqual([401]);
    }
    expect(await plain.testDb.db.prisma.ledgerEntry.count()).toBe(before);
  });
});
