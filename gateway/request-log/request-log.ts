// The request log of one gateway process (docs/logs.md). Rows are made on the request path and
// wait in a bounded buffer; one multi-row insert writes them every `flushMs`, or as soon as
// `batchRows` wait, so no request ever waits for the database for its log. Past `bufferRows`
// waiting rows (the database slow or away) new rows are dropped and counted, never held
// without bound. What a request consumed comes from its debits (observeCore); what only a
// session or the upstream seam knows comes through `annotate`, `attempt` and `turn`.
import type { Registry } from 'prom-client';
import type { Prisma } from '../../server/db/database.ts';
import type { HotStore, UsageRecord } from '../../server/db/hot-store.ts';
import { newTimeOrderedId } from '../../server/db/ids.ts';
import type { RequestLogRow, RequestLogStore, RequestLogTurnRow } from '../../server/db/request-log-store.ts';
import type { RequestLogConfig } from '../../server/config/env.ts';
import { isServiceError } from '../../server/services/errors.ts';
import { verifyApiKey, verifyKeyHash } from '../../server/services/keys/verify-api-key.ts';
import type { GatewayCore } from '../core/gateway-core.ts';
import { RequestLogMetrics } from './request-log-metrics.ts';
import { applyPatch, clip, type FinishedRequest, type LogRef, type RequestLogPatch, type SessionTurn, type UpstreamAttempt } from './request-log-types.ts';

export { CONTENT_MAX_CHARS, type FinishedRequest, type LogRef, type RequestLogPatch, type SessionTurn, type UpstreamAttempt } from './request-log-types.ts';

const USER_AGENT_MAX_CHARS = 256;
/** Rows per insert statement round (a flush writes at most this many; the rest wait for the next). */
const MAX_ROWS_PER_WRITE = 5_000;
const PRUNE_EVERY_MS = 60_000;
const PRUNE_BATCH_ROWS = 1_000;
/** A prune tick deletes at most this many batches, yielding to requests between them. */
const PRUNE_BATCHES_PER_TICK = 20;
/** How often the orgs' content opt-ins and retentions are re-read (a change takes effect within it). */
const SETTINGS_EVERY_MS = 5_000;
/** Key names are re-read this often (a renamed key's next rows carry the new name). */
const KEY_NAMES_TTL_MS = 60_000;
const DAY_MS = 86_400_000;

/**
 * A request's state before its row exists: what its debits, its session or the upstream seam
 * said of it. Once the request is finished its row takes its place (later debits and
 * annotations change the row until it is written): one long-lived object per request, since
 * what outlives V8's young generation is what costs under load (docs/performance.md, "Memory").
 */
interface Pending {
  logId: string;
  /** The flush count when it was made: an entry no row claims is dropped a few flushes later. */
  born: number;
  /** An open session: kept until it closes, however many flushes that takes. */
  open: boolean;
  inputTokens: number;
  outputTokens: number;
  characters: number;
  audioMillis: number;
  costMicros: bigint;
  usageModelId: string | null;
  patch: RequestLogPatch | null;
  attempts: UpstreamAttempt[] | null;
}

type Entry = Pending | RequestLogRow;
const isRow = (e: Entry): e is RequestLogRow => !('born' in e);

export interface RequestLogOptions extends RequestLogConfig {
  /** The time retention is measured from (tests move it). */
  now?: () => number;
}

export class RequestLog {
  /** By org, then request id (no key string made per request). */
  private readonly pending = new Map<string, Map<string, Entry>>();
  /** Finished rows, written at the next flush. */
  private ready: RequestLogRow[] = [];
  /** Finished sessions' rows, held one flush longer: a session's last debit is written just after its socket closes. */
  private holding: RequestLogRow[] = [];
  /**
   * Rows of requests whose client left: the engine is stopped after the response ended, and the
   * debit for what it produced comes after the row was made. Each waits for that debit, or until
   * the time kept with it (a flush interval), before it is written.
   */
  private awaitingDebit = new Map<RequestLogRow, number>();
  private turns: RequestLogTurnRow[] = [];
  private flushes = 0;
  private flushing: Promise<void> | null = null;
  private flushSoon = false;
  private flushTimer: NodeJS.Timeout | undefined;
  private pruneTimer: NodeJS.Timeout | undefined;
  private settingsTimer: NodeJS.Timeout | undefined;
  private pruning: Promise<unknown> | null = null;
  private closed = false;
  private readonly contentOrgs = new Set<string>();
  private readonly retentionDaysByOrg = new Map<string, number>();
  private keyNames = new Map<string, string>();
  private keyNamesAt = 0;
  /** Errors of admissions refused after the key was verified, with whose key it was: those rows are logged too. */
  private readonly refusedKeys = new WeakMap<object, { keyId: string; orgId: string }>();
  private readonly now: () => number;
  private readonly metrics: RequestLogMetrics | null;
  /** Told when a batch cannot be written (the rows stay buffered and are retried), and when one is written. */
  onWriteError: (err: unknown) => void = () => {};
  onWritten: () => void = () => {};

  constructor(
    private readonly store: RequestLogStore,
    private readonly prisma: Prisma,
    private readonly options: RequestLogOptions,
    registry?: Registry,
  ) {
    this.now = options.now ?? Date.now;
    this.metrics = registry ? new RequestLogMetrics(registry, () => this.buffered()) : null;
  }

  /** Rows and turns waiting to be written. */
  buffered(): number {
    return this.ready.length + this.holding.length + this.awaitingDebit.size + this.turns.length;
  }

  /**
   * Reads the orgs' settings, then writes every `flushMs` and prunes every minute. A batch the
   * database refuses is reported once until one is written again.
   */
  async start(log: { warn(obj: object, msg: string): void; info(msg: string): void }): Promise<void> {
    const onError = (err: unknown) => log.warn({ err }, 'request log upkeep failed');
    let failing = false;
    this.onWriteError = (err) => {
      if (!failing)
        log.warn({ err, buffered: this.buffered() }, 'request log rows could not be written; kept and retried (past SVC_LOG_BUFFER_ROWS new rows are dropped)');
      failing = true;
    };
    this.onWritten = () => {
      if (failing) log.info('request log rows are written again');
      failing = false;
    };
    await this.refreshSettings().catch(onError);
    this.flushTimer = setInterval(() => void this.flush().catch(() => {}), this.options.flushMs);
    this.flushTimer.unref();
    this.settingsTimer = setInterval(() => void this.refreshSettings().catch(onError), SETTINGS_EVERY_MS);
    this.settingsTimer.unref();
    this.pruneTimer = setInterval(() => void this.prune().catch(onError), PRUNE_EVERY_MS);
    this.pruneTimer.unref();
  }

  /** Whether the org keeps the text of its requests (as of the last settings read). */
  keepsContent(orgId: string): boolean {
    return this.contentOrgs.has(orgId);
  }

  /** The core, with every debit's usage added to its request's row and refused admissions remembered (the onResponse hook logs them). */
  observeCore(core: GatewayCore, store: HotStore): GatewayCore {
    const wrapped = Object.create(core) as GatewayCore;
    wrapped.charge = (auth, requestId, costMicros, usage, hold, settles) =>
      core.charge(auth, requestId, costMicros, usage, hold, settles).then((remaining) => {
        this.charged(auth.orgId, requestId, usage, costMicros);
        return remaining;
      });
    wrapped.admit = (presentedKey, metered) =>
      core.admit(presentedKey, metered).catch(async (e: unknown) => {
        // A key refused for its rate, its org's credit or the database: the key was valid, so
        // the refusal belongs in its org's log. Looked up again only on this path.
        if (isServiceError(e) && REFUSED_AFTER_KEY.has(e.code)) {
          const key = await (typeof presentedKey === 'object' ? verifyKeyHash(store, presentedKey.keyHash) : verifyApiKey(store, presentedKey)).catch(
            () => null,
          );
          if (key) this.refusedKeys.set(e, { keyId: key.keyId, orgId: key.orgId });
        }
        throw e;
      });
    return wrapped;
  }

  /** The key and org of an admission refused after its key was verified (an error observeCore saw). */
  refusedAuth(error: unknown): { keyId: string; orgId: string } | undefined {
    return typeof error === 'object' && error !== null ? this.refusedKeys.get(error) : undefined;
  }

  /** A debit of the request: its units and cost are added to the request's row. */
  charged(orgId: string, requestId: string, usage: UsageRecord, costMicros: bigint): void {
    const entry = this.entry(orgId, requestId);
    entry.inputTokens += usage.inputTokens ?? 0;
    entry.outputTokens += usage.outputTokens ?? 0;
    entry.characters += usage.characters ?? 0;
    entry.audioMillis += usage.audioMillis ?? 0;
    entry.costMicros += costMicros;
    if (isRow(entry)) entry.modelId ??= usage.modelId;
    else entry.usageModelId ??= usage.modelId;
    if (isRow(entry) && this.awaitingDebit.delete(entry)) {
      this.ready.push(entry);
      this.batchFilled();
    }
  }

  /** A live session has started: its row's id is kept for its turns until it closes (called by the hook on session routes). */
  opened(ref: LogRef): void {
    const entry = this.entry(ref.orgId, ref.requestId);
    if (!isRow(entry)) entry.open = true;
  }

  /** What a route or session knows of its request that the hook does not (timings, failover, the answer's text). */
  annotate(ref: LogRef, patch: RequestLogPatch): void {
    const entry = this.entry(ref.orgId, ref.requestId);
    if (isRow(entry)) applyPatch(entry, patch, this.keepsContent(ref.orgId));
    else entry.patch = { ...entry.patch, ...patch };
  }

  /** An upstream the request tried (in order); the last one that answered `ok` served it. */
  attempt(ref: LogRef, attempt: UpstreamAttempt): void {
    const entry = this.entry(ref.orgId, ref.requestId);
    if (isRow(entry)) {
      const attempts = entry.upstreams ? (JSON.parse(entry.upstreams) as UpstreamAttempt[]) : [];
      attempts.push(attempt);
      entry.upstreams = JSON.stringify(attempts);
      if (attempt.outcome === 'ok') entry.servedBy = attempt.upstreamId;
    } else (entry.attempts ??= []).push(attempt);
  }

  /** One turn of a live session, written with the next batch. */
  turn(ref: LogRef, turn: SessionTurn): void {
    if (this.closed) return;
    if (this.buffered() >= this.options.bufferRows) {
      this.metrics?.dropped('buffer_full');
      return;
    }
    const entry = this.entry(ref.orgId, ref.requestId);
    const content = this.keepsContent(ref.orgId);
    this.turns.push({
      id: newTimeOrderedId('turn'),
      requestLogId: isRow(entry) ? entry.id : entry.logId,
      orgId: ref.orgId,
      turnIndex: turn.turnIndex,
      startMs: turn.startMs,
      speechEndMs: turn.speechEndMs ?? null,
      endOfTurnMs: turn.endOfTurnMs ?? null,
      llmFirstTokenMs: turn.llmFirstTokenMs ?? null,
      ttsFirstAudioMs: turn.ttsFirstAudioMs ?? null,
      firstAudibleMs: turn.firstAudibleMs ?? null,
      bargeInMs: turn.bargeInMs ?? null,
      failoverReason: turn.failoverReason ?? null,
      userText: content ? clip(turn.userText) : null,
      assistantText: content ? clip(turn.assistantText) : null,
      createdAt: this.now(),
    });
    this.batchFilled();
  }

  /** The request is answered (or its session closed): its row joins the next batch. */
  finish(r: FinishedRequest): void {
    const found = this.pending.get(r.orgId)?.get(r.requestId);
    // A row already there is another request that was answered with the same id: it keeps it.
    const entry = found && !isRow(found) ? found : undefined;
    if (this.closed || this.buffered() >= this.options.bufferRows) {
      if (entry) this.forget(r.orgId, r.requestId, entry);
      this.metrics?.dropped('buffer_full');
      return;
    }
    const content = this.keepsContent(r.orgId);
    const row: RequestLogRow = {
      id: entry?.logId ?? newTimeOrderedId('log'),
      orgId: r.orgId,
      requestId: r.requestId,
      apiKeyId: r.apiKeyId,
      apiKeyName: '',
      kind: r.kind,
      method: r.method,
      route: r.route,
      modelId: r.modelId ?? entry?.usageModelId ?? null,
      status: r.status,
      errorCode: r.errorCode,
      upstreams: null,
      servedBy: null,
      failoverReason: null,
      userAgent: r.userAgent === null ? null : r.userAgent.slice(0, USER_AGENT_MAX_CHARS),
      traceId: r.traceId,
      ttfbMs: r.ttfbMs,
      firstAudioMs: null,
      firstAudibleMs: null,
      totalMs: r.totalMs,
      inputTokens: entry?.inputTokens ?? 0,
      outputTokens: entry?.outputTokens ?? 0,
      characters: entry?.characters ?? 0,
      audioMillis: entry?.audioMillis ?? 0,
      costMicros: entry?.costMicros ?? 0n,
      requestContent: content ? clip(r.requestContent) : null,
      responseContent: content ? clip(r.responseContent) : null,
      createdAt: r.startedAt,
    };
    if (entry?.patch) applyPatch(row, entry.patch, content);
    if (entry?.attempts) {
      row.upstreams = JSON.stringify(entry.attempts);
      row.servedBy ??= entry.attempts.findLast((a) => a.outcome === 'ok')?.upstreamId ?? null;
    }
    if (!found || entry) this.place(r.orgId, r.requestId, row);
    if (r.kind === 'session') this.holding.push(row);
    else if (r.errorCode === 'client_gone') this.awaitingDebit.set(row, this.now() + this.options.flushMs);
    else this.ready.push(row);
    this.batchFilled();
  }

  /** Writes what waits (one batch); rows of a failed write stay and are retried at the next flush. */
  flush(): Promise<void> {
    // One at a time: a flush asked for while one runs is the next one.
    this.flushing ??= this.writeBatch().finally(() => (this.flushing = null));
    return this.flushing;
  }

  private async writeBatch(): Promise<void> {
    this.flushSoon = false;
    this.flushes++;
    for (const [row, writeBy] of this.awaitingDebit) {
      if (writeBy > this.now()) continue;
      this.awaitingDebit.delete(row);
      this.ready.push(row);
    }
    const rows = this.ready.length > MAX_ROWS_PER_WRITE ? this.ready.slice(0, MAX_ROWS_PER_WRITE) : this.ready;
    this.ready = rows === this.ready ? [] : this.ready.slice(MAX_ROWS_PER_WRITE);
    // Sessions closed since the last flush are written at the next one.
    this.ready = this.ready.concat(this.holding);
    this.holding = [];
    const turns = this.turns;
    this.turns = [];
    this.sweepOrphans();
    if (rows.length === 0 && turns.length === 0) return;
    try {
      await this.nameKeys(rows);
      await this.store.insert(rows, turns);
    } catch (err) {
      // Back at the front, in order; beyond the buffer's bound the oldest go.
      this.ready = rows.concat(this.ready);
      this.turns = turns.concat(this.turns);
      const excess = this.buffered() - this.options.bufferRows;
      if (excess > 0) {
        const fromTurns = Math.min(excess, this.turns.length);
        this.turns.splice(0, fromTurns);
        for (const row of this.ready.splice(0, excess - fromTurns)) this.forget(row.orgId, row.requestId, row);
        this.metrics?.dropped('write_failed', excess);
      }
      this.metrics?.writeFailed();
      this.onWriteError(err);
      throw err;
    }
    for (const row of rows) this.forget(row.orgId, row.requestId, row);
    this.metrics?.written(rows.length, turns.length);
    this.onWritten();
  }

  /** A full batch is written at once (on the next turn of the event loop), not at the next tick. */
  private batchFilled(): void {
    if (this.flushSoon || this.ready.length + this.turns.length < this.options.batchRows) return;
    this.flushSoon = true;
    setImmediate(() => void this.flush().catch(() => {}));
  }

  private place(orgId: string, requestId: string, entry: Entry): void {
    let byRequest = this.pending.get(orgId);
    if (!byRequest) this.pending.set(orgId, (byRequest = new Map()));
    byRequest.set(requestId, entry);
  }

  private forget(orgId: string, requestId: string, entry: Entry): void {
    const byRequest = this.pending.get(orgId);
    if (byRequest?.get(requestId) === entry) byRequest.delete(requestId);
  }

  /** Entries no row ever claimed (a debit or annotation after the row was written, or for an unknown request) go after a few flushes. */
  private sweepOrphans(): void {
    for (const [orgId, byRequest] of this.pending) {
      for (const [requestId, entry] of byRequest) if (!isRow(entry) && !entry.open && this.flushes - entry.born > 2) byRequest.delete(requestId);
      if (byRequest.size === 0) this.pending.delete(orgId);
    }
  }

  /** The request's entry (its row once it has one), made when there is none. */
  private entry(orgId: string, requestId: string): Entry {
    const found = this.pending.get(orgId)?.get(requestId);
    if (found) return found;
    const entry = emptyPending(newTimeOrderedId('log'), this.flushes);
    this.place(orgId, requestId, entry);
    return entry;
  }

  /** Each row's key name, read once a minute per key (off the request path: here, before the insert). */
  private async nameKeys(rows: readonly RequestLogRow[]): Promise<void> {
    if (this.now() - this.keyNamesAt > KEY_NAMES_TTL_MS) {
      this.keyNames = new Map();
      this.keyNamesAt = this.now();
    }
    const missing = new Set<string>();
    for (const r of rows) if (r.apiKeyId && !this.keyNames.has(r.apiKeyId)) missing.add(r.apiKeyId);
    if (missing.size > 0) {
      const unknown = [...missing];
      const keys = await this.prisma.apiKey.findMany({ where: { id: { in: unknown } }, select: { id: true, name: true } });
      for (const id of unknown) this.keyNames.set(id, '');
      for (const k of keys) this.keyNames.set(k.id, k.name);
    }
    for (const r of rows) if (r.apiKeyId) r.apiKeyName = this.keyNames.get(r.apiKeyId) ?? '';
  }

  /** Re-reads which orgs keep content and which keep their logs for less than the gateway's retention. */
  async refreshSettings(): Promise<void> {
    const orgs = await this.prisma.org.findMany({
      where: { OR: [{ logContent: true }, { logRetentionDays: { not: null } }] },
      select: { id: true, logContent: true, logRetentionDays: true },
    });
    this.contentOrgs.clear();
    this.retentionDaysByOrg.clear();
    for (const o of orgs) {
      if (o.logContent) this.contentOrgs.add(o.id);
      if (o.logRetentionDays !== null && o.logRetentionDays < this.options.retentionDays) this.retentionDaysByOrg.set(o.id, o.logRetentionDays);
    }
  }

  /**
   * Deletes rows past the gateway's retention, past each org's shorter one, and the oldest
   * beyond the size cap: batches of PRUNE_BATCH_ROWS, at most PRUNE_BATCHES_PER_TICK per call,
   * each its own short statement with the event loop free between them. Resolves to the rows deleted.
   */
  prune(): Promise<number> {
    const run = async () => {
      let deleted = 0;
      let batches = 0;
      const step = async (once: () => Promise<number>) => {
        while (batches < PRUNE_BATCHES_PER_TICK) {
          batches++;
          const n = await once();
          deleted += n;
          await new Promise((r) => setImmediate(r));
          if (n < PRUNE_BATCH_ROWS) return;
        }
      };
      const now = this.now();
      await step(() => this.store.pruneOlderThan(new Date(now - this.options.retentionDays * DAY_MS), PRUNE_BATCH_ROWS));
      for (const [orgId, days] of this.retentionDaysByOrg) await step(() => this.store.pruneOlderThan(new Date(now - days * DAY_MS), PRUNE_BATCH_ROWS, orgId));
      await step(() => this.store.pruneOverCap(this.options.maxRows, PRUNE_BATCH_ROWS));
      this.metrics?.pruned(deleted);
      return deleted;
    };
    // One prune at a time (a slow database must not pile them up).
    const running = (this.pruning ??= run().finally(() => (this.pruning = null)));
    return running as Promise<number>;
  }

  /** Stops the timers and writes what is left (sessions' rows included); what cannot be written is counted as dropped. */
  async close(): Promise<void> {
    clearInterval(this.flushTimer);
    clearInterval(this.pruneTimer);
    clearInterval(this.settingsTimer);
    await this.pruning?.catch(() => {});
    this.ready = this.ready.concat(this.holding, [...this.awaitingDebit.keys()]);
    this.holding = [];
    this.awaitingDebit.clear();
    for (let attempt = 0; attempt < 3 && (this.ready.length > 0 || this.turns.length > 0 || this.flushing); attempt++) {
      await this.flushing?.catch(() => {});
      await this.flush().catch(() => {});
    }
    const lost = this.buffered();
    if (lost > 0) this.metrics?.dropped('write_failed', lost);
    this.closed = true;
    this.pending.clear();
    await this.store.close();
  }
}

/** Admission refusals that come after the key was found valid. */
const REFUSED_AFTER_KEY = new Set(['rate_limit_exceeded', 'insufficient_quota', 'key_budget_exceeded', 'temporarily_unavailable']);

const emptyPending = (logId: string, born: number): Pending => ({
  logId,
  born,
  open: false,
  inputTokens: 0,
  outputTokens: 0,
  characters: 0,
  audioMillis: 0,
  costMicros: 0n,
  usageModelId: null,
  patch: null,
  attempts: null,
});
