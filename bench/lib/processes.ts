import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundle, bundleGateway } from '../../scripts/lib/bundle.mjs';
import { gatewayEnv, gatewayNodeFlags } from '../../scripts/lib/runtime-flags.mjs';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

// Whatever ends the bench (its end, a failure to start the next process, an uncaught error), the
// processes it started end with it: none is left serving, or holding the pipe of `| tail`.
const started = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of started) child.kill('SIGTERM');
});

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
 * `root`: another checkout's tree for the gateway (bench/ab-gateway.ts).
 */
export function startBundled(
  entry: string,
  env: Record<string, string> = {},
  runtime: 'gateway' | 'node' = 'gateway',
  root = ROOT,
): Promise<{ child: ChildProcess; url: string }> {
  const name = entry.replace(/\.ts$/, '').replaceAll('/', '-');
  if (runtime === 'node') return startListening(entry, [bundle(ROOT, { [name]: entry })[name]!], { ...process.env, LOG_LEVEL: 'warn', ...env });
  // The gateway logs as svc does (LOG_LEVEL info: an access-log line per request; set
  // BENCH_GATEWAY_LOG_LEVEL=warn for none) to a file, as a service's logs go to journald or a
  // file, rather than into a pipe that the load generator would have to read; it says where it
  // listens on stderr (bench/gateway-server.ts).
  // The benchmarks drive one key far past what one key may run at once in production, from one
  // address (and bench/stt.ts more sessions than the default decoder pool): the caps are lifted,
  // not measured.
  const uncapped = {
    SVC_MAX_CONNECTIONS: '1000000',
    SVC_MAX_CONNECTIONS_PER_ADDRESS: '1000000',
    SVC_MAX_REQUESTS_PER_KEY: '1000000',
    SVC_MAX_STREAMS_PER_KEY: '1000000',
    SVC_MAX_STREAMS_PER_ORG: '1000000',
    SVC_MAX_STREAMS: '1000000',
    SVC_STT_MAX_DECODERS: '10000',
  };
  const childEnv: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: process.env.BENCH_GATEWAY_LOG_LEVEL ?? 'info', ...uncapped, ...env };
  const script = bundleGateway(root, name, entry);
  const logFile = join(tmpdir(), `svc-bench-${name}-${process.pid}-${++gatewaysStarted}.log`);
  return startListening(entry, [...gatewayNodeFlags([], childEnv.SVC_NODE_FLAGS), script], gatewayEnv(childEnv), logFile);
}

let gatewaysStarted = 0;

/** Starts the process; resolves when it prints "listening <url>" (on stdout, or on stderr when its stdout goes to `logFile`). */
function startListening(entry: string, args: string[], env: NodeJS.ProcessEnv, logFile?: string): Promise<{ child: ChildProcess; url: string }> {
  const stdout = logFile ? openSync(logFile, 'w') : 'pipe';
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', stdout, logFile ? 'pipe' : 'inherit'] });
  started.add(child);
  child.once('exit', () => started.delete(child));
  if (typeof stdout === 'number') closeSync(stdout);
  // The log (tens of MB per bench run) is removed when the bench exits, unless BENCH_KEEP_LOGS is set.
  if (logFile && !process.env.BENCH_KEEP_LOGS) process.once('exit', () => rmSync(logFile, { force: true }));
  const announced = (logFile ? child.stderr : child.stdout)!;
  return new Promise((resolve, reject) => {
    let out = '';
    const untilListening = (d: Buffer) => {
      out += d.toString();
      const m = /^listening (\S+)$/m.exec(out);
      if (!m) return;
      announced.off('data', untilListening);
      if (logFile) announced.pipe(process.stderr);
      else announced.resume(); // anything it prints later is dropped, so that it never blocks
      resolve({ child, url: m[1]! });
    };
    announced.on('data', untilListening);
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
