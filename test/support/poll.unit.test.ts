// The poll helper: it returns what the check found, stops at a check that throws, and fails
// after its time naming what it waited for.
import { afterEach, expect, it, vi } from 'vitest';
import { until } from './poll.ts';

afterEach(() => {
  vi.useRealTimers();
});

it('returns the first value that is not undefined, null or false', async () => {
  const answers = [undefined, null, false, 0, 'later'];
  let calls = 0;
  expect(await until('a value', () => answers[calls++], { intervalMs: 0 })).toBe(0);
  expect(calls).toBe(4);
});

it('waits for `between` instead of a pause when given', async () => {
  let ticks = 0;
  expect(await until('three ticks', () => ticks >= 3, { between: async () => void ticks++ })).toBe(true);
  expect(ticks).toBe(3);
});

it('a check that throws fails the wait at once', async () => {
  let calls = 0;
  const check = () => {
    calls++;
    throw new Error('the process exited');
  };
  await expect(until('never', check)).rejects.toThrow('the process exited');
  expect(calls).toBe(1);
});

it('fails after timeoutMs, naming what it waited for and what was seen', async () => {
  vi.useFakeTimers();
  const failed = expect(until('the port to close', () => false, { timeoutMs: 1_000, seen: () => 'still listening' })).rejects.toThrow(
    'timed out after 1000 ms waiting for the port to close:\nstill listening',
  );
  await vi.advanceTimersByTimeAsync(1_200);
  await failed;
});
