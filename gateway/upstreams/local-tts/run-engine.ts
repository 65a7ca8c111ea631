// Runs a local speech engine as a child process (off the event loop by construction) and
// turns its failure modes into the spec's errors. The process is started by the engine
// spawner (spawner.mjs), a small helper process, so that starting one does not fork the
// whole gateway; it is killed when the request is aborted or times out.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { UpstreamError } from '../contract.ts';
import { AsyncQueue } from '../async-queue.ts';
import { Slots } from '../slots.ts';

/**
 * Engine processes running at once (SVC_TTS_MAX_ENGINES, set at start by limitEngines): each
 * is a process with its own memory and a share of the cores. Requests past it wait their turn,
 * a bounded number of them; past that they get 503 before anything is spawned. One org may keep
 * at most half of the waiting line, and the orgs waiting take turns for each freed process
 * (slots.ts): one org's sockets cannot keep the others out.
 */
const engineSlots = new Slots(8, 64, 'speech engine processes', 1 / 2);

export function limitEngines(processes: number): void {
  engineSlots.resize(processes);
}

export interface EngineRun {
  stdout: AsyncIterable<Buffer>;
  done: Promise<void>;
}

interface ExitInfo {
  code: number | null;
  signal: string | null;
  stderr: string;
  error: { code?: string; message: string } | null;
}

interface Run {
  stdout: AsyncQueue<Buffer>;
  exit: (info: ExitInfo) => void;
}

// Plain JavaScript run from its source file, whether the gateway runs from the sources (beside
// this module) or bundled (from .build/<name>.mjs at the project's root, scripts/lib/bundle.mjs).
const SPAWNER = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './spawner.mjs' : '../gateway/upstreams/local-tts/spawner.mjs', import.meta.url));
let spawner: ChildProcess | null = null;
const runs = new Map<number, Run>();
let nextId = 1;

function getSpawner(): ChildProcess {
  if (spawner && spawner.connected) return spawner;
  const child = fork(SPAWNER, [], { serialization: 'advanced', stdio: ['ignore', 'ignore', 'inherit', 'ipc'], execArgv: [] });
  child.on('message', (msg: { id: number; data?: Uint8Array; exit?: ExitInfo }) => {
    const run = runs.get(msg.id);
    if (!run) return;
    if (msg.data) run.stdout.push(Buffer.from(msg.data.buffer, msg.data.byteOffset, msg.data.byteLength));
    else if (msg.exit) {
      runs.delete(msg.id);
      run.exit(msg.exit);
    }
  });
  child.on('exit', () => {
    if (spawner === child) spawner = null;
    // Runs in flight die with it.
    for (const [id, run] of runs) {
      runs.delete(id);
      run.exit({ code: null, signal: 'SIGKILL', stderr: 'the engine spawner exited', error: null });
    }
  });
  // Do not keep the gateway alive for it.
  child.unref();
  (child as ChildProcess & { channel?: { unref(): void } }).channel?.unref();
  spawner = child;
  return child;
}

/**
 * Starts the spawner now (gateway start, when a local speech engine is registered): the first
 * synthesis then does not wait for a Node process to boot.
 */
export function warmUpEngineSpawner(): void {
  getSpawner();
}

/** Stops the spawner (graceful shutdown, tests); engines still running are killed. */
export function stopEngineSpawner(): void {
  spawner?.disconnect();
  spawner = null;
}

/** `input`: written to the engine's stdin; `tenant`: the org the engine runs for (its share of the pool). */
export function runEngine(command: string, args: string[], options: { signal: AbortSignal; input?: string; tenant?: string }): EngineRun {
  const { signal, input, tenant } = options;
  const id = nextId++;
  const stdout = new AsyncQueue<Buffer>();
  const done = engineSlots.acquire({ wait: true, signal, tenant }).then(
    (release) => spawnRun(id, stdout, command, args, signal, input).finally(release),
    (err: unknown) => {
      stdout.end(err);
      throw err;
    },
  );
  done.catch(() => {});
  return { stdout, done };
}

function spawnRun(id: number, stdout: AsyncQueue<Buffer>, command: string, args: string[], signal: AbortSignal, input?: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const s = getSpawner();
    const kill = () => {
      if (runs.has(id) && s.connected) s.send({ id, kill: true });
    };
    runs.set(id, {
      stdout,
      exit: (info) => {
        signal.removeEventListener('abort', kill);
        stdout.end();
        if (info.error) {
          reject(
            info.error.code === 'ENOENT'
              ? new UpstreamError(
                  'unavailable',
                  `The speech engine '${command}' is not installed; run \`npm run setup\` (it installs it from Debian packages).`,
                )
              : new UpstreamError('broken', `The speech engine '${command}' failed to start: ${info.error.message}`),
          );
        } else if (info.code === 0) resolve();
        else if (signal.aborted) reject(signal.reason);
        else
          reject(
            new UpstreamError('broken', `The speech engine '${command}' failed (${info.signal ?? `exit ${info.code}`}): ${info.stderr.trim().slice(0, 300)}`),
          );
      },
    });
    signal.addEventListener('abort', kill, { once: true });
    s.send({ id, command, args, input });
  });
}
