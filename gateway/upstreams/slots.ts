// A bound on engine state that costs real memory or CPU (local recognizer decoders, TTS engine
// processes): at most `size` in use at once, and at most `maxWaiting` callers waiting for one.
// Past that the caller gets UpstreamError 'busy' (503 temporarily_unavailable) before any engine work starts.
//
// Callers may name a tenant (an org). With a `tenantShare` below 1, one tenant may keep at most
// that share of the waiting line, and freed slots go to the waiting tenants in turn (the one
// given a slot longest ago first, in line order within a tenant). One tenant alone still uses
// every slot; another that comes finds a place in the line and gets every other freed slot,
// however busy the first keeps the engine.
import { UpstreamError } from './contract.ts';

interface Waiter {
  /** Callers that name none are one tenant between them (''). */
  tenant: string;
  grant: (release: () => void) => void;
  fail: (err: unknown) => void;
}

export class Slots {
  private used = 0;
  private readonly waiters: Waiter[] = [];
  private readonly usedBy = new Map<string, number>();
  private readonly waitingBy = new Map<string, number>();
  /** When each tenant running or waiting was last given a slot (a count of grants). */
  private readonly servedAt = new Map<string, number>();
  private grants = 0;

  constructor(
    private size: number,
    private readonly maxWaiting: number,
    /** What a slot is, for the refusal's message ("speech recognizers", ...). */
    private readonly what: string,
    /** The share (0-1] of the waiting line one tenant may keep; below 1, tenants also take turns for freed slots. 1: one line in order. */
    private readonly tenantShare = 1,
  ) {}

  get inUse(): number {
    return this.used;
  }

  /** Changes the bound (start-up configuration); slots in use are not taken back. */
  resize(size: number): void {
    this.size = size;
    this.grantWaiting();
  }

  /**
   * A slot, as its release function (idempotent). `wait: false`: refused at once when none is
   * free. Waiting ends with the signal's reason if it aborts first.
   */
  acquire(options: { wait: boolean; signal?: AbortSignal; tenant?: string }): Promise<() => void> {
    const tenant = options.tenant ?? '';
    if (this.used < this.size) return Promise.resolve(this.take(tenant));
    if (!options.wait || this.waiters.length >= this.maxWaiting) return Promise.reject(this.full());
    if (options.tenant !== undefined && this.tenantShare < 1 && count(this.waitingBy, tenant) >= this.share(this.maxWaiting)) {
      return Promise.reject(this.overShare());
    }
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const leave = () => {
        const i = this.waiters.indexOf(waiter);
        if (i < 0) return false;
        this.waiters.splice(i, 1);
        this.leaveLine(tenant);
        return true;
      };
      const onAbort = () => {
        if (leave()) reject(signal!.reason);
      };
      const waiter: Waiter = {
        tenant,
        grant: (release) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(release);
        },
        fail: reject,
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
      add(this.waitingBy, tenant, 1);
    });
  }

  /** A tenant's share of `n`: at least one. */
  private share(n: number): number {
    return Math.max(1, Math.ceil(n * this.tenantShare));
  }

  private take(tenant: string): () => void {
    this.used++;
    add(this.usedBy, tenant, 1);
    this.servedAt.set(tenant, ++this.grants);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used--;
      add(this.usedBy, tenant, -1);
      this.forgetIfIdle(tenant);
      this.grantWaiting();
    };
  }

  private leaveLine(tenant: string): void {
    add(this.waitingBy, tenant, -1);
    this.forgetIfIdle(tenant);
  }

  /** A tenant with nothing running and nobody waiting is at the front of the turns when it comes back. */
  private forgetIfIdle(tenant: string): void {
    if (!this.usedBy.has(tenant) && !this.waitingBy.has(tenant)) this.servedAt.delete(tenant);
  }

  private grantWaiting(): void {
    while (this.used < this.size && this.waiters.length > 0) {
      const [waiter] = this.waiters.splice(this.tenantShare < 1 ? this.nextInTurn() : 0, 1);
      add(this.waitingBy, waiter!.tenant, -1);
      waiter!.grant(this.take(waiter!.tenant));
    }
  }

  /** The first waiter of the tenant given a slot longest ago (never: first). */
  private nextInTurn(): number {
    let next = 0;
    let nextServed = Infinity;
    for (const [i, w] of this.waiters.entries()) {
      const served = this.servedAt.get(w.tenant) ?? -1;
      if (served < nextServed) [next, nextServed] = [i, served];
    }
    return next;
  }

  private full(): UpstreamError {
    return new UpstreamError('busy', `This server is running as many ${this.what} as it can (${this.size}); retry shortly.`, { retryAfterSeconds: 1 });
  }

  private overShare(): UpstreamError {
    return new UpstreamError(
      'busy',
      `This organization has as many requests waiting for ${this.what} as one organization may (${this.share(this.maxWaiting)}); retry shortly.`,
      { retryAfterSeconds: 1 },
    );
  }
}

const count = (map: Map<string, number>, tenant: string) => map.get(tenant) ?? 0;

function add(map: Map<string, number>, tenant: string, n: number): void {
  const next = count(map, tenant) + n;
  if (next === 0) map.delete(tenant);
  else map.set(tenant, next);
}
