// What a streaming session's audio costs, and the credit that covers it. Audio is counted in
// samples (exact; milliseconds derive from it) and debited each time an interval's worth more has
// arrived, and at the end: the cumulative cost is rounded up once and each debit is the
// difference, so the debits add up to exactly the cost of all the audio received. Audio is taken
// only as far as reserved credit covers it: the session reserves each next interval (extend)
// before it accepts the audio past what is covered.
//
// Each session debits at its own offset into the interval (`offsetMs`): sessions started together
// would otherwise all debit in the same few milliseconds of every interval, one burst on the event
// loop for all of them (a debit is the costly part: the ledger row, the request log, the metrics).
// The offset moves the first debit earlier, to `offsetMs` of audio; reservations stay at whole
// intervals, so where a session's credit stops its audio does not depend on the offset.
import { perSecondCostMicros } from '../../server/services/credits/pricing.ts';
import type { CreditHold } from '../core/gateway-core.ts';

export interface AudioMeterOptions {
  sampleRate: number;
  picoPerSecond: bigint;
  /** Audio is debited every time this much more has arrived (and at the end); credit is reserved this much at a time. */
  intervalMs: number;
  /** Where in each interval this session debits, 0 <= offsetMs < intervalMs (default 0). */
  offsetMs?: number;
  /** The credit reserved for the session (its first interval reserved before it started). */
  hold: CreditHold;
  /** Debits `micros` for `audioMillis` more audio from the hold; resolves with the balance left. */
  charge(micros: bigint, audioMillis: number): Promise<bigint>;
}

export class AudioMeter {
  private receivedSamples = 0;
  private billedMicros = 0n;
  /** The audio (ms) the last debit counted up to: below zero until the first debit when it comes at an offset. */
  private meteredMs: number;
  /** Audio already in a usage record (its sum over the records is the whole audio billed). */
  private recordedMs = 0;
  private coveredSamples: number;
  private readonly intervalMicros: bigint;
  private readonly intervalSamples: number;

  constructor(private readonly o: AudioMeterOptions) {
    const offsetMs = o.offsetMs ?? 0;
    if (!(offsetMs >= 0 && offsetMs < o.intervalMs)) throw new RangeError(`offsetMs must be in [0, ${o.intervalMs})`);
    this.intervalMicros = this.costOf(o.intervalMs);
    this.intervalSamples = (o.sampleRate * o.intervalMs) / 1000;
    this.coveredSamples = this.intervalMicros === 0n ? Infinity : this.intervalSamples;
    // The first debit is due at `offsetMs` of audio, then every interval after it.
    this.meteredMs = offsetMs > 0 ? offsetMs - o.intervalMs : 0;
  }

  private costOf(millis: number): bigint {
    return perSecondCostMicros(this.o.picoPerSecond, millis);
  }

  get receivedMillis(): number {
    return Math.round((this.receivedSamples * 1000) / this.o.sampleRate);
  }

  /** The cost of all the audio received so far. */
  get costMicros(): bigint {
    return this.costOf(this.receivedMillis);
  }

  /** `samples` more were received (and so are owed for). */
  count(samples: number): void {
    this.receivedSamples += samples;
  }

  /** Whether `samples` more than those received are paid for (reserved). */
  covers(samples: number): boolean {
    return this.receivedSamples + samples <= this.coveredSamples;
  }

  /** Why the last extend was refused: insufficient_quota (with `orgMessage`), or key_budget_exceeded. */
  refusal(orgMessage: string) {
    return this.o.hold.refusal(orgMessage);
  }

  /** Reserves the next interval; false when the credit cannot cover it. */
  async extend(): Promise<boolean> {
    if (!(await this.o.hold.extend(this.intervalMicros))) return false;
    this.coveredSamples += this.intervalSamples;
    return true;
  }

  /** An interval's worth more audio has arrived since the last debit. */
  get debitDue(): boolean {
    return this.receivedMillis - this.meteredMs >= this.o.intervalMs;
  }

  /**
   * Debits the audio received since the last debit once an interval's worth more has arrived
   * (or whatever there is, with `force`). Resolves with the balance left, or null when nothing
   * was debited.
   */
  async debit(force: boolean): Promise<bigint | null> {
    if (!force && !this.debitDue) return null;
    const millis = this.receivedMillis;
    this.meteredMs = millis;
    const owed = this.costOf(millis);
    const delta = owed - this.billedMicros;
    if (delta <= 0n) return null;
    this.billedMicros = owed;
    const audioMillis = millis - this.recordedMs;
    this.recordedMs = millis;
    return this.o.charge(delta, audioMillis);
  }
}
