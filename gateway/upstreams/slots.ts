// A bound on engine state that costs real memory or CPU (local recognizer decoders, TTS engine
// processes): at most `size` in use at once, and at most `maxWaiting` callers waiting for one.
// Past that the caller gets UpstreamError 'busy' (503 temporarily_unavailable) before any engine work starts.
import { UpstreamError } from './contract.ts';

interface Waiter {
  grant: (release: () => void) => void;
  fail: (err: unknown) => void;
}

export class Slots {
  private used = 0;
  private readonly waiters: Waiter[] = [];

  constructor(
    private size: number,
    private readonly maxWaiting: number,
    /** What a slot is, for the refusal's message ("speech recognizers", ...). */
    private readonly what: string,
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
  acquire(options: { wait: boolean; signal?: AbortSignal }): Promise<() => void> {
    if (this.used < this.size) return Promise.resolve(this.take());
    if (!options.wait || this.waiters.length >= this.maxWaiting) return Promise.reject(this.full());
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(signal!.reason);
      };
      const waiter: Waiter = {
        grant: (release) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(release);
        },
        fail: reject,
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  private take(): () => void {
    this.used++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used--;
      this.grantWaiting();
    };
  }

  private grantWaiting(): void {
    while (this.used < this.size && this.waiters.length > 0) this.waiters.shift()!.grant(this.take());
  }

  private full(): UpstreamError {
    return new UpstreamError('busy', `This server is running as many ${this.what} as it can (${this.size}); retry shortly.`, { retryAfterSeconds: 1 });
  }
}
