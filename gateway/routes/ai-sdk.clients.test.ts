// The Vercel AI SDK (`ai` + `@ai-sdk/openai`, unmodified but for their base URL) against the real
// gateway runtime (throw-away database): generateText / streamText with the default
// `openai(model)` -- the Responses API -- on every kind of LLM upstream (an engine that serves
// /responses, one with chat completions only, the local llama.cpp engine with a tiny GGUF whose
// reply is known exactly) and with `openai.chat(model)`; transcription with verbose_json on speech
// flite makes, read by the local recogniser; speech from flite, heard back by the recogniser.
// Results, usage and the ledger are exact; bad keys and a zero balance fail as the SDK's errors.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createOpenAI } from '@ai-sdk/openai';
import { APICallError, generateSpeech, generateText, streamText, tool, transcribe } from 'ai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { scanMpegFrames } from '../audio/mp3-frames.ts';
import { parseWav } from '../audio/wav.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedUpstream, type Behaviour, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { STT_PRICE, audioCost, settleRecognizers, speech as fliteSpeech, wer } from '../../test/support/stt-routes.ts';
import { writeTinyGguf, type TinyGguf } from '../../test/support/tiny-gguf.ts';
import { FLITE_PRICE, codePoints, costOf as ttsCost } from '../../test/support/tts-routes.ts';
import { usageRows, type UsageRow } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const PRICE_IN = 150_001n;
const PRICE_OUT = 600_003n;
const PRICES = { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT };
const llmCost = (input: number, output: number): bigint => (BigInt(input) * PRICE_IN + BigInt(output) * PRICE_OUT + 999_999n) / 1_000_000n;
const CALL = 'please call me tomorrow morning about the meeting';

let h: GatewayHarness;
let tiny: TinyGguf;
let zeroKey = '';
const ups: Record<string, ScriptedUpstream> = {};

const TOOL_CALL = {
  id: 'chatcmpl-tool',
  object: 'chat.completion',
  created: 1_700_000_000,
  model: 'x',
  choices: [
    {
      index: 0,
      message: {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_42', type: 'function', function: { name: 'weather', arguments: '{"city":"Zürich"}' } }],
      },
      finish_reason: 'tool_calls',
    },
  ],
  usage: { prompt_tokens: 30, completion_tokens: 9, total_tokens: 39 },
};

async function scripted(id: string, behaviour: Behaviour, responsesApi: boolean) {
  const up = await startScriptedUpstream(behaviour);
  up.responsesApi = responsesApi;
  ups[id] = up;
  await upsertModel(h.testDb.db.prisma, checkProtocol, { id, modality: 'llm', prices: PRICES, upstream: { url: up.baseUrl, protocol: 'openai' } });
}

beforeAll(async () => {
  h = await startGateway({ creditsMicros: 100_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600', SVC_LLAMA_THREADS: '1' } });
  const prisma = h.testDb.db.prisma;
  // The local engines first, health-checked alone (the scripted upstreams need no check: an
  // upstream not yet checked is used, and a check of everything at once is slow on a busy machine).
  mkdirSync(join(h.testDb.dataDir, 'models'), { recursive: true });
  tiny = await writeTinyGguf(join(h.testDb.dataDir, 'models', 'local-llm.gguf'));
  await upsertModel(prisma, checkProtocol, { id: 'local-llm', modality: 'llm', prices: PRICES, upstream: { url: 'local:llama-cpp', protocol: 'llama-cpp' } });
  await upsertModel(prisma, checkProtocol, {
    id: 'local-stt',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await seedPlatformVoices(prisma);
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
  await scripted('native', { kind: 'ok', text: 'Hello from the scripted upstream.' }, true);
  await scripted('native-stream', { kind: 'stream', chunks: ['Voice ', 'agents ', 'talk', '.'] }, true);
  await scripted('chat-only', { kind: 'ok', text: 'Translated hello.', usage: { prompt_tokens: 21, completion_tokens: 3 } }, false);
  await scripted('chat-only-stream', { kind: 'stream', chunks: ['Spoken ', 'words ', 'flow', '.'] }, false);
  await scripted('chat-only-tools', { kind: 'raw', status: 200, contentType: 'application/json', body: JSON.stringify(TOOL_CALL) }, false);
  await h.runtime.ctx.registry.refresh();
  const broke = await createOrg(h.testDb.db, { name: 'broke', creditsMicros: 0n });
  zeroKey = (await createApiKey(prisma, { orgId: broke.id, name: 'zero' })).key;
}, 120_000);

afterAll(async () => {
  await Promise.allSettled(Object.values(ups).map((u) => u.close()));
  await settleRecognizers();
  await h?.close();
});

const provider = (apiKey = h.key) => createOpenAI({ baseURL: `${h.url}/v1`, apiKey });

/** The ledger's usage row of the request the SDK call made (by its x-request-id). */
async function rowOf(headers: Record<string, string> | undefined): Promise<UsageRow> {
  const id = headers?.['x-request-id'];
  expect(id).toBeTruthy();
  await vi.waitFor(async () => expect(await usageRows(h.testDb.db.prisma, { requestId: id! })).toHaveLength(1), { timeout: 10_000, interval: 20 });
  return (await usageRows(h.testDb.db.prisma, { requestId: id! }))[0]!;
}

describe('generateText and streamText with openai(model): the Responses API', () => {
  it.each([
    ['an engine that serves /responses', 'native', 'Hello from the scripted upstream.', 12, 7],
    ['an engine with chat completions only', 'chat-only', 'Translated hello.', 21, 3],
  ] as const)('generateText, %s: the exact text and usage, metered exactly', async (_name, model, text, input, output) => {
    const result = await generateText({ model: provider()(model), prompt: 'Say hello', maxRetries: 0 });
    expect(result.text).toBe(text);
    expect(result.finishReason).toBe('stop');
    expect(result.usage.inputTokens).toBe(input);
    expect(result.usage.outputTokens).toBe(output);
    expect(await rowOf(result.response.headers)).toMatchObject({
      modelId: model,
      route: 'responses',
      inputTokens: input,
      outputTokens: output,
      costMicros: llmCost(input, output),
    });
  });

  it('generateText on the local llama.cpp engine: exactly the model reply, the engine token counts billed', async () => {
    const result = await generateText({ model: provider()('local-llm'), prompt: 'Say something.', maxRetries: 0 });
    expect(result.text).toBe(tiny.reply);
    expect(result.usage.outputTokens).toBeGreaterThanOrEqual(tiny.replyTokens);
    const row = await rowOf(result.response.headers);
    expect(row).toMatchObject({
      route: 'responses',
      inputTokens: result.usage.inputTokens,
      outputTokens: result.usage.outputTokens,
      costMicros: llmCost(result.usage.inputTokens!, result.usage.outputTokens!),
    });
  });

  it.each([
    ['an engine that serves /responses', 'native-stream', 'Voice agents talk.', 10, 4],
    ['an engine with chat completions only', 'chat-only-stream', 'Spoken words flow.', 10, 4],
  ] as const)('streamText, %s: the text piece by piece, usage from the end of the stream', async (_name, model, text, input, output) => {
    const result = streamText({ model: provider()(model), prompt: 'Talk', maxRetries: 0 });
    const pieces: string[] = [];
    for await (const piece of result.textStream) pieces.push(piece);
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.join('')).toBe(text);
    const usage = await result.usage;
    expect([usage.inputTokens, usage.outputTokens]).toEqual([input, output]);
    expect(await rowOf((await result.response).headers)).toMatchObject({ inputTokens: input, outputTokens: output, costMicros: llmCost(input, output) });
  });

  it('streamText on the local llama.cpp engine', async () => {
    const result = streamText({ model: provider()('local-llm'), prompt: 'Say something.', maxRetries: 0 });
    expect(await result.text).toBe(tiny.reply);
    const usage = await result.usage;
    expect(await rowOf((await result.response).headers)).toMatchObject({ inputTokens: usage.inputTokens, outputTokens: usage.outputTokens });
  });

  it('a second turn that carries the first answer (the SDK sends it as an item_reference) reaches the chat-only engine as the assistant message', async () => {
    const first = await generateText({ model: provider()('chat-only'), prompt: 'Q1', maxRetries: 0 });
    const second = await generateText({
      model: provider()('chat-only'),
      messages: [{ role: 'user', content: 'Q1' }, ...first.response.messages, { role: 'user', content: 'Q2' }],
      maxRetries: 0,
    });
    expect(second.text).toBe('Translated hello.');
    expect(JSON.parse(ups['chat-only']!.received.at(-1)!.body.toString()).messages).toEqual([
      { role: 'user', content: 'Q1' },
      { role: 'assistant', content: 'Translated hello.' },
      { role: 'user', content: 'Q2' },
    ]);
  });

  it('a tool call from a chat-only engine arrives as the SDK tool call, and its tool runs', async () => {
    const result = await generateText({
      model: provider()('chat-only-tools'),
      prompt: 'Weather in Zürich?',
      tools: { weather: tool({ description: 'Current weather', inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => `${city}: 4 °C` }) },
      maxRetries: 0,
    });
    expect(result.toolCalls).toEqual([expect.objectContaining({ toolCallId: 'call_42', toolName: 'weather', input: { city: 'Zürich' } })]);
    expect(result.toolResults).toEqual([expect.objectContaining({ toolCallId: 'call_42', output: 'Zürich: 4 °C' })]);
    const sent = JSON.parse(ups['chat-only-tools']!.received.at(-1)!.body.toString()) as { tools: unknown[] };
    expect(sent.tools).toEqual([{ type: 'function', function: expect.objectContaining({ name: 'weather', description: 'Current weather' }) }]);
  });
});

describe('generateText and streamText with openai.chat(model)', () => {
  it('generateText: the exact text, billed as chat.completions', async () => {
    const result = await generateText({ model: provider().chat('native'), prompt: 'Say hello', maxRetries: 0 });
    expect(result.text).toBe('Hello from the scripted upstream.');
    expect(await rowOf(result.response.headers)).toMatchObject({ route: 'chat.completions', inputTokens: 12, outputTokens: 7, costMicros: llmCost(12, 7) });
  });

  it('streamText on the local llama.cpp engine', async () => {
    const result = streamText({ model: provider().chat('local-llm'), prompt: 'Say something.', maxRetries: 0 });
    expect(await result.text).toBe(tiny.reply);
  });
});

describe('transcription and speech', { timeout: 120_000 }, () => {
  it('transcribe with verbose_json: the spoken words, duration in seconds, language, timed segments; billed per millisecond', async () => {
    const call = await fliteSpeech(CALL);
    const millis = Math.round((call.samples.length / 16000) * 1000);
    const result = await transcribe({
      model: provider().transcription('local-stt'),
      audio: call.wav,
      providerOptions: { openai: { responseFormat: 'verbose_json', timestampGranularities: ['word'], language: 'en' } },
      maxRetries: 0,
    });
    expect(wer(CALL, result.text)).toBeLessThanOrEqual(0.2);
    expect(result.durationInSeconds).toBe(millis / 1000);
    expect(result.language).toBe('en');
    expect(result.segments.length).toBeGreaterThan(3);
    let last = 0;
    for (const s of result.segments) {
      expect(s.startSecond).toBeGreaterThanOrEqual(last);
      expect(s.endSecond).toBeGreaterThan(s.startSecond);
      expect(s.endSecond).toBeLessThanOrEqual(millis / 1000);
      last = s.startSecond;
    }
    expect(result.segments.map((s) => s.text).join(' ')).toBe(result.text);
    expect(await rowOf(result.responses[0]!.headers)).toMatchObject({ route: 'audio.transcriptions', audioMillis: millis, costMicros: audioCost(millis) });
  });

  it('transcribe with verbose_json segments: Whisper\u2019s segment shape passes the SDK\u2019s schema, the segments add up to the text', async () => {
    const call = await fliteSpeech(CALL);
    const result = await transcribe({
      model: provider().transcription('local-stt'),
      audio: call.wav,
      providerOptions: { openai: { responseFormat: 'verbose_json', timestampGranularities: ['segment'] } },
      maxRetries: 0,
    });
    expect(wer(CALL, result.text)).toBeLessThanOrEqual(0.2);
    expect(result.segments.length).toBeGreaterThan(0);
    expect(result.segments.map((s) => s.text).join(' ')).toBe(result.text);
    expect(result.segments[0]!.endSecond).toBeGreaterThan(result.segments[0]!.startSecond);
  });

  it('generateSpeech: mp3 by default; wav whose words the recogniser hears back through transcribe; billed per character', async () => {
    const mp3 = await generateSpeech({
      model: provider().speech('local-flite'),
      text: 'Please call me tomorrow morning about the meeting.',
      voice: 'flite-slt',
      maxRetries: 0,
    });
    expect(mp3.audio.mediaType).toBe('audio/mpeg');
    expect(scanMpegFrames(mp3.audio.uint8Array).frames.length).toBeGreaterThan(10);

    const text = 'Please call me tomorrow morning about the meeting.';
    const wav = await generateSpeech({ model: provider().speech('local-flite'), text, voice: 'flite-slt', outputFormat: 'wav', maxRetries: 0 });
    expect(wav.audio.mediaType).toBe('audio/wav');
    expect(parseWav(wav.audio.uint8Array).sampleRate).toBe(24000);
    expect(await rowOf(wav.responses[0]!.headers)).toMatchObject({
      route: 'audio.speech',
      characters: codePoints(text),
      costMicros: ttsCost(codePoints(text), FLITE_PRICE),
    });
    const heard = await transcribe({ model: provider().transcription('local-stt'), audio: wav.audio.uint8Array, maxRetries: 0 });
    expect(wer(CALL, heard.text)).toBeLessThanOrEqual(0.2);
  });
});

describe('errors arrive as the SDK errors', () => {
  it('a bad key: 401 from generateText, streamText, transcribe and generateSpeech', async () => {
    const bad = provider('sk_svc_not_a_real_key_0000000000000000000');
    const wav = (await fliteSpeech(CALL)).wav;
    const calls: (() => Promise<unknown>)[] = [
      () => generateText({ model: bad('native'), prompt: 'x', maxRetries: 0 }),
      () => generateText({ model: bad.chat('native'), prompt: 'x', maxRetries: 0 }),
      () => transcribe({ model: bad.transcription('local-stt'), audio: wav, maxRetries: 0 }),
      () => generateSpeech({ model: bad.speech('local-flite'), text: 'x', voice: 'flite-slt', maxRetries: 0 }),
    ];
    for (const call of calls) {
      const e = await call().then(
        () => null,
        (err: unknown) => err,
      );
      expect(APICallError.isInstance(e), String(e)).toBe(true);
      expect((e as APICallError).statusCode).toBe(401);
    }
    // streamText reports the failure to onError (its text then has no output).
    let streamError: unknown;
    const stream = streamText({ model: bad('native-stream'), prompt: 'x', maxRetries: 0, onError: ({ error }) => void (streamError = error) });
    await expect(stream.text).rejects.toThrow();
    expect(APICallError.isInstance(streamError) && streamError.statusCode).toBe(401);
  });

  it('a zero balance: 402 insufficient_quota, nothing billed', async () => {
    const broke = provider(zeroKey);
    const wav = (await fliteSpeech(CALL)).wav;
    // Every earlier test's debits are written first (on SQLite they commit just after their answer).
    await h.settled();
    const before = await h.testDb.db.prisma.ledgerEntry.count();
    for (const call of [
      () => generateText({ model: broke('chat-only'), prompt: 'x', maxRetries: 0 }),
      () => transcribe({ model: broke.transcription('local-stt'), audio: wav, maxRetries: 0 }),
      () => generateSpeech({ model: broke.speech('local-flite'), text: 'x', voice: 'flite-slt', maxRetries: 0 }),
    ]) {
      const e = (await call().then(
        () => null,
        (err: unknown) => err,
      )) as APICallError;
      expect(APICallError.isInstance(e)).toBe(true);
      expect(e.statusCode).toBe(402);
      expect(JSON.parse(e.responseBody!).error.code).toBe('insufficient_quota');
    }
    await h.settled();
    expect(await h.testDb.db.prisma.ledgerEntry.count()).toBe(before);
  });

  it('an unknown model: 404 model_not_found', async () => {
    const e = (await generateText({ model: provider()('no-such-model'), prompt: 'x', maxRetries: 0 }).then(
      () => null,
      (err: unknown) => err,
    )) as APICallError;
    expect(e.statusCode).toBe(404);
    expect(JSON.parse(e.responseBody!).error.code).toBe('model_not_found');
  });
});
