// Admission control of one gateway process: how much may run at once per key, per org and in
// the process, decided before any engine work, and the revocation watch that ends what a
// revoked key still has running (or an expired one, at its expiry). Caps are per process (each
// replica enforces its own).
import { systemClock, type Clock, type Timer } from '../../server/clock.ts';
import { ServiceError } from '../../server/services/errors.ts';
import { keyExpiredError } from '../../server/services/keys/key-budget.ts';
import type { LimitsConfig } from '../../server/config/env.ts';
import type { RequestAuth } from './gateway-core.ts';

/** Metered HTTP requests in flight per key; open streaming sessions per key, org and process. */
export type AdmissionCaps = Pick<
  LimitsConfig,
  'requestsPerKey' | 'trialRequestsPerKey' | 'streamsPerKey' | 'trialStreamsPerKey' | 'streamsPerOrg' | 'streamsPerProcess' | 'sttDecodersPerOrg'
>;

/** What one key has running in this process. */
class KeyLoad {
  requests = 0;
  streams = 0;
  /** Work to abort if the key is revoked: engine calls, sessions. */
  readonly running = new Set<AbortController>();
  /** Set while work runs for a key that expires: ends it at the expiry. */
  expiry: Timer | undefined;
  constructor(readonly orgId: string) {}
}

/** One admitted request or session: `release` (idempotent) when it ends, whatever the ending. */
export class Ticket {
  private done = false;

  constructor(
    private readonly admission: Admission,
    private readonly load: KeyLoad,
    private readonly keyId: string,
    private readonly stream: boolean,
  ) {}

  /**
   * Aborts `controller` with 401 api_key_disabled if the key is revoked while this runs, or
   * api_key_expired when it reaches the key's expiry; unbound when the ticket is released.
   */
  bind(controller: AbortController): void {
    if (this.done) return;
    this.load.running.add(controller);
    this.bound ??= [];
    this.bound.push(controller);
  }

  private bound: AbortController[] | undefined;

  readonly release = (): void => {
    if (this.done) return;
    this.done = true;
    if (this.bound) for (const c of this.bound) this.load.running.delete(c);
    this.admission.ended(this.keyId, this.load, this.stream);
  };
}

export function keyRevokedError(): ServiceError {
  return new ServiceError('api_key_disabled', 'This API key has been disabled; the session was ended.');
}

export class Admission {
  private readonly keys = new Map<string, KeyLoad>();
  private readonly orgStreams = new Map<string, number>();
  private readonly orgDecoders = new Map<string, number>();
  private streams = 0;
  private timer: NodeJS.Timeout | undefined;
  private checking = false;

  constructor(
    readonly caps: AdmissionCaps,
    /** Current statuses of these keys (a key absent from the answer was deleted). */
    private readonly keyStatuses: (keyIds: string[]) => Promise<Map<string, 'active' | 'revoked'>>,
    /** How often keys with work running are checked for revocation. */
    private readonly revocationCheckMs = 500,
    private readonly onCheckError: (err: unknown) => void = () => {},
    /** What key expiry is timed by. */
    private readonly clock: Clock = systemClock,
  ) {}

  /** Streaming sessions open in this process (metrics, tests). */
  get openStreams(): number {
    return this.streams;
  }

  /** A metered request starts; 429 past its key's cap of requests in flight. */
  enterRequest(auth: RequestAuth): Ticket {
    const load = this.loadOf(auth);
    const cap = auth.isTrial ? this.caps.trialRequestsPerKey : this.caps.requestsPerKey;
    if (load.requests >= cap) {
      this.dropIfIdle(auth.keyId, load);
      throw tooMany(`This key already has ${cap} requests in flight${auth.isTrial ? ' (a trial key)' : ''}; wait for one to finish.`);
    }
    load.requests++;
    this.watch();
    return new Ticket(this, load, auth.keyId, false);
  }

  /**
   * A streaming session opens: 429 past the key's or the org's cap of open sessions, 503 when
   * this process has as many as it takes.
   */
  openStream(auth: RequestAuth): Ticket {
    const load = this.loadOf(auth);
    const keyCap = auth.isTrial ? this.caps.trialStreamsPerKey : this.caps.streamsPerKey;
    const orgOpen = this.orgStreams.get(auth.orgId) ?? 0;
    let refusal: ServiceError | undefined;
    if (load.streams >= keyCap)
      refusal = tooMany(`This key already has ${keyCap} streaming sessions open${auth.isTrial ? ' (a trial key)' : ''}; close one first.`);
    else if (orgOpen >= this.caps.streamsPerOrg)
      refusal = tooMany(`This organization already has ${this.caps.streamsPerOrg} streaming sessions open on this server; close one first.`);
    else if (this.streams >= this.caps.streamsPerProcess) {
      refusal = new ServiceError('temporarily_unavailable', 'This server has as many streaming sessions as it can take; retry shortly.', null, {
        retryAfterSeconds: 1,
      });
    }
    if (refusal) {
      this.dropIfIdle(auth.keyId, load);
      throw refusal;
    }
    load.streams++;
    this.orgStreams.set(auth.orgId, orgOpen + 1);
    this.streams++;
    this.watch();
    return new Ticket(this, load, auth.keyId, true);
  }

  /**
   * A streaming session's recognizer (engine state that costs real memory): one org may hold
   * only its share of the process's pool (a trial org one), so that it cannot keep the rest out.
   * Past it: 503 temporarily_unavailable (the session closes with 1013). Returns the release.
   */
  takeDecoder(auth: RequestAuth): () => void {
    const orgId = auth.orgId;
    const held = this.orgDecoders.get(orgId) ?? 0;
    if (held >= (auth.isTrial ? 1 : this.caps.sttDecodersPerOrg)) {
      throw new ServiceError(
        'temporarily_unavailable',
        `This organization already holds ${held} speech recognizers on this server, its share; close a session that is not sending audio.`,
        null,
        { retryAfterSeconds: 1 },
      );
    }
    this.orgDecoders.set(orgId, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.orgDecoders.get(orgId) ?? 1) - 1;
      if (left > 0) this.orgDecoders.set(orgId, left);
      else this.orgDecoders.delete(orgId);
    };
  }

  /** Called by Ticket.release. */
  ended(keyId: string, load: KeyLoad, stream: boolean): void {
    if (stream) {
      load.streams--;
      this.streams--;
      const org = (this.orgStreams.get(load.orgId) ?? 1) - 1;
      if (org > 0) this.orgStreams.set(load.orgId, org);
      else this.orgStreams.delete(load.orgId);
    } else load.requests--;
    this.dropIfIdle(keyId, load);
  }

  /** Ends the revocation watch (shutdown). */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Looks for revoked keys among those with work running now (also run by the timer). */
  async checkRevocations(): Promise<void> {
    if (this.checking || this.keys.size === 0) return;
    this.checking = true;
    try {
      const ids = [...this.keys.keys()];
      const statuses = await this.keyStatuses(ids);
      for (const id of ids) {
        if (statuses.get(id) === 'active') continue;
        const load = this.keys.get(id);
        if (!load) continue;
        abortAll(load, keyRevokedError());
      }
    } catch (err) {
      this.onCheckError(err);
    } finally {
      this.checking = false;
    }
  }

  private loadOf(auth: RequestAuth): KeyLoad {
    let load = this.keys.get(auth.keyId);
    if (!load) {
      load = new KeyLoad(auth.orgId);
      this.keys.set(auth.keyId, load);
      // A key that expires while it has work running: that work ends at the expiry, as at a revocation.
      if (auth.expiresAt !== null) this.endAtExpiry(load, auth.expiresAt);
    }
    return load;
  }

  private endAtExpiry(load: KeyLoad, expiresAt: number): void {
    // A timer's delay is at most 2^31 - 1 ms (about 24.8 days): a later expiry is waited for in steps.
    const wait = Math.min(expiresAt - this.clock.now(), MAX_TIMER_MS);
    load.expiry = this.clock.after(wait, () => {
      if (this.clock.now() < expiresAt) this.endAtExpiry(load, expiresAt);
      else abortAll(load, keyExpiredError(expiresAt, true));
    });
  }

  private dropIfIdle(keyId: string, load: KeyLoad): void {
    if (load.requests === 0 && load.streams === 0 && this.keys.get(keyId) === load) {
      this.keys.delete(keyId);
      load.expiry?.cancel();
    }
  }

  /** The revocation watch starts with the first admitted work (a check with nothing running costs nothing). */
  private watch(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.checkRevocations(), this.revocationCheckMs);
    this.timer.unref();
  }
}

const MAX_TIMER_MS = 2 ** 31 - 1;

function abortAll(load: KeyLoad, reason: ServiceError): void {
  for (const c of load.running) c.abort(reason);
  load.running.clear();
}

const tooMany = (message: string) => new ServiceError('rate_limit_exceeded', message, null, { retryAfterSeconds: 1 });
