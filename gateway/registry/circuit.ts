// A circuit per upstream (docs/failover.md, "Circuits"): the calls of this process decide whether
// an upstream gets new work, beside the health checks. It opens after `failures` failures in a
// row, when most of the recent calls failed, or at once when a stream failed on it (failover.ts);
// stays open for `openMs` on the injected clock; then lets one trial call through (half-open):
// its success closes the circuit, its failure opens it again. A good health check closes it too.
import type { Clock } from '../../server/clock.ts';

export type CircuitState = 'closed' | 'open' | 'half_open';

export interface CircuitSettings {
  /** How long an open circuit keeps its upstream out of new work. */
  openMs: number;
  /** Failures in a row that open it. */
  failures: number;
}

/** The recent calls an error rate is judged over, and the share of failures that opens the circuit. */
const WINDOW = 20;
const MIN_CALLS_FOR_RATE = 10;
const FAILURE_RATE = 0.5;

interface Circuit {
  state: CircuitState;
  openedAt: number;
  inARow: number;
  /** The last WINDOW outcomes, true for a success (a ring: `next` is where the next one goes). */
  recent: boolean[];
  next: number;
  /** Half-open: when the trial call was let through (null: none yet). */
  trialAt: number | null;
}

/** Told when an upstream's circuit opens or closes (the metric). */
export type CircuitObserver = (upstreamId: string, open: boolean) => void;

export class Circuits {
  private readonly circuits = new Map<string, Circuit>();

  constructor(
    private readonly clock: Clock,
    private readonly settings: CircuitSettings,
    private readonly observe: CircuitObserver = () => {},
  ) {}

  private get(id: string): Circuit {
    let c = this.circuits.get(id);
    if (!c) {
      c = { state: 'closed', openedAt: 0, inARow: 0, recent: [], next: 0, trialAt: null };
      this.circuits.set(id, c);
    }
    return c;
  }

  /** The state as it stands now: an open circuit whose time is up is half-open. */
  stateOf(id: string): CircuitState {
    const c = this.circuits.get(id);
    if (!c || c.state === 'closed') return 'closed';
    if (c.state === 'open' && this.clock.now() - c.openedAt >= this.settings.openMs) return 'half_open';
    return c.state;
  }

  /** Whether new work may go to the upstream; a half-open circuit admits one trial call (again once a lost trial's time is up). */
  admits(id: string): boolean {
    const state = this.stateOf(id);
    if (state === 'closed') return true;
    if (state === 'open') return false;
    const c = this.get(id);
    const now = this.clock.now();
    if (c.trialAt !== null && now - c.trialAt < this.settings.openMs) return false;
    c.state = 'half_open';
    c.trialAt = now;
    return true;
  }

  /** Whether the upstream may be offered at all (the trial not yet taken counts): for ordering and /ready. */
  isOpen(id: string): boolean {
    return this.stateOf(id) === 'open';
  }

  success(id: string): void {
    const c = this.get(id);
    this.remember(c, true);
    c.inARow = 0;
    // Only the trial decides: a call let through before the circuit opened does not close it.
    if (this.stateOf(id) === 'half_open') this.close(id, c);
  }

  failure(id: string): void {
    const c = this.get(id);
    this.remember(c, false);
    c.inARow += 1;
    if (c.state === 'half_open' || this.stateOf(id) === 'half_open') return this.open(id, c);
    if (c.state === 'open') return;
    const failed = c.recent.filter((ok) => !ok).length;
    if (c.inARow >= this.settings.failures || (c.recent.length >= MIN_CALLS_FOR_RATE && failed / c.recent.length >= FAILURE_RATE)) this.open(id, c);
  }

  /** A stream failed on the upstream: open at once. */
  trip(id: string): void {
    const c = this.get(id);
    this.remember(c, false);
    c.inARow += 1;
    this.open(id, c);
  }

  /** A good health check: the upstream answers again. */
  healthy(id: string): void {
    const c = this.circuits.get(id);
    if (c && c.state !== 'closed') this.close(id, c);
  }

  private remember(c: Circuit, ok: boolean): void {
    c.recent[c.next] = ok;
    c.next = (c.next + 1) % WINDOW;
  }

  private open(id: string, c: Circuit): void {
    const wasClosed = c.state === 'closed';
    c.state = 'open';
    c.openedAt = this.clock.now();
    c.trialAt = null;
    if (wasClosed) this.observe(id, true);
  }

  private close(id: string, c: Circuit): void {
    c.state = 'closed';
    c.inARow = 0;
    c.recent = [];
    c.next = 0;
    c.trialAt = null;
    this.observe(id, false);
  }
}
