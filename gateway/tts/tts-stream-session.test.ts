// The streaming TTS session with no socket: commands in, typed events out through an in-memory
// outbox (test/support/memory-outbox.ts), the local flite engine, a throw-away database for the
// key, the voice and the debits, the session's timers on a manual clock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { manualClock } from '../../test/support/manual-clock.ts';
import { memoryOutbox } from '../../test/support/memory-outbox.ts';
import { FLITE_PRICE, FOX, codePoints, costOf, decodeRaw, natural, startTtsGateway } from '../../test/support/tts-routes.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { parseTtsRequest } from './tts-request.ts';
import { TtsStreamSession, VOICE_KEPT_MS, ttsSessionLimits, type TtsEvent, type TtsInput } from './tts-stream-session.ts';

const clock = manualClock(Date.UTC(2026, 0, 1));
let h: GatewayHarness;

beforeAll(async () => {
  h = await startTtsGateway({ clock });
}, 60_000);

afterAll(async () => {
  await h?.close();
});

const quiet = { warn: () => {}, error: () => {} };

/** A session as the route opens one (an admitted key, a hold of nothing), bound to an in-memory outbox. */
async function openSession(requestId: string) {
  const { ctx } = h.runtime;
  const auth = await ctx.core.admit(h.key, true);
  const outbox = memoryOutbox<TtsEvent>();
  const session = new TtsStreamSession({
    ctx,
    auth,
    requestId,
    hold: await ctx.core.reserve(auth, 0n),
    limits: { ...ttsSessionLimits },
    outbox,
    revoked: new AbortController().signal,
    log: quiet,
  });
  return { session, outbox };
}

const settings = () =>
  parseTtsRequest(
    { model_id: 'local-flite', voice: { mode: 'id', id: 'flite-slt' }, output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 } },
    'websocket',
  );
const input = (transcript: string, more: boolean): TtsInput => ({ transcript, continue: more, flush: false, maxBufferDelayMs: undefined });

describe('TtsStreamSession over an in-memory outbox', () => {
  it('a context\u2019s text in two pieces: its audio in order (flite\u2019s own, sample for sample), then done; the exact cost charged', async () => {
    const requestId = `memory-${Date.now()}`;
    const before = await h.balanceMicros();
    const { session, outbox } = await openSession(requestId);
    session.receive({ type: 'generate', contextId: 'c', input: input('The quick brown fox ', true), settings });
    session.receive({ type: 'generate', contextId: 'c', input: input('jumps over the lazy dog.', false), settings });
    expect(await outbox.next((e) => e.type === 'done' || e.type === 'error')).toEqual({ type: 'done', contextId: 'c' });

    expect(outbox.events.at(-1)).toEqual({ type: 'done', contextId: 'c' });
    const chunks = outbox.events.slice(0, -1);
    expect(chunks.length).toBeGreaterThan(1);
    for (const e of chunks) expect(e).toMatchObject({ type: 'audio', contextId: 'c', part: 1 });
    const audio = Buffer.concat(chunks.map((e) => (e.type === 'audio' ? e.audio : Buffer.alloc(0))));
    expect(Array.from(decodeRaw(audio, 'pcm_s16le'))).toEqual(Array.from(natural('flite', 'slt', FOX).samples));

    session.transportClosed();
    await h.settled();
    const rows = await usageRows(h.testDb.db.prisma, { requestId });
    const cost = costOf(codePoints(FOX), FLITE_PRICE);
    expect(rows.map((r) => ({ characters: r.characters, costMicros: r.costMicros, route: r.route, modelId: r.modelId }))).toEqual([
      { characters: codePoints(FOX), costMicros: cost, route: 'tts.websocket', modelId: 'local-flite' },
    ]);
    await expect.poll(() => h.balanceMicros()).toBe(before - cost);
    const org = await h.testDb.db.prisma.org.findUniqueOrThrow({ where: { id: h.orgId } });
    expect(org.heldMicros).toBe(0n);
  });

  it('cancel: no event for the context after it; an idle session is closed by its clock (1000 idle_timeout)', async () => {
    const { session, outbox } = await openSession(`memory-cancel-${Date.now()}`);
    session.receive({ type: 'generate', contextId: 'long', input: input(`${FOX} ${FOX} ${FOX}`, false), settings });
    await outbox.next((e) => e.type === 'audio');
    session.receive({ type: 'cancel', contextId: 'long' });
    const cancelledAt = outbox.events.length;
    // Another context is served after it: the session goes on, and the cancelled one has said its last.
    session.receive({ type: 'generate', contextId: 'next', input: input('Hello.', false), settings });
    await outbox.next((e) => e.type === 'done' && e.contextId === 'next');
    expect(outbox.events.slice(cancelledAt).filter((e) => e.type !== 'error' && e.contextId === 'long')).toEqual([]);
    expect(outbox.events.filter((e) => e.type === 'error')).toEqual([]);

    expect(outbox.open).toBe(true);
    clock.advance(ttsSessionLimits.idleMs);
    expect(await outbox.closed()).toEqual({ code: 1000, reason: 'idle_timeout' });
    expect(session.state).toBe('closing');
    session.transportClosed();
    expect(session.state).toBe('closed');
  });

  it('a socket looks each voice up once, and again after VOICE_KEPT_MS: a voice deleted meanwhile is refused then', async () => {
    const prisma = h.testDb.db.prisma;
    const slt = await prisma.voiceProfile.findFirstOrThrow({ where: { voiceId: 'flite-slt', modelId: 'local-flite' } });
    const voiceId = `voice_cache_${Date.now()}`;
    await prisma.voice.create({ data: { id: voiceId, orgId: h.orgId, kind: 'library', name: 'cached', tags: [] } });
    await prisma.voiceProfile.create({ data: { id: `vpr_${voiceId}`, voiceId, modelId: 'local-flite', upstreamId: slt.upstreamId, status: 'ready' } });
    const own = () =>
      parseTtsRequest(
        { model_id: 'local-flite', voice: { mode: 'id', id: voiceId }, output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 } },
        'websocket',
      );
    const { session, outbox } = await openSession(`memory-voices-${Date.now()}`);
    const speak = (contextId: string) => {
      session.receive({ type: 'generate', contextId, input: input('Hello.', false), settings: own });
      return outbox.next((e) => (e.type === 'done' || e.type === 'error') && e.contextId === contextId);
    };
    expect(await speak('first')).toEqual({ type: 'done', contextId: 'first' });
    await prisma.voice.update({ where: { id: voiceId }, data: { deletedAt: new Date() } });
    expect(await speak('same-period')).toEqual({ type: 'done', contextId: 'same-period' });
    clock.advance(VOICE_KEPT_MS + 1);
    expect(await speak('next-period')).toMatchObject({ type: 'error', contextId: 'next-period', error: { code: 'voice_not_found' } });
    session.transportClosed();
  });
});
