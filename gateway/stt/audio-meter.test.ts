// A streaming session's metering (AudioMeter) driven frame by frame as SttSession drives it,
// over a real credit hold on the test database: where in the audio its debits and reservations
// fall, with and without an offset into the interval, and that no more than an interval is ever
// reserved ahead of the audio.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { CreditHold } from '../core/gateway-core.ts';
import { AudioMeter } from './audio-meter.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const RATE = 16_000;
const FRAME = 320; // 20 ms
/** 1,000 micro-USD a second: a millisecond of audio costs one micro-USD, exactly. */
const PICO_PER_SECOND = 1_000_000_000n;

interface Moment {
  /** Audio received when it happened (ms). */
  atMs: number;
  micros: bigint;
}

/** `seconds` of audio through a meter, as SttSession takes it: covered first (extended when not), counted, then debited when due. */
async function meterAudio(offsetMs: number | undefined, seconds: number) {
  const org = await createOrg(t.db, { name: 'meter', creditsMicros: 1_000_000n });
  const hold = new CreditHold(t.db.hot, org.id, 0n);
  expect(await hold.extend(1_000n)).toBe(true); // the opening reservation: one interval
  const debits: Moment[] = [];
  const extends_: Moment[] = [];
  let receivedMs = 0;
  const meter = new AudioMeter({
    sampleRate: RATE,
    picoPerSecond: PICO_PER_SECOND,
    intervalMs: 1_000,
    offsetMs,
    hold,
    charge: async (micros) => {
      debits.push({ atMs: receivedMs, micros });
      hold.take(micros);
      return 1n;
    },
  });
  let aheadMaxMs = 0;
  for (let frame = 0; frame < (seconds * RATE) / FRAME; frame++) {
    while (!meter.covers(FRAME)) {
      const before = hold.amountMicros;
      expect(await meter.extend()).toBe(true);
      extends_.push({ atMs: receivedMs, micros: hold.amountMicros - before });
    }
    meter.count(FRAME);
    receivedMs += 20;
    await meter.debit(false);
    // Reserved past the audio received (a micro-USD is a millisecond here): never more than an interval.
    const debitedMs = Number(debits.reduce((sum, d) => sum + d.micros, 0n));
    aheadMaxMs = Math.max(aheadMaxMs, Number(hold.amountMicros) - (receivedMs - debitedMs));
  }
  await meter.debit(true);
  hold.release();
  return { debits, extends: extends_, aheadMaxMs, billed: debits.reduce((s, d) => s + d.micros, 0n) };
}

describe('AudioMeter', () => {
  it('without an offset: a debit and a reservation at every whole second of audio', async () => {
    const m = await meterAudio(undefined, 3.5);
    expect(m.debits.map((d) => d.atMs)).toEqual([1_000, 2_000, 3_000, 3_500]);
    expect(m.extends).toEqual([
      { atMs: 1_000, micros: 1_000n },
      { atMs: 2_000, micros: 1_000n },
      { atMs: 3_000, micros: 1_000n },
    ]);
    expect(m.billed).toBe(3_500n);
    expect(m.aheadMaxMs).toBeLessThanOrEqual(1_000);
  });

  it('with an offset: the first debit at the offset, then every second from it; reservations still at whole seconds', async () => {
    const m = await meterAudio(300, 3.5);
    expect(m.debits.map((d) => d.atMs)).toEqual([300, 1_300, 2_300, 3_300, 3_500]);
    expect(m.debits.map((d) => d.micros)).toEqual([300n, 1_000n, 1_000n, 1_000n, 200n]);
    // Reservations do not move with the offset: where a session's credit stops its audio is the same.
    expect(m.extends).toEqual((await meterAudio(undefined, 3.5)).extends);
    expect(m.billed).toBe(3_500n);
    expect(m.aheadMaxMs).toBeLessThanOrEqual(1_000);
  });

  it('refuses an offset outside the interval', () => {
    const hold = new CreditHold(t.db.hot, 'org_none', 0n);
    const options = { sampleRate: RATE, picoPerSecond: PICO_PER_SECOND, intervalMs: 1_000, hold, charge: async () => 0n };
    expect(() => new AudioMeter({ ...options, offsetMs: 1_000 })).toThrow(RangeError);
    expect(() => new AudioMeter({ ...options, offsetMs: -1 })).toThrow(RangeError);
  });
});
