import { describe, expect, it } from 'vitest';
import { manualClock } from '../../test/support/manual-clock.ts';
import { Circuits } from './circuit.ts';

function circuits(failures = 3) {
  const clock = manualClock(1_000_000);
  const changes: [string, boolean][] = [];
  const c = new Circuits(clock, { openMs: 30_000, failures }, (id, open) => changes.push([id, open]));
  return { clock, c, changes };
}

describe('per-upstream circuits', () => {
  it('opens after the set number of failures in a row, not before; a success in between starts the count again', () => {
    const { c, changes } = circuits(3);
    c.failure('a');
    c.failure('a');
    c.success('a');
    c.failure('a');
    c.failure('a');
    expect(c.stateOf('a')).toBe('closed');
    expect(c.admits('a')).toBe(true);
    c.failure('a');
    expect(c.stateOf('a')).toBe('open');
    expect(c.admits('a')).toBe(false);
    expect(c.isOpen('a')).toBe(true);
    expect(changes).toEqual([['a', true]]);
    expect(c.stateOf('b')).toBe('closed');
  });

  it('opens when most of the recent calls failed, even with no long run of failures', () => {
    const { c } = circuits(5);
    for (let i = 0; i < 6; i++) {
      c.success('a');
      c.failure('a');
    }
    // 12 calls, 6 failed: half.
    expect(c.stateOf('a')).toBe('open');
  });

  it('a stream failure opens it at once', () => {
    const { c, changes } = circuits(5);
    c.trip('a');
    expect(c.stateOf('a')).toBe('open');
    expect(changes).toEqual([['a', true]]);
  });

  it('stays open for its time on the clock, then lets one trial call through: its success closes the circuit', () => {
    const { c, clock, changes } = circuits();
    c.trip('a');
    clock.advance(29_999);
    expect(c.admits('a')).toBe(false);
    clock.advance(1);
    expect(c.stateOf('a')).toBe('half_open');
    expect(c.isOpen('a')).toBe(false);
    expect(c.admits('a')).toBe(true);
    expect(c.admits('a')).toBe(false); // the trial is out: nobody else
    c.success('a');
    expect(c.stateOf('a')).toBe('closed');
    expect(c.admits('a')).toBe(true);
    expect(changes).toEqual([
      ['a', true],
      ['a', false],
    ]);
  });

  it('a failed trial opens it again for another full period', () => {
    const { c, clock } = circuits();
    c.trip('a');
    clock.advance(30_000);
    expect(c.admits('a')).toBe(true);
    c.failure('a');
    expect(c.stateOf('a')).toBe('open');
    clock.advance(29_999);
    expect(c.admits('a')).toBe(false);
    clock.advance(1);
    expect(c.admits('a')).toBe(true);
  });

  it('a trial that never reports is given up after a period, and another is let through', () => {
    const { c, clock } = circuits();
    c.trip('a');
    clock.advance(30_000);
    expect(c.admits('a')).toBe(true);
    clock.advance(29_999);
    expect(c.admits('a')).toBe(false);
    clock.advance(1);
    expect(c.admits('a')).toBe(true);
  });

  it('a good health check closes an open circuit at once', () => {
    const { c, changes } = circuits();
    c.trip('a');
    c.healthy('a');
    expect(c.stateOf('a')).toBe('closed');
    expect(c.admits('a')).toBe(true);
    c.healthy('b'); // never seen: nothing to tell
    expect(changes).toEqual([
      ['a', true],
      ['a', false],
    ]);
  });

  it('failures of calls begun before it opened do not extend an open circuit', () => {
    const { c, clock } = circuits();
    c.trip('a');
    clock.advance(20_000);
    c.failure('a');
    clock.advance(10_000);
    expect(c.stateOf('a')).toBe('half_open');
  });
});
