// Who pays for the spans a live session speaks (span-speaker.ts): one CreditHold shared by the
// session's speakers (a TTS socket's contexts, a realtime answer), extended span by span before
// each engine starts and settled by each span's debit. A span that never started gives its
// share back to `spare`, which the next span claims before the hold is extended again.
import type { ServiceError } from '../../server/services/errors.ts';
import type { UsageRecord } from '../../server/db/hot-store.ts';
import type { GatewayContext } from '../context.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';

export interface SpanCreditOptions {
  ctx: GatewayContext;
  auth: RequestAuth;
  /** Every debit carries it (the upgrade's request id). */
  requestId: string;
  hold: CreditHold;
  /** The error a span gets when its cost cannot be reserved (or the credit is exhausted). */
  refusal: () => ServiceError;
  /** The balance after each debit. */
  onBalance?: (remainingMicros: bigint) => void;
  /** A span's reservation was refused (the balance, less what is held, cannot cover it). */
  onRefused?: () => void;
}

export class SpanCredit {
  private spare = 0n;
  private readonly debits = new Set<Promise<unknown>>();
  private readonly exhaustedListeners = new Set<() => void>();
  private isExhausted = false;

  constructor(private readonly o: SpanCreditOptions) {}

  /** Set by exhaust(): no span is paid for any more. */
  get exhausted(): boolean {
    return this.isExhausted;
  }

  refusal(): ServiceError {
    return this.o.refusal();
  }

  /** Reserves a span's cost: first from credit held already, then by extending the hold; false when it cannot be paid. */
  async reserve(cost: bigint): Promise<boolean> {
    if (this.isExhausted) return false;
    const fromSpare = this.spare < cost ? this.spare : cost;
    this.spare -= fromSpare;
    const more = cost - fromSpare;
    let ok: boolean;
    try {
      ok = more === 0n || (await this.o.hold.extend(more));
    } catch (e) {
      this.spare += fromSpare;
      throw e;
    }
    if (!ok) {
      this.spare += fromSpare;
      this.o.onRefused?.();
    }
    return ok;
  }

  /** A reserved span that was not synthesized: its cost is free for the next one. */
  unreserve(cost: bigint): void {
    this.spare += cost;
  }

  /** Debits a span whose audio started, settling its reservation; resolves with the balance after it. */
  charge(cost: bigint, usage: UsageRecord): Promise<bigint> {
    const { ctx, auth, requestId, hold } = this.o;
    const written = ctx.core.charge(auth, requestId, cost, usage, hold, cost).then((remaining) => {
      this.o.onBalance?.(remaining);
      return remaining;
    });
    this.debits.add(written);
    void written.catch(() => {}).finally(() => this.debits.delete(written));
    return written;
  }

  /** No more spans are paid for; speakers waiting for text end with the refusal, running ones after their span. */
  exhaust(): void {
    if (this.isExhausted) return;
    this.isExhausted = true;
    for (const listener of [...this.exhaustedListeners]) listener();
  }

  /** Runs `listener` when the credit is exhausted; returns its removal. */
  whenExhausted(listener: () => void): () => void {
    this.exhaustedListeners.add(listener);
    return () => this.exhaustedListeners.delete(listener);
  }

  /** Once every debit on its way is written, gives back what no span took (the session is over). */
  async settle(): Promise<void> {
    await Promise.allSettled([...this.debits]);
    this.o.hold.release();
  }
}
