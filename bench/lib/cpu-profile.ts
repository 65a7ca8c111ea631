// CPU profiles of a child process taken through its inspector (started with
// --inspect=127.0.0.1:0) while a load runs, and their self time grouped by package or by
// function: what bench/profile-gateway.ts and the concurrency benchmarks print.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { attachInspector } from './inspector.ts';
import { table } from './load.ts';

export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The inspector flag for the child's environment (NODE_OPTIONS). */
export const INSPECT_ENV = { NODE_OPTIONS: '--inspect=127.0.0.1:0' };

/** Profiles process `pid` while `load` runs (sampling every `intervalUs`). */
export async function profileWhile<T>(pid: number, load: () => Promise<T>, intervalUs = 200): Promise<{ profile: CpuProfile; result: T }> {
  const session = await attachInspector(pid);
  await session.call('Profiler.enable');
  await session.call('Profiler.setSamplingInterval', { interval: intervalUs });
  await session.call('Profiler.start');
  try {
    const result = await load();
    const { profile } = await session.call<{ profile: CpuProfile }>('Profiler.stop');
    return { profile, result };
  } finally {
    session.close();
  }
}

/** Writes the profile as DIR/NAME.cpuprofile (open it in Chrome DevTools or speedscope). */
export function saveProfile(dir: string, name: string, profile: CpuProfile): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name.replaceAll(' ', '-')}.cpuprofile`);
  writeFileSync(file, JSON.stringify(profile));
  return file;
}

/**
 * Self time (microseconds) of the profile's samples, grouped by `key`. A sample's time runs from
 * it to the next sample (`timeDeltas[i + 1]`; the last to the profile's end), as DevTools counts
 * it: V8 takes few samples while the thread is inside a long native call (a SQLite commit), and
 * the gap before the next sample is that call's, not the next function's.
 */
export function selfTimes(p: CpuProfile, key: (url: string, functionName: string, line: number) => string): Map<string, number> {
  const nodes = new Map(p.nodes.map((n) => [n.id, n.callFrame]));
  const out = new Map<string, number>();
  const lastAt = p.startTime + p.timeDeltas.reduce((sum, d) => sum + d, 0);
  p.samples.forEach((id, i) => {
    const f = nodes.get(id)!;
    const k = f.url ? key(f.url, f.functionName, f.lineNumber) : f.functionName; // (garbage collector), (program), (idle)...
    const us = i + 1 < p.samples.length ? (p.timeDeltas[i + 1] ?? 0) : Math.max(0, p.endTime - lastAt);
    out.set(k, (out.get(k) ?? 0) + us);
  });
  return out;
}

export function packageOf(url: string): string {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg) return pkg;
  if (url.startsWith('node:')) return url.replace(/^node:(internal\/)?/, 'node:').replace(/\/.*$/, '');
  if (url.startsWith('wasm://')) return 'wasm (undici llhttp)';
  return 'project';
}

export function shortUrl(url: string): string {
  return url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/\.build\//, '.build/');
}

export const byPackage = (p: CpuProfile) => selfTimes(p, (url) => packageOf(url));
export const byFunction = (p: CpuProfile) => selfTimes(p, (url, fn, line) => `${fn || '(anonymous)'} ${shortUrl(url)}:${line + 1}`);

/** Total self time not idle (microseconds). */
export const busyUs = (m: Map<string, number>) => [...m].filter(([k]) => k !== '(idle)').reduce((s, [, v]) => s + v, 0);

/**
 * The profile as two tables, CPU per `unit` (the profile's microseconds divided by `units`): by
 * package next to a baseline's (when given), and the `top` functions by self time.
 */
export function profileTables(
  profile: CpuProfile,
  units: number,
  unit: string,
  top: number,
  baseline?: { name: string; profile: CpuProfile; units: number },
): string {
  const per = (us: number | undefined, n: number) => Number(((us ?? 0) / n).toFixed(1));
  const gp = byPackage(profile);
  const bp = baseline ? byPackage(baseline.profile) : new Map<string, number>();
  const col = `us/${unit}`;
  const baseCol = baseline ? `${baseline.name} us/${unit}` : '';
  const rows: Record<string, string | number>[] = [...new Set([...gp.keys(), ...bp.keys()])]
    .filter((k) => k !== '(idle)')
    .map((k) => ({ where: k, [col]: per(gp.get(k), units), ...(baseline && { [baseCol]: per(bp.get(k), baseline.units) }) }))
    .sort((x, y) => (y[col] as number) - (x[col] as number))
    .filter((r) => (r[col] as number) >= 0.5 || (baseline !== undefined && (r[baseCol] as number) >= 0.5));
  rows.unshift({ where: 'total (not idle)', [col]: per(busyUs(gp), units), ...(baseline && { [baseCol]: per(busyUs(bp), baseline.units) }) });
  const fns = [...byFunction(profile)]
    .filter(([k]) => k !== '(idle)')
    .sort((x, y) => y[1] - x[1])
    .slice(0, top)
    .map(([k, v]) => ({ function: k, [col]: per(v, units) }));
  return `${table(rows)}\n\nby function (self time):\n\n${table(fns)}`;
}
