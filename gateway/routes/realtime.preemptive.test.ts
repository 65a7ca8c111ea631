// WS /v1/realtime with preemptive answers (`session.svc_preemptive_answers`, issue #32,
// docs/realtime.md#preemptive-answers): on the turn's eager end the answer starts held, on the
// words heard so far; the turn's end with exactly those words releases it, speech after the eager
// end discards it (the engine's request is ended and the client never sees it). A bare `ws` client
// (test/support/realtime-client.ts) against the real gateway runtime: the local recognizer
// (pocketsphinx), flite for the answer's speech, a scripted OpenAI-compatible LLM. The audio goes
// in at real time, as a caller speaks: the recognizer keeps up with it, so the words before a pause
// are heard by the time the detector's eager end comes.
//
// The turn's end before its eager end: a turn may end before the final of the words before its
// eager end is in (`semantic_vad` high ends a turn ~0.1 s after its eager end). A scripted Cartesia
// (test/support/scripted-cartesia.ts: a word per voiced burst, test/support/speech-bursts.ts) holds
// back its answers to the gateway's finalizes (socket-faults.ts `hold`) so that the order is the
// test's: released one finalize at a time, the turn is committed and answered at its last eager
// end, its own final still held; an eager end that speech took back is not.
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { openRealtime, type RealtimeClient, type RealtimeEvent } from '../../test/support/realtime-client.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { concat, settleRecognizers, silence, speech, startSttGateway, toRate, trimSilence } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE } from '../../test/support/tts-routes.ts';
import { startScriptedCartesia, type ScriptedCartesia } from '../../test/support/scripted-cartesia.ts';
import type { SocketFault } from '../../test/support/socket-faults.ts';
import { speechBursts } from '../../test/support/speech-bursts.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const CA_KEY = 'sk_car_preemptive_secret_4d1a';
process.env.PREEMPTIVE_CA_KEY = CA_KEY;

let h: GatewayHarness;
let llm: ScriptedUpstream;
let ca: ScriptedCartesia;

beforeAll(async () => {
  ca = await startScriptedCartesia({ apiKey: CA_KEY });
  h = await startSttGateway();
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'rt-ca-stt',
    modality: 'stt',
    prices: { picoPerSecond: 100_000_000n },
    upstream: { url: ca.url, protocol: 'cartesia', upstreamModel: 'ink-whisper', apiKeyEnv: 'PREEMPTIVE_CA_KEY' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await seedPlatformVoices(prisma);
  // A word every 150 ms (a second in all): an answer prepared in a pause is still streaming when the user speaks on.
  llm = await startScriptedUpstream({
    kind: 'stream',
    chunks: ['It ', 'will ', 'be ', 'sunny ', 'all ', 'day', '.'],
    delayMs: 150,
    usage: { prompt_tokens: 40, completion_tokens: 7 },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'rt-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: 150_001n, outputPicoPerToken: 600_003n },
    upstream: { url: llm.baseUrl, protocol: 'openai' },
  });
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
}, 60_000);

afterAll(async () => {
  await llm?.close();
  await ca?.close();
  await settleRecognizers();
  await h?.close();
});

/** semantic_vad low (the patient preset) unless said: the turn ends well after its eager end, and a short pause does not end it. */
async function session(preemptive: boolean, options: { eagerness?: string; transcriptionModel?: string } = {}): Promise<RealtimeClient> {
  const org = await createOrg(h.testDb.db, { name: 'realtime-preemptive', creditsMicros: 10_000_000n });
  const { key } = await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k' });
  const c = await openRealtime(h, key, { model: 'rt-llm' });
  onTestFinished(() => c.close());
  expect((await c.next('session.created')).session).toMatchObject({ svc_preemptive_answers: false });
  const input = {
    turn_detection: { type: 'semantic_vad', eagerness: options.eagerness ?? 'low' },
    ...(options.transcriptionModel ? { transcription: { model: options.transcriptionModel } } : {}),
  };
  c.send({ type: 'session.update', session: { type: 'realtime', svc_preemptive_answers: preemptive, audio: { input } } });
  expect((await c.next('session.updated')).session).toMatchObject({ svc_preemptive_answers: preemptive });
  return c;
}

/** `parts` spoken by flite with `pauseSeconds` between them, then 2 s of silence: pcm16 at 24 kHz. */
async function spoken(parts: string[], pauseSeconds: number): Promise<Buffer> {
  const pieces = [silence(0.3)];
  for (const [i, text] of parts.entries()) {
    if (i > 0) pieces.push(silence(pauseSeconds));
    pieces.push(trimSilence((await speech(text)).samples));
  }
  pieces.push(silence(2));
  const samples = toRate(concat(...pieces), 24_000);
  const out = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(samples[i]! * 32767))), i * 2);
  return out;
}

/** Appends `pcm` in 100 ms events at real time (a caller's pace), until `stop` settles or the audio ends. */
async function speak(c: RealtimeClient, pcm: Buffer, stop: Promise<unknown>): Promise<void> {
  let stopped = false;
  void stop.then(() => (stopped = true));
  const bytes = 24_000 * 0.1 * 2;
  for (let at = 0; at < pcm.length && !stopped && c.ws.readyState === c.ws.OPEN; at += bytes) {
    c.send({ type: 'input_audio_buffer.append', audio: pcm.subarray(at, at + bytes).toString('base64') });
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Responses discarded unseen so far (the gateway's metrics). */
async function discarded(): Promise<number> {
  const text = await h.runtime.ctx.metrics.registry.getSingleMetricAsString('svc_realtime_responses_total');
  return Number(/status="discarded"\} (\d+)/.exec(text)?.[1] ?? 0);
}

const userWords = (body: Buffer): string => {
  const messages = (JSON.parse(body.toString()) as { messages: { role: string; content: string }[] }).messages;
  return messages.filter((m) => m.role === 'user').at(-1)!.content;
};

const responseIds = (events: RealtimeEvent[]) =>
  new Set(events.filter((e) => e.type.startsWith('response.')).map((e) => (e.response as { id?: string } | undefined)?.id ?? (e.response_id as string)));

describe('preemptive answers', () => {
  it('on: the answer is prepared on the eager end with the final words, released at the turn\u2019s end; one engine request, events in the usual order', async () => {
    const c = await session(true);
    const before = llm.received.length;
    const done = c.until('response.done', 60_000);
    await speak(c, await spoken(['what is the weather like today'], 0), done);
    const events = await done;
    const types = events.map((e) => e.type);
    const order = ['input_audio_buffer.speech_stopped', 'input_audio_buffer.committed', 'conversation.item.input_audio_transcription.completed'];
    order.push('response.created', 'response.output_audio.delta', 'response.done');
    expect(order.map((t) => types.indexOf(t)).every((i) => i >= 0)).toBe(true);
    expect(order.map((t) => types.indexOf(t))).toEqual(order.map((t) => types.indexOf(t)).sort((a, b) => a - b));
    const response = (events.at(-1)!.response ?? {}) as { status: string; svc_prepared?: boolean };
    expect(response).toMatchObject({ status: 'completed', svc_prepared: true });
    // The engine was asked once, with exactly the words the turn committed.
    const asked = llm.received.slice(before).filter((r) => r.path === '/v1/chat/completions');
    expect(asked).toHaveLength(1);
    const transcript = events.find((e) => e.type === 'conversation.item.input_audio_transcription.completed')!.transcript as string;
    expect(transcript).toMatch(/weather/);
    expect(userWords(asked[0]!.body)).toBe(transcript);
    // The answer's item follows the user's in the conversation.
    const committed = events.find((e) => e.type === 'input_audio_buffer.committed')!;
    const added = events.filter((e) => e.type === 'conversation.item.added').map((e) => (e.item as { id: string; role: string }).role);
    expect(added).toEqual(['user', 'assistant']);
    expect(responseIds(events).size).toBe(1);
    expect(committed.item_id).toBe(events.find((e) => e.type === 'input_audio_buffer.speech_stopped')!.item_id);
  }, 90_000);

  it('speech after the eager end: the prepared answer is discarded (its engine request ended, never seen by the client); the turn is answered on all its words', async () => {
    const c = await session(true);
    const before = llm.received.length;
    const streamsBefore = llm.streams.length;
    const discardedBefore = await discarded();
    const done = c.until('response.done', 60_000);
    await speak(c, await spoken(['i would like to book a table', 'for two people tonight'], 0.5), done);
    const events = await done;
    const asked = llm.received.slice(before).filter((r) => r.path === '/v1/chat/completions');
    // An answer was prepared in the pause and dropped when the user went on (before or after its engine request began: then that request was ended).
    expect(await discarded()).toBeGreaterThan(discardedBefore);
    expect(llm.streams.slice(streamsBefore, streamsBefore + asked.length - 1).every((s) => s.closedEarly)).toBe(true);
    const transcript = events.find((e) => e.type === 'conversation.item.input_audio_transcription.completed')!.transcript as string;
    // Both parts (the recognizer hears the first one less well: its words are not all checked).
    expect(transcript).toMatch(/would like/);
    expect(transcript).toMatch(/people tonight/);
    expect(userWords(asked.at(-1)!.body)).toBe(transcript);
    for (const earlier of asked.slice(0, -1)) expect(userWords(earlier.body)).not.toMatch(/tonight/);
    // The client saw one response: the one that answered the whole turn.
    expect(events.filter((e) => e.type === 'response.created')).toHaveLength(1);
    expect(responseIds(events).size).toBe(1);
  }, 90_000);

  it('off (the default): nothing is prepared, the engine is asked after the turn is committed', async () => {
    const c = await session(false);
    const before = llm.received.length;
    const done = c.until('response.done', 60_000);
    await speak(c, await spoken(['what is the weather like today'], 0), done);
    const events = await done;
    expect((events.at(-1)!.response as { svc_prepared?: boolean }).svc_prepared).toBeUndefined();
    expect(llm.received.slice(before).filter((r) => r.path === '/v1/chat/completions')).toHaveLength(1);
  }, 90_000);

  it('a session that has spent its allowance on discarded answers prepares none', async () => {
    const limits = h.runtime.ctx.config.limits;
    const allowance = limits.realtimePreemptiveMaxDiscardedMicros;
    limits.realtimePreemptiveMaxDiscardedMicros = 0;
    onTestFinished(() => {
      limits.realtimePreemptiveMaxDiscardedMicros = allowance;
    });
    const c = await session(true);
    const before = llm.received.length;
    const done = c.until('response.done', 60_000);
    await speak(c, await spoken(['i would like to book a table', 'for two people tonight'], 0.5), done);
    const events = await done;
    expect(llm.received.slice(before).filter((r) => r.path === '/v1/chat/completions')).toHaveLength(1);
    expect((events.at(-1)!.response as { svc_prepared?: boolean }).svc_prepared).toBeUndefined();
  }, 90_000);

  /** pcm16 at 24 kHz: voiced bursts (one word each to the scripted Cartesia) at these spans, silence to `totalSeconds`. */
  const bursts = (spans: [number, number][], totalSeconds: number): Buffer => {
    const samples = speechBursts(24_000, spans, totalSeconds);
    const out = Buffer.alloc(samples.length * 2);
    for (let i = 0; i < samples.length; i++) out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(samples[i]! * 32767))), i * 2);
    return out;
  };

  /** A session (semantic_vad high, transcribed by the scripted Cartesia) whose engine holds back its answers from its first final on. */
  async function heldSession(): Promise<{ c: RealtimeClient; fault: SocketFault; shown: Promise<void> }> {
    let shown!: () => void;
    const held = new Promise<void>((resolve) => (shown = resolve));
    const fault: SocketFault = { kind: 'hold', afterFinals: 0, onFinal: true, shown };
    ca.sttFault = fault;
    onTestFinished(() => {
      ca.sttFault = undefined;
      fault.release?.();
    });
    const c = await session(true, { eagerness: 'high', transcriptionModel: 'rt-ca-stt' });
    return { c, fault, shown: held };
  }

  it('the turn ends before its eager end: the turn is committed and answered at the eager end, its own final not awaited; one answer, on its words, prepared', async () => {
    const { c, fault, shown } = await heldSession();
    const before = llm.received.length;
    const done = c.until('response.done', 60_000);
    void speak(c, bursts([[0.3, 1.1]], 3), done);
    // The eager end's final is held: the turn's end goes out first.
    await c.next('input_audio_buffer.speech_stopped', 20_000);
    await shown;
    // The eager end's answer (its final transcript, then flush_done) and nothing more: the turn's own finalize stays unanswered.
    fault.release!(2);
    const committed = await c.next('input_audio_buffer.committed', 20_000);
    fault.release!();
    const events = await done;
    const types = events.map((e) => e.type);
    const order = ['input_audio_buffer.speech_stopped', 'input_audio_buffer.committed', 'conversation.item.input_audio_transcription.completed'];
    order.push('response.created', 'response.output_audio.delta', 'response.done');
    expect(order.map((t) => types.indexOf(t)).every((i) => i >= 0)).toBe(true);
    expect(order.map((t) => types.indexOf(t))).toEqual(order.map((t) => types.indexOf(t)).sort((a, b) => a - b));
    expect(committed.item_id).toBe(events.find((e) => e.type === 'input_audio_buffer.speech_stopped')!.item_id);
    const transcript = events.find((e) => e.type === 'conversation.item.input_audio_transcription.completed')!.transcript as string;
    expect(transcript).toBe('alpha');
    expect((events.at(-1)!.response as { status: string; svc_prepared?: boolean }).svc_prepared).toBe(true);
    const asked = llm.received.slice(before).filter((r) => r.path === '/v1/chat/completions');
    expect(asked).toHaveLength(1);
    expect(userWords(asked[0]!.body)).toBe('alpha');
    expect(events.filter((e) => e.type === 'response.created')).toHaveLength(1);
  }, 90_000);

  it('the turn ends before an eager end that speech took back: that one commits nothing; the turn is answered on all its words', async () => {
    const { c, shown } = await heldSession();
    const before = llm.received.length;
    const discardedBefore = await discarded();
    const done = c.until('response.done', 60_000);
    // A 0.12 s pause: an eager end there (high: after ~0.1 s of silence), speech again before the turn's end.
    void speak(
      c,
      bursts(
        [
          [0.3, 0.9],
          [1.02, 1.6],
        ],
        3.5,
      ),
      done,
    );
    await c.next('input_audio_buffer.speech_stopped', 20_000);
    await shown;
    // Every answer at once, in order: the eager end in the pause, the resume, the last eager end, the turn's final.
    ca.sttFault!.release!();
    const events = await done;
    // The eager end in the pause prepared an answer, which the resume discarded.
    expect(await discarded()).toBeGreaterThan(discardedBefore);
    const transcript = events.find((e) => e.type === 'conversation.item.input_audio_transcription.completed')!.transcript as string;
    expect(transcript).toBe('alpha bravo');
    const asked = llm.received.slice(before).filter((r) => r.path === '/v1/chat/completions');
    expect(userWords(asked.at(-1)!.body)).toBe('alpha bravo');
    expect(events.filter((e) => e.type === 'input_audio_buffer.committed')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'response.created')).toHaveLength(1);
  }, 90_000);

  it('svc_preemptive_answers must be a boolean', async () => {
    const c = await session(false);
    c.send({ type: 'session.update', session: { svc_preemptive_answers: 'yes' } });
    expect((await c.next('error')).error).toMatchObject({ code: 'invalid_request', param: 'session.svc_preemptive_answers' });
  });
});
