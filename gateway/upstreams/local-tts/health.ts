import { execFile } from 'node:child_process';
import type { HealthResult } from '../types.js';

/** A local engine is healthy when its binary runs. */
export function checkLocalEngine(command: string, args: string[]) {
  return (_upstream: unknown, signal: AbortSignal): Promise<HealthResult> => {
    const started = performance.now();
    return new Promise((resolve) => {
      execFile(command, args, { signal, timeout: 5_000 }, (err) => {
        const latencyMs = Math.round(performance.now() - started);
        if (!err) resolve({ ok: true, latencyMs });
        else if ((err as NodeJS.ErrnoException).code === 'ENOENT') resolve({ ok: false, latencyMs, error: `${command} is not installed; \`npm run setup\` installs it (Debian package)` });
        else resolve({ ok: false, latencyMs, error: `${command} ${args.join(' ')} failed: ${err.message}` });
      });
    });
  };
}
