// Local speech-to-text: pocketsphinx (Debian's libpocketsphinx3 + pocketsphinx-en-us) through
// koffi, in a small pool of worker threads so decoding never runs on the gateway's event loop.
//
// Pool: SVC_STT_WORKERS threads (default: cores - 1, at least 1; see configureRecognizer), started
// on first use, each handed the configured decoder settings in its workerData. Each holds many
// decoders, one per session (~100 MB each: this pocketsphinx cannot share a loaded model between
// decoders); a new session goes to the thread with the fewest sessions. A thread handles its
// sessions' requests in arrival order, chunk by chunk, so they share its core fairly.
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { OpenResult, WorkerReply, WorkerRequest, WorkerSettings, WorkerStats } from './worker.ts';
import { normalizeWords } from './words.ts';
import { Slots } from '../slots.ts';

export interface RecognizerOptions {
  /** 8000 is upsampled to 16000 in the worker: pocketsphinx's en-us model is 16 kHz only. */
  sampleRate: 16000 | 8000;
  /**
   * Terms to favour: words missing from the dictionary are added with an espeak-ng
   * pronunciation (and as language-model unigrams); at finalize, the N-best hypothesis with the
   * keyterms wins over a slightly better-scoring one without. Partials are not biased.
   */
  keyterms?: string[];
  /** Exact sentences, for tests: the recognizer then only ever hears one of them. */
  grammar?: string[];
  /**
   * When every decoder slot is taken: wait for one (batch transcription), or fail at once with
   * 503 temporarily_unavailable (a live session cannot wait). Default: wait.
   */
  waitForDecoder?: boolean;
  /** Ends the wait for a decoder slot. */
  signal?: AbortSignal;
}
export interface Word {
  word: string;
  start: number;
  end: number;
} // seconds from the start of the audio
export interface Hypothesis {
  text: string;
  words: Word[];
}
export interface Recognizer {
  /** Feed 16-bit mono PCM at options.sampleRate. Resolves with the current partial hypothesis after processing. */
  push(samples: Int16Array): Promise<Hypothesis>;
  /** End of utterance: the final hypothesis with word times; the recognizer can take more audio after (a new utterance whose times continue from the audio already consumed). */
  finalize(): Promise<Hypothesis>;
  close(): void; // frees the decoder in the worker; idempotent; must be called when the client disconnects
}

/** The recognizer's settings: Config.engines.pocketsphinx (gateway/upstreams/contract.ts EngineConfig). */
export interface RecognizerSettings extends WorkerSettings {
  /** Worker threads in the pool (SVC_STT_WORKERS). */
  workers: number;
}

/**
 * From the validated configuration (SVC_STT_WORKERS, SVC_STT_SPARE_DECODERS, SVC_POCKETSPHINX_*,
 * server/config/env.ts), set by the protocol when the gateway creates it. Until then, the same
 * defaults as the configuration's (benches and tests that configure nothing).
 */
let settings: RecognizerSettings = {
  workers: Math.max(1, availableParallelism() - 1),
  spareDecoders: 1,
  modelDir: '/usr/share/pocketsphinx/model/en-us',
  logFile: '/dev/null',
  extraArgs: '',
  keytermBonus: 20000,
};

/**
 * Takes effect for worker threads started afterwards: the process configures it once, at start,
 * before the pool's first thread. Threads already running keep the settings they started with
 * (until shutdownRecognizers ends them).
 */
export function configureRecognizer(next: RecognizerSettings): void {
  if (!Number.isInteger(next.workers) || next.workers < 1) throw new TypeError(`workers must be a positive integer (got ${String(next.workers)})`);
  if (!Number.isInteger(next.spareDecoders) || next.spareDecoders < 0)
    throw new TypeError(`spareDecoders must be a non-negative integer (got ${String(next.spareDecoders)})`);
  settings = { ...next };
}

/** The settings in effect (the protocol's health check uses the model directory). */
export function recognizerSettings(): RecognizerSettings {
  return { ...settings };
}

/**
 * Decoders open at once in this process (SVC_STT_MAX_DECODERS, set at start by limitDecoders):
 * each holds ~100 MB, so this bounds the recognizer's memory, whatever clients do.
 */
const decoderSlots = new Slots(16, 64, 'speech recognizers');

export function limitDecoders(decoders: number): void {
  decoderSlots.resize(decoders);
}

/** Decoders open now (tests, metrics). */
export const openDecoders = () => decoderSlots.inUse;
const MAX_KEYTERMS = 100;
const MAX_KEYTERM_WORDS = 8;
/** Audio per worker request: a longer push is split, so other sessions interleave. */
const MAX_PUSH_SECONDS = 1;
/**
 * The worker thread's entry. Run from the TypeScript sources (tsx, vitest), worker-entry.mjs
 * registers tsx in the thread and loads worker.ts. In a gateway bundle (.build/<name>.mjs, see
 * scripts/lib/bundle.mjs) the worker is bundled beside it as stt-worker.mjs: plain JavaScript,
 * ready ~50 ms sooner and ~5-10 MB smaller per thread than with tsx.
 */
const WORKER_ENTRY = new URL(import.meta.url.endsWith('.ts') ? './worker-entry.mjs' : './stt-worker.mjs', import.meta.url);

type RequestBody = WorkerRequest extends infer R ? (R extends { rid: number } ? Omit<R, 'rid'> : never) : never;

class PoolWorker {
  readonly worker: Worker;
  sessions = 0;
  private nextRid = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  /** Set once the thread is gone: every request then fails with it. */
  dead: Error | null = null;

  constructor(onExit: (w: PoolWorker) => void) {
    // What the thread needs of the settings; it reads them from workerData (worker.ts).
    const workerData: WorkerSettings = {
      spareDecoders: settings.spareDecoders,
      modelDir: settings.modelDir,
      logFile: settings.logFile,
      extraArgs: settings.extraArgs,
      keytermBonus: settings.keytermBonus,
    };
    // No execArgv: worker-entry.mjs registers tsx itself (a parent's `--import tsx` would load it twice).
    this.worker = new Worker(WORKER_ENTRY, { workerData, execArgv: [], name: 'pocketsphinx' });
    this.worker.unref();
    this.worker.on('message', (reply: WorkerReply) => {
      const p = this.pending.get(reply.rid);
      if (!p) return;
      this.pending.delete(reply.rid);
      if (this.pending.size === 0) this.worker.unref();
      if (reply.ok) p.resolve(reply.value);
      else p.reject(new Error(reply.error));
    });
    const fail = (err: Error) => {
      if (this.dead) return;
      this.dead = err;
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      onExit(this);
    };
    this.worker.on('error', (err) => fail(new Error(`speech recognizer worker failed: ${err.message}`)));
    this.worker.on('exit', (code) => fail(new Error(`speech recognizer worker stopped (exit code ${code})`)));
  }

  request<T>(body: RequestBody, transfer: ArrayBuffer[] = []): Promise<T> {
    if (this.dead) return Promise.reject(this.dead);
    const rid = this.nextRid++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(rid, { resolve: resolve as (v: unknown) => void, reject });
      // A request in flight keeps the process alive; an idle pool does not.
      if (this.pending.size === 1) this.worker.ref();
      this.worker.postMessage({ ...body, rid }, transfer);
    });
  }
}

let pool: PoolWorker[] = [];
let nextSid = 1;

function pickWorker(): PoolWorker {
  const live = pool.filter((w) => !w.dead);
  const least = live.reduce<PoolWorker | null>((a, w) => (a && a.sessions <= w.sessions ? a : w), null);
  if (least && (least.sessions === 0 || live.length >= settings.workers)) return least;
  const w = new PoolWorker((gone) => {
    pool = pool.filter((x) => x !== gone);
  });
  pool.push(w);
  return w;
}

class PocketsphinxRecognizer implements Recognizer {
  private closed = false;
  /** This session's requests, one after another (a long push goes to the worker in pieces). */
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly w: PoolWorker,
    private readonly sid: number,
    private readonly sampleRate: number,
    private readonly releaseSlot: () => void,
  ) {}

  private enqueue<T>(run: () => Promise<T>): Promise<T> {
    const result = this.tail.then(run, run);
    this.tail = result.catch(() => {});
    return result;
  }

  push(samples: Int16Array): Promise<Hypothesis> {
    if (!(samples instanceof Int16Array)) return Promise.reject(new TypeError('push takes an Int16Array of 16-bit PCM samples'));
    if (this.closed) return Promise.reject(new Error('recognizer is closed'));
    // A copy now: the caller may reuse its buffer as soon as push returns.
    const copy = samples.slice();
    return this.enqueue(async () => {
      // At most a second per request, so that other sessions on the worker get their turn.
      const piece = this.sampleRate * MAX_PUSH_SECONDS;
      let hyp: Hypothesis | null = null;
      for (let i = 0; i < copy.length || hyp === null; i += piece) {
        // Its own buffer, handed over rather than cloned.
        const part = copy.length <= piece ? copy : copy.slice(i, i + piece);
        hyp = await this.w.request<Hypothesis>({ op: 'push', sid: this.sid, samples: part }, [part.buffer as ArrayBuffer]);
      }
      return hyp;
    });
  }

  finalize(): Promise<Hypothesis> {
    if (this.closed) return Promise.reject(new Error('recognizer is closed'));
    return this.enqueue(() => this.w.request<Hypothesis>({ op: 'finalize', sid: this.sid }));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.w.sessions--;
    this.releaseSlot();
    // Posted now: requests already posted still complete; pieces of a long push not yet posted
    // then fail with "recognizer is closed".
    this.w.request({ op: 'close', sid: this.sid }).catch(() => {});
  }
}

export async function createRecognizer(options: RecognizerOptions): Promise<Recognizer> {
  if (options.sampleRate !== 16000 && options.sampleRate !== 8000) {
    throw new TypeError(`sampleRate must be 16000 or 8000 (got ${String(options.sampleRate)})`);
  }
  const keyterms = (options.keyterms ?? [])
    .slice(0, MAX_KEYTERMS)
    .map((t) => normalizeWords(String(t)).slice(0, MAX_KEYTERM_WORDS))
    .filter((t) => t.length > 0);
  const grammar = options.grammar?.map((s) => normalizeWords(String(s))).filter((s) => s.length > 0);
  if (options.grammar && !grammar?.length) throw new TypeError('grammar has no words');
  const releaseSlot = await decoderSlots.acquire({ wait: options.waitForDecoder ?? true, signal: options.signal });
  let w: PoolWorker | undefined;
  const sid = nextSid++;
  try {
    w = pickWorker();
    w.sessions++;
    await w.request<OpenResult>({ op: 'open', sid, sampleRate: options.sampleRate, grammar, keyterms });
  } catch (err) {
    if (w) w.sessions--;
    releaseSlot();
    throw err;
  }
  return new PocketsphinxRecognizer(w, sid, options.sampleRate, releaseSlot);
}

export async function transcribeAll(samples: Int16Array, options: RecognizerOptions): Promise<Hypothesis> {
  const r = await createRecognizer(options);
  try {
    await r.push(samples);
    return await r.finalize();
  } finally {
    r.close();
  }
}

/** Terminates the worker threads (graceful shutdown, tests); open recognizers then fail. */
export async function shutdownRecognizers(): Promise<void> {
  const workers = pool;
  pool = [];
  await Promise.all(
    workers.map(async (w) => {
      // Ask first: the thread frees its decoders between native calls. Terminating it while
      // it is inside pocketsphinx aborts the process. A thread that does not answer in 10 s
      // is terminated anyway.
      if (!w.dead) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          w.request<null>({ op: 'shutdown' }).catch(() => null),
          new Promise((r) => {
            timer = setTimeout(r, 10_000);
          }),
        ]);
        clearTimeout(timer);
      }
      await w.worker.terminate();
    }),
  );
}

/** Per worker thread: sessions, live decoders and memory (tests, diagnostics). */
export async function recognizerStats(): Promise<WorkerStats[]> {
  return Promise.all(pool.filter((w) => !w.dead).map((w) => w.request<WorkerStats>({ op: 'stats' })));
}
