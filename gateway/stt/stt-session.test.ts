// The streaming-transcription session with no socket: its typed events read from an in-memory
// outbox (test/support/memory-outbox.ts), as the realtime session reads them. The session is
// started as every route starts one (startPlannedSession), on a real gateway runtime for its core
// (key, credit holds, debits on a throw-away database) and the local pocketsphinx recognizer,
// with speech made by flite; its timers run on a manual clock, moved by the test.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { manualClock } from '../../test/support/manual-clock.ts';
import { memoryOutbox, type MemoryOutbox } from '../../test/support/memory-outbox.ts';
import {
  audioCost,
  concat,
  expectDebited,
  s16le,
  settleRecognizers,
  silence,
  speech,
  startSttGateway,
  trimSilence,
  wer,
} from '../../test/support/stt-routes.ts';
import { usd } from '../../test/support/tts-routes.ts';
import { streamingModel, startPlannedSession } from './open-session.ts';
import type { SttEvent, SttTranscript, SttTurn } from './stt-events.ts';
import { MAX_SESSION_MS, METER_EVERY_MS, type SttSession } from './stt-session.ts';
import { presetSettings } from './turn-params.ts';

const FOX = 'the quick brown fox jumps over the lazy dog';
const CALL = 'please call me tomorrow morning about the meeting';

let h: GatewayHarness;
const clock = manualClock(Date.UTC(2026, 0, 1));

beforeAll(async () => {
  h = await startSttGateway({ clock });
  await Promise.all([speech(FOX), speech(CALL)]);
}, 120_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
});

let sessions = 0;

/** A session of `local-stt` at 16 kHz s16 with the balanced turn detection, its events in memory. */
async function startSession(): Promise<{ session: SttSession; outbox: MemoryOutbox<SttEvent>; requestId: string }> {
  const { ctx } = h.runtime;
  const auth = await ctx.core.admit(h.key, true);
  const model = streamingModel(ctx, 'local-stt', auth);
  const hold = await ctx.core.reserve(auth, audioCost(METER_EVERY_MS));
  const outbox = memoryOutbox<SttEvent>();
  const requestId = `stt-session-${++sessions}-${Date.now()}`;
  const plan = {
    model,
    sampleRate: 16000,
    encoding: 'pcm_s16le' as const,
    turnSource: 'gateway' as const,
    turns: presetSettings('balanced', { eager: false }),
    keyterms: [],
    language: undefined,
  };
  const session = startPlannedSession(ctx, outbox, {
    plan,
    auth,
    requestId,
    log: h.runtime.app.log,
    hold,
    revoked: new AbortController().signal,
    usageRoute: 'stt.test',
  });
  return { session, outbox, requestId };
}

/** Audio as 100 ms frames. */
function sendAudio(session: SttSession, samples: Float32Array): void {
  const bytes = s16le(samples);
  for (let at = 0; at < bytes.length; at += 3200) session.audio(bytes.subarray(at, at + 3200));
}

const isTranscript = (e: SttEvent): e is SttTranscript => e.type === 'transcript';
const isTurn = (turn: SttTurn['turn']) => (e: SttEvent) => e.type === 'turn' && e.turn === turn;
const millisOf = (samples: number) => Math.round((samples * 1000) / 16000);

describe('SttSession over an in-memory outbox', () => {
  it('transcripts, a turn, a finalize and the close, with the exact cost billed', async () => {
    const { session, outbox, requestId } = await startSession();
    expect(outbox.events[0]).toMatchObject({ type: 'started', requestId, model: 'local-stt', sampleRate: 16000, encoding: 'pcm_s16le' });

    // A sentence and silence: the gateway's detector ends the turn at once; its final follows, then turn_final with the turn's text.
    const fox = concat((await speech(FOX)).samples, silence(2));
    sendAudio(session, fox);
    await outbox.next(isTurn('turn.end'), 30_000);
    await outbox.next((e) => e.type === 'turn_final', 30_000);
    // A second sentence, finalized by the client: its final, then flushed.
    const call = trimSilence((await speech(CALL)).samples);
    sendAudio(session, call);
    session.command({ type: 'finalize' });
    await outbox.next((e) => e.type === 'flushed', 30_000);
    session.command({ type: 'close' });
    const closed = await outbox.next((e) => e.type === 'closed', 30_000);

    const shape = outbox.events
      .filter((e) => !isTranscript(e) || e.isFinal)
      .map((e) => (isTranscript(e) ? `final:${e.cause}` : e.type === 'turn' ? e.turn : e.type));
    expect(shape).toEqual(['started', 'turn.start', 'turn.end', 'final:turn', 'turn_final', 'turn.start', 'final:finalize', 'flushed', 'closed']);
    const finals = outbox.events.filter(isTranscript).filter((e) => e.isFinal);
    expect(wer(FOX, finals[0]!.text)).toBeLessThanOrEqual(0.25);
    expect(wer(CALL, finals[1]!.text)).toBeLessThanOrEqual(0.25);
    // turn_final carries the turn's final text, exactly, at the end's audio time.
    const end = outbox.events.find(isTurn('turn.end')) as SttTurn;
    expect(outbox.events.filter((e) => e.type === 'turn_final')).toEqual([{ type: 'turn_final', atSeconds: end.atSeconds, transcript: finals[0]!.text }]);
    expect(outbox.events.filter(isTranscript).filter((e) => !e.isFinal).length).toBeGreaterThanOrEqual(2);

    const millis = millisOf(fox.length + call.length);
    const cost = audioCost(millis);
    expect(closed).toEqual({ type: 'closed', reason: 'client_close', audioSeconds: millis / 1000, costUsd: usd(cost), clientRequested: true });
    expect(outbox.closedWith).toEqual({ code: 1000, reason: 'client_close' });
    const billed = await expectDebited(h, requestId, cost);
    expect(billed.usageMicros).toBe(cost);
    expect(billed.audioMillis).toBe(millis);
    expect(billed.usage.every((u) => u.route === 'stt.test' && u.modality === 'stt')).toBe(true);
  }, 90_000);

  it('a bad command is answered with an error in order, and the session carries on', async () => {
    const { session, outbox } = await startSession();
    session.command({ type: 'invalid', code: 'invalid_message', message: 'not a command' });
    expect(outbox.events.at(-1)).toEqual({ type: 'error', code: 'invalid_message', message: 'not a command' });
    session.command({ type: 'close' });
    expect(await outbox.next((e) => e.type === 'closed')).toMatchObject({ reason: 'client_close', audioSeconds: 0, costUsd: '0.000000' });
  });

  it('the idle timeout and the maximum duration run on the clock', async () => {
    // Without audio or keepalive: closed once 15 s have passed on the session's clock.
    const idle = await startSession();
    clock.advance(h.runtime.ctx.config.limits.sttIdleMs - 1);
    expect(idle.outbox.closedWith).toBeNull();
    clock.advance(1);
    expect(idle.outbox.events.slice(1)).toEqual([
      { type: 'error', code: 'idle_timeout', message: 'No audio or keepalive for 15 s.' },
      { type: 'closed', reason: 'idle_timeout', audioSeconds: 0, costUsd: '0.000000', clientRequested: false },
    ]);
    expect(idle.outbox.closedWith).toEqual({ code: 1000, reason: 'idle_timeout' });

    // A sample every 10 s keeps a session from idling, but not past its maximum duration.
    const long = await startSession();
    let samples = 0;
    for (let t = 0; t < MAX_SESSION_MS && long.outbox.open; t += 10_000) {
      long.session.audio(Buffer.alloc(2));
      samples++;
      clock.advance(10_000);
    }
    const closed = await long.outbox.next((e) => e.type === 'closed', 30_000);
    expect(long.outbox.events.filter((e) => e.type === 'error')).toEqual([
      { type: 'error', code: 'max_duration', message: 'Sessions last at most 60 minutes; reconnect to continue.' },
    ]);
    expect(samples).toBe(MAX_SESSION_MS / 10_000);
    expect(closed).toMatchObject({ reason: 'max_duration', audioSeconds: millisOf(samples) / 1000, costUsd: usd(audioCost(millisOf(samples))) });
    expect(long.outbox.closedWith).toEqual({ code: 1000, reason: 'max_duration' });
    await expectDebited(h, long.requestId, audioCost(millisOf(samples)));
  }, 60_000);
});
