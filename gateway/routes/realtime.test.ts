// WS /v1/realtime on the wire (a bare `ws` client; the real clients are in
// realtime.clients.test.ts): the real gateway runtime, the local recognizer (pocketsphinx), flite
// for the answers' speech, and a scripted OpenAI-compatible LLM.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { writeTinyGguf, type TinyGguf } from '../../test/support/tiny-gguf.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import WebSocket from 'ws';
import { appendAudio, openRealtime, realtimeUrl, responseAudio, spokenPcm24, type RealtimeEvent } from '../../test/support/realtime-client.ts';
import { startOtlpCollector } from '../../test/support/otlp-collector.ts';
import { startScriptedUpstream, toolCallStream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import {
  STT_PRICE,
  audioCost,
  concat,
  refusedUpgrade,
  settleRecognizers,
  silence,
  speech,
  startSttGateway,
  toRate,
  transcribe,
  wavFile,
} from '../../test/support/stt-routes.ts';
import { encodeSamples } from '../audio/sample-encoding.ts';
import { FLITE_PRICE, costOf } from '../../test/support/tts-routes.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import { DEFAULT_PROFILES_FILE } from '../realtime/profiles.ts';

const PRICE_IN = 150_001n;
const PRICE_OUT = 600_003n;
const REPLY = ['The ', 'weather ', 'is ', 'sunny', '.'];
const REPLY_TEXT = REPLY.join('');

let h: GatewayHarness;
let tiny: TinyGguf;
let llm: ScriptedUpstream;
/** A long answer, slowly streamed: a response still running when the user speaks again. */
let slowLlm: ScriptedUpstream;
let toolLlm: ScriptedUpstream;

const TOOL_STREAM = toolCallStream('rt-tools');

beforeAll(async () => {
  // The shipped profiles, and one whose voice does not exist.
  const profilesFile = join(mkdtempSync(join(tmpdir(), 'rt-profiles-')), 'profiles.json');
  const shipped = JSON.parse(readFileSync(DEFAULT_PROFILES_FILE, 'utf8')) as { profiles: object[] };
  writeFileSync(
    profilesFile,
    JSON.stringify({ profiles: [...shipped.profiles, { id: 'no-voice', llm: 'rt-llm', tts: 'local-flite', voice: 'no-such-voice' }] }),
  );
  h = await startSttGateway({ env: { SVC_LLAMA_THREADS: '1', SVC_REALTIME_PROFILES_FILE: profilesFile } });
  const prisma = h.testDb.db.prisma;
  // The shipped profile local-realtime: local-stt, local-llm (llama.cpp, here the tiny GGUF), local-flite.
  mkdirSync(join(h.testDb.dataDir, 'models'), { recursive: true });
  tiny = await writeTinyGguf(join(h.testDb.dataDir, 'models', 'local-llm.gguf'));
  await upsertModel(prisma, checkProtocol, {
    id: 'local-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT },
    upstream: { url: 'local:llama-cpp', protocol: 'llama-cpp' },
  });
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
  toolLlm = await startScriptedUpstream({ kind: 'raw', status: 200, contentType: 'text/event-stream', body: TOOL_STREAM });
  const prices = { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT };
  await upsertModel(prisma, checkProtocol, { id: 'rt-llm', modality: 'llm', prices, upstream: { url: llm.baseUrl, protocol: 'openai' } });
  await upsertModel(prisma, checkProtocol, { id: 'rt-slow', modality: 'llm', prices, upstream: { url: slowLlm.baseUrl, protocol: 'openai' } });
  await upsertModel(prisma, checkProtocol, { id: 'rt-tools', modality: 'llm', prices, upstream: { url: toolLlm.baseUrl, protocol: 'openai' } });
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([llm?.close(), slowLlm?.close(), toolLlm?.close()]);
  await settleRecognizers();
  await h?.close();
});

async function orgWithKey(credit = 10_000_000n) {
  const org = await createOrg(h.testDb.db, { name: 'realtime', creditsMicros: credit });
  const key = (await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k' })).key;
  return { orgId: org.id, key };
}

/** Every session's last debit written (an audio leg bills after its socket closes) and committed. */
async function billed(): Promise<void> {
  expect(await h.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
  await h.settled();
}

const types = (events: RealtimeEvent[]) => events.map((e) => e.type);

describe('a conversation session', () => {
  it('hears a spoken question, answers it in speech, and bills each leg', async () => {
    const { key, orgId } = await orgWithKey();
    const c = await openRealtime(h, key, { model: 'rt-llm' });
    const created = await c.next('session.created');
    expect(created.session).toMatchObject({ type: 'realtime', models: { stt: 'local-stt', llm: 'rt-llm', tts: 'local-flite' } });
    const question = await spokenPcm24('what is the weather like today');
    appendAudio(c, question);
    const heard = await c.until('conversation.item.input_audio_transcription.completed');
    expect(types(heard)).toEqual(
      expect.arrayContaining(['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped', 'input_audio_buffer.committed']),
    );
    const completed = heard.at(-1)!;
    expect(completed.transcript).toMatch(/weather/);
    const answer = await c.until('response.done');
    const done = answer.at(-1)!.response as { status: string; usage: { input_tokens: number; output_tokens: number; svc: { tts_characters: number } } };
    expect(done.status).toBe('completed');
    expect(done.usage).toMatchObject({ input_tokens: 40, output_tokens: 6 });
    const audio = responseAudio(answer);
    expect(audio.length).toBeGreaterThan(24_000); // more than half a second of speech
    const samples = new Float32Array(audio.length / 2);
    for (let i = 0; i < samples.length; i++) samples[i] = audio.readInt16LE(i * 2) / 32768;
    const res = await transcribe(h, wavFile([samples], 24_000), { model: 'local-stt' });
    expect(((await res.json()) as { text: string }).text).toMatch(/weather/);
    const transcript = answer
      .filter((e) => e.type === 'response.output_audio_transcript.delta')
      .map((e) => e.delta)
      .join('');
    expect(transcript).toBe(REPLY_TEXT);
    await c.close();
    await billed();
    // Each leg on the ledger at its own price: the audio by the second, the tokens, the characters spoken.
    const rows = await usageRows(h.testDb.db.prisma, { orgId });
    const stt = rows.filter((r) => r.modality === 'stt');
    const millis = Math.round((question.length / 2 / 24_000) * 1000);
    expect(stt.reduce((n, r) => n + r.audioMillis, 0)).toBe(millis);
    expect(stt.reduce((n, r) => n + r.costMicros, 0n)).toBe(audioCost(millis, STT_PRICE));
    expect(rows.filter((r) => r.modality === 'llm').map((r) => [r.inputTokens, r.outputTokens, r.costMicros])).toEqual([[40, 6, llmCost(40, 6)]]);
    const tts = rows.filter((r) => r.modality === 'tts');
    expect(tts.reduce((n, r) => n + r.characters, 0)).toBe(done.usage.svc.tts_characters);
    expect(tts.reduce((n, r) => n + r.characters, 0)).toBe(REPLY_TEXT.length);
    expect(tts.reduce((n, r) => n + r.costMicros, 0n)).toBe(tts.reduce((n, r) => n + costOf(r.characters, FLITE_PRICE), 0n));
    expect(rows.every((r) => r.route === 'realtime')).toBe(true);
    // The session's row in the request log, with its turn: the legs in the order they happen, no content (not opted in).
    const [row] = await vi.waitFor(
      async () => {
        await h.runtime.ctx.requestLog!.flush();
        const found = await h.testDb.db.prisma.requestLog.findMany({ where: { orgId, route: '/v1/realtime' } });
        expect(found).toHaveLength(1);
        return found;
      },
      { timeout: 10_000, interval: 50 },
    );
    const turns = await h.testDb.db.prisma.requestLogTurn.findMany({ where: { requestLogId: row!.id } });
    expect(turns).toHaveLength(1);
    const turn = turns[0]!;
    expect(turn).toMatchObject({ turnIndex: 0, userText: null, assistantText: null, bargeInMs: null });
    expect(turn.speechEndMs).toBeGreaterThan(0);
    expect(turn.endOfTurnMs).toBeGreaterThanOrEqual(turn.speechEndMs!);
    expect(turn.llmFirstTokenMs).toBeGreaterThanOrEqual(turn.endOfTurnMs!);
    expect(turn.ttsFirstAudioMs).toBeGreaterThanOrEqual(turn.llmFirstTokenMs!);
  }, 60_000);
});

describe('the shipped profile, all local engines', () => {
  it('local-realtime: the local recognizer, llama.cpp and flite answer a spoken question', async () => {
    const { key, orgId } = await orgWithKey();
    const c = await openRealtime(h, key, { model: 'local-realtime' });
    const created = await c.next('session.created');
    expect(created.session).toMatchObject({ model: 'local-realtime', models: { stt: 'local-stt', llm: 'local-llm', tts: 'local-flite' } });
    expect((created.session as { instructions: string }).instructions).toMatch(/voice assistant/);
    appendAudio(c, await spokenPcm24('what is the weather like today'));
    const answer = await c.until('response.done');
    const done = answer.at(-1)!.response as { status: string; output: { content: { transcript: string }[] }[] };
    expect(done.status, JSON.stringify(done)).toBe('completed');
    expect(done.output[0]!.content[0]!.transcript).toBe(tiny.reply);
    const audio = responseAudio(answer);
    const samples = new Float32Array(audio.length / 2);
    for (let i = 0; i < samples.length; i++) samples[i] = audio.readInt16LE(i * 2) / 32768;
    const res = await transcribe(h, wavFile([samples], 24_000), { model: 'local-stt' });
    expect(((await res.json()) as { text: string }).text).toMatch(/hello/);
    await c.close();
    await billed();
    const rows = await usageRows(h.testDb.db.prisma, { orgId });
    expect(new Set(rows.map((r) => r.modelId))).toEqual(new Set(['local-stt', 'local-llm', 'local-flite']));
  }, 120_000);
});

describe('OpenAI model names', () => {
  it('a client left at its default model gets the first profile, in the URL and in session.update', async () => {
    const { key } = await orgWithKey();
    const c = await openRealtime(h, key, { model: 'gpt-realtime' });
    expect((await c.next('session.created')).session).toMatchObject({ models: { llm: 'local-llm', stt: 'local-stt', tts: 'local-flite' } });
    c.send({ type: 'session.update', session: { type: 'realtime', model: 'gpt-realtime-2.1', instructions: 'Be brief.' } });
    expect((await c.next('session.updated')).session).toMatchObject({ instructions: 'Be brief.', models: { llm: 'local-llm' } });
    await c.close();
  }, 30_000);
});

describe('a profile whose voice cannot be used', () => {
  it('starts anyway, says why, answers in text, and takes a usable voice', async () => {
    const { key } = await orgWithKey();
    const c = await openRealtime(h, key, { model: 'no-voice' });
    expect((await c.next('session.created')).session).toMatchObject({ model: 'no-voice' });
    expect((await c.next('error')).error).toMatchObject({ code: 'voice_not_found' });
    c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] } });
    c.send({ type: 'response.create', response: { output_modalities: ['text'] } });
    expect(((await c.next('response.done')).response as { status: string }).status).toBe('completed');
    c.send({ type: 'session.update', session: { audio: { output: { voice: 'flite-slt' } } } });
    expect((await c.next('session.updated')).session).toMatchObject({ audio: { output: { voice: 'flite-slt' } } });
    await c.close();
  }, 30_000);
});

describe('before the upgrade', () => {
  it('refuses a bad key (401), an unknown model (404), no model (400), and a zero balance (402) with the envelope', async () => {
    const { key } = await orgWithKey();
    const bad = await refusedUpgrade(h, { model: 'rt-llm' }, { authorization: 'Bearer sk-nope' }, '/v1/realtime');
    expect(bad.status).toBe(401);
    expect(JSON.parse(bad.body)).toMatchObject({ error: { code: 'invalid_api_key' } });
    const unknown = await refusedUpgrade(h, { model: 'no-such-model' }, { authorization: `Bearer ${key}` }, '/v1/realtime');
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body)).toMatchObject({ error: { code: 'model_not_found' } });
    const none = await refusedUpgrade(h, {}, { authorization: `Bearer ${key}` }, '/v1/realtime');
    expect(none.status).toBe(400);
    expect(JSON.parse(none.body)).toMatchObject({ error: { param: 'model' } });
    const broke = await orgWithKey(0n);
    const zero = await refusedUpgrade(h, { model: 'rt-llm' }, { authorization: `Bearer ${broke.key}` }, '/v1/realtime');
    expect(zero.status).toBe(402);
    expect(JSON.parse(zero.body)).toMatchObject({ error: { code: 'insufficient_quota' } });
    // The browser's way: the key in a subprotocol.
    const ws = new WebSocket(realtimeUrl(h, { model: 'rt-llm' }), ['realtime', `openai-insecure-api-key.${key}`]);
    const first = await new Promise<RealtimeEvent>((resolve, reject) => {
      ws.once('message', (d) => resolve(JSON.parse(d.toString()) as RealtimeEvent));
      ws.once('error', reject);
    });
    expect(first.type).toBe('session.created');
    expect(ws.protocol).toBe('realtime');
    ws.close();
  }, 30_000);

  it('zero balance during a session: an error event, then 1008, and the ledger holds exactly the audio heard', async () => {
    // 1.5 s of audio at 100 micro-USD a second: the first second is paid for, the next cannot be.
    const { key, orgId } = await orgWithKey(150n);
    const c = await openRealtime(h, key, { intent: 'transcription' });
    await c.next('session.created');
    appendAudio(c, await spokenPcm24('the weather is sunny today and tomorrow'));
    const error = await c.next('error');
    expect(error.error).toMatchObject({ code: 'insufficient_quota' });
    expect((await c.closed).code).toBe(1008);
    await billed();
    const rows = await usageRows(h.testDb.db.prisma, { orgId });
    expect(rows.map((r) => [r.modality, r.route, r.audioMillis, r.costMicros])).toEqual([['stt', 'realtime', 1000, 100n]]);
    expect((await h.testDb.db.prisma.org.findUniqueOrThrow({ where: { id: orgId } })).balanceMicros).toBe(50n);
  }, 30_000);
});

describe('the beta protocol', () => {
  it('reads beta fields and names its events as the beta did, for clients that ask for it', async () => {
    const { key } = await orgWithKey();
    const c = await openRealtime(h, key, { model: 'rt-llm' }, { 'openai-beta': 'realtime=v1' });
    await c.next('session.created');
    c.send({
      type: 'session.update',
      session: {
        modalities: ['text', 'audio'],
        voice: 'alloy',
        input_audio_format: 'pcm16',
        output_audio_format: 'g711_alaw',
        turn_detection: { type: 'semantic_vad', eagerness: 'high' },
        input_audio_transcription: { model: 'whisper-1' },
      },
    });
    const updated = await c.next('session.updated');
    expect(updated.session).toMatchObject({
      audio: {
        output: { format: { type: 'audio/pcma' }, voice: expect.stringMatching(/^flite-/) },
        input: { turn_detection: { type: 'semantic_vad', eagerness: 'high' } },
      },
    });
    c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] } });
    expect((await c.next('conversation.item.created')).item).toMatchObject({ role: 'user' });
    c.send({ type: 'response.create' });
    const answer = await c.until('response.done');
    const audio = responseAudio(answer, 'response.audio.delta');
    // G.711 at 8 kHz: a byte a sample, more than half a second of it.
    expect(audio.length).toBeGreaterThan(4000);
    expect(answer.some((e) => e.type === 'response.audio_transcript.delta')).toBe(true);
    expect(answer.some((e) => e.type === 'response.output_audio.delta')).toBe(false);
    await c.close();
  }, 30_000);
});

const llmCost = (input: number, output: number): bigint => (BigInt(input) * PRICE_IN + BigInt(output) * PRICE_OUT + 999_999n) / 1_000_000n;

describe('conversation events', () => {
  it('a text-only response to a typed message, out of band and in the conversation', async () => {
    const { key, orgId } = await orgWithKey();
    const c = await openRealtime(h, key, { model: 'rt-llm' });
    await c.next('session.created');
    c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'How is the weather?' }] } });
    const added = await c.next('conversation.item.added');
    c.send({ type: 'response.create', response: { output_modalities: ['text'], instructions: 'Be brief.' } });
    const answer = await c.until('response.done');
    expect(answer.some((e) => e.type === 'response.output_audio.delta')).toBe(false);
    expect(
      answer
        .filter((e) => e.type === 'response.output_text.delta')
        .map((e) => e.delta)
        .join(''),
    ).toBe(REPLY_TEXT);
    const done = answer.at(-1)!.response as { status: string; output: { role: string; content: { text: string }[] }[] };
    expect(done.status).toBe('completed');
    expect(done.output[0]!.content[0]!.text).toBe(REPLY_TEXT);
    // What the LLM got: the instructions, then the typed message.
    const body = JSON.parse(llm.received.at(-1)!.body.toString()) as { messages: { role: string; content: string }[] };
    expect(body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'How is the weather?' },
    ]);
    // Out of band: not added to the conversation; the next in-band answer sees only the conversation.
    c.send({
      type: 'response.create',
      response: {
        conversation: 'none',
        output_modalities: ['text'],
        input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Classify: positive?' }] }],
      },
    });
    const oob = await c.until('response.done');
    expect(oob.some((e) => e.type === 'conversation.item.added')).toBe(false);
    expect((JSON.parse(llm.received.at(-1)!.body.toString()) as { messages: unknown[] }).messages).toEqual([{ role: 'user', content: 'Classify: positive?' }]);
    c.send({ type: 'conversation.item.retrieve', item_id: (added.item as { id: string }).id });
    expect(((await c.next('conversation.item.retrieved')).item as { id: string }).id).toBe((added.item as { id: string }).id);
    await c.close();
    await billed();
    const rows = await usageRows(h.testDb.db.prisma, { orgId });
    expect(rows.map((r) => [r.modality, r.route, r.inputTokens, r.outputTokens, r.costMicros])).toEqual([
      ['llm', 'realtime', 40, 6, llmCost(40, 6)],
      ['llm', 'realtime', 40, 6, llmCost(40, 6)],
    ]);
  }, 30_000);

  it('a tool call round trip: the call streamed, its output sent back, a second answer', async () => {
    const { key } = await orgWithKey();
    const c = await openRealtime(h, key, { model: 'rt-tools' });
    await c.next('session.created');
    c.send({
      type: 'session.update',
      session: {
        type: 'realtime',
        output_modalities: ['text'],
        tools: [
          { type: 'function', name: 'get_weather', description: 'Weather by city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
        ],
      },
    });
    await c.next('session.updated');
    c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Oslo?' }] } });
    c.send({ type: 'response.create' });
    const answer = await c.until('response.done');
    const args = answer
      .filter((e) => e.type === 'response.function_call_arguments.delta')
      .map((e) => e.delta)
      .join('');
    expect(args).toBe('{"city":"Oslo"}');
    const argsDone = answer.find((e) => e.type === 'response.function_call_arguments.done')!;
    expect(argsDone).toMatchObject({ call_id: 'call_7', name: 'get_weather', arguments: '{"city":"Oslo"}' });
    const sent = JSON.parse(toolLlm.received.at(-1)!.body.toString()) as { tools: unknown[]; tool_choice: unknown };
    expect(sent.tools).toEqual([
      {
        type: 'function',
        function: { name: 'get_weather', description: 'Weather by city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
      },
    ]);
    c.send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: 'call_7', output: '{"sky":"clear"}' } });
    c.send({ type: 'response.create' });
    await c.until('response.done');
    const second = JSON.parse(toolLlm.received.at(-1)!.body.toString()) as { messages: unknown[] };
    expect(second.messages).toEqual([
      { role: 'user', content: 'Weather in Oslo?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_7', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
      { role: 'tool', tool_call_id: 'call_7', content: '{"sky":"clear"}' },
    ]);
    await c.close();
  }, 30_000);

  it('barge-in: speech over an answer stops it, truncates its item to what was played, bills what was made', async () => {
    const { key, orgId } = await orgWithKey();
    const c = await openRealtime(h, key, { model: 'rt-slow' });
    await c.next('session.created');
    c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Talk for a while.' }] } });
    c.send({ type: 'response.create' });
    const before = await c.until('response.output_audio.delta');
    appendAudio(c, await spokenPcm24('stop please'));
    const events = [...before, ...(await c.until('response.done'))];
    const done = events.at(-1)!.response as {
      status: string;
      status_details: { reason: string };
      output: { id: string }[];
      usage: { output_tokens: number; svc: { tts_characters: number } };
    };
    expect(events.some((e) => e.type === 'input_audio_buffer.speech_started')).toBe(true);
    expect(done.status).toBe('cancelled');
    expect(done.status_details.reason).toBe('turn_detected');
    const truncated = await c.next('conversation.item.truncated');
    expect(truncated.item_id).toBe(done.output[0]!.id);
    c.send({ type: 'conversation.item.retrieve', item_id: done.output[0]!.id });
    const item = (await c.next('conversation.item.retrieved')).item as { status: string; content: { transcript: string }[] };
    expect(item.status).toBe('incomplete');
    const spoken = events
      .filter((e) => e.type === 'response.output_audio_transcript.delta')
      .map((e) => e.delta)
      .join('');
    // What was heard is a prefix of what was said, which is a prefix of the whole answer.
    expect(spoken.startsWith(item.content[0]!.transcript), `${JSON.stringify(spoken)} vs ${JSON.stringify(item.content[0]!.transcript)}`).toBe(true);
    expect(slowLlm.streams.at(-1)!.closedEarly).toBe(true);
    // The turn spoken over the answer is answered in its turn, after the cancelled one ended.
    const second = (await c.next('response.created')).response as { id: string };
    expect(second.id).not.toBe((events.at(-1)!.response as { id: string }).id);
    c.send({ type: 'response.cancel', response_id: second.id });
    const secondDone = (await c.next('response.done')).response as {
      id: string;
      status: string;
      status_details: { reason: string };
      usage: { output_tokens: number };
    };
    expect(secondDone).toMatchObject({ id: second.id, status: 'cancelled', status_details: { reason: 'client_cancelled' } });
    // Billed for what was made: fewer tokens than the whole answer, the spans that were spoken.
    expect(done.usage.output_tokens).toBeLessThan(600);
    await c.close();
    await billed();
    const rows = await usageRows(h.testDb.db.prisma, { orgId });
    const llmRows = rows.filter((r) => r.modality === 'llm');
    expect(llmRows[0]!.outputTokens).toBe(done.usage.output_tokens);
    // The second was cancelled at once: billed for what its LLM had streamed by then, if it had answered at all.
    expect(llmRows.reduce((n, r) => n + r.outputTokens, 0)).toBe(done.usage.output_tokens + secondDone.usage.output_tokens);
    const ttsRows = rows.filter((r) => r.modality === 'tts');
    expect(ttsRows.reduce((n, r) => n + r.costMicros, 0n)).toBe(ttsRows.reduce((n, r) => n + costOf(r.characters, FLITE_PRICE), 0n));
  }, 60_000);

  it('errors name the event and the field, and the session goes on', async () => {
    const { key } = await orgWithKey();
    const c = await openRealtime(h, key, { model: 'rt-llm' });
    await c.next('session.created');
    c.send({ type: 'session.update', event_id: 'ev1', session: { audio: { input: { format: { type: 'audio/flac' } } } } });
    expect((await c.next('error')).error).toMatchObject({
      type: 'invalid_request_error',
      code: 'invalid_request',
      param: 'session.audio.input.format.type',
      event_id: 'ev1',
    });
    c.send({ type: 'session.update', session: { audio: { output: { voice: 'no-such-voice' } } } });
    expect((await c.next('error')).error).toMatchObject({ code: 'voice_not_found' });
    c.send({ type: 'input_audio_buffer.commit' });
    expect((await c.next('error')).error).toMatchObject({ code: 'invalid_request', param: 'input_audio_buffer' });
    c.send({ type: 'response.cancel' });
    expect((await c.next('error')).error).toMatchObject({ param: 'response_id' });
    c.send({ type: 'input_audio_buffer.append', audio: 'not base64!' });
    expect((await c.next('error')).error).toMatchObject({ param: 'audio' });
    c.ws.send('not json');
    expect((await c.next('error')).error).toMatchObject({ code: 'invalid_message' });
    c.send({ type: 'no.such.event' });
    expect((await c.next('error')).error).toMatchObject({ param: 'type' });
    // Still answering.
    c.send({ type: 'session.update', session: { instructions: 'Hello.' } });
    expect(((await c.next('session.updated')).session as { instructions: string }).instructions).toBe('Hello.');
    await c.close();
  }, 30_000);
});

describe('a transcription session', () => {
  it('manual commits of G.711 audio: a transcript per commit, billed by the second', async () => {
    const { key, orgId } = await orgWithKey();
    const c = await openRealtime(h, key, { intent: 'transcription' });
    const created = await c.next('session.created');
    expect(created.session).toMatchObject({ type: 'transcription' });
    c.send({
      type: 'session.update',
      session: {
        type: 'transcription',
        audio: { input: { format: { type: 'audio/pcmu' }, transcription: { model: 'gpt-4o-transcribe' }, turn_detection: null } },
      },
    });
    const updated = await c.next('session.updated');
    expect(updated.session).toMatchObject({
      audio: { input: { format: { type: 'audio/pcmu' }, transcription: { model: 'local-stt' }, turn_detection: null } },
    });
    // Telephone audio: flite's speech at 8 kHz, mu-law.
    const samples = toRate(concat(silence(0.3), (await speech('the weather is sunny today')).samples, silence(0.3)), 8000);
    const ulaw = encodeSamples(samples, 'pcm_mulaw');
    for (let at = 0; at < ulaw.length; at += 800) c.send({ type: 'input_audio_buffer.append', audio: ulaw.subarray(at, at + 800).toString('base64') });
    c.send({ type: 'input_audio_buffer.commit' });
    const heard = await c.until('conversation.item.input_audio_transcription.completed');
    expect(heard.some((e) => e.type === 'input_audio_buffer.committed')).toBe(true);
    expect(heard.some((e) => e.type === 'input_audio_buffer.speech_started')).toBe(false);
    expect(heard.at(-1)!.transcript).toMatch(/weather/);
    await c.close();
    await billed();
    const rows = await usageRows(h.testDb.db.prisma, { orgId });
    const millis = Math.round((samples.length * 1000) / 8000);
    expect(rows.every((r) => r.modality === 'stt' && r.route === 'realtime')).toBe(true);
    expect(rows.reduce((n, r) => n + r.audioMillis, 0)).toBe(millis);
    expect(rows.reduce((n, r) => n + r.costMicros, 0n)).toBe(audioCost(millis, STT_PRICE));
  }, 60_000);
});

describe('tracing', () => {
  it('one trace per response: a span per leg, the upstream attempts under them', async () => {
    const collector = await startOtlpCollector();
    const traced = await startSttGateway({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url } });
    try {
      const prisma = traced.testDb.db.prisma;
      await upsertModel(prisma, checkProtocol, {
        id: 'local-flite',
        modality: 'tts',
        prices: { picoPerChar: FLITE_PRICE },
        upstream: { url: 'local:flite', protocol: 'flite' },
      });
      await seedPlatformVoices(prisma);
      await upsertModel(prisma, checkProtocol, {
        id: 'rt-llm',
        modality: 'llm',
        prices: { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT },
        upstream: { url: llm.baseUrl, protocol: 'openai' },
      });
      await traced.runtime.ctx.registry.refresh();
      const c = await openRealtime(traced, traced.key, { model: 'rt-llm' });
      await c.next('session.created');
      c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather?' }] } });
      c.send({ type: 'response.create' });
      const done = (await c.next('response.done')).response as { id: string };
      await c.close();
      await traced.runtime.ctx.tracing!.flush();
      const root = collector.spans.find((s) => s.name === 'realtime.response')!;
      expect(root).toMatchObject({ parentSpanId: '', attributes: { 'svc.response_id': done.id, 'svc.status': 'completed' } });
      const legs = collector.spans.filter((s) => s.traceId === root.traceId && s.parentSpanId === root.spanId);
      const llmLeg = legs.find((s) => s.name === 'realtime.llm')!;
      expect(llmLeg.attributes['svc.model']).toBe('rt-llm');
      expect(legs.filter((s) => s.name === 'realtime.tts').length).toBeGreaterThan(0);
      expect(collector.spans.some((s) => s.parentSpanId === llmLeg.spanId && s.name === 'upstream openai')).toBe(true);
    } finally {
      await traced.close();
      await collector.close();
    }
  }, 30_000);
});
