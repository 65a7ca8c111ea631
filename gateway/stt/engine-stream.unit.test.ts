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
