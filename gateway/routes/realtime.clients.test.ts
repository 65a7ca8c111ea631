// WS /v1/realtime with the real clients from npm, unmodified but for base URL and key, against the
// real gateway runtime (throw-away database) serving TLS: the local recogniser hears the user,
// a scripted OpenAI-compatible LLM answers, flite speaks the answer.
// - openai's OpenAIRealtimeWS (openai 6.49.0, the version LiveKit's agents share; it always connects with wss:, trusting the test's
//   certificate through its own `ws` options): a spoken question streamed at real time, its
//   transcript, the answer as audio that the local recogniser hears back; a tool call round trip;
//   a text-only response; content parts typed as the API types them; the ledger exact per leg;
//   barge-in over a long slow answer (the LLM stopped, the item cut to what was played, then to
//   what the app says it played, the words spoken over it answered); the credit running out
//   mid-session (the answer stops at the speech it cannot pay for, the next words end the
//   session with 1008, each leg exact on the ledger);
// - @openai/agents-realtime's RealtimeSession over its WebSocket transport (0.20.0): a spoken
//   question, an audio answer and both transcripts in the session's history; a function tool
//   called, its result sent back by the session and a second answer; the SDK's default model
//   name in its session.update;
// - LiveKit's openai.STT in its default realtime mode (@livekit/agents-plugin-openai 1.8.1):
//   /v1/realtime?intent=transcription, speech events and the spoken words;
// - a bad key (401), a zero balance (402) and a trial key at its cap of open sessions (429),
//   refused before the upgrade, as OpenAIRealtimeWS reports them.
// The agents SDK and LiveKit take no CA option: the process trusts the test certificate as
// NODE_EXTRA_CA_CERTS would make it (tls.setDefaultCACertificates, undone after).
import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';
import { initializeLogger, stt as agentsStt } from '@livekit/agents';
import * as livekitOpenai from '@livekit/agents-plugin-openai';
import { AudioFrame } from '@livekit/rtc-node';
import { RealtimeAgent, RealtimeSession, tool, type RealtimeItem } from '@openai/agents-realtime';
import OpenAI from 'openai';
import type { OpenAIRealtimeError } from 'openai/realtime/index';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { defaultVoiceFor } from '../../server/services/voices/default-voice.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { spokenPcm24 } from '../../test/support/realtime-client.ts';
import { EventLog } from '../../test/support/socket-events.ts';
import { startScriptedUpstream, toolCallStream, type Behaviour, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { audioCost, settleRecognizers, startSttGateway, transcribe, wavFile, wer } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE, codePoints, costOf } from '../../test/support/tts-routes.ts';
import { makeTestCertificate, type TestCertificate } from '../../test/support/tls.ts';
import { usageRows, type UsageRow } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const PRICE_IN = 150_001n;
const PRICE_OUT = 600_003n;
const llmCost = (input: number, output: number): bigint => (BigInt(input) * PRICE_IN + BigInt(output) * PRICE_OUT + 999_999n) / 1_000_000n;
const CREDIT = 10_000_000n;

const QUESTION = 'what is the weather like today';
/** The scripted LLM's answer, as it streams it: two sentences, so two spans of speech. */
const REPLY = ['The ', 'weather ', 'is ', 'sunny ', 'today', '. ', 'Please ', 'call ', 'me ', 'tomorrow ', 'morning', '.'];
const REPLY_TEXT = REPLY.join('');
const REPLY_SPANS = ['The weather is sunny today.', 'Please call me tomorrow morning.'];
const REPLY_USAGE = { prompt_tokens: 40, completion_tokens: REPLY.length };
/** The answer after the tool's result. */
const AFTER_TOOL = ['It ', 'is ', 'four ', 'degrees ', 'in ', 'Oslo', '.'];
const AFTER_TOOL_TEXT = AFTER_TOOL.join('');
const AFTER_TOOL_USAGE = { prompt_tokens: 52, completion_tokens: AFTER_TOOL.length };
const afterTool: Behaviour = { kind: 'stream', chunks: AFTER_TOOL, usage: AFTER_TOOL_USAGE };

const TOOL_STREAM = toolCallStream('rt-llm-tools');
const toolCall: Behaviour = { kind: 'raw', status: 200, contentType: 'text/event-stream', body: TOOL_STREAM };

/** A long answer streamed slowly (a sentence every 100 ms, a minute in all): still running when the user speaks over it, however busy the machine. */
const SLOW_CHUNKS = Array.from({ length: 600 }, (_, i) => `Sentence number ${i} is here. `);
const SLOW: Behaviour = { kind: 'stream', chunks: SLOW_CHUNKS, delayMs: 100, usage: { prompt_tokens: 40, completion_tokens: 200 } };
/** The answer to the words spoken over the slow one. */
const STOPPED = ['Okay, ', 'I ', 'will ', 'stop', '.'];
const STOPPED_USAGE = { prompt_tokens: 60, completion_tokens: STOPPED.length };
const WEATHER_TOOL = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
} as const;

let cert: TestCertificate;
let defaultCAs: string[];
let h: GatewayHarness;
let llm: ScriptedUpstream;
let toolLlm: ScriptedUpstream;
let slowLlm: ScriptedUpstream;
let question: Buffer;

beforeAll(async () => {
  initializeLogger({ pretty: false, level: 'warn' });
  cert = await makeTestCertificate();
  defaultCAs = tls.getCACertificates('default');
  tls.setDefaultCACertificates([...defaultCAs, cert.ca]);
  h = await startSttGateway({ env: { SVC_TLS_CERT: cert.certPath, SVC_TLS_KEY: cert.keyPath } });
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await seedPlatformVoices(prisma);
  llm = await startScriptedUpstream({ kind: 'stream', chunks: REPLY, usage: REPLY_USAGE });
  toolLlm = await startScriptedUpstream(toolCall);
  slowLlm = await startScriptedUpstream(SLOW);
  const prices = { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT };
  await upsertModel(prisma, checkProtocol, { id: 'rt-llm', modality: 'llm', prices, upstream: { url: llm.baseUrl, protocol: 'openai' } });
  await upsertModel(prisma, checkProtocol, { id: 'rt-llm-tools', modality: 'llm', prices, upstream: { url: toolLlm.baseUrl, protocol: 'openai' } });
  await upsertModel(prisma, checkProtocol, { id: 'rt-slow', modality: 'llm', prices, upstream: { url: slowLlm.baseUrl, protocol: 'openai' } });
  await h.runtime.ctx.registry.refresh();
  question = await spokenPcm24(QUESTION);
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([llm?.close(), toolLlm?.close(), slowLlm?.close()]);
  await settleRecognizers();
  await h?.close();
  if (defaultCAs) tls.setDefaultCACertificates(defaultCAs);
  await cert?.remove();
});

/** An org of its own with `credit`, and its key: each test reads a ledger nobody else writes. */
async function orgWithKey(credit = CREDIT) {
  const org = await createOrg(h.testDb.db, { name: 'realtime clients', creditsMicros: credit });
  const key = (await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k' })).key;
  return { orgId: org.id, key };
}

// ---------------------------------------------------------------------------------------
// Audio

/** 100 ms of pcm16 at 24 kHz. */
const FRAME_BYTES = 4_800;
const FRAME_MS = 100;
const millisOf = (pcm: Buffer) => Math.round(pcm.length / 48);

/** `pcm` in 100 ms frames, one every 100 ms (a microphone's pace), each frame a buffer of its own; none once `stopped()`. */
async function atRealTime(pcm: Buffer, send: (frame: Buffer) => void, stopped: () => boolean = () => false): Promise<void> {
  const started = performance.now();
  for (let at = 0, n = 0; at < pcm.length; at += FRAME_BYTES, n++) {
    const wait = started + n * FRAME_MS - performance.now();
    if (wait > 0) await sleep(wait);
    if (stopped()) return;
    send(Buffer.from(pcm.subarray(at, at + FRAME_BYTES)));
  }
}

/** `pcm` with silence added up to a whole number of seconds. */
const toWholeSeconds = (pcm: Buffer) => Buffer.concat([pcm, Buffer.alloc((48_000 - (pcm.length % 48_000)) % 48_000)]);

/** What the local recogniser hears in pcm16 at 24 kHz (POST /v1/audio/transcriptions, the harness's own org). */
async function heardIn(pcm: Buffer): Promise<string> {
  const samples = new Float32Array(pcm.length / 2);
  for (let i = 0; i < samples.length; i++) samples[i] = pcm.readInt16LE(i * 2) / 32768;
  const res = await transcribe(h, wavFile([samples], 24_000), { model: 'local-stt' });
  expect(res.status).toBe(200);
  return ((await res.json()) as { text: string }).text;
}

// ---------------------------------------------------------------------------------------
// Events as a client receives them

type ServerEvent = { type: string; [k: string]: unknown };

/** A client's server events in arrival order, and waiting on the next of a type. */
class ServerEvents extends EventLog<ServerEvent> {
  constructor() {
    super((e) => (e.type === 'error' ? `error(${JSON.stringify(e.error)})` : e.type));
  }

  /** Every event up to and including the next of `type` after those already taken. */
  until(type: string, timeoutMs?: number): Promise<ServerEvent[]> {
    return this.through((e) => e.type === type, timeoutMs);
  }

  async next(type: string, timeoutMs?: number): Promise<ServerEvent> {
    return (await this.until(type, timeoutMs)).at(-1)!;
  }
}

const ofType = (events: ServerEvent[], type: string) => events.filter((e) => e.type === type);
const deltas = (events: ServerEvent[], type: string) => ofType(events, type).map((e) => e.delta as string);
const audioOf = (events: ServerEvent[]) => Buffer.concat(deltas(events, 'response.output_audio.delta').map((d) => Buffer.from(d, 'base64')));

interface SpokenSpan {
  text: string;
  startMs: number;
  endMs: number;
}

/**
 * A response's spoken spans as the client received them: a transcript delta starts one, the
 * audio deltas after it make its audio (ms of pcm16 at 24 kHz, added delta by delta).
 */
function spokenSpans(events: ServerEvent[]): SpokenSpan[] {
  const spans: SpokenSpan[] = [];
  let ms = 0;
  for (const e of events) {
    if (e.type === 'response.output_audio_transcript.delta') spans.push({ text: (e.delta as string).trim(), startMs: ms, endMs: ms });
    if (e.type === 'response.output_audio.delta') {
      ms += Buffer.from(e.delta as string, 'base64').length / 48;
      spans.at(-1)!.endMs = ms;
    }
  }
  return spans;
}

/** What the user heard of `spans` by `ms` (docs/realtime.md, "Barge-in and truncation"): the spans played whole, and of the span being played its share of the words. */
function heardBy(spans: SpokenSpan[], ms: number): string {
  const heard: string[] = [];
  for (const s of spans) {
    if (s.startMs >= ms) break;
    if (s.endMs <= ms) {
      heard.push(s.text);
      continue;
    }
    const words = s.text.split(/\s+/);
    heard.push(...words.slice(0, Math.floor((words.length * (ms - s.startMs)) / (s.endMs - s.startMs))));
    break;
  }
  return heard.join(' ');
}

// ---------------------------------------------------------------------------------------
// The ledger

interface ExpectedLedger {
  /** Token counts of each LLM call, in order. */
  llm: { model: string; input: number; output: number }[];
  /** The text of each span spoken. */
  ttsSpans: string[];
  /** Audio the user sent, in ms. */
  sttMillis: number;
  /** What the org was given (default CREDIT). */
  credit?: bigint;
}

/** Every session's last debit written (an audio leg bills after its socket closes) and committed. */
async function billed(): Promise<void> {
  expect(await h.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
  await h.settled();
}

/**
 * The org's usage rows once the session's legs are all billed and its holds given back: one
 * realtime row per LLM call at its token price, one per spoken span at its code points' price,
 * and the user's audio at its per-second price (cumulative, rounded up once per debit); the
 * balance is the credit less exactly their sum.
 */
async function expectLedger(orgId: string, expected: ExpectedLedger): Promise<UsageRow[]> {
  const prisma = h.testDb.db.prisma;
  const byModality = (rows: UsageRow[], modality: string) => rows.filter((r) => r.modality === modality);
  await vi.waitFor(
    async () => {
      const rows = await usageRows(prisma, { orgId });
      expect(byModality(rows, 'llm')).toHaveLength(expected.llm.length);
      expect(byModality(rows, 'tts')).toHaveLength(expected.ttsSpans.length);
      expect(byModality(rows, 'stt').reduce((n, r) => n + r.audioMillis, 0)).toBe(expected.sttMillis);
      expect((await prisma.org.findUniqueOrThrow({ where: { id: orgId } })).heldMicros).toBe(0n);
    },
    { timeout: 10_000, interval: 25 },
  );
  const rows = await usageRows(prisma, { orgId });
  expect(rows.every((r) => r.route === 'realtime')).toBe(true);
  expect(rows.map((r) => r.modality).filter((m) => m !== 'llm' && m !== 'tts' && m !== 'stt')).toEqual([]);

  // Debits of one session may share a timestamp: compared in a fixed order, not the ledger's.
  const llmRow = (modelId: string | null, inputTokens: number, outputTokens: number, costMicros: bigint) =>
    `${modelId} ${inputTokens}+${outputTokens} tokens: ${costMicros}`;
  expect(
    byModality(rows, 'llm')
      .map((r) => llmRow(r.modelId, r.inputTokens, r.outputTokens, r.costMicros))
      .sort(),
  ).toEqual(expected.llm.map((c) => llmRow(c.model, c.input, c.output, llmCost(c.input, c.output))).sort());

  const ttsRow = (modelId: string | null, characters: number, costMicros: bigint) => `${modelId} ${characters} chars: ${costMicros}`;
  expect(
    byModality(rows, 'tts')
      .map((r) => ttsRow(r.modelId, r.characters, r.costMicros))
      .sort(),
  ).toEqual(expected.ttsSpans.map((span) => ttsRow('local-flite', codePoints(span), costOf(codePoints(span), FLITE_PRICE))).sort());

  let heard = 0;
  for (const r of byModality(rows, 'stt')) {
    expect(r.modelId).toBe('local-stt');
    expect(r.costMicros).toBe(audioCost(heard + r.audioMillis) - audioCost(heard));
    heard += r.audioMillis;
  }
  expect(byModality(rows, 'stt').reduce((n, r) => n + r.costMicros, 0n)).toBe(audioCost(expected.sttMillis));

  const org = await prisma.org.findUniqueOrThrow({ where: { id: orgId } });
  expect(org.balanceMicros).toBe((expected.credit ?? CREDIT) - rows.reduce((n, r) => n + r.costMicros, 0n));
  return rows;
}

// ---------------------------------------------------------------------------------------
// openai: OpenAIRealtimeWS

/** An OpenAIRealtimeWS session on `?model=`, its events recorded from the first. */
function openaiRealtime(key: string, model: string) {
  const client = new OpenAI({ apiKey: key, baseURL: `${h.url}/v1` });
  // The client turns the base URL into wss: whatever its scheme; `options` are the `ws` socket's own.
  const rt = new OpenAIRealtimeWS({ model, options: { ca: cert.ca } }, client);
  const log = new ServerEvents();
  const errors: OpenAIRealtimeError[] = [];
  rt.on('event', (event: { type: string }) => log.push(event as ServerEvent));
  rt.on('error', (e) => errors.push(e));
  const closed = new Promise<number>((resolve) =>
    rt.socket.once('close', (code: number) => {
      log.end(`closed (${code})`);
      resolve(code);
    }),
  );
  return { rt, log, errors, closed };
}

describe('openai OpenAIRealtimeWS', { timeout: 60_000 }, () => {
  it('a spoken question streamed at real time: its transcript, the answer in speech that the recogniser hears back; the ledger exact per leg', async () => {
    const { orgId, key } = await orgWithKey();
    const { rt, log, errors, closed } = openaiRealtime(key, 'rt-llm');
    expect(rt.url.toString()).toMatch(/^wss:\/\/127\.0\.0\.1:\d+\/v1\/realtime\?model=rt-llm$/);
    const created = await log.next('session.created');
    expect(created.session).toMatchObject({ type: 'realtime', models: { stt: 'local-stt', llm: 'rt-llm', tts: 'local-flite' } });
    // An OpenAI voice name: the gateway speaks with the tts model's first platform voice.
    rt.send({ type: 'session.update', session: { type: 'realtime', audio: { output: { voice: 'alloy' } } } });
    const updated = await log.next('session.updated');
    const platformVoice = await defaultVoiceFor(h.testDb.db.prisma, 'local-flite');
    expect(platformVoice).toMatch(/^flite-/);
    expect(updated.session).toMatchObject({ audio: { output: { voice: platformVoice } } });

    await atRealTime(question, (frame) => rt.send({ type: 'input_audio_buffer.append', audio: frame.toString('base64') }));
    const heard = await log.until('conversation.item.input_audio_transcription.completed');
    expect(ofType(heard, 'input_audio_buffer.speech_started')).toHaveLength(1);
    expect(ofType(heard, 'input_audio_buffer.speech_stopped')).toHaveLength(1);
    const transcript = heard.at(-1)!.transcript as string;
    expect(wer(QUESTION, transcript), transcript).toBeLessThanOrEqual(0.5);

    const answer = await log.until('response.done');
    const done = answer.at(-1)!.response as { status: string; output_modalities: string[]; usage: { input_tokens: number; output_tokens: number } };
    expect(done).toMatchObject({
      status: 'completed',
      output_modalities: ['audio'],
      usage: { input_tokens: REPLY_USAGE.prompt_tokens, output_tokens: REPLY_USAGE.completion_tokens },
    });
    // The question reached the LLM as its transcript.
    const sent = JSON.parse(llm.received.at(-1)!.body.toString()) as { messages: { role: string; content: string }[] };
    expect(sent.messages.at(-1)).toEqual({ role: 'user', content: transcript });
    const spoken = deltas(answer, 'response.output_audio_transcript.delta');
    expect(spoken.join('')).toBe(REPLY_TEXT);
    expect(ofType(answer, 'response.output_audio_transcript.done').map((e) => e.transcript)).toEqual([REPLY_TEXT]);
    const audio = audioOf(answer);
    expect(audio.length).toBeGreaterThan(2 * 48_000); // over two seconds of speech
    const back = await heardIn(audio);
    expect(wer(REPLY_TEXT, back), back).toBeLessThanOrEqual(0.5);

    rt.close();
    expect(await closed).toBe(1000);
    expect(errors).toEqual([]);
    await expectLedger(orgId, {
      llm: [{ model: 'rt-llm', input: REPLY_USAGE.prompt_tokens, output: REPLY_USAGE.completion_tokens }],
      ttsSpans: REPLY_SPANS,
      sttMillis: millisOf(question),
    });
  });

  it('a tool call round trip: the call arrives whole, its output goes back with response.create, the second answer follows; the tool message reached the LLM', async () => {
    const { orgId, key } = await orgWithKey();
    toolLlm.behaviour = toolCall;
    const before = toolLlm.received.length;
    const { rt, log, errors, closed } = openaiRealtime(key, 'rt-llm-tools');
    await log.next('session.created');
    rt.send({ type: 'session.update', session: { type: 'realtime', tools: [WEATHER_TOOL], tool_choice: 'auto' } });
    expect((await log.next('session.updated')).session).toMatchObject({ tools: [WEATHER_TOOL] });
    rt.send({
      type: 'conversation.item.create',
      item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'What is the weather in Oslo?' }] },
    });
    rt.send({ type: 'response.create' });

    const first = await log.until('response.done');
    const args = ofType(first, 'response.function_call_arguments.done');
    expect(args).toEqual([expect.objectContaining({ call_id: 'call_7', name: 'get_weather', arguments: '{"city":"Oslo"}' })]);
    expect(deltas(first, 'response.function_call_arguments.delta').join('')).toBe('{"city":"Oslo"}');
    expect(first.at(-1)!.response).toMatchObject({
      status: 'completed',
      output: [{ type: 'function_call', call_id: 'call_7', name: 'get_weather', arguments: '{"city":"Oslo"}' }],
    });

    // The scripted engine's next answer is the one after the tool's result.
    toolLlm.behaviour = afterTool;
    rt.send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: 'call_7', output: '{"temperature_c":4}' } });
    rt.send({ type: 'response.create' });
    const second = await log.until('response.done');
    expect(second.at(-1)!.response).toMatchObject({
      status: 'completed',
      usage: { input_tokens: AFTER_TOOL_USAGE.prompt_tokens, output_tokens: AFTER_TOOL_USAGE.completion_tokens },
    });
    const spoken = deltas(second, 'response.output_audio_transcript.delta');
    expect(spoken.join('')).toBe(AFTER_TOOL_TEXT);
    expect(audioOf(second).length).toBeGreaterThan(48_000);

    const requests = toolLlm.received.slice(before).map((r) => JSON.parse(r.body.toString()) as { messages: unknown[]; tools?: unknown[] });
    expect(requests).toHaveLength(2);
    expect(requests[0]!.tools).toEqual([
      { type: 'function', function: { name: 'get_weather', description: WEATHER_TOOL.description, parameters: WEATHER_TOOL.parameters } },
    ]);
    expect(requests[1]!.messages).toEqual([
      { role: 'user', content: 'What is the weather in Oslo?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_7', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
      { role: 'tool', tool_call_id: 'call_7', content: '{"temperature_c":4}' },
    ]);

    rt.close();
    expect(await closed).toBe(1000);
    expect(errors).toEqual([]);
    await expectLedger(orgId, {
      llm: [
        { model: 'rt-llm-tools', input: 30, output: 9 },
        { model: 'rt-llm-tools', input: AFTER_TOOL_USAGE.prompt_tokens, output: AFTER_TOOL_USAGE.completion_tokens },
      ],
      ttsSpans: [AFTER_TOOL_TEXT],
      sttMillis: 0,
    });
  });

  it('a text-only response (output_modalities ["text"]): the text streamed, no audio; only the LLM billed', async () => {
    const { orgId, key } = await orgWithKey();
    const { rt, log, errors, closed } = openaiRealtime(key, 'rt-llm');
    await log.next('session.created');
    rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'How is the weather?' }] } });
    rt.send({ type: 'response.create', response: { output_modalities: ['text'] } });
    const answer = await log.until('response.done');
    expect(answer.at(-1)!.response).toMatchObject({
      status: 'completed',
      output_modalities: ['text'],
      output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: REPLY_TEXT }] }],
    });
    expect(deltas(answer, 'response.output_text.delta')).toEqual(REPLY);
    expect(ofType(answer, 'response.output_text.done').map((e) => e.text)).toEqual([REPLY_TEXT]);
    expect(ofType(answer, 'response.output_audio.delta')).toEqual([]);
    expect(ofType(answer, 'response.output_audio_transcript.delta')).toEqual([]);

    rt.close();
    expect(await closed).toBe(1000);
    expect(errors).toEqual([]);
    await expectLedger(orgId, {
      llm: [{ model: 'rt-llm', input: REPLY_USAGE.prompt_tokens, output: REPLY_USAGE.completion_tokens }],
      ttsSpans: [],
      sttMillis: 0,
    });
  });

  // openai's own types (resources/realtime/realtime.d.ts, ResponseContentPartAddedEvent.Part and
  // ResponseContentPartDoneEvent.Part) and @openai/agents-realtime's event schema
  // (openaiRealtimeEvents: responseContentPartAddedEventSchema) type a part 'text' or 'audio';
  // the item's content says output_text / output_audio.
  it('response.content_part.added / done name the part as the API types it: audio for speech, text for text', async () => {
    const { orgId, key } = await orgWithKey();
    const { rt, log, closed } = openaiRealtime(key, 'rt-llm');
    await log.next('session.created');
    rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'How is the weather?' }] } });
    rt.send({ type: 'response.create' });
    const spoken = await log.until('response.done');
    rt.send({ type: 'response.create', response: { output_modalities: ['text'] } });
    const written = await log.until('response.done');
    rt.close();
    await closed;
    const reply = { model: 'rt-llm', input: REPLY_USAGE.prompt_tokens, output: REPLY_USAGE.completion_tokens };
    await expectLedger(orgId, { llm: [reply, reply], ttsSpans: REPLY_SPANS, sttMillis: 0 });
    expect(ofType(spoken, 'response.content_part.added').map((e) => e.part)).toEqual([{ type: 'audio', transcript: '' }]);
    expect(ofType(spoken, 'response.content_part.done').map((e) => e.part)).toEqual([{ type: 'audio', transcript: REPLY_TEXT }]);
    expect(ofType(written, 'response.content_part.added').map((e) => e.part)).toEqual([{ type: 'text', text: '' }]);
    expect(ofType(written, 'response.content_part.done').map((e) => e.part)).toEqual([{ type: 'text', text: REPLY_TEXT }]);
  });

  it('barge-in: the user speaks over a long answer; it stops, the LLM too; its item is cut to what was played, then to what the app says it played; the words spoken over it are answered; billed for what was made', async () => {
    const { orgId, key } = await orgWithKey();
    slowLlm.behaviour = SLOW;
    const requestsBefore = slowLlm.received.length;
    const streamsBefore = slowLlm.streams.length;
    // Whole seconds: its last frame needs no second of its own reserved, so the gateway has taken
    // it by the time the client closes (audio still waiting for its reservation then is dropped, and not billed).
    const stop = toWholeSeconds(await spokenPcm24('stop please'));
    const { rt, log, errors, closed } = openaiRealtime(key, 'rt-slow');
    await log.next('session.created');
    rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Talk for a while.' }] } });
    rt.send({ type: 'response.create' });
    const playing = await log.until('response.output_audio.delta');
    // The next answer, to the words spoken over this one, is a short one.
    slowLlm.behaviour = { kind: 'stream', chunks: STOPPED, usage: STOPPED_USAGE };
    const speaking = atRealTime(stop, (frame) => rt.send({ type: 'input_audio_buffer.append', audio: frame.toString('base64') }));

    const first = [...playing, ...(await log.until('response.done'))];
    expect(ofType(first, 'input_audio_buffer.speech_started')).toHaveLength(1);
    type Done = {
      id: string;
      status: string;
      output: { id: string }[];
      usage: { input_tokens: number; output_tokens: number; svc: { tts_characters: number } };
    };
    const done = first.at(-1)!.response as Done;
    expect(done).toMatchObject({
      status: 'cancelled',
      status_details: { type: 'cancelled', reason: 'turn_detected' },
      output: [{ type: 'message', role: 'assistant', status: 'incomplete' }],
    });
    const itemId = done.output[0]!.id;
    const spans = spokenSpans(first);
    const spoken = deltas(first, 'response.output_audio_transcript.delta').join('');
    expect(spans.map((s) => s.text).join(' ')).toBe(spoken);
    expect(SLOW_CHUNKS.join('').startsWith(spoken), spoken).toBe(true);

    // Cut by the gateway to what the client can have played: the audio sent, at most the time since the first of it.
    const truncated = await log.next('conversation.item.truncated');
    expect(truncated).toMatchObject({ item_id: itemId, content_index: 0 });
    const playedMs = truncated.audio_end_ms as number;
    expect(Number.isInteger(playedMs)).toBe(true);
    expect(playedMs).toBeGreaterThan(0);
    expect(playedMs).toBeLessThanOrEqual(Math.round(spans.at(-1)!.endMs));
    // The app's player was behind what it had been sent: it says what it played.
    const appPlayedMs = Math.floor(playedMs / 2);
    rt.send({ type: 'conversation.item.retrieve', item_id: itemId });
    rt.send({ type: 'conversation.item.truncate', item_id: itemId, content_index: 0, audio_end_ms: appPlayedMs });
    rt.send({ type: 'conversation.item.retrieve', item_id: itemId });
    type Item = { status: string; content: { type: string; transcript: string }[] };
    const cutByGateway = (await log.next('conversation.item.retrieved')).item as Item;
    expect(await log.next('conversation.item.truncated')).toMatchObject({ item_id: itemId, content_index: 0, audio_end_ms: appPlayedMs });
    const cutByApp = (await log.next('conversation.item.retrieved')).item as Item;
    expect(cutByGateway).toMatchObject({ status: 'incomplete', content: [{ type: 'output_audio', transcript: heardBy(spans, playedMs) }] });
    expect(cutByApp).toMatchObject({ status: 'incomplete', content: [{ type: 'output_audio', transcript: heardBy(spans, appPlayedMs) }] });
    const [byGateway, byApp] = [cutByGateway.content[0]!.transcript, cutByApp.content[0]!.transcript];
    expect(spoken.startsWith(byGateway), `${JSON.stringify(spoken)} vs ${JSON.stringify(byGateway)}`).toBe(true);
    expect(byGateway.startsWith(byApp), `${JSON.stringify(byGateway)} vs ${JSON.stringify(byApp)}`).toBe(true);

    // The LLM was stopped: its stream closed before its end.
    const stream = slowLlm.streams[streamsBefore]!;
    await vi.waitFor(() => expect(stream.closedEarly).toBe(true), { timeout: 5_000 });
    expect(stream.ended).toBe(false);
    expect(done.usage.output_tokens).toBeGreaterThan(0);
    expect(done.usage.output_tokens).toBeLessThanOrEqual(stream.sent);

    // The words spoken over the answer are answered once it has ended; that LLM saw the answer as the app cut it.
    const secondDone = (await log.next('response.done')).response as Done;
    expect(secondDone).toMatchObject({
      status: 'completed',
      usage: { input_tokens: STOPPED_USAGE.prompt_tokens, output_tokens: STOPPED_USAGE.completion_tokens },
    });
    const second = log.events.filter((e) => e.response_id === secondDone.id);
    expect(deltas(second, 'response.output_audio_transcript.delta').join('')).toBe(STOPPED.join(''));
    const stopHeard = ofType(log.events, 'conversation.item.input_audio_transcription.completed').map((e) => e.transcript as string);
    expect(stopHeard).toHaveLength(1);
    const requests = slowLlm.received.slice(requestsBefore).map((r) => JSON.parse(r.body.toString()) as { messages: unknown[] });
    expect(requests).toHaveLength(2);
    expect(requests[1]!.messages).toEqual([
      { role: 'user', content: 'Talk for a while.' },
      ...(byApp ? [{ role: 'assistant', content: byApp }] : []),
      { role: 'user', content: stopHeard[0] },
    ]);

    await speaking;
    rt.close();
    expect(await closed).toBe(1000);
    expect(errors).toEqual([]);
    await billed();
    // The cancelled answer: the tokens streamed until it stopped (its usage), the spans whose audio had started.
    expect(spans.reduce((n, s) => n + codePoints(s.text), 0)).toBe(done.usage.svc.tts_characters);
    await expectLedger(orgId, {
      llm: [
        { model: 'rt-slow', input: done.usage.input_tokens, output: done.usage.output_tokens },
        { model: 'rt-slow', input: STOPPED_USAGE.prompt_tokens, output: STOPPED_USAGE.completion_tokens },
      ],
      ttsSpans: [...spans, ...spokenSpans(second)].map((s) => s.text),
      sttMillis: millisOf(stop),
    });
  });

  it('the credit runs out mid-session: the answer stops at the speech it cannot pay for (insufficient_quota, response failed), the next words cannot be paid for (error, then 1008); each leg exact on the ledger, the balance never below zero', async () => {
    // Push-to-talk (no turn detection), whole seconds of audio: the question is paid for to the
    // micro-USD before the answer starts, so the legs draw on the credit in a fixed order. The
    // credit: the question, the answer's tokens, its first sentence's speech, and LEFT, which is
    // less than the second sentence's speech and than a second of audio, and more than the LLM's
    // reservation (max_output_tokens, the prompt's estimate) beyond what it costs.
    const pcm = toWholeSeconds(question);
    const LEFT = 40n;
    const [firstSpan, secondSpan] = REPLY_SPANS as [string, string];
    const credit =
      audioCost(millisOf(pcm)) + llmCost(REPLY_USAGE.prompt_tokens, REPLY_USAGE.completion_tokens) + costOf(codePoints(firstSpan), FLITE_PRICE) + LEFT;
    expect(LEFT).toBeLessThan(costOf(codePoints(secondSpan), FLITE_PRICE));
    expect(LEFT).toBeLessThan(audioCost(1000));
    const again = await spokenPcm24('are you still there');
    const { orgId, key } = await orgWithKey(credit);
    const { rt, log, errors, closed } = openaiRealtime(key, 'rt-llm');
    await log.next('session.created');
    rt.send({
      type: 'session.update',
      session: { type: 'realtime', instructions: 'Answer in one sentence.', max_output_tokens: REPLY.length, audio: { input: { turn_detection: null } } },
    });
    expect((await log.next('session.updated')).session).toMatchObject({ max_output_tokens: REPLY.length, audio: { input: { turn_detection: null } } });

    const append = (frame: Buffer) => rt.send({ type: 'input_audio_buffer.append', audio: frame.toString('base64') });
    await atRealTime(pcm, append);
    rt.send({ type: 'input_audio_buffer.commit' });
    await log.next('conversation.item.input_audio_transcription.completed');
    rt.send({ type: 'response.create' });
    const answer = await log.until('response.done');
    expect(ofType(answer, 'error').map((e) => e.error)).toEqual([expect.objectContaining({ code: 'insufficient_quota' })]);
    expect(answer.at(-1)!.response).toMatchObject({
      status: 'failed',
      status_details: { type: 'failed', error: { code: 'insufficient_quota' } },
      output: [{ type: 'message', role: 'assistant', status: 'incomplete', content: [{ type: 'output_audio', transcript: firstSpan }] }],
      usage: { input_tokens: REPLY_USAGE.prompt_tokens, output_tokens: REPLY_USAGE.completion_tokens, svc: { tts_characters: codePoints(firstSpan) } },
    });
    expect(deltas(answer, 'response.output_audio_transcript.delta')).toEqual([firstSpan]);
    expect(audioOf(answer).length).toBeGreaterThan(0);

    // The user speaks again: the first frame past the paid-for seconds cannot be paid for.
    const speaking = atRealTime(again, append, () => rt.socket.readyState !== rt.socket.OPEN);
    expect((await log.next('error')).error).toMatchObject({ type: 'invalid_request_error', code: 'insufficient_quota' });
    expect(await closed).toBe(1008);
    await speaking;
    expect(errors.map((e) => e.error?.code)).toEqual(['insufficient_quota', 'insufficient_quota']);

    await billed();
    await expectLedger(orgId, {
      credit,
      llm: [{ model: 'rt-llm', input: REPLY_USAGE.prompt_tokens, output: REPLY_USAGE.completion_tokens }],
      ttsSpans: [firstSpan],
      sttMillis: millisOf(pcm),
    });
    const prisma = h.testDb.db.prisma;
    expect((await prisma.org.findUniqueOrThrow({ where: { id: orgId } })).balanceMicros).toBe(LEFT);
    const entries = await prisma.ledgerEntry.findMany({ where: { orgId } });
    expect(entries.map((e) => e.balanceAfterMicros).filter((b) => b < 0n)).toEqual([]);
  });

  it.each([
    ['a bad key', 401, async () => ({ key: 'sk_svc_not_a_real_key_0000000000000000000' })],
    ['a zero balance', 402, async () => orgWithKey(0n)],
  ] as const)('%s: refused before the upgrade with %i, reported as the client\u2019s error; nothing billed', async (_name, status, keyFor) => {
    const { key } = await keyFor();
    const ledgerBefore = await h.testDb.db.prisma.ledgerEntry.count();
    const { log, errors, closed } = openaiRealtime(key, 'rt-llm');
    expect(await closed).toBe(1006);
    expect(errors.map((e) => e.message)).toEqual([`Unexpected server response: ${status}`]);
    expect(log.events).toEqual([]);
    expect(await h.testDb.db.prisma.ledgerEntry.count()).toBe(ledgerBefore);
  });

  it('a trial key at its cap of open sessions: the next one refused before the upgrade with 429, reported as the client\u2019s error; a session closed makes room', async () => {
    const prisma = h.testDb.db.prisma;
    const org = await createOrg(h.testDb.db, { name: 'realtime trial', creditsMicros: CREDIT, isTrial: true });
    const key = (await createApiKey(prisma, { orgId: org.id, name: 'trial', isTrial: true })).key;
    const admission = h.runtime.ctx.admission;
    // The sessions of the tests before are gone (the server sees their sockets close a moment after their clients do).
    await vi.waitFor(() => expect(admission.openStreams).toBe(0), { timeout: 5_000 });
    const cap = h.runtime.ctx.config.limits.trialStreamsPerKey;
    const open = Array.from({ length: cap }, () => openaiRealtime(key, 'rt-llm'));
    for (const s of open) await s.log.next('session.created');

    const refused = openaiRealtime(key, 'rt-llm');
    expect(await refused.closed).toBe(1006);
    expect(refused.errors.map((e) => e.message)).toEqual(['Unexpected server response: 429']);
    expect(refused.log.events).toEqual([]);

    open[0]!.rt.close();
    expect(await open[0]!.closed).toBe(1000);
    await vi.waitFor(() => expect(admission.openStreams).toBe(cap - 1), { timeout: 5_000 });
    const next = openaiRealtime(key, 'rt-llm');
    expect((await next.log.next('session.created')).session).toMatchObject({ models: { llm: 'rt-llm' } });
    for (const s of [...open.slice(1), next]) {
      s.rt.close();
      expect(await s.closed).toBe(1000);
    }
    expect([...open, next].flatMap((s) => s.errors)).toEqual([]);
    await billed();
    expect(await usageRows(prisma, { orgId: org.id })).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------
// @openai/agents-realtime: RealtimeSession over its WebSocket transport

/** The session's history once `pred` holds of it (checked at each history_updated). */
function historyWhere(session: RealtimeSession, pred: (history: RealtimeItem[]) => boolean, timeoutMs = 30_000): Promise<RealtimeItem[]> {
  return new Promise((resolve, reject) => {
    const check = (history: RealtimeItem[]) => {
      if (!pred(history)) return;
      clearTimeout(timer);
      session.off('history_updated', check);
      resolve(history);
    };
    const timer = setTimeout(() => {
      session.off('history_updated', check);
      reject(new Error(`history not reached within ${timeoutMs} ms: ${JSON.stringify(session.history)}`));
    }, timeoutMs);
    session.on('history_updated', check);
    check(session.history);
  });
}

type MessageItem = Extract<RealtimeItem, { type: 'message'; role: 'user' | 'assistant' }>;
const messages = (history: RealtimeItem[], role: 'user' | 'assistant') => history.filter((i): i is MessageItem => i.type === 'message' && i.role === role);
const transcriptOf = (item: MessageItem | undefined): string | null => {
  const part = item?.content[0] as { transcript?: string | null; text?: string } | undefined;
  return part?.transcript ?? part?.text ?? null;
};

/**
 * A RealtimeSession for `agent` connected to the gateway at `?model=` (an LLM of the registry),
 * its errors and server events recorded. `sessionModel`: what the session names in its
 * session.update (null: the SDK's default, an OpenAI model).
 */
async function agentSession(agent: RealtimeAgent, key: string, model: string, sessionModel: string | null = model) {
  const session = new RealtimeSession(agent, { transport: 'websocket', apiKey: key, ...(sessionModel ? { model: sessionModel } : {}) });
  const errors: unknown[] = [];
  const events: ServerEvent[] = [];
  session.on('error', (e) => errors.push(e.error));
  session.on('transport_event', (e) => events.push(e as ServerEvent));
  await session.connect({ apiKey: key, url: `${h.url.replace(/^https:/, 'wss:')}/v1/realtime?model=${model}` });
  return { session, errors, events };
}

describe('@openai/agents-realtime RealtimeSession over WebSocket', { timeout: 60_000 }, () => {
  it('a spoken question (sendAudio at real time) gets a spoken answer; the history holds both transcripts', async () => {
    const { orgId, key } = await orgWithKey();
    const agent = new RealtimeAgent({ name: 'Weather', instructions: 'Answer in one sentence.' });
    const { session, errors, events } = await agentSession(agent, key, 'rt-llm');
    const audio: Buffer[] = [];
    session.on('audio', (e) => audio.push(Buffer.from(e.data)));
    const answered = new Promise<string>((resolve) => session.once('agent_end', (_ctx, _agent, text) => resolve(text)));

    await atRealTime(question, (frame) => session.sendAudio(frame.buffer.slice(frame.byteOffset, frame.byteOffset + frame.length) as ArrayBuffer));
    expect(await answered).toBe(REPLY_TEXT);
    const history = await historyWhere(session, (h) => transcriptOf(messages(h, 'user')[0]) !== null && messages(h, 'assistant')[0]?.status === 'completed');
    const user = transcriptOf(messages(history, 'user')[0])!;
    expect(wer(QUESTION, user), user).toBeLessThanOrEqual(0.5);
    expect(messages(history, 'assistant')).toHaveLength(1);
    expect(transcriptOf(messages(history, 'assistant')[0])).toBe(REPLY_TEXT);
    // The session's own instructions reached the LLM.
    const sent = JSON.parse(llm.received.at(-1)!.body.toString()) as { messages: { role: string; content: string }[] };
    expect(sent.messages[0]).toEqual({ role: 'system', content: 'Answer in one sentence.' });

    const pcm = Buffer.concat(audio);
    expect(pcm.length).toBeGreaterThan(2 * 48_000);
    const back = await heardIn(pcm);
    expect(wer(REPLY_TEXT, back), back).toBeLessThanOrEqual(0.5);

    session.close();
    expect(errors).toEqual([]);
    expect(ofType(events, 'error')).toEqual([]);
    await expectLedger(orgId, {
      llm: [{ model: 'rt-llm', input: REPLY_USAGE.prompt_tokens, output: REPLY_USAGE.completion_tokens }],
      ttsSpans: REPLY_SPANS,
      sttMillis: millisOf(question),
    });
  });

  it('a function tool (zod parameters): called with the engine\u2019s arguments, its result sent back by the session, a second answer follows', async () => {
    const { key } = await orgWithKey();
    toolLlm.behaviour = toolCall;
    const before = toolLlm.received.length;
    const calls: string[] = [];
    const getWeather = tool({
      name: 'get_weather',
      description: 'Current weather in a city',
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        calls.push(city);
        // The scripted engine's next answer is the one after the tool's result.
        toolLlm.behaviour = afterTool;
        return `${city}: 4 degrees`;
      },
    });
    const agent = new RealtimeAgent({ name: 'Weather', instructions: 'Use the tool.', tools: [getWeather] });
    const { session, errors, events } = await agentSession(agent, key, 'rt-llm-tools');
    session.sendMessage('What is the weather in Oslo?');
    const history = await historyWhere(session, (h) => messages(h, 'assistant').some((m) => m.status === 'completed' && transcriptOf(m) === AFTER_TOOL_TEXT));
    expect(calls).toEqual(['Oslo']);
    expect(history.filter((i) => i.type === 'function_call')).toEqual([
      expect.objectContaining({ name: 'get_weather', arguments: '{"city":"Oslo"}', output: 'Oslo: 4 degrees', status: 'completed' }),
    ]);

    const requests = toolLlm.received.slice(before).map(
      (r) =>
        JSON.parse(r.body.toString()) as {
          messages: { role: string; content?: unknown; tool_call_id?: string }[];
          tools?: { function: { name: string; parameters: unknown } }[];
        },
    );
    expect(requests).toHaveLength(2);
    expect(requests[0]!.tools).toEqual([
      {
        type: 'function',
        function: expect.objectContaining({ name: 'get_weather', parameters: expect.objectContaining({ properties: { city: { type: 'string' } } }) }),
      },
    ]);
    expect(requests[1]!.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'call_7', content: 'Oslo: 4 degrees' });

    session.close();
    expect(errors).toEqual([]);
    expect(ofType(events, 'error')).toEqual([]);
  });

  it('left at the SDK\u2019s default model (its session.update names gpt-realtime-2.1): the session keeps the URL\u2019s model and takes the rest of the update', async () => {
    const { key } = await orgWithKey();
    const agent = new RealtimeAgent({ name: 'Weather', instructions: 'Answer in one sentence.' });
    const { session, events } = await agentSession(agent, key, 'rt-llm', null);
    const answered = new Promise<string>((resolve) => session.once('agent_end', (_ctx, _agent, text) => resolve(text)));
    session.sendMessage('How is the weather?');
    expect(await answered).toBe(REPLY_TEXT);
    session.close();
    // The update's model is OpenAI's name for a speech-to-speech model: like OpenAI's transcription and voice names, it stands for the gateway's own.
    expect(ofType(events, 'error')).toEqual([]);
    const sent = JSON.parse(llm.received.at(-1)!.body.toString()) as { messages: { role: string; content: string }[] };
    expect(sent.messages[0]).toEqual({ role: 'system', content: 'Answer in one sentence.' });
  });
});

// ---------------------------------------------------------------------------------------
// LiveKit: openai.STT in its default realtime mode

/** `pcm` (pcm16, 24 kHz) as the 100 ms frames an agent pushes, each on its own buffer (the plugin sends `frame.data.buffer` whole). */
function framesOf(pcm: Buffer): AudioFrame[] {
  const frames: AudioFrame[] = [];
  for (let at = 0; at < pcm.length; at += FRAME_BYTES) {
    const part = pcm.subarray(at, Math.min(pcm.length, at + FRAME_BYTES));
    const data = new Int16Array(part.length / 2);
    for (let i = 0; i < data.length; i++) data[i] = part.readInt16LE(i * 2);
    frames.push(new AudioFrame(data, 24_000, 1, data.length));
  }
  return frames;
}

describe('LiveKit openai.STT, realtime mode (/v1/realtime?intent=transcription)', { timeout: 60_000 }, () => {
  it.each([
    ['local-stt', 'a model of the registry'],
    ['gpt-4o-transcribe', 'an OpenAI transcription model: the gateway\u2019s default'],
  ])('model %s (%s): start of speech, end of speech, the final transcript with the words; the audio billed', async (model) => {
    const { orgId, key } = await orgWithKey();
    const recognizer = new livekitOpenai.STT({ baseURL: `${h.url}/v1`, apiKey: key, model });
    expect(recognizer.capabilities.streaming).toBe(true);
    const stream = recognizer.stream();
    const pushing = (async () => {
      const frames = framesOf(question);
      const started = performance.now();
      for (const [n, frame] of frames.entries()) {
        const wait = started + n * FRAME_MS - performance.now();
        if (wait > 0) await sleep(wait);
        stream.pushFrame(frame);
      }
    })();
    const { START_OF_SPEECH, END_OF_SPEECH, FINAL_TRANSCRIPT } = agentsStt.SpeechEventType;
    const received: agentsStt.SpeechEvent[] = [];
    for await (const event of stream) {
      received.push(event);
      // Input ended once the words are in: the plugin sends what it holds, then closes its socket and the stream ends.
      if (event.type === FINAL_TRANSCRIPT) {
        await pushing;
        stream.endInput();
      }
    }
    await recognizer.close();
    expect(received.map((e) => e.type).filter((t) => t === START_OF_SPEECH || t === END_OF_SPEECH || t === FINAL_TRANSCRIPT)).toEqual([
      START_OF_SPEECH,
      END_OF_SPEECH,
      FINAL_TRANSCRIPT,
    ]);
    const text = received.find((e) => e.type === FINAL_TRANSCRIPT)!.alternatives![0]!.text;
    expect(wer(QUESTION, text), text).toBeLessThanOrEqual(0.5);
    // The plugin's usage is the speech's span, from speech_started's audio_start_ms to speech_stopped's audio_end_ms.
    const usage = received.filter((e) => e.type === agentsStt.SpeechEventType.RECOGNITION_USAGE).map((e) => e.recognitionUsage!.audioDuration);
    expect(usage).toHaveLength(1);
    expect(usage[0]).toBeGreaterThan(1);
    expect(usage[0]).toBeLessThan(millisOf(question) / 1000);
    await expectLedger(orgId, { llm: [], ttsSpans: [], sttMillis: millisOf(question) });
  });
});
