// The revocation watch of phone calls: a revoked phone token ends its calls within a second, as
// a revoked key ends its sessions (gateway/core/admission.ts). One query of the live calls'
// tokens every CHECK_EVERY_MS, only while a call runs, on the context's clock (tests move it).
// The key a token stands for is watched by the admission's own watch (Ticket.bind).
import type { Clock, Timer } from '../../server/clock.ts';
import { ServiceError } from '../../server/services/errors.ts';

const CHECK_EVERY_MS = 500;

export const phoneTokenRevokedError = () => new ServiceError('api_key_disabled', 'This phone token has been revoked; the call was ended.');

export class PhoneTokenWatch {
  private readonly calls = new Map<string, Set<AbortController>>();
  private timer: Timer | null = null;
  private checking = false;

  constructor(
    private readonly clock: Clock,
    /** Current statuses of these tokens (a token absent from the answer was deleted). */
    private readonly statuses: (tokenIds: string[]) => Promise<Map<string, 'active' | 'revoked'>>,
    private readonly onCheckError: (err: unknown) => void = () => {},
  ) {}

  /** A call with this token runs: `call` is aborted (reason: a ServiceError) if the token is revoked. Returns the release (idempotent). */
  add(tokenId: string, call: AbortController): () => void {
    let set = this.calls.get(tokenId);
    if (!set) this.calls.set(tokenId, (set = new Set()));
    set.add(call);
    this.timer ??= this.clock.every(CHECK_EVERY_MS, () => void this.check());
    return () => {
      set.delete(call);
      if (set.size === 0 && this.calls.get(tokenId) === set) this.calls.delete(tokenId);
      if (this.calls.size === 0) this.stop();
    };
  }

  /** Calls running now, per token (metrics, tests). */
  get liveCalls(): number {
    let n = 0;
    for (const set of this.calls.values()) n += set.size;
    return n;
  }

  /** Looks for revoked tokens among those with calls running (also run by the timer); a failed look is retried by the next tick. */
  async check(): Promise<void> {
    if (this.checking || this.calls.size === 0) return;
    this.checking = true;
    try {
      const ids = [...this.calls.keys()];
      const statuses = await this.statuses(ids);
      for (const id of ids) {
        if (statuses.get(id) === 'active') continue;
        for (const call of this.calls.get(id) ?? []) call.abort(phoneTokenRevokedError());
      }
    } catch (err) {
      this.onCheckError(err);
    } finally {
      this.checking = false;
    }
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = null;
  }
}
