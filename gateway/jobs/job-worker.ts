// Runs queued jobs: claims one at a time per slot (SVC_WORKER_CONCURRENCY), renews its lease
// while it works, and records the outcome. Engines that are offline put the job back in the
// queue with a growing delay until SVC_JOB_OFFLINE_GIVE_UP_SECONDS after it was created, then
// fail it with `model_offline`. Other errors fail the job with their code.
//
// A job queued in this process is looked for at once (notify); the poll finds the others (queued
// by another process, or due again after a retry's delay). While polls find nothing, each waits
// twice as long as the last, up to IDLE_POLL_BACKOFF times SVC_JOB_POLL_MS: an idle gateway
// (and every replica of it) would otherwise query the database twice a second for nothing.
import { hostname } from 'node:os';
import { newId } from '../../server/db/ids.ts';
import { isServiceError } from '../../server/services/errors.ts';
import { claimNextJob, completeJob, failJob, renewJobLease, retryJobLater, type Job } from '../../server/services/jobs/job-queue.ts';
import type { GatewayContext } from '../context.ts';

export type JobHandler = (job: Job, signal: AbortSignal) => Promise<Record<string, unknown>>;

export interface JobWorkerOptions {
  pollMs: number;
  leaseMs: number;
  concurrency: number;
  offlineGiveUpMs: number;
  log: { warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
}

const RETRYABLE = new Set(['model_offline', 'upstream_unavailable']);

/** How far the poll backs off while the queue stays empty, as a multiple of the poll interval. */
export const IDLE_POLL_BACKOFF = 8;

/** The wait before the next poll: the interval after a poll that found work, doubling per empty poll up to the cap. */
export function nextPollDelayMs(pollMs: number, emptyPolls: number): number {
  return pollMs * Math.min(2 ** emptyPolls, IDLE_POLL_BACKOFF);
}

export class JobWorker {
  readonly id = `${hostname()}:${process.pid}:${newId('w').slice(-8)}`;
  private timer: NodeJS.Timeout | undefined;
  private running = 0;
  private stopping = false;
  private readonly inFlight = new Map<string, AbortController>();
  private idle: Promise<void> = Promise.resolve();
  private wake = () => {};
  /** Polls in a row that found nothing to claim (reset by a claim or a notify). */
  private emptyPolls = 0;
  /** A poll is under way; `notified`: told of a job meanwhile (it may have missed it): it looks again at once. */
  private polling = false;
  private notified = false;
  /** The wait before the poll last scheduled (for tests). */
  pollDelayMs = 0;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly handle: JobHandler,
    private readonly options: JobWorkerOptions,
  ) {}

  start(): void {
    this.stopping = false;
    this.schedule(0);
  }

  /** A job was queued in this process: look now rather than at the next poll. */
  notify(): void {
    this.emptyPolls = 0;
    if (this.stopping) return;
    // One poll at a time: two would each claim up to the concurrency.
    if (this.polling) this.notified = true;
    else this.schedule(0);
  }

  private schedule(delayMs: number): void {
    this.pollDelayMs = delayMs;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), delayMs);
    this.timer.unref?.();
  }

  private async tick(): Promise<void> {
    if (this.stopping) return;
    this.polling = true;
    this.notified = false;
    let claimed = false;
    let polled = false;
    try {
      while (!this.stopping && this.running < this.options.concurrency) {
        polled = true;
        const job = await claimNextJob(this.ctx.db.prisma, this.id, this.options.leaseMs);
        if (!job) break;
        claimed = true;
        this.running++;
        void this.run(job).finally(() => {
          this.running--;
          if (this.running === 0) this.wake();
          this.notify();
        });
      }
    } catch (err) {
      this.options.log.warn({ err }, 'job queue poll failed; retrying');
    }
    this.polling = false;
    // Every slot busy: nothing was asked of the queue, and nothing is learnt of it.
    if (claimed || this.notified) this.emptyPolls = 0;
    else if (polled) this.emptyPolls++;
    if (!this.stopping) this.schedule(this.notified ? 0 : nextPollDelayMs(this.options.pollMs, this.emptyPolls));
  }

  private async run(job: Job): Promise<void> {
    const { prisma } = this.ctx.db;
    const abort = new AbortController();
    this.inFlight.set(job.id, abort);
    const renew = setInterval(
      () => {
        renewJobLease(prisma, job.id, this.id, this.options.leaseMs)
          .then((mine) => mine || abort.abort(new Error('lease lost')))
          .catch(() => {});
      },
      Math.max(50, this.options.leaseMs / 3),
    );
    try {
      const result = await this.handle(job, abort.signal);
      await completeJob(prisma, job.id, this.id, result);
    } catch (err) {
      if (this.stopping && abort.signal.aborted) return; // shutting down: the lease lapses and another worker retries
      const code = isServiceError(err) ? err.code : 'internal_error';
      if (!isServiceError(err)) this.options.log.error({ err, jobId: job.id }, 'job failed with an unexpected error');
      const age = Date.now() - job.createdAt.getTime();
      if (RETRYABLE.has(code) && age < this.options.offlineGiveUpMs) {
        const delay = Math.min(60_000, 1_000 * 2 ** Math.min(job.attempts, 6));
        await retryJobLater(prisma, job.id, this.id, delay, code);
      } else {
        await failJob(prisma, job, this.id, RETRYABLE.has(code) ? 'model_offline' : code);
      }
    } finally {
      clearInterval(renew);
      this.inFlight.delete(job.id);
    }
  }

  /** Stops claiming; waits up to `graceMs` for running jobs, then abandons them to their lease. */
  async stop(graceMs = 5_000): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    if (this.running === 0) return;
    this.idle = new Promise<void>((resolve) => (this.wake = resolve));
    const timeout = new Promise<void>((resolve) => setTimeout(resolve, graceMs).unref());
    await Promise.race([this.idle, timeout]);
    for (const abort of this.inFlight.values()) abort.abort(new Error('worker stopping'));
  }
}
