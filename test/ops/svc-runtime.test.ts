// How `svc gateway` runs (bin/svc.mjs, scripts/lib/runtime-flags.mjs): the process that was
// started replaces itself, same pid, with a node that has the gateway's memory flags and
// environment, and leaves no process behind (no parent, no esbuild), unless the operator set
// those flags and environment themselves. SIGTERM still drains and exits 0.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/test-database.ts';
import { ROOT, startSvcGateway, stopSvc, type SvcProcess } from '../support/svc-process.ts';

vi.setConfig({ testTimeout: 90_000 });

let t: TestDatabase;
const started: SvcProcess[] = [];

beforeAll(async () => {
  t = await createTestDatabase();
}, 60_000);

afterAll(async () => {
  await Promise.allSettled(started.map((p) => stopSvc(p, 2_000)));
  await t?.drop();
}, 60_000);

async function gateway(name: string, env: Record<string, string> = {}): Promise<SvcProcess> {
  const p = await startSvcGateway(name, { DATABASE_URL: t.url, SVC_DATA_DIR: t.dataDir, LOG_LEVEL: 'info', ...env });
  started.push(p);
  return p;
}

const commandLine = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);

/** The environment the process was started (or replaced) with. */
function environment(pid: number): Map<string, string> {
  const vars = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean);
  return new Map(vars.map((v) => [v.slice(0, v.indexOf('=')), v.slice(v.indexOf('=') + 1)]));
}

/** Pids whose parent is `pid` (zombies included). */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        // Field 4 of stat is the parent pid; field 2, the name in parentheses, may hold spaces.
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}

describe('svc gateway', () => {
  it('runs in the process that was started, with the memory flags and environment, and nothing else left running', async () => {
    const p = await gateway('flags');
    const pid = p.child.pid!;
    expect(commandLine(pid).slice(1)).toEqual(['--heap-growing-percent=30', join(ROOT, 'bin/svc.mjs'), 'gateway']);
    expect(environment(pid).get('MALLOC_ARENA_MAX')).toBe('2');
    expect(childrenOf(pid)).toEqual([]);

    await stopSvc(p);
    expect(await p.exited).toEqual({ code: 0, signal: null });
    // The gateway's own log lines carry the pid of the process that listened: the one started.
    // Lines are written in batches while it runs (at most 100 ms apart) and the rest at exit,
    // so they are read once its output has closed, not polled for while it runs.
    await p.outputClosed;
    const lines = p
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{') && l.endsWith('}'))
      .map((l) => JSON.parse(l) as { msg?: string; pid?: number });
    expect(lines.find((l) => l.msg === 'gateway listening')?.pid).toBe(pid);
    expect(lines.at(-1)).toMatchObject({ msg: 'shut down', pid });
  });

  it('keeps a heap-growing setting and MALLOC_ARENA_MAX the operator set', async () => {
    const p = await gateway('operator', { SVC_NODE_FLAGS: '--heap-growing-percent=60 --max-semi-space-size=8', MALLOC_ARENA_MAX: '4' });
    const pid = p.child.pid!;
    expect(commandLine(pid).slice(1)).toEqual(['--heap-growing-percent=60', '--max-semi-space-size=8', join(ROOT, 'bin/svc.mjs'), 'gateway']);
    expect(environment(pid).get('MALLOC_ARENA_MAX')).toBe('4');
    await stopSvc(p);
    expect(await p.exited).toEqual({ code: 0, signal: null });
  });
});
