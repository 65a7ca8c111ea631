// Real `svc gateway` processes for the operations tests (shutdown, replicas, faults): started
// on a free loopback port against a given database, watched until /health answers, and
// stopped by signal. Every child is killed if the test worker exits without cleaning up.
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './free-port.ts';
import { until } from './poll.ts';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const SVC = join(ROOT, 'bin/svc.mjs');
const START_TIMEOUT_MS = 45_000;

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export { freePort };

/** True when a TCP connection to the port is refused (nothing listens). */
export function connectionRefused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

export interface SvcProcess {
  name: string;
  port: number;
  base: string;
  child: ChildProcess;
  output(): string;
  /** Resolves with the exit code (null when killed by a signal) and the signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /**
   * Resolves once the process has exited and its stdout and stderr are closed: output() then
   * holds every line it wrote. The gateway writes its log in batches and the rest at exit, so
   * a line may be missing from output() while the process runs and even just after `exited`.
   */
  outputClosed: Promise<void>;
}

/**
 * Starts `svc gateway` with the given environment (on top of a minimal one: PATH, HOME, no
 * seeded models, fast registry refresh, no job worker) and waits for /health.
 */
export async function startSvcGateway(name: string, env: Record<string, string>): Promise<SvcProcess> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startSvcGatewayOn(await freePort(), name, env);
    } catch (e) {
      // another test's listener took the port between the check and the bind: a new port
      if (attempt === 3 || !String(e).includes('EADDRINUSE')) throw e;
    }
  }
}

async function startSvcGatewayOn(port: number, name: string, env: Record<string, string>): Promise<SvcProcess> {
  const child = spawn(process.execPath, [SVC, 'gateway'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: String(port),
      LOG_LEVEL: 'warn',
      SVC_MODELS_FILE: '/nonexistent',
      SVC_REGISTRY_REFRESH_SECONDS: '0.2',
      SVC_HEALTH_CHECK_SECONDS: '3600',
      SVC_WORKER: 'off',
      ...env,
    } as unknown as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    }),
  );
  const outputClosed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  let gone = false;
  void exited.then(() => (gone = true));
  const proc: SvcProcess = { name, port, base: `http://127.0.0.1:${port}`, child, output: () => output, exited, outputClosed };
  await until(
    `gateway ${name} to answer /health`,
    async () => {
      if (gone) {
        await outputClosed; // the reason it gave may still be in the pipe
        throw new Error(`gateway ${name} exited before it answered /health:\n${output}`);
      }
      return fetch(`${proc.base}/health`, { signal: AbortSignal.timeout(1_000) })
        .then((r) => r.status === 200)
        .catch(() => false);
    },
    { timeoutMs: START_TIMEOUT_MS, seen: () => output },
  ).catch((e: unknown) => {
    if (!gone) child.kill('SIGKILL');
    throw e;
  });
  return proc;
}

/** SIGTERM, then SIGKILL if it has not exited after `killAfterMs`. */
export async function stopSvc(p: SvcProcess, killAfterMs = 10_000): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), killAfterMs);
  await p.exited;
  clearTimeout(timer);
}
