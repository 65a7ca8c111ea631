// `flite` and `espeak-ng`: the speech engines the gateway runs itself (Debian packages, one
// process per request through a bounded pool: gateway/upstreams/local-tts/run-engine.ts).
// "Cloning" picks and tunes an engine voice from the clip's measurements (local-tts/clone.ts).
import { execFile } from 'node:child_process';
import { z } from 'zod';
import { defineProtocol, type HealthCheck } from '../contract.ts';
import { localClone } from '../local-tts/clone.ts';
import { espeakSpeech } from '../local-tts/espeak.ts';
import { fliteSpeech } from '../local-tts/flite.ts';

/** A local engine is healthy when its binary runs. */
function binaryRuns(command: string, args: string[]): HealthCheck {
  return (_target, signal) => {
    const started = performance.now();
    return new Promise((resolve) => {
      execFile(command, args, { signal, timeout: 5_000 }, (err) => {
        const latencyMs = Math.round(performance.now() - started);
        if (!err) resolve({ ok: true, latencyMs });
        else if ((err as NodeJS.ErrnoException).code === 'ENOENT')
          resolve({ ok: false, latencyMs, error: `${command} is not installed; \`npm run setup\` installs it (Debian package)` });
        else resolve({ ok: false, latencyMs, error: `${command} ${args.join(' ')} failed: ${err.message}` });
      });
    });
  };
}

export const flite = defineProtocol({
  name: 'flite',
  summary: 'CMU Flite, run by the gateway (upstream URL local:flite)',
  settings: z.object({}).strict(),
  capabilities: ['speech', 'clone'],
  create: () => ({ health: binaryRuns('flite', ['-lv']), speech: fliteSpeech, clone: localClone('flite') }),
});

export const espeakNg = defineProtocol({
  name: 'espeak-ng',
  summary: 'eSpeak NG, run by the gateway (upstream URL local:espeak-ng)',
  settings: z.object({}).strict(),
  capabilities: ['speech', 'clone'],
  create: () => ({ health: binaryRuns('espeak-ng', ['--version']), speech: espeakSpeech, clone: localClone('espeak-ng') }),
});
