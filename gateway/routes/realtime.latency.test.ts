// WS /v1/realtime, a turn's latency as a client sees it (issue #32): the order of a turn's events
// now that the end of turn goes out at the detector's decision (speech_stopped, then the item
// committed with the exact final transcript, then the answer), and the opt-in per-turn latency
// event `svc.turn_latency` (`session.svc_turn_latency`, docs/realtime.md). A bare `ws` client
// (test/support/realtime-client.ts) against the real gateway runtime: the local recognizer
// (pocketsphinx), flite for the answer's speech, a scripted OpenAI-compatible LLM.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { appendAudio, openRealtime, responseAudio, spokenPcm24, type RealtimeEvent } from '../../test/support/realtime-client.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { settleRecognizers, startSttGateway } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE } from '../../test/support/tts-routes.ts';
import { firstAudibleMs } from '../audio/first-audible.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

let h: GatewayHarness;
let llm: ScriptedUpstream;

beforeAll(async () => {
  h = await startSttGateway();
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await seedPlatformVoices(prisma);
  llm = await startScriptedUpstream({ kind: 'stream', chunks: ['The ', 'weather ', 'is ', 'sunny', '.'], usage: { prompt_tokens: 40, completion_tokens: 5 } });
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
  await settleRecognizers();
  await h?.close();
});

async function orgWithKey() {
  const org = await createOrg(h.testDb.db, { name: 'realtime-latency', creditsMicros: 10_000_000n });
  return { orgId: org.id, key: (await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k' })).key };
}

const one = (events: RealtimeEvent[], type: string) => {
  const found = events.filter((e) => e.type === type);
  expect(found, type).toHaveLength(1);
  return found[0]!;
};

interface Latency {
  item_id: string;
  response_id: string | null;
  audio_end_ms: number;
  turn_end_ms: number;
  transcript_final_ms: number | null;
  llm_first_token_ms: number | null;
  tts_first_audio_ms: number | null;
  first_audible_ms: number | null;
}

describe('svc.turn_latency', () => {
  it('opted in: after the answer, each leg from the end of speech in the order they happen; speech_stopped comes before the committed item and its exact transcript', async () => {
    const { key, orgId } = await orgWithKey();
    const c = await openRealtime(h, key, { model: 'rt-llm' });
    expect((await c.next('session.created')).session).toMatchObject({ svc_turn_latency: false });
    c.send({ type: 'session.update', session: { type: 'realtime', svc_turn_latency: true } });
    expect((await c.next('session.updated')).session).toMatchObject({ svc_turn_latency: true });

    const question = await spokenPcm24('what is the weather like today');
    appendAudio(c, question);
    const events = await c.until('svc.turn_latency', 30_000);
    const types = events.map((e) => e.type);

    // The turn's end goes out at the detector's decision; the item is committed with the final transcript, then answered.
    const stopped = one(events, 'input_audio_buffer.speech_stopped');
    const committed = one(events, 'input_audio_buffer.committed');
    const completed = one(events, 'conversation.item.input_audio_transcription.completed');
    const done = one(events, 'response.done').response as { id: string; status: string; svc_timings: Record<string, number> };
    const order = ['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped', 'input_audio_buffer.committed'];
    order.push('conversation.item.input_audio_transcription.completed', 'response.created', 'response.done', 'svc.turn_latency');
    expect(order.map((t) => types.indexOf(t))).toEqual(order.map((t) => types.indexOf(t)).sort((a, b) => a - b));
    expect(stopped.item_id).toBe(committed.item_id);
    expect(completed.item_id).toBe(committed.item_id);
    expect(completed.transcript).toMatch(/weather/);
    // Deltas of the turn's last words, if any came after speech_stopped, belong to the ended turn's item.
    for (const d of events.filter((e) => e.type === 'conversation.item.input_audio_transcription.delta')) expect(d.item_id).toBe(committed.item_id);
    expect(done.status).toBe('completed');

    const latency = events.at(-1) as unknown as Latency;
    expect(latency).toMatchObject({ item_id: committed.item_id, response_id: done.id, audio_end_ms: stopped.audio_end_ms });
    // Each leg after the one before it, all after the end of speech.
    const legs = [latency.turn_end_ms, latency.transcript_final_ms, latency.llm_first_token_ms, latency.tts_first_audio_ms, latency.first_audible_ms];
    expect(legs.every((ms) => typeof ms === 'number' && ms >= 0)).toBe(true);
    expect([...(legs as number[])].sort((a, b) => a - b)).toEqual(legs);
    // The answer's legs are the response's own timings, moved to the end of speech (each rounded to 0.1 ms).
    const t = done.svc_timings;
    expect(latency.tts_first_audio_ms! - latency.llm_first_token_ms!).toBeCloseTo(t.first_audio_ms! - t.llm_first_token_ms!, 0);
    expect(latency.first_audible_ms! - latency.tts_first_audio_ms!).toBeCloseTo(t.first_audible_ms! - t.first_audio_ms!, 0);
    // The first audible sample is no earlier than where the sound begins in the audio the client got, played from its first byte.
    const within = firstAudibleMs(responseAudio(events), 'pcm_s16le', 24_000)!;
    expect(within).toBeDefined();
    expect(t.first_audible_ms! - t.first_audio_ms!).toBeGreaterThanOrEqual(within - 0.2);

    // The request log's turn: the same end of turn (the detector's decision) and first audible sample.
    await c.close();
    const turn = await vi.waitFor(
      async () => {
        await h.runtime.ctx.requestLog!.flush();
        const row = await h.testDb.db.prisma.requestLog.findFirst({ where: { orgId, route: '/v1/realtime' } });
        expect(row).not.toBeNull();
        const turns = await h.testDb.db.prisma.requestLogTurn.findMany({ where: { requestLogId: row!.id } });
        expect(turns).toHaveLength(1);
        return turns[0]!;
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(Math.abs(turn.endOfTurnMs! - turn.speechEndMs! - latency.turn_end_ms)).toBeLessThanOrEqual(1.1);
    expect(Math.abs(turn.firstAudibleMs! - turn.speechEndMs! - latency.first_audible_ms!)).toBeLessThanOrEqual(1.1);
  }, 60_000);

  it('not asked for (the default), or turned off again: no svc.turn_latency; a value that is not a boolean is an error naming the field', async () => {
    const { key } = await orgWithKey();
    const c = await openRealtime(h, key, { model: 'rt-llm' });
    await c.next('session.created');
    c.send({ type: 'session.update', session: { svc_turn_latency: 'yes' } });
    const error = (await c.next('error')).error as { code: string; param: string; message: string };
    expect(error).toMatchObject({ code: 'invalid_request', param: 'session.svc_turn_latency' });
    c.send({ type: 'session.update', session: { svc_turn_latency: true } });
    await c.next('session.updated');
    c.send({ type: 'session.update', session: { svc_turn_latency: false } });
    expect((await c.next('session.updated')).session).toMatchObject({ svc_turn_latency: false });

    appendAudio(c, await spokenPcm24('what is the weather like today'));
    await c.next('response.done', 30_000);
    // An event the session sends after anything the turn could still send: the latency would have come before it.
    c.send({ type: 'session.update', session: {} });
    await c.next('session.updated');
    expect(c.events.filter((e) => e.type === 'svc.turn_latency')).toEqual([]);
    await c.close();
  }, 60_000);
});
