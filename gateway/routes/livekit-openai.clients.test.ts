// LiveKit Agents' OpenAI plugin (@livekit/agents-plugin-openai 1.8.1 with @livekit/agents 1.8.1),
// unmodified but for its base URL and key, against the real gateway runtime (throw-away database):
// - openai.LLM: chat streams over /v1/chat/completions from a scripted OpenAI-compatible engine,
//   text and a function tool's call;
// - openai.TTS: synthesize() over /v1/audio/speech (response_format pcm, 24 kHz) from flite, and
//   stream() the way an AgentSession streams a TTS that cannot (tts.StreamAdapter with the basic
//   sentence tokenizer: one synthesize() per sentence);
// - openai.STT with useRealtime: false: recognize() over /v1/audio/transcriptions, flite's speech
//   heard by the local recogniser. (The plugin's default, useRealtime: true, opens
//   /v1/realtime?intent=transcription, which the gateway does not serve: not tested here.)
// Asserted: the exact text, decoded non-silent audio of the text's length, the spoken words, the
// ledger exact per request; a bad key (401) and a zero balance (402) surface as plugin errors.
import { initializeLogger, llm as agentsLlm, stt as agentsStt, tokenize, tts as agentsTts } from '@livekit/agents';
import * as openai from '@livekit/agents-plugin-openai';
import type { AudioFrame } from '@livekit/rtc-node';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { framesOf, samplesOf, unhandledRejections } from '../../test/support/livekit-agents.ts';
import { startScriptedUpstream, toolCallStream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { audioCost, settleRecognizers, speech, startSttGateway, wer } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE, FOX, codePoints, costOf, expectSpeechLevel, natural } from '../../test/support/tts-routes.ts';
import { usageRows, type UsageRow } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const PRICE_IN = 150_001n;
const PRICE_OUT = 600_003n;
const llmCost = (input: number, output: number): bigint => (BigInt(input) * PRICE_IN + BigInt(output) * PRICE_OUT + 999_999n) / 1_000_000n;
const CALL = 'Please call me tomorrow morning about the meeting.';
const CREDIT = 10_000_000n;
/** The plugin's TTS is fixed at OpenAI's pcm: 16-bit mono at 24 kHz, cut into 100 ms frames. */
const TTS_RATE = 24_000;
const TTS_FRAME = TTS_RATE / 10;
/** The plugin's typings allow only OpenAI's voice names (its model is `TTSModels | string`, its voice is not): a gateway voice needs the cast. */
const VOICE = 'flite-slt' as openai.TTSVoices;

const TOOL_STREAM = toolCallStream('lk-llm-tools');

let h: GatewayHarness;
let upstream: ScriptedUpstream;
let toolUpstream: ScriptedUpstream;

beforeAll(async () => {
  initializeLogger({ pretty: false, level: 'warn' });
  h = await startSttGateway();
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await seedPlatformVoices(prisma);
  upstream = await startScriptedUpstream({ kind: 'stream', chunks: ['Voice ', 'agents ', 'talk', '.'] });
  toolUpstream = await startScriptedUpstream({ kind: 'raw', status: 200, contentType: 'text/event-stream', body: TOOL_STREAM });
  const prices = { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT };
  await upsertModel(prisma, checkProtocol, { id: 'lk-llm', modality: 'llm', prices, upstream: { url: upstream.baseUrl, protocol: 'openai' } });
  await upsertModel(prisma, checkProtocol, { id: 'lk-llm-tools', modality: 'llm', prices, upstream: { url: toolUpstream.baseUrl, protocol: 'openai' } });
  await h.runtime.ctx.registry.refresh();
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([upstream?.close(), toolUpstream?.close()]);
  await settleRecognizers();
  await h?.close();
});

/** An org of its own with `credit`, and its key: the plugin hides response headers, so the org's ledger is the test's alone. */
async function orgWithKey(credit = CREDIT) {
  const org = await createOrg(h.testDb.db, { name: 'livekit openai', creditsMicros: credit });
  const key = (await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k' })).key;
  return { orgId: org.id, key };
}

/** The org's usage rows once `count` are written and its holds given back; its balance is the credit less their cost. */
async function settledRows(orgId: string, count: number): Promise<UsageRow[]> {
  const prisma = h.testDb.db.prisma;
  await vi.waitFor(
    async () => {
      expect((await prisma.org.findUniqueOrThrow({ where: { id: orgId } })).heldMicros).toBe(0n);
      expect(await usageRows(prisma, { orgId })).toHaveLength(count);
    },
    { timeout: 10_000, interval: 25 },
  );
  const rows = await usageRows(prisma, { orgId });
  const org = await prisma.org.findUniqueOrThrow({ where: { id: orgId } });
  expect(org.balanceMicros).toBe(CREDIT - rows.reduce((n, r) => n + r.costMicros, 0n));
  return rows;
}

/**
 * The plugin keeps whole 100 ms frames of the answer and drops the rest (its ChunkedStream never
 * flushes its AudioByteStream): flite's own length at 24 kHz, less under one frame.
 */
function expectTtsLength(samples: Float32Array, text: string): void {
  const full = (natural('flite', 'slt', text).samples.length * TTS_RATE) / 16_000;
  expect(samples.length % TTS_FRAME).toBe(0);
  expect(samples.length).toBeGreaterThan(full * 0.99 - TTS_FRAME);
  expect(samples.length).toBeLessThanOrEqual(full * 1.01);
}

const noRetry = { maxRetry: 0, retryIntervalMs: 0, timeoutMs: 30_000 };

function chatContext(text: string): agentsLlm.ChatContext {
  const ctx = agentsLlm.ChatContext.empty();
  ctx.addMessage({ role: 'user', content: text });
  return ctx;
}

/** Runs one chat and gathers what the plugin gives: content pieces, usage, and errors it emitted. */
async function chat(key: string) {
  const model = new openai.LLM({ baseURL: `${h.url}/v1`, apiKey: key, model: 'lk-llm' });
  const errors: Error[] = [];
  model.on('error', (e: { error: Error }) => errors.push(e.error));
  const pieces: string[] = [];
  const usage: agentsLlm.CompletionUsage[] = [];
  for await (const chunk of model.chat({ chatCtx: chatContext('Say hello'), connOptions: noRetry })) {
    if (chunk.delta?.content) pieces.push(chunk.delta.content);
    if (chunk.usage) usage.push(chunk.usage);
  }
  await model.aclose();
  return { pieces, usage, errors };
}

/** One synthesize() call's frames, and the errors the TTS emitted. */
async function synthesize(key: string, text: string) {
  const tts = new openai.TTS({ baseURL: `${h.url}/v1`, apiKey: key, model: 'local-flite', voice: VOICE });
  const errors: Error[] = [];
  tts.on('error', (e: { error: Error }) => errors.push(e.error));
  const events: agentsTts.SynthesizedAudio[] = [];
  for await (const audio of tts.synthesize(text, noRetry)) events.push(audio);
  await tts.close();
  return { events, errors };
}

const recognizer = (key: string) => new openai.STT({ baseURL: `${h.url}/v1`, apiKey: key, model: 'local-stt', useRealtime: false });

describe('openai.LLM: chat streams through /v1/chat/completions', () => {
  it('yields the engine\u2019s text exactly, piece by piece, and its usage; metered exactly', async () => {
    const { orgId, key } = await orgWithKey();
    const { pieces, usage, errors } = await chat(key);
    expect(errors).toEqual([]);
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.join('')).toBe('Voice agents talk.');
    expect(usage).toEqual([expect.objectContaining({ promptTokens: 10, completionTokens: 4, totalTokens: 14 })]);
    // The plugin's request reached the engine as it sent it: streamed, usage asked for.
    const sent = JSON.parse(upstream.received.at(-1)!.body.toString()) as Record<string, unknown>;
    expect(sent).toMatchObject({ model: 'lk-llm', stream: true, stream_options: { include_usage: true } });
    expect(JSON.stringify(sent.messages)).toContain('Say hello');
    const rows = await settledRows(orgId, 1);
    expect(rows[0]).toMatchObject({
      modelId: 'lk-llm',
      modality: 'llm',
      route: 'chat.completions',
      inputTokens: 10,
      outputTokens: 4,
      costMicros: llmCost(10, 4),
    });
  });

  it('collect(): the whole answer and its usage', async () => {
    const { orgId, key } = await orgWithKey();
    const model = new openai.LLM({ baseURL: `${h.url}/v1`, apiKey: key, model: 'lk-llm' });
    const response = await model.chat({ chatCtx: chatContext('Talk'), connOptions: noRetry }).collect();
    await model.aclose();
    expect(response.text).toBe('Voice agents talk.');
    expect(response.usage).toMatchObject({ promptTokens: 10, completionTokens: 4 });
    expect((await settledRows(orgId, 1))[0]).toMatchObject({ inputTokens: 10, outputTokens: 4, costMicros: llmCost(10, 4) });
  });

  it('a function tool: the engine\u2019s streamed call arrives whole as the plugin\u2019s tool call; the tool reached the engine', async () => {
    const { orgId, key } = await orgWithKey();
    const model = new openai.LLM({ baseURL: `${h.url}/v1`, apiKey: key, model: 'lk-llm-tools' });
    const getWeather = agentsLlm.tool({
      description: 'Current weather in a city',
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => `${city}: 4 °C`,
    });
    const response = await model.chat({ chatCtx: chatContext('Weather in Oslo?'), toolCtx: { get_weather: getWeather }, connOptions: noRetry }).collect();
    await model.aclose();
    expect(response.toolCalls).toEqual([expect.objectContaining({ callId: 'call_7', name: 'get_weather', args: '{"city":"Oslo"}' })]);
    const sent = JSON.parse(toolUpstream.received.at(-1)!.body.toString()) as { tools: unknown[] };
    expect(sent.tools).toEqual([{ type: 'function', function: expect.objectContaining({ name: 'get_weather', description: 'Current weather in a city' }) }]);
    expect((await settledRows(orgId, 1))[0]).toMatchObject({ modelId: 'lk-llm-tools', inputTokens: 30, outputTokens: 9, costMicros: llmCost(30, 9) });
  });
});

describe('openai.TTS: /v1/audio/speech in pcm', { timeout: 60_000 }, () => {
  it('synthesize(): 24 kHz frames of flite\u2019s speech, the last marked final; billed per character', async () => {
    const { orgId, key } = await orgWithKey();
    const { events, errors } = await synthesize(key, FOX);
    expect(errors).toEqual([]);
    expect(events.length).toBeGreaterThan(10);
    expect(events.every((e) => e.frame.sampleRate === TTS_RATE && e.frame.channels === 1)).toBe(true);
    expect(events.map((e) => e.final)).toEqual([...Array<boolean>(events.length - 1).fill(false), true]);
    const samples = samplesOf(events.map((e) => e.frame));
    expectSpeechLevel(samples);
    expectTtsLength(samples, FOX);
    const rows = await settledRows(orgId, 1);
    expect(rows[0]).toMatchObject({
      modelId: 'local-flite',
      modality: 'tts',
      route: 'audio.speech',
      characters: codePoints(FOX),
      costMicros: costOf(codePoints(FOX), FLITE_PRICE),
    });
  });

  it('stream(), as an AgentSession streams it (StreamAdapter + sentence tokenizer): each sentence synthesized and billed once', async () => {
    const { orgId, key } = await orgWithKey();
    const tts = new openai.TTS({ baseURL: `${h.url}/v1`, apiKey: key, model: 'local-flite', voice: VOICE });
    // The plugin has no streaming of its own; the framework wraps it.
    expect(() => tts.stream()).toThrow(/Streaming is not supported/);
    const adapter = new agentsTts.StreamAdapter(tts, new tokenize.basic.SentenceTokenizer());
    const errors: Error[] = [];
    adapter.on('error', (e: { error: Error }) => errors.push(e.error));
    const stream = adapter.stream({ connOptions: noRetry });
    // Pieces as an LLM streams them, split mid-word.
    for (const piece of `${FOX} ${CALL}`.match(/.{1,7}/gs)!) stream.pushText(piece);
    stream.endInput();
    const frames: AudioFrame[] = [];
    for await (const audio of stream) {
      if (audio === agentsTts.SynthesizeStream.END_OF_STREAM) break;
      frames.push(audio.frame);
    }
    await adapter.close();
    await tts.close();
    expect(errors).toEqual([]);
    expect(frames.every((f) => f.sampleRate === TTS_RATE)).toBe(true);
    const samples = samplesOf(frames);
    expectSpeechLevel(samples);
    // Two requests, each cut to whole frames.
    const full = ((natural('flite', 'slt', FOX).samples.length + natural('flite', 'slt', CALL).samples.length) * TTS_RATE) / 16_000;
    expect(samples.length).toBeGreaterThan(full * 0.99 - 2 * TTS_FRAME);
    expect(samples.length).toBeLessThanOrEqual(full * 1.01);
    const rows = await settledRows(orgId, 2);
    expect(rows.map((r) => r.characters).sort((a, b) => a - b)).toEqual([codePoints(FOX), codePoints(CALL)].sort((a, b) => a - b));
    expect(rows.every((r) => r.route === 'audio.speech' && r.costMicros === costOf(r.characters, FLITE_PRICE))).toBe(true);
  });
});

describe('openai.STT with useRealtime: false: /v1/audio/transcriptions', { timeout: 60_000 }, () => {
  it('recognize() on an agent\u2019s frames of flite\u2019s speech: the spoken words; billed per millisecond', async () => {
    const { orgId, key } = await orgWithKey();
    const call = await speech(CALL);
    const millis = Math.round((call.samples.length / 16000) * 1000);
    const stt = recognizer(key);
    expect(stt.capabilities.streaming).toBe(false);
    const event = await stt.recognize(framesOf(call.samples));
    await stt.close();
    expect(event.type).toBe(agentsStt.SpeechEventType.FINAL_TRANSCRIPT);
    const text = event.alternatives![0]!.text;
    expect(wer(CALL, text), text).toBeLessThanOrEqual(0.2);
    const rows = await settledRows(orgId, 1);
    expect(rows[0]).toMatchObject({ modelId: 'local-stt', modality: 'stt', route: 'audio.transcriptions', audioMillis: millis, costMicros: audioCost(millis) });
  });
});

describe('errors through the plugin', { timeout: 60_000 }, () => {
  it.each([
    ['a bad key', 401, async () => ({ key: 'sk_svc_not_a_real_key_0000000000000000000', orgId: null as string | null })],
    ['a zero balance', 402, async () => orgWithKey(0n)],
  ] as const)('%s: %i from the LLM, the TTS and the STT; nothing billed', async (_name, status, keyFor) => {
    const { key } = await keyFor();
    const before = await h.testDb.db.prisma.ledgerEntry.count();

    const llmRun = await chat(key);
    expect(llmRun.pieces).toEqual([]);
    expect(llmRun.errors).toHaveLength(1);
    expect((llmRun.errors[0] as Error & { statusCode?: number }).statusCode).toBe(status);

    const { result: ttsRun, reasons } = await unhandledRejections(1, () => synthesize(key, 'Hello.'));
    expect(ttsRun.events).toEqual([]);
    expect(ttsRun.errors).toHaveLength(1);
    expect((ttsRun.errors[0] as Error & { status?: number }).status).toBe(status);
    // The same failure, rethrown by the framework where nobody awaits it.
    expect(reasons).toEqual([ttsRun.errors[0]]);

    const stt = recognizer(key);
    const failure = (await stt.recognize(framesOf((await speech(CALL)).samples)).then(
      () => null,
      (e: unknown) => e,
    )) as (Error & { status?: number; error?: { code?: string } }) | null;
    await stt.close();
    expect(failure?.status).toBe(status);
    if (status === 402) expect(failure?.error?.code).toBe('insufficient_quota');

    expect(await h.testDb.db.prisma.ledgerEntry.count()).toBe(before);
  });
});
