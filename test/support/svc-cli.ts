// The real `svc` CLI (bin/svc.mjs) in its own process against a test database, as an operator
// runs it, its one JSON object (--json) read from stdout.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'vitest';
import { ROOT } from './svc-process.ts';
import type { TestDatabase } from './test-database.ts';

const SVC = join(ROOT, 'bin/svc.mjs');

export interface SvcResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `svc --json <args>` against `t`'s database, and the same expecting success (exit 0, one JSON object). */
export function svcCli(t: () => TestDatabase) {
  const svc = (...args: string[]): Promise<SvcResult> =>
    new Promise((resolve, reject) => {
      const env = {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        SVC_DATA_DIR: t().dataDir,
        DATABASE_URL: t().url,
      } as unknown as NodeJS.ProcessEnv;
      const child = spawn(process.execPath, [SVC, '--json', ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
  const svcOk = async (...args: string[]): Promise<Record<string, unknown>> => {
    const r = await svc(...args);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
    expect(lines).toHaveLength(1);
    return JSON.parse(lines[0]!) as Record<string, unknown>;
  };
  return { svc, svcOk };
}
