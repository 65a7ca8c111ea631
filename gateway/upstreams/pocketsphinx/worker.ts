// A recognizer worker thread (started through worker-entry.mjs): holds one pocketsphinx decoder
// per session and runs every native call, so the gateway's event loop never does. Requests are
// handled one at a time in arrival order; sessions interleave chunk by chunk.
import { parentPort, workerData } from 'node:worker_threads';
import { Decoder, type DecoderSettings, type Hypothesis } from './decoder.ts';
import { releaseFreedMemory } from '../release-freed-memory.ts';
import { Upsampler2x } from './resample.ts';

/** What the pool hands each thread in its workerData: the configured settings it needs. */
export interface WorkerSettings extends DecoderSettings {
  /** Fresh decoders kept loaded ahead (SVC_STT_SPARE_DECODERS). */
  spareDecoders: number;
}

export type WorkerRequest =
  | { op: 'open'; rid: number; sid: number; sampleRate: 16000 | 8000; grammar?: string[][]; keyterms?: string[][] }
  | { op: 'push'; rid: number; sid: number; samples: Int16Array }
  | { op: 'finalize'; rid: number; sid: number }
  | { op: 'close'; rid: number; sid: number }
  | { op: 'stats'; rid: number }
  | { op: 'shutdown'; rid: number };

export interface OpenResult {
  /** Keyterm words added to the dictionary with espeak-ng pronunciations. */
  added: string[];
  /** Keyterm words that could not be added (espeak-ng could not pronounce them). */
  unknown: string[];
}

export interface WorkerStats {
  sessions: number;
  /** Decoders alive in the worker: one per session plus the spares. */
  decoders: number;
  spares: number;
  /** A spare decoder is due to load (spares load only then: without one due, `spares` stays as it is until the next open). */
  loadingSpare: boolean;
  rssBytes: number;
}

export type WorkerReply = { rid: number; ok: true; value: Hypothesis | OpenResult | WorkerStats | null } | { rid: number; ok: false; error: string };

interface Session {
  decoder: Decoder;
  /** For 8 kHz sessions: the model only exists at 16 kHz. */
  upsampler: Upsampler2x | null;
}

if (!parentPort) throw new Error('worker.ts runs in a worker thread (see recognizer.ts)');
const port = parentPort;

/** The settings the pool started this thread with (recognizer.ts, from the validated configuration). */
function settingsFromWorkerData(data: unknown): WorkerSettings {
  const d = (data ?? {}) as Partial<Record<keyof WorkerSettings, unknown>>;
  const wellFormed =
    typeof d.modelDir === 'string' &&
    typeof d.logFile === 'string' &&
    typeof d.extraArgs === 'string' &&
    Number.isFinite(d.keytermBonus) &&
    Number.isInteger(d.spareDecoders) &&
    (d.spareDecoders as number) >= 0;
  if (!wellFormed) throw new Error(`speech recognizer worker started without its settings in workerData (got ${JSON.stringify(data)}; see recognizer.ts)`);
  return d as WorkerSettings;
}
const settings = settingsFromWorkerData(workerData);

/**
 * Fresh decoders loaded ahead of need while the thread is otherwise idle: a new session takes one
 * instead of spending ~0.4 s loading the model at open. Never reused after a session: pocketsphinx
 * keeps adapting its cepstral mean across utterances, so a used decoder would carry something of
 * the previous caller into the next session and make its results depend on it.
 */
const SPARES = settings.spareDecoders;

const sessions = new Map<number, Session>();
const spares: Decoder[] = [];
let spareTimer: NodeJS.Timeout | null = null;

let stopping = false;

function scheduleSpare(): void {
  if (stopping || spareTimer || spares.length >= SPARES) return;
  // A timer, not inline: requests already queued go first.
  spareTimer = setTimeout(() => {
    spareTimer = null;
    try {
      spares.push(new Decoder(settings));
    } catch {
      return; // not installed: open reports it
    }
    scheduleSpare();
  }, 50);
  spareTimer.unref();
}

function open(req: Extract<WorkerRequest, { op: 'open' }>): OpenResult {
  if (sessions.has(req.sid)) throw new Error(`session ${req.sid} is already open`);
  const grammar = req.grammar?.length ? req.grammar : undefined;
  const keyterms = req.keyterms ?? [];
  const vocabulary = [...new Set(keyterms.flat())];
  let decoder: Decoder | undefined;
  const narrowband = req.sampleRate === 8000;
  // Spares are plain 16 kHz decoders.
  const spare = grammar || narrowband ? undefined : spares.pop();
  if (spare && vocabulary.every((w) => spare.knows(w))) decoder = spare;
  else if (spare) spares.push(spare);
  decoder ??= new Decoder(settings, { grammar, vocabulary, narrowband });
  decoder.keyterms = keyterms;
  sessions.set(req.sid, { decoder, upsampler: narrowband ? new Upsampler2x() : null });
  scheduleSpare();
  return { added: decoder.added.map((p) => p.word), unknown: decoder.unknown };
}

function session(sid: number): Session {
  const s = sessions.get(sid);
  if (!s) throw new Error('recognizer is closed');
  return s;
}

function close(sid: number): void {
  const s = sessions.get(sid);
  if (!s) return;
  sessions.delete(sid);
  s.decoder.free();
  // A decoder is a great many small allocations: give the freed pages back to the system.
  releaseFreedMemory();
}

function handle(req: WorkerRequest): Hypothesis | OpenResult | WorkerStats | null {
  switch (req.op) {
    case 'open':
      return open(req);
    case 'push': {
      const s = session(req.sid);
      return s.decoder.push(s.upsampler ? s.upsampler.process(req.samples) : req.samples);
    }
    case 'finalize': {
      const s = session(req.sid);
      if (s.upsampler) s.decoder.push(s.upsampler.flush());
      return s.decoder.finalize();
    }
    case 'close':
      close(req.sid);
      return null;
    case 'shutdown':
      // Handled in turn like any request, so no native call is ever cut off mid-way
      // (terminating a thread inside one aborts the whole process).
      stopping = true;
      if (spareTimer) clearTimeout(spareTimer);
      spareTimer = null;
      for (const sid of [...sessions.keys()]) close(sid);
      for (const d of spares.splice(0)) d.free();
      return null;
    case 'stats':
      return {
        sessions: sessions.size,
        decoders: sessions.size + spares.length,
        spares: spares.length,
        loadingSpare: spareTimer !== null,
        rssBytes: process.memoryUsage().rss,
      };
    default:
      throw new Error(`unknown request ${(req as { op: string }).op}`);
  }
}

port.on('message', (req: WorkerRequest) => {
  let reply: WorkerReply;
  try {
    reply = { rid: req.rid, ok: true, value: handle(req) };
  } catch (err) {
    reply = { rid: req.rid, ok: false, error: err instanceof Error ? err.message : String(err) };
  }
  port.postMessage(reply);
});
scheduleSpare();
