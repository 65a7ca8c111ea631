// A tiny runner for the browser tests. A test file declares its steps in a setup function;
// the steps run in order and depend on each other, so after the first failure the rest are
// reported as not run (and counted as failed). One line per step, "N passed, N failed" last,
// exit code 0 only when every step passed.
//
// What the support modules start (processes, temporary directories, the browser) registers a
// cleanup here; cleanups run at the end, on failure and on Ctrl-C. They also register what to
// report when something fails (log tails, a screenshot).
import { basename } from 'node:path';

interface Step {
  name: string;
  run: () => Promise<void>;
}

const steps: Step[] = [];
const cleanups: Array<() => unknown> = [];
const failureReports: Array<(label: string) => unknown> = [];
let cleanedUp = false;

/** The test file's name without .e2e.ts, e.g. "dictionaries": names failure screenshots. */
export const SUITE = basename(process.argv[1] ?? 'e2e').replace(/\.e2e\.[cm]?[jt]s$/, '');

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function step(name: string, run: () => Promise<void>): void {
  steps.push({ name, run });
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

/** Runs at the end (last registered first), also after a failure or a signal. */
export function onCleanup(fn: () => unknown): void {
  cleanups.unshift(fn);
}

/** Runs when a step or the setup fails; `label` is e.g. "dictionaries-failure-3". */
export function onFailure(fn: (label: string) => unknown): void {
  failureReports.push(fn);
}

async function cleanup(): Promise<void> {
  if (cleanedUp) return;
  cleanedUp = true;
  for (const fn of cleanups) {
    try {
      await fn();
    } catch (e) {
      console.error(`  ! cleanup: ${(e as Error).message}`);
    }
  }
}

async function reportFailure(label: string): Promise<void> {
  for (const fn of failureReports) {
    try {
      await fn(label);
    } catch {
      // a report that cannot be made (no page yet, no log) must not hide the failure
    }
  }
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: cleaning up`);
    void cleanup().finally(() => process.exit(130));
  });
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms / 1000} s`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

async function runSteps(stepTimeoutMs: number): Promise<number> {
  let passed = 0;
  let failed = 0;
  for (const [i, s] of steps.entries()) {
    const t0 = Date.now();
    try {
      await withTimeout(s.run(), stepTimeoutMs, s.name);
      passed++;
      console.log(`  ✓ ${s.name} (${Date.now() - t0} ms)`);
    } catch (e) {
      failed++;
      console.log(`  ✗ ${s.name}\n      ${(e as Error).message.split('\n').join('\n      ')}`);
      for (const rest of steps.slice(i + 1)) {
        failed++;
        console.log(`  - ${rest.name} (not run: an earlier step failed)`);
      }
      await reportFailure(`${SUITE}-failure-${i + 1}`);
      break;
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

/**
 * Runs `setup` (start what the test needs, declare its steps), then the steps; cleans up and
 * exits the process with 0 when all passed, 1 otherwise.
 */
export async function runE2E(options: { stepTimeoutMs?: number }, setup: () => Promise<void>): Promise<never> {
  let exitCode = 1;
  try {
    let ready = false;
    try {
      await setup();
      ready = true;
    } catch (e) {
      console.log(`  ✗ setup: ${(e as Error).message}`);
      await reportFailure(`${SUITE}-setup-failure`);
      console.log('0 passed, 1 failed');
    }
    if (ready) exitCode = await runSteps(options.stepTimeoutMs ?? 60_000);
  } finally {
    await cleanup();
  }
  process.exit(exitCode);
}
