// LiveKit Agents' ElevenLabs plugin (@livekit/agents-plugin-elevenlabs 1.8.1 with @livekit/agents
// 1.8.1), unmodified but for its base URL and key, against the real gateway runtime (throw-away
// database, flite, the local recogniser):
// - elevenlabs.TTS synthesize(): POST /v1/text-to-speech/{voice_id}/stream (its default pcm_22050);
// - elevenlabs.TTS stream(): the multi-stream-input socket, one context a stream, text pushed in
//   pieces as an LLM streams it (the plugin cuts sentences, sends each with flush, then
//   {"text": "", flush} and close_context, and ends the stream at the context's isFinal).
// Asserted: frames of flite's speech at the plugin's rate, heard back by the recogniser as the
// words; usage rows per character, exact, on a gateway voice id; an unknown voice fails the call.
import { initializeLogger, tts as agentsTts } from '@livekit/agents';
import * as elevenlabs from '@livekit/agents-plugin-elevenlabs';
import type { AudioFrame } from '@livekit/rtc-node';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { samplesOf, unhandledRejections } from '../../test/support/livekit-agents.ts';
import { STT_PRICE, settleRecognizers, transcribe, wavFile, wer } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE, FOX, codePoints, costOf, expectSpeechLevel, expectWithin, natural, startTtsGateway } from '../../test/support/tts-routes.ts';
import { usageRows, type UsageRow } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const CALL = 'Please call me tomorrow morning about the meeting.';
const CREDIT = 10_000_000n;
/** The plugin's default encoding, pcm_22050. */
const RATE = 22_050;

let h: GatewayHarness;

beforeAll(async () => {
  initializeLogger({ pretty: false, level: 'warn' });
  h = await startTtsGateway();
  // The recogniser that hears the plugin's audio back (billed to the harness's own org).
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: 'local-stt',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  await h.runtime.ctx.registry.refresh();
}, 60_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
});

/** An org of its own and its key: the plugin hides response headers, so the org's usage is the test's alone. */
async function orgWithKey(credit = CREDIT) {
  const org = await createOrg(h.testDb.db, { name: 'livekit elevenlabs', creditsMicros: credit });
  const key = (await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k' })).key;
  return { orgId: org.id, key };
}

/** A TTS as an agent configures it: the gateway's /v1, a gateway voice id and tts model; closed when the test ends. */
function ttsFor(key: string, voiceId = 'flite-slt'): elevenlabs.TTS {
  const tts = new elevenlabs.TTS({ baseURL: `${h.url}/v1`, apiKey: key, voiceId, model: 'local-flite' });
  onTestFinished(() => tts.close());
  return tts;
}

/** The org's usage rows once their characters add up to `characters` and its holds are given back; its balance is the credit less their cost. */
async function billed(orgId: string, characters: number): Promise<UsageRow[]> {
  const prisma = h.testDb.db.prisma;
  await vi.waitFor(
    async () => {
      expect((await prisma.org.findUniqueOrThrow({ where: { id: orgId } })).heldMicros).toBe(0n);
      expect((await usageRows(prisma, { orgId })).reduce((n, r) => n + r.characters, 0)).toBe(characters);
    },
    { timeout: 10_000, interval: 25 },
  );
  const rows = await usageRows(prisma, { orgId });
  for (const r of rows)
    expect({ modelId: r.modelId, modality: r.modality, costMicros: r.costMicros }).toEqual({
      modelId: 'local-flite',
      modality: 'tts',
      costMicros: costOf(r.characters, FLITE_PRICE),
    });
  expect((await prisma.org.findUniqueOrThrow({ where: { id: orgId } })).balanceMicros).toBe(CREDIT - rows.reduce((n, r) => n + r.costMicros, 0n));
  return rows;
}

/** What the local recogniser hears in `samples` (at `rate`). */
async function heard(samples: Float32Array, rate = RATE): Promise<string> {
  const res = await transcribe(h, wavFile([samples], rate), { model: 'local-stt' });
  expect(res.status).toBe(200);
  return ((await res.json()) as { text: string }).text;
}

/** flite's own length for `texts` at the plugin's rate. */
const fliteSamples = (...texts: string[]) => texts.reduce((n, t) => n + (natural('flite', 'slt', t).samples.length * RATE) / 16_000, 0);

const noRetry = { maxRetry: 0, retryIntervalMs: 0, timeoutMs: 30_000 };

describe('elevenlabs.TTS synthesize(): POST /v1/text-to-speech/{voice_id}/stream', () => {
  it('frames of flite\u2019s speech at 22.05 kHz (the plugin\u2019s default pcm_22050), the last final, heard as the words; billed per character', async () => {
    const { orgId, key } = await orgWithKey();
    const tts = ttsFor(key);
    const errors: Error[] = [];
    tts.on('error', (e: { error: Error }) => errors.push(e.error));
    const events: agentsTts.SynthesizedAudio[] = [];
    for await (const audio of tts.synthesize(CALL)) events.push(audio);
    expect(errors).toEqual([]);
    expect(events.every((e) => e.frame.sampleRate === RATE && e.frame.channels === 1)).toBe(true);
    expect(events.map((e) => e.final)).toEqual([...Array<boolean>(events.length - 1).fill(false), true]);
    const samples = samplesOf(events.map((e) => e.frame));
    expectSpeechLevel(samples);
    expectWithin(samples.length, fliteSamples(CALL), 0.02);
    const text = await heard(samples);
    expect(wer(CALL, text), text).toBeLessThanOrEqual(0.2);
    const rows = await billed(orgId, codePoints(CALL));
    expect(rows.map((r) => r.route)).toEqual(['elevenlabs.tts']);
  });
});

describe('elevenlabs.TTS stream(): the multi-stream-input socket', { timeout: 60_000 }, () => {
  /** Pushes `text` in pieces of `size` (as an LLM streams it), ends the input, and gathers the frames until the end of the stream. */
  async function speak(stream: agentsTts.SynthesizeStream, text: string, size = 7): Promise<AudioFrame[]> {
    for (const piece of text.match(new RegExp(`.{1,${size}}`, 'gs'))!) stream.pushText(piece);
    stream.endInput();
    const frames: AudioFrame[] = [];
    for await (const audio of stream) {
      if (audio === agentsTts.SynthesizeStream.END_OF_STREAM) break;
      frames.push(audio.frame);
    }
    return frames;
  }

  it('two sentences pushed in pieces: flite\u2019s speech of both, heard as the words; billed per character of each sentence and the space the plugin adds', async () => {
    const { orgId, key } = await orgWithKey();
    const tts = ttsFor(key);
    const errors: Error[] = [];
    tts.on('error', (e: { error: Error }) => errors.push(e.error));
    const frames = await speak(tts.stream({ connOptions: noRetry }), `${FOX} ${CALL}`);
    expect(errors).toEqual([]);
    expect(frames.every((f) => f.sampleRate === RATE)).toBe(true);
    const samples = samplesOf(frames);
    expectSpeechLevel(samples);
    expectWithin(samples.length, fliteSamples(FOX, CALL), 0.02);
    const text = await heard(samples);
    expect(wer(`${FOX} ${CALL}`, text), text).toBeLessThanOrEqual(0.2);
    // Each sentence is sent with a space after it; the context's opening " " and closing "" are not billed.
    const rows = await billed(orgId, codePoints(`${FOX} `) + codePoints(`${CALL} `));
    expect(new Set(rows.map((r) => r.route))).toEqual(new Set(['elevenlabs.tts.websocket']));
  });

  it('one stream after another, as an agent speaks its turns: both over the plugin\u2019s one socket, each context spoken whole', async () => {
    const { orgId, key } = await orgWithKey();
    const tts = ttsFor(key);
    const first = samplesOf(await speak(tts.stream({ connOptions: noRetry }), FOX));
    const second = samplesOf(await speak(tts.stream({ connOptions: noRetry }), CALL));
    expectWithin(first.length, fliteSamples(FOX), 0.02);
    expectWithin(second.length, fliteSamples(CALL), 0.02);
    const text = await heard(second);
    expect(wer(CALL, text), text).toBeLessThanOrEqual(0.2);
    const rows = await billed(orgId, codePoints(`${FOX} `) + codePoints(`${CALL} `));
    // One socket: every row carries its request id.
    expect(new Set(rows.map((r) => r.requestId)).size).toBe(1);
  });
});

describe('errors through the plugin', { timeout: 60_000 }, () => {
  /** Runs `stream` to its end: the frames it gave. */
  async function drain(stream: agentsTts.SynthesizeStream): Promise<AudioFrame[]> {
    const frames: AudioFrame[] = [];
    for await (const audio of stream) {
      if (audio === agentsTts.SynthesizeStream.END_OF_STREAM) break;
      frames.push(audio.frame);
    }
    return frames;
  }

  /** One synthesize() that fails: its frames, the TTS's error events, and the same failure rethrown where nobody awaits it (see unhandledRejections). */
  async function failingSynthesize(tts: elevenlabs.TTS) {
    const errors: Error[] = [];
    tts.on('error', (e: { error: Error }) => errors.push(e.error));
    const { result: events, reasons } = await unhandledRejections(1, async () => {
      const out: agentsTts.SynthesizedAudio[] = [];
      // The plugin's synthesize() takes no connection options: a 4xx is not retried.
      for await (const audio of tts.synthesize(CALL)) out.push(audio);
      return out;
    });
    expect(events).toEqual([]);
    expect(errors).toHaveLength(1);
    expect(reasons).toEqual([errors[0]]);
    return errors[0] as Error & { statusCode?: number };
  }

  it('a voice the gateway does not have: synthesize() fails with 404 and ElevenLabs’ detail; stream() ends without audio (its context’s error ends it); nothing billed', async () => {
    const { orgId, key } = await orgWithKey();
    const tts = ttsFor(key, 'no-such-voice');
    const failure = await failingSynthesize(tts);
    expect(failure.statusCode).toBe(404);
    expect(failure.message).toContain('"detail":{"status":"voice_not_found"');

    const errors: Error[] = [];
    tts.on('error', (e: { error: Error }) => errors.push(e.error));
    const stream = tts.stream({ connOptions: noRetry });
    stream.pushText(CALL);
    stream.endInput();
    expect(await drain(stream)).toEqual([]);
    // The plugin logs the gateway's message and reports its own.
    expect(errors.map((e) => e.message)).toEqual(['Could not synthesize']);
    expect(await usageRows(h.testDb.db.prisma, { orgId })).toEqual([]);
  });

  it.each([
    ['a bad key', 401, async (): Promise<string> => 'sk_svc_not_a_real_key_0000000000000000000'],
    ['a zero balance', 402, async (): Promise<string> => (await orgWithKey(0n)).key],
  ] as const)('%s: synthesize() fails with %i; stream() cannot connect (the upgrade is refused); nothing billed', async (_name, status, keyFor) => {
    const key = await keyFor();
    const before = await h.testDb.db.prisma.ledgerEntry.count();
    const tts = ttsFor(key);
    expect((await failingSynthesize(tts)).statusCode).toBe(status);

    const errors: Error[] = [];
    tts.on('error', (e: { error: Error }) => errors.push(e.error));
    const stream = tts.stream({ connOptions: noRetry });
    stream.pushText(CALL);
    stream.endInput();
    expect(await drain(stream)).toEqual([]);
    expect(errors.map((e) => [e.name, e.message])).toEqual([['APIConnectionError', 'could not connect to ElevenLabs']]);
    expect(await h.testDb.db.prisma.ledgerEntry.count()).toBe(before);
  });
});
