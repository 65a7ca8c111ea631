// What the concurrency benchmarks (bench/sessions-at-scale.ts, tts-at-scale.ts,
// realtime-at-scale.ts) measure of a process over a window of load: its CPU (utime + stime from
// /proc/<pid>/stat; its main thread's alone from /proc/<pid>/task/<pid>/stat), its read and write
// system calls (/proc/<pid>/io), the time its main thread waited for a CPU it was ready to use
// (run-queue wait from /proc/<pid>/task/<pid>/schedstat: on a shared machine, the part of a stall
// that is the machine's, not the process's), its peak RSS, its event-loop delay (the gateway's
// /metrics, a bare relay's GET /stats: bench/lib/loop-stats.ts) and, with a profile, a CPU profile
// of the window.
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { profileWhile, type CpuProfile } from './cpu-profile.ts';
import { rssMb } from './processes.ts';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

export function cpuMs(pid: number): number {
  return statCpuMs(`/proc/${pid}/stat`);
}

/** The CPU of the process's main thread alone (its event loop; not V8's GC helpers nor worker threads). */
export function mainThreadCpuMs(pid: number): number {
  return threadCpuMs(pid, pid);
}

/** The CPU of one thread of the process. */
export function threadCpuMs(pid: number, tid: number): number {
  return statCpuMs(`/proc/${pid}/task/${tid}/stat`);
}

/** The process's read and write system calls so far (/proc/<pid>/io: syscr, syscw; socket and file I/O alike). */
export function ioSyscalls(pid: number): { reads: number; writes: number } {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)`, 'm').exec(io)?.[1] ?? NaN);
  return { reads: field('syscr'), writes: field('syscw') };
}

function statCpuMs(path: string): number {
  const stat = readFileSync(path, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
}

/** Milliseconds the process's main thread has spent runnable but waiting for a CPU (NaN where schedstat is not kept). */
export function runQueueWaitMs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
  } catch {
    return NaN;
  }
}

export interface LoopDelay {
  p99: number;
  max: number;
}

/** The gateway's event-loop delay since the last scrape (prom-client resets its histogram at each). */
export async function gatewayLoopDelay(url: string, metricsToken: string): Promise<LoopDelay> {
  const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } })).text();
  const read = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN) * 1000;
  return { p99: read('nodejs_eventloop_lag_p99_seconds'), max: read('nodejs_eventloop_lag_max_seconds') };
}

/** A bare relay's event-loop delay since the last call (GET /stats, bench/lib/loop-stats.ts). */
export async function relayLoopDelay(url: string): Promise<LoopDelay> {
  const s = (await (await fetch(`${url}/stats`)).json()) as { loopP99Ms: number; loopMaxMs: number };
  return { p99: s.loopP99Ms, max: s.loopMaxMs };
}

export interface WindowFigures {
  cpuMs: number;
  /** Of which the main thread's. */
  mainCpuMs: number;
  /** Read and write system calls made over the window (all threads). */
  syscalls: { reads: number; writes: number };
  /** The main thread's run-queue wait over the window. */
  waitMs: number;
  /** Peak RSS sampled each second over the window. */
  rssPeakMb: number;
  loop: LoopDelay;
  profile?: CpuProfile;
}

/**
 * Measures process `pid` while `run` runs: `loop` is read once before (to reset it) and once
 * after; with `profile`, the process (started with INSPECT_ENV) is profiled over the window.
 */
export async function measureWindow(pid: number, loop: () => Promise<LoopDelay>, run: () => Promise<unknown>, profile = false): Promise<WindowFigures> {
  await loop();
  const cpu0 = cpuMs(pid);
  const main0 = mainThreadCpuMs(pid);
  const io0 = ioSyscalls(pid);
  const wait0 = runQueueWaitMs(pid);
  let rssPeakMb = rssMb(pid);
  const rssTimer = setInterval(() => (rssPeakMb = Math.max(rssPeakMb, rssMb(pid))), 1000);
  try {
    const taken = profile ? (await profileWhile(pid, run)).profile : (await run(), undefined);
    const io = ioSyscalls(pid);
    return {
      cpuMs: cpuMs(pid) - cpu0,
      mainCpuMs: mainThreadCpuMs(pid) - main0,
      syscalls: { reads: io.reads - io0.reads, writes: io.writes - io0.writes },
      waitMs: runQueueWaitMs(pid) - wait0,
      rssPeakMb,
      loop: await loop(),
      profile: taken,
    };
  } finally {
    clearInterval(rssTimer);
  }
}

export const loadAverage = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

/** A number for a table: `d` decimals, '-' when not finite. */
export const fixed = (x: number, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '-');

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
