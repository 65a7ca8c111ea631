// Runs a local speech engine as a child process (off the event loop by construction) and
// turns its failure modes into the spec's errors. The process is killed when the request
// is aborted or times out.
import { spawn } from 'node:child_process';
import { ServiceError } from '../../../server/services/errors.js';

export interface EngineRun {
  stdout: AsyncIterable<Buffer>;
  done: Promise<void>;
}

export function runEngine(command: string, args: string[], signal: AbortSignal, input?: string): EngineRun {
  const child = spawn(command, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
  const kill = () => child.kill('SIGKILL');
  signal.addEventListener('abort', kill, { once: true });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    if (stderr.length < 2000) stderr += d.toString();
  });
  if (input !== undefined) child.stdin!.end(input);
  const done = new Promise<void>((resolve, reject) => {
    child.on('error', (e: NodeJS.ErrnoException) => {
      reject(e.code === 'ENOENT'
        ? new ServiceError('model_offline', `The speech engine '${command}' is not installed; run \`npm run setup\` (it installs it from Debian packages).`)
        : new ServiceError('upstream_error', `The speech engine '${command}' failed to start: ${e.message}`));
    });
    child.on('close', (code, sig) => {
      signal.removeEventListener('abort', kill);
      if (code === 0) resolve();
      else if (signal.aborted) reject(signal.reason);
      else reject(new ServiceError('upstream_error', `The speech engine '${command}' failed (${sig ?? `exit ${code}`}): ${stderr.trim().slice(0, 300)}`));
    });
  });
  done.catch(() => {});
  return { stdout: child.stdout!, done };
}
