import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../server/services/errors.ts';
import { manualClock } from '../../test/support/manual-clock.ts';
import { SessionLife, type SessionEnds } from './session-life.ts';

function recorder() {
  const seen: string[] = [];
  const ends: SessionEnds = {
    idle: () => seen.push('idle'),
    maxDuration: () => seen.push('max'),
    shutdown: (e) => seen.push(`shutdown:${e.code}`),
    revoked: (e) => seen.push(`revoked:${e.code}`),
  };
  return { seen, ends };
}

describe('SessionLife', () => {
  it('ends idle after idleMs without a touch, and a touch starts the wait again', () => {
    const clock = manualClock(0);
    const { seen, ends } = recorder();
    const life = new SessionLife(clock, { idleMs: 1000, maxDurationMs: 60_000 }, {}, ends);
    clock.advance(900);
    life.touch();
    clock.advance(900);
    expect(seen).toEqual([]);
    clock.advance(100);
    expect(seen).toEqual(['idle']);
    life.dispose();
  });

  it('keeps one idle timer however often it is touched, and ends idle idleMs after the last touch', () => {
    const clock = manualClock(0);
    let timersSet = 0;
    const counted = { ...clock, after: (ms: number, fn: () => void) => (timersSet++, clock.after(ms, fn)) };
    const { seen, ends } = recorder();
    const life = new SessionLife(counted, { idleMs: 1000, maxDurationMs: 60_000 }, {}, ends);
    for (let t = 0; t < 150; t++) {
      clock.advance(20);
      life.touch();
    }
    // 150 touches over 3 s: the maximum duration's timer, and the idle timer moved on once a second.
    expect(timersSet).toBe(5);
    expect(clock.pendingTimers).toBe(2);
    clock.advance(999);
    expect(seen).toEqual([]);
    clock.advance(1);
    expect(seen).toEqual(['idle']);
    life.dispose();
  });

  it('ends at the maximum duration however busy the session is', () => {
    const clock = manualClock(0);
    const { seen, ends } = recorder();
    const life = new SessionLife(clock, { idleMs: 1000, maxDurationMs: 5000 }, {}, ends);
    for (let t = 0; t < 6; t++) {
      clock.advance(999);
      life.touch();
    }
    expect(seen).toEqual(['max']);
    life.dispose();
  });

  it('runs no timer once disposed', () => {
    const clock = manualClock(0);
    const { seen, ends } = recorder();
    const life = new SessionLife(clock, { idleMs: 1000, maxDurationMs: 5000 }, {}, ends);
    life.dispose();
    clock.advance(10_000);
    expect(seen).toEqual([]);
    expect(clock.pendingTimers).toBe(0);
  });

  it('passes on the shutdown and revocation reasons, also when aborted before the session started', async () => {
    const clock = manualClock(0);
    const { seen, ends } = recorder();
    const revoked = new AbortController();
    revoked.abort(new ServiceError('api_key_disabled', 'gone'));
    const shutdown = new AbortController();
    const life = new SessionLife(clock, { idleMs: 1000, maxDurationMs: 5000 }, { revoked: revoked.signal, shutdown: shutdown.signal }, ends);
    await Promise.resolve();
    expect(seen).toEqual(['revoked:api_key_disabled']);
    shutdown.abort('not a service error');
    expect(seen).toEqual(['revoked:api_key_disabled', 'shutdown:temporarily_unavailable']);
    life.dispose();
  });
});
