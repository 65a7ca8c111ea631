// Hedging in the engine's side of a streaming-transcription session (engine-stream.ts): two fake
// engine streams opened at once, the test deciding when each opens and what each says. Which one
// opens first is the one the session writes to; the other is sent the audio (and the finalizes)
// so far when it opens, then what the first is sent; the first message of either decides, the
// other is closed. The WebSocket engines' side of it: stt-failover.test.ts.
import { describe, expect, it } from 'vitest';
import { manualClock } from '../../test/support/manual-clock.ts';
import type { UpstreamEntry } from '../registry/model-registry.ts';
import { UpstreamError, type TranscriptionEvent, type TranscriptionStream } from '../upstreams/contract.ts';
import { EngineStream, HEDGE_MAX_SECONDS, type EngineSwitch, type HedgeOutcome, type OpenedStream } from './engine-stream.ts';

const RATE = 16_000;

/** An engine's stream: counts what it is sent; says what the test makes it say, or fails. */
class FakeStream implements TranscriptionStream {
  samples = 0;
  finalizes = 0;
  closed = false;
  readonly pendingSamples = 0;
  private readonly queue: TranscriptionEvent[] = [];
  private failure: Error | null = null;
  private wake: (() => void) | null = null;
  private readonly watchers: { samples: number; resolve: () => void }[] = [];
  readonly events: AsyncIterable<TranscriptionEvent> = { [Symbol.asyncIterator]: () => this.iterate() };

  write(samples: Int16Array): void {
    this.samples += samples.length;
    for (const w of this.watchers.filter((w) => this.samples >= w.samples)) w.resolve();
  }

  finalize(): void {
    this.finalizes++;
  }

  close(): void {
    this.closed = true;
    this.poke();
  }

  say(event: TranscriptionEvent): void {
    this.queue.push(event);
    this.poke();
  }

  fail(error: Error): void {
    this.failure = error;
    this.poke();
  }

  /** Resolves once `samples` have been written to it. */
  received(samples: number): Promise<void> {
    return this.samples >= samples ? Promise.resolve() : new Promise((resolve) => this.watchers.push({ samples, resolve }));
  }

  private poke(): void {
    this.wake?.();
    this.wake = null;
  }

  private async *iterate(): AsyncGenerator<TranscriptionEvent> {
    for (;;) {
      while (this.queue.length) yield this.queue.shift()!;
      if (this.failure) throw this.failure;
      if (this.closed) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}

const upstream = (id: string) =>
  ({ id, modelId: 'm', url: `http://${id}.test`, protocol: 'fake', upstreamModel: 'm', settings: {}, weight: 1, apiKeyEnv: null }) as UpstreamEntry;
const A = upstream('a');
const B = upstream('b');

/** A session's engine side with both engines' openings in the test's hands, and what it reports. */
function hedged() {
  const streams = { a: new FakeStream(), b: new FakeStream() };
  const openers: Record<string, { resolve: (o: OpenedStream) => void; reject: (e: unknown) => void }> = {};
  const reports = { events: [] as TranscriptionEvent[], switches: [] as EngineSwitch[], failed: [] as unknown[] };
  let decided!: (h: HedgeOutcome) => void;
  const hedge = new Promise<HedgeOutcome>((resolve) => (decided = resolve));
  const engine = new EngineStream(
    RATE,
    {
      open: (_failed, only) => new Promise<OpenedStream>((resolve, reject) => (openers[only ?? 'next'] = { resolve, reject })),
      canSwitch: () => false,
      clock: manualClock(0),
      stallMs: 5_000,
      maxPendingSeconds: 30,
      hedge: () => [A, B],
    },
    {
      event: (e) => reports.events.push(e),
      failed: (e) => reports.failed.push(e),
      switching: (s) => reports.switches.push(s),
      hedged: (h) => decided(h),
    },
  );
  const opened = (id: 'a' | 'b') => openers[id]!.resolve({ stream: streams[id], engineRate: RATE, engineTurns: true, upstream: id === 'a' ? A : B });
  return { engine, streams, opened, openers, reports, hedge };
}

const seconds = (s: number) => new Float32Array(Math.round(s * RATE));
const words = (text: string) => ({ type: 'transcript' as const, isFinal: false, text, words: [{ word: text, start: 0.2, end: 0.4 }] });

describe('EngineStream hedging', () => {
  it('the second to open is sent the audio and finalizes so far; its first message makes it the engine, the first closed', async () => {
    const { engine, streams, opened, reports, hedge } = hedged();
    const opening = engine.open();
    opened('a');
    expect((await opening).stream).toBe(streams.a);
    engine.write(seconds(1));
    let finalized = false;
    engine.finalize('finalize', () => (finalized = true));
    opened('b');
    await streams.b.received(RATE);
    expect(streams.b.finalizes).toBe(1);
    engine.write(seconds(0.5));
    expect([streams.a.samples, streams.b.samples]).toEqual([1.5 * RATE, 1.5 * RATE]);
    streams.b.say(words('hello'));
    expect(await hedge).toEqual({ won: B, lost: A });
    expect([streams.a.closed, streams.b.closed]).toEqual([true, false]);
    await expect.poll(() => reports.events).toEqual([words('hello')]);
    // From now on the second alone: its audio, its finalizes answered.
    engine.write(seconds(0.5));
    expect([streams.a.samples, streams.b.samples]).toEqual([1.5 * RATE, 2 * RATE]);
    streams.b.say({ type: 'finalized' });
    await expect.poll(() => finalized).toBe(true);
    expect(reports.switches).toEqual([]);
  });

  it('the first to speak is kept: the other, opened later, is closed at once and sent nothing', async () => {
    const { engine, streams, opened, hedge } = hedged();
    const opening = engine.open();
    opened('a');
    await opening;
    engine.write(seconds(1));
    streams.a.say(words('first'));
    expect(await hedge).toEqual({ won: A, lost: B });
    opened('b');
    await expect.poll(() => streams.b.closed).toBe(true);
    expect(streams.b.samples).toBe(0);
    expect(streams.a.closed).toBe(false);
  });

  it('an empty transcript decides nothing', async () => {
    const { engine, streams, opened, hedge } = hedged();
    const opening = engine.open();
    opened('a');
    await opening;
    opened('b');
    engine.write(seconds(0.5));
    await streams.b.received(0.5 * RATE);
    streams.a.say({ type: 'transcript', isFinal: false, text: '', words: [] });
    streams.b.say(words('b speaks'));
    expect(await hedge).toEqual({ won: B, lost: A });
  });

  it('the other failing while racing: the first is kept, the failure reported with the hedge', async () => {
    const { engine, streams, opened, hedge, reports } = hedged();
    const opening = engine.open();
    opened('a');
    await opening;
    opened('b');
    engine.write(seconds(0.2));
    await streams.b.received(0.2 * RATE);
    streams.b.fail(new UpstreamError('broken', 'gone'));
    expect(await hedge).toMatchObject({ won: A, lost: B, failure: { reason: 'closed' } });
    expect(streams.b.closed).toBe(true);
    engine.write(seconds(0.2));
    expect([streams.a.samples, streams.b.samples]).toEqual([0.4 * RATE, 0.2 * RATE]);
    expect(reports.failed).toEqual([]);
  });

  it('the engine failing while the other races: the other, which heard everything, takes over at once (a failover from the start of its audio)', async () => {
    const { engine, streams, opened, hedge, reports } = hedged();
    const opening = engine.open();
    opened('a');
    await opening;
    engine.write(seconds(0.3));
    opened('b');
    await streams.b.received(0.3 * RATE);
    streams.a.fail(new UpstreamError('broken', 'gone'));
    expect(await hedge).toEqual({ won: B, lost: A });
    expect(reports.switches).toEqual([expect.objectContaining({ from: A, reason: 'closed', atSeconds: 0 })]);
    expect(reports.failed).toEqual([]);
    streams.b.say(words('carried on'));
    await expect.poll(() => reports.events).toEqual([words('carried on')]);
  });

  it(`a word from neither: after ${HEDGE_MAX_SECONDS} s of audio the first opened is kept, the other closed having been sent no more`, async () => {
    const { engine, streams, opened, hedge } = hedged();
    const opening = engine.open();
    opened('a');
    await opening;
    opened('b');
    engine.write(seconds(0.1));
    await streams.b.received(0.1 * RATE);
    for (let s = 0.1; s < HEDGE_MAX_SECONDS + 1; s += 0.1) engine.write(seconds(0.1));
    expect(await hedge).toEqual({ won: A, lost: B });
    expect(streams.b.closed).toBe(true);
    expect(streams.b.samples).toBeLessThanOrEqual(HEDGE_MAX_SECONDS * RATE);
    expect(streams.a.samples).toBeGreaterThan(HEDGE_MAX_SECONDS * RATE);
  });

  it('neither opens: the first one asked fails the open, as without hedging', async () => {
    const { engine, openers } = hedged();
    const opening = engine.open();
    openers.b!.reject(new UpstreamError('connect', 'b refused'));
    openers.a!.reject(new UpstreamError('connect', 'a refused'));
    await expect(opening).rejects.toThrow('a refused');
  });
});

/** A stream over a batch engine: it is told who speaks, and answers a finalize once its segment is transcribed. */
class BatchStream extends FakeStream {
  speaking(): void {}
}

/**
 * A session's engine side on engine `a`, the next upstream `b` opened when the test says, on a
 * clock the test moves: a finalize's takeover (engine-stream.ts) after `hedgeMs` at least.
 */
function takingOver(first: FakeStream = new FakeStream()) {
  const clock = manualClock(0);
  const streams = { a: first, b: new FakeStream() };
  const opens: (readonly string[])[] = [];
  let next: { resolve: (o: OpenedStream) => void; reject: (e: unknown) => void } | undefined;
  const reports = { events: [] as TranscriptionEvent[], switches: [] as EngineSwitch[], failed: [] as unknown[], takeoverFailed: [] as EngineSwitch[] };
  const engine = new EngineStream(
    RATE,
    {
      open: (failed) => {
        opens.push(failed);
        if (failed.length === 0) return Promise.resolve({ stream: streams.a, engineRate: RATE, engineTurns: true, upstream: A });
        return new Promise<OpenedStream>((resolve, reject) => (next = { resolve, reject }));
      },
      canSwitch: (failed) => ['a', 'b'].some((id) => !failed.includes(id)),
      clock,
      stallMs: 5_000,
      finalizeHedgeMs: 200,
      maxPendingSeconds: 30,
    },
    {
      event: (e) => reports.events.push(e),
      failed: (e) => reports.failed.push(e),
      switching: (s) => reports.switches.push(s),
      takeoverFailed: (s) => reports.takeoverFailed.push(s),
    },
  );
  const openNext = () => next!.resolve({ stream: streams.b, engineRate: RATE, engineTurns: true, upstream: B });
  return { engine, clock, streams, opens, openNext, reports };
}

const final = (text: string, start: number, end: number) => ({ type: 'transcript' as const, isFinal: true, text, words: [{ word: text, start, end }] });
const FINALIZED = { type: 'finalized' } as const;

describe('EngineStream: a finalize taken over', () => {
  it('unanswered at the hedge delay: the next upstream hears the audio since the last final and the finalize; it answers first and carries on, the engine failed over; what the engine said meanwhile is never heard', async () => {
    const { engine, clock, streams, opens, openNext, reports } = takingOver();
    await engine.open();
    engine.write(seconds(1));
    streams.a.say(final('one', 0.25, 0.5));
    await expect.poll(() => reports.events).toEqual([final('one', 0.25, 0.5)]);
    engine.write(seconds(1));
    const done: string[] = [];
    engine.finalize('finalize', () => done.push('finalized'));
    clock.advance(199);
    expect(opens).toEqual([[]]);
    clock.advance(1);
    expect(opens).toEqual([[], ['a']]);
    openNext();
    // The audio after the last final's last word (0.5 s), then the finalize.
    await streams.b.received(1.5 * RATE);
    expect([streams.b.samples, streams.b.finalizes]).toEqual([1.5 * RATE, 1]);
    // The engine speaks after all, but answers no finalize: held, then dropped.
    streams.a.say(final('late', 1.25, 1.5));
    streams.b.say(final('two', 0.25, 0.75));
    streams.b.say(FINALIZED);
    await expect.poll(() => done).toEqual(['finalized']);
    expect(reports.switches).toEqual([{ from: A, reason: 'finalize_unanswered', error: expect.any(UpstreamError), atSeconds: 0.5 }]);
    // Its words on the session's clock: moved by where its audio began.
    expect(reports.events).toEqual([final('one', 0.25, 0.5), final('two', 0.75, 1.25)]);
    expect([streams.a.closed, streams.b.closed]).toEqual([true, false]);
    engine.write(seconds(0.5));
    expect([streams.a.samples, streams.b.samples]).toEqual([2 * RATE, 2 * RATE]);
    expect([reports.failed, reports.takeoverFailed]).toEqual([[], []]);
  });

  it('answered within the hedge delay: nothing else opened; the delay grows to twice the slowest answer seen', async () => {
    const { engine, clock, streams, opens, reports } = takingOver();
    await engine.open();
    const done: number[] = [];
    const answerAfter = async (ms: number) => {
      engine.write(seconds(0.5));
      engine.finalize('finalize', () => done.push(ms));
      clock.advance(ms);
      streams.a.say(FINALIZED);
      await expect.poll(() => done.at(-1)).toBe(ms);
    };
    await answerAfter(150);
    // 250 ms: past the floor (200), within twice the slowest answer (300).
    await answerAfter(250);
    expect(opens).toEqual([[]]);
    // Now twice 250 ms.
    engine.write(seconds(0.5));
    engine.finalize('finalize', () => {});
    clock.advance(499);
    expect(opens).toEqual([[]]);
    clock.advance(1);
    expect(opens).toEqual([[], ['a']]);
    expect(reports.switches).toEqual([]);
  });

  it.each([
    { answer: 'a final with words', words: true, delay: 100 },
    { answer: 'no words (as an adapter settles a finalize it did not send)', words: false, delay: 200 },
  ])('a first finalize answered in 40 ms with $answer: the next is taken over after $delay ms', async ({ words, delay }) => {
    const { engine, clock, streams, opens } = takingOver();
    await engine.open();
    engine.write(seconds(1));
    let answered = 0;
    engine.finalize('turn', () => answered++);
    clock.advance(40);
    if (words) streams.a.say(final('one', 0.25, 0.75));
    streams.a.say(FINALIZED);
    await expect.poll(() => answered).toBe(1);
    // Twice 40 ms is less than either floor: the floor decides, halved once the engine answered with words.
    engine.write(seconds(1));
    engine.finalize('turn', () => answered++);
    clock.advance(delay - 1);
    expect(opens).toEqual([[]]);
    clock.advance(1);
    expect(opens).toEqual([[], ['a']]);
  });

  it('the engine answers after the next upstream began: the engine is kept and nothing switched; the other is closed, what it said never heard', async () => {
    const { engine, clock, streams, openNext, reports } = takingOver();
    await engine.open();
    engine.write(seconds(1));
    let finalized = false;
    engine.finalize('finalize', () => (finalized = true));
    clock.advance(200);
    openNext();
    await streams.b.received(RATE);
    streams.b.say(final('other', 0.25, 0.5));
    streams.a.say(final('mine', 0.25, 0.5));
    streams.a.say(FINALIZED);
    await expect.poll(() => finalized).toBe(true);
    expect(reports.events).toEqual([final('mine', 0.25, 0.5)]);
    expect([streams.a.closed, streams.b.closed]).toEqual([false, true]);
    expect([reports.switches, reports.takeoverFailed]).toEqual([[], []]);
    engine.write(seconds(0.5));
    expect([streams.a.samples, streams.b.samples]).toEqual([1.5 * RATE, RATE]);
  });

  it('the engine answers while the next upstream still opens: that one is closed when it opens, sent nothing', async () => {
    const { engine, clock, streams, openNext, reports } = takingOver();
    await engine.open();
    engine.write(seconds(1));
    let finalized = false;
    engine.finalize('finalize', () => (finalized = true));
    clock.advance(200);
    streams.a.say(FINALIZED);
    await expect.poll(() => finalized).toBe(true);
    openNext();
    await expect.poll(() => streams.b.closed).toBe(true);
    expect([streams.b.samples, streams.b.finalizes]).toEqual([0, 0]);
    expect(reports.switches).toEqual([]);
  });

  it('the stall allowance runs out while the next upstream opens: the failover takes that one (nothing else opened)', async () => {
    const { engine, clock, streams, opens, openNext, reports } = takingOver();
    await engine.open();
    engine.write(seconds(1));
    // Heard: the engine is not silent while audio flows (only the finalize is left unanswered).
    streams.a.say(words('hi'));
    await expect.poll(() => reports.events).toHaveLength(1);
    let finalized = false;
    engine.finalize('finalize', () => (finalized = true));
    clock.advance(200);
    clock.advance(4_800);
    expect(reports.switches).toEqual([expect.objectContaining({ from: A, reason: 'finalize_unanswered', atSeconds: 0 })]);
    expect(streams.a.closed).toBe(true);
    openNext();
    await streams.b.received(RATE);
    expect(streams.b.finalizes).toBe(1);
    streams.b.say(FINALIZED);
    await expect.poll(() => finalized).toBe(true);
    expect(opens).toEqual([[], ['a']]);
  });

  it('the next upstream fails before it answers: the engine goes on, the failure reported as the takeover’s', async () => {
    const { engine, clock, streams, openNext, reports } = takingOver();
    await engine.open();
    engine.write(seconds(1));
    let finalized = false;
    engine.finalize('finalize', () => (finalized = true));
    clock.advance(200);
    openNext();
    await streams.b.received(RATE);
    streams.b.fail(new UpstreamError('broken', 'gone'));
    await expect.poll(() => reports.takeoverFailed).toEqual([expect.objectContaining({ from: B, reason: 'closed' })]);
    expect([streams.a.closed, streams.b.closed]).toEqual([false, true]);
    streams.a.say(FINALIZED);
    await expect.poll(() => finalized).toBe(true);
    expect([reports.switches, reports.failed]).toEqual([[], []]);
  });

  it('a stream over a batch engine (its answer takes as long as its segment): not taken over before the stall allowance', async () => {
    const { engine, clock, opens, reports } = takingOver(new BatchStream());
    await engine.open();
    engine.write(seconds(1));
    engine.finalize('finalize', () => {});
    clock.advance(4_999);
    expect(opens).toEqual([[]]);
    clock.advance(1);
    expect(reports.switches).toEqual([expect.objectContaining({ reason: 'finalize_unanswered' })]);
  });
});
