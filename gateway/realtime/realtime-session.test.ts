// A /v1/realtime session with no socket: its events in through receive(), out to an in-memory
// outbox (test/support/memory-outbox.ts), its timers on a manual clock. The real gateway runtime
// (database, registry, credits), a scripted OpenAI-compatible LLM and flite for the speech.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { A_WINDOW_START, manualClock } from '../../test/support/manual-clock.ts';
import { memoryOutbox, type MemoryOutbox } from '../../test/support/memory-outbox.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { startSttGateway } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE, costOf } from '../../test/support/tts-routes.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import type { ClientEvent } from './client-events.ts';
import { RealtimeSession } from './realtime-session.ts';
import type { ServerEvent } from './server-events.ts';

const PRICE_IN = 150_001n;
const PRICE_OUT = 600_003n;
const REPLY = ['The ', 'weather ', 'is ', 'sunny', '.'];
const REPLY_TEXT = REPLY.join('');
const CREDIT = 10_000_000n;
const clock = manualClock(A_WINDOW_START);

let h: GatewayHarness;
let llm: ScriptedUpstream;
/** A long answer, slowly streamed; closed by the test to fail it mid-answer. */
let dyingLlm: ScriptedUpstream;

beforeAll(async () => {
  h = await startSttGateway({ creditsMicros: CREDIT, clock });
  const prisma = h.testDb.db.prisma;
  llm = await startScriptedUpstream({ kind: 'stream', chunks: REPLY, usage: { prompt_tokens: 40, completion_tokens: 6 } });
  await upsertModel(prisma, checkProtocol, {
    id: 'rt-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT },
    upstream: { url: llm.baseUrl, protocol: 'openai' },
  });
  dyingLlm = await startScriptedUpstream({ kind: 'stream', chunks: Array.from({ length: 100 }, (_, i) => `Sentence number ${i} is here. `), delayMs: 100 });
  await upsertModel(prisma, checkProtocol, {
    id: 'rt-dying',
    modality: 'llm',
    prices: { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT },
    upstream: { url: dyingLlm.baseUrl, protocol: 'openai' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await seedPlatformVoices(prisma);
  await h.runtime.ctx.registry.refresh();
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([llm?.close(), dyingLlm?.close()]);
  await h?.close();
});

/** A conversation session on `rt-llm` whose events go to an in-memory outbox. */
async function openSession(llmId = 'rt-llm'): Promise<{ session: RealtimeSession; outbox: MemoryOutbox<ServerEvent>; receive: (event: ClientEvent) => void }> {
  const { ctx } = h.runtime;
  const auth = await ctx.core.admit(h.key, true);
  const outbox = memoryOutbox<ServerEvent>();
  const session = new RealtimeSession(outbox, {
    ctx,
    auth,
    requestId: 'req_in_memory',
    log: h.runtime.app.log,
    kind: 'realtime',
    profile: { id: llmId, llm: llmId },
    profiles: new Map(),
    sttModel: null,
    hold: await ctx.core.reserve(auth, 0n),
    revoked: new AbortController().signal,
  });
  await session.start();
  return { session, outbox, receive: (event) => session.receive({ event, size: JSON.stringify(event).length }) };
}

/** The next event of `type` the session sent (after those already taken). */
const nextOf = async <T extends ServerEvent['type']>(outbox: MemoryOutbox<ServerEvent>, type: T) =>
  (await outbox.next((e) => e.type === type)) as ServerEvent & { type: T };

/** The `delta` of each event of `type`, in order. */
const deltas = (events: ServerEvent[], type: ServerEvent['type']): string[] => events.flatMap((e) => (e.type === type && 'delta' in e ? [e.delta] : []));

describe('a realtime session over an in-memory outbox', () => {
  it('a typed message and response.create: the events of the turn in order, the answer spoken, each model billed exactly', async () => {
    const { session, outbox, receive } = await openSession();
    expect(await nextOf(outbox, 'session.created')).toMatchObject({ session: { models: { llm: 'rt-llm', tts: 'local-flite' } } });
    receive({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'How is the weather?' }] } });
    receive({ type: 'response.create' });
    const done = await nextOf(outbox, 'response.done');
    const turn = outbox.events.slice(1).map((e) => e.type);
    // The item, then the response: its item and part opened, the speech (each span's transcript with its audio), everything closed.
    expect([...turn.slice(0, 6), ...new Set(turn.slice(6, -6)), ...turn.slice(-6)]).toEqual([
      'conversation.item.added',
      'conversation.item.done',
      'response.created',
      'response.output_item.added',
      'conversation.item.added',
      'response.content_part.added',
      'response.output_audio_transcript.delta',
      'response.output_audio.delta',
      'response.output_audio.done',
      'response.output_audio_transcript.done',
      'response.content_part.done',
      'response.output_item.done',
      'conversation.item.done',
      'response.done',
    ]);
    expect(deltas(outbox.events, 'response.output_audio_transcript.delta').join('')).toBe(REPLY_TEXT);
    const audioBytes = deltas(outbox.events, 'response.output_audio.delta').reduce((n, d) => n + Buffer.from(d, 'base64').length, 0);
    expect(audioBytes).toBeGreaterThan(24_000); // more than half a second of pcm16 at 24 kHz
    expect(done.response).toMatchObject({
      status: 'completed',
      usage: { input_tokens: 40, output_tokens: 6, svc: { llm_model: 'rt-llm', tts_model: 'local-flite', tts_characters: REPLY_TEXT.length } },
    });
    // What the LLM got: the typed message.
    expect((JSON.parse(llm.received.at(-1)!.body.toString()) as { messages: unknown[] }).messages).toEqual([{ role: 'user', content: 'How is the weather?' }]);

    session.close(1000, 'done');
    expect(outbox.closedWith).toEqual({ code: 1000, reason: 'done' });
    expect(await h.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
    await h.settled();
    const rows = await usageRows(h.testDb.db.prisma, { orgId: h.orgId });
    const llmCost = (BigInt(40) * PRICE_IN + BigInt(6) * PRICE_OUT + 999_999n) / 1_000_000n;
    expect(rows.filter((r) => r.modality === 'llm').map((r) => [r.modelId, r.route, r.inputTokens, r.outputTokens, r.costMicros])).toEqual([
      ['rt-llm', 'realtime', 40, 6, llmCost],
    ]);
    const tts = rows.filter((r) => r.modality === 'tts');
    expect(tts.reduce((n, r) => n + r.characters, 0)).toBe(REPLY_TEXT.length);
    const ttsCost = tts.reduce((n, r) => n + costOf(r.characters, FLITE_PRICE), 0n);
    expect(tts.reduce((n, r) => n + r.costMicros, 0n)).toBe(ttsCost);
    expect(rows.filter((r) => r.modality === 'stt')).toEqual([]);
    expect(await h.balanceMicros()).toBe(CREDIT - llmCost - ttsCost);
  }, 60_000);

  it('ends on the session clock: idle after the configured time, with an error event and close 1000', async () => {
    const { outbox, receive } = await openSession();
    await nextOf(outbox, 'session.created');
    const idleMs = h.runtime.ctx.config.limits.realtimeIdleMs;
    clock.advance(idleMs - 1000);
    receive({ type: 'session.update', session: { instructions: 'Hello.' } });
    await nextOf(outbox, 'session.updated');
    // The update started the wait again.
    clock.advance(idleMs - 1000);
    expect(outbox.closedWith).toBeNull();
    clock.advance(1000);
    expect(outbox.closedWith).toEqual({ code: 1000, reason: 'idle_timeout' });
    expect(outbox.events.at(-1)).toMatchObject({ type: 'error', error: { code: 'idle_timeout' } });
  });

  it('an LLM failing mid-answer: its speech stops before response.done, nothing is spoken after it', async () => {
    const { outbox, receive } = await openSession('rt-dying');
    await nextOf(outbox, 'session.created');
    receive({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Talk for a while.' }] } });
    // The client stops reading: the answer's first audio waits for it, its speech under way.
    outbox.pause();
    receive({ type: 'response.create' });
    await outbox.blocked();
    dyingLlm.close().catch(() => {});
    expect((await nextOf(outbox, 'error')).error).toMatchObject({ code: 'upstream_error' });
    outbox.resume();
    const done = await nextOf(outbox, 'response.done');
    expect(done.response.status).toBe('failed');
    // Whatever the session does next comes after anything the failed answer could still send.
    receive({ type: 'session.update', session: { instructions: 'Hello.' } });
    await nextOf(outbox, 'session.updated');
    const after = outbox.events.slice(outbox.events.indexOf(done) + 1).map((e) => e.type);
    expect(after).toEqual(['session.updated']);
  }, 60_000);
});
