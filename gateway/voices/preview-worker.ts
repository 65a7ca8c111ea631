// The preview worker of a gateway (or of `svc worker`): every poll, and at once when told that a
// voice got a profile here, it asks for the previews that voices now need (only when voices or
// profiles changed since it last looked, and every FULL_PASS_MS in any case: profiles expire
// without a write), then makes the due ones, at most `concurrency` at once, each bounded by
// PREVIEW_TIMEOUT_MS. Off the request path: nothing waits for it, and a failure is recorded on the
// preview (server/services/voices/make-voice-preview.ts) and tried again later.
import { hostname } from 'node:os';
import { newId } from '../../server/db/ids.ts';
import { claimVoicePreview, makeVoicePreview } from '../../server/services/voices/make-voice-preview.ts';
import { previewSourcesVersion, reconcileVoicePreviews } from '../../server/services/voices/reconcile-voice-previews.ts';
import type { VoiceEngines } from '../../server/services/voices/voice-deps.ts';
import type { Prisma } from '../../server/db/database.ts';

/** A preview is a sentence: an engine that takes longer than this is failing. */
export const PREVIEW_TIMEOUT_MS = 60_000;
/** A preview's lease outlives its timeout: a worker that died leaves it to another after this. */
const LEASE_MS = PREVIEW_TIMEOUT_MS + 30_000;
const FULL_PASS_MS = 10 * 60_000;

export interface PreviewWorkerOptions {
  prisma: Prisma;
  dataDir: string;
  engines: Pick<VoiceEngines, 'speak'>;
  concurrency: number;
  pollMs: number;
  log: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
}

export class PreviewWorker {
  readonly id = `${hostname()}:${process.pid}:${newId('pw').slice(-8)}`;
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;
  private busy = false;
  private again = false;
  private lastVersion: string | null = null;
  private lastFullPass = 0;
  private readonly making = new Map<string, { abort: AbortController; done: Promise<void> }>();

  constructor(private readonly options: PreviewWorkerOptions) {}

  start(): void {
    this.stopping = false;
    this.schedule(0);
  }

  /** A voice got a ready profile in this process: look now rather than at the next poll. */
  notify(): void {
    if (!this.stopping) this.schedule(0);
  }

  /** Previews being made by this worker now. */
  get running(): number {
    return this.making.size;
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), delayMs);
    this.timer.unref?.();
  }

  private async tick(): Promise<void> {
    if (this.stopping) return;
    // One pass at a time; a call meanwhile runs another right after.
    if (this.busy) {
      this.again = true;
      return;
    }
    this.busy = true;
    this.again = false;
    const { prisma, dataDir } = this.options;
    try {
      const version = await previewSourcesVersion(prisma);
      const now = Date.now();
      if (version !== this.lastVersion || now - this.lastFullPass >= FULL_PASS_MS) {
        const outcome = await reconcileVoicePreviews({ prisma, dataDir }, new Date(now));
        // The version read before the pass: a change made during it is looked at next time.
        this.lastVersion = version;
        this.lastFullPass = now;
        if (outcome.queued + outcome.dropped > 0) this.options.log.info(outcome, 'voice previews asked for and dropped');
      }
      while (!this.stopping && this.making.size < this.options.concurrency) {
        const preview = await claimVoicePreview(prisma, this.id, LEASE_MS);
        if (!preview) break;
        const abort = new AbortController();
        const signal = AbortSignal.any([abort.signal, AbortSignal.timeout(PREVIEW_TIMEOUT_MS)]);
        const done = makeVoicePreview({ prisma, dataDir, engines: this.options.engines }, preview, signal)
          .then((result) => {
            if (result === 'failed')
              this.options.log.warn({ voiceId: preview.voiceId, modelId: preview.modelId }, 'voice preview failed; it is tried again later');
          })
          .catch((err: unknown) =>
            this.options.log.warn({ err, voiceId: preview.voiceId }, 'voice preview could not be recorded; its lease lapses and it is tried again'),
          )
          .finally(() => {
            this.making.delete(preview.id);
            this.notify();
          });
        this.making.set(preview.id, { abort, done });
      }
    } catch (err) {
      this.options.log.warn({ err }, 'voice preview pass failed; retrying');
    } finally {
      this.busy = false;
    }
    if (!this.stopping) this.schedule(this.again ? 0 : this.options.pollMs);
  }

  /** Stops: previews being made are cut short and recorded as failed (tried again later, by any worker). */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    const running = [...this.making.values()];
    for (const { abort } of running) abort.abort(new Error('preview worker stopping'));
    await Promise.all(running.map((r) => r.done));
  }
}
