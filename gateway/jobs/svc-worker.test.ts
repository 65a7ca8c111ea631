// `svc worker` processes: two of them on the gateway's database run every queued job exactly
// once (each job claimed once: attempts 1), and a SIGTERM stops them cleanly.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { ROOT } from '../../test/support/svc-process.ts';
import { startTtsGateway } from '../../test/support/tts-routes.ts';
import { call, cloneMultipart, speak, waitForJob } from '../../test/support/voice-routes.ts';

let h: GatewayHarness;
const workers: ChildProcess[] = [];
let output = '';

beforeAll(async () => {
  // Six jobs queued at once: above the default per-org cap of in-flight jobs (5).
  h = await startTtsGateway({ env: { SVC_WORKER: 'off', SVC_MAX_JOBS_PER_ORG: '6' } });
}, 60_000);

afterAll(async () => {
  for (const w of workers) w.kill('SIGKILL');
  await h?.close();
});

it('two svc worker processes run each queued job exactly once', async () => {
  const clip = speak('flite', 'rms');
  const jobs: string[] = [];
  for (let i = 0; i < 6; i++) {
    const voice = await cloneMultipart(h, clip, { name: `w${i}`, model_id: 'local-flite' });
    const r = await call(h, 'POST', `/voices/${voice.body.id}/profiles`, { model_id: 'local-espeak' });
    expect(r.status).toBe(202);
    jobs.push(r.body.job_id);
  }
  for (let i = 0; i < 2; i++) {
    const child = spawn(process.execPath, [join(ROOT, 'bin/svc.mjs'), 'worker'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        DATABASE_URL: h.testDb.url,
        SVC_DATA_DIR: h.testDb.dataDir,
        SVC_MODELS_FILE: '/nonexistent',
        LOG_LEVEL: 'warn',
        SVC_JOB_POLL_MS: '50',
      } as unknown as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    workers.push(child);
  }
  for (const id of jobs)
    expect((await waitForJob(h, id, h.headers, 30_000).catch((e: Error) => ({ status: `${e.message}\n${output}` }))).status).toBe('succeeded');
  const rows = await h.testDb.db.prisma.job.findMany({ where: { id: { in: jobs } } });
  expect(rows.map((r) => r.attempts)).toEqual(jobs.map(() => 1));
  expect(new Set(rows.map((r) => r.status))).toEqual(new Set(['succeeded']));
  const exits = workers.map((w) => new Promise<number | null>((r) => w.once('exit', (code) => r(code))));
  for (const w of workers) w.kill('SIGTERM');
  expect(await Promise.all(exits)).toEqual([0, 0]);
}, 90_000);
