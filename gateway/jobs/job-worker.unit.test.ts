// The job worker's poll while the queue is empty: each empty poll doubles the wait, up to a cap.
import { expect, it } from 'vitest';
import { IDLE_POLL_BACKOFF, nextPollDelayMs } from './job-worker.ts';

it('waits the poll interval after a poll that found work, twice as long after each empty one, up to the cap', () => {
  expect([0, 1, 2, 3, 4, 10, 2000].map((empty) => nextPollDelayMs(500, empty))).toEqual([500, 1000, 2000, 4000, 4000, 4000, 4000]);
  expect(IDLE_POLL_BACKOFF).toBe(8);
});
