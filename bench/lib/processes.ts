import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundle, bundleGateway } from '../../scripts/lib/bundle.mjs';
import { gatewayEnv, gatewayNodeFlags } from '../../scripts/lib/runtime-flags.mjs';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

/** Starts a TypeScript entry point under tsx and resolves when it prints "listening <url>". */
export function startTs(entry: string, env: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string }> {
  return startListening(entry, ['--import', 'tsx', join(ROOT, entry)], { ...process.env, LOG_LEVEL: 'warn', ...env });
}

/**
 * Starts a TypeScript entry point as plain JavaScript, bundled into .build/ as `svc` bundles
 * itself (scripts/lib/bundle.mjs), and resolves when it prints "listening <url>".
 * - runtime 'gateway' (the gateway's entries): with the node flags and environment `svc gateway`
 *   runs with in production (scripts/lib/runtime-flags.mjs). `svc` also turns source maps on for
 *   the project's code, which is not done here: it costs no measurable memory, and no time until
 *   a stack trace is formatted.
 * - runtime 'node' (the bare proxy, the baseline): with Node's defaults.
 */
export function startBundled(entry: string, env: Record<string, string> = {}, runtime: 'gateway' | 'node' = 'gateway'): Promise<{ child: ChildProcess; url: string }> {
  const name = entry.replace(/\.ts$/, '').replaceAll('/', '-');
  // The gateway logs at svc's default level (info: an access-log line per request), read and dropped by this process.
  const childEnv: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: runtime === 'gateway' ? 'info' : 'warn', ...env };
  if (runtime === 'node') return startListening(entry, [bundle(ROOT, { [name]: entry })[name]!], childEnv);
  const script = bundleGateway(ROOT, name, entry);
  return startListening(entry, [...gatewayNodeFlags([], childEnv.SVC_NODE_FLAGS), script], gatewayEnv(childEnv));
}

function startListening(entry: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const untilListening = (d: Buffer) => {
      out += d.toString();
      const m = /^listening (\S+)$/m.exec(out);
      if (!m) return;
      // From now on its output (access logs) is read and dropped, so that it never blocks.
      child.stdout!.off('data', untilListening).on('data', () => {});
      resolve({ child, url: m[1]! });
    };
    child.stdout!.on('data', untilListening);
    child.on('exit', (code) => reject(new Error(`${entry} exited with ${code} before listening`)));
  });
}

export function rssMb(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    return kb / 1024;
  } catch {
    return NaN;
  }
}
