// Bundles TypeScript entry points into plain JavaScript in <root>/.build/ with esbuild, so that
// the gateway runs without tsx: no loader thread and no esbuild in its process (~50 MB of RSS).
// Plain JavaScript itself, so that bin/svc.mjs can use it under any Node.
//
// Dependencies stay external (imported from node_modules as usual); only the project's own code
// is bundled. A linked source map (without the sources: they are on disk) lets stack traces
// point at the TypeScript files once source maps are on (scripts/lib/runtime-flags.mjs).
//
// Several processes may build the same bundle at once (the tests start many `svc` processes):
// each writes its own temporary files and renames them into place, which is atomic, so a
// process never imports a half-written bundle.
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, join } from 'node:path';

// esbuild's synchronous API runs its binary to completion (execFileSync) when its worker threads
// are off, which esbuild reads once, as it loads: nothing of esbuild is left afterwards, not even
// a child process to reap, when `svc` then replaces itself with the gateway (bin/svc.mjs).
process.env.ESBUILD_WORKER_THREADS = '0';
const { buildSync } = createRequire(import.meta.url)('esbuild');
delete process.env.ESBUILD_WORKER_THREADS;

/**
 * Bundles each entry (name -> path relative to root) into <root>/.build/<name>.mjs and returns
 * those paths by name. Synchronous, ~100 ms; a compile error throws with file:line:column.
 * @param {string} root
 * @param {Record<string, string>} entries
 * @returns {Record<string, string>}
 */
export function bundle(root, entries) {
  const outdir = join(root, '.build');
  mkdirSync(outdir, { recursive: true });
  const result = buildSync({
    absWorkingDir: root,
    entryPoints: entries,
    outdir,
    outExtension: { '.js': '.mjs' },
    write: false,
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    target: 'node22',
    sourcemap: 'linked',
    sourcesContent: false,
    logLevel: 'silent',
  });
  // Maps first: a process that loads a new bundle finds its map already there.
  const files = [...result.outputFiles].sort((a, b) => Number(b.path.endsWith('.map')) - Number(a.path.endsWith('.map')));
  for (const file of files) {
    const tmp = join(outdir, `.${basename(file.path)}.${process.pid}.tmp`);
    try {
      writeFileSync(tmp, file.contents);
      renameSync(tmp, file.path);
    } catch (e) {
      rmSync(tmp, { force: true });
      throw e;
    }
  }
  return Object.fromEntries(Object.keys(entries).map((name) => [name, join(outdir, `${name}.mjs`)]));
}

const GATEWAY_WORKERS = { 'stt-worker': 'gateway/upstreams/pocketsphinx/worker.ts', 'vad-worker': 'gateway/stt/vad-worker.ts' };

/**
 * Bundles a gateway entry point (the CLI, a bench's gateway server) into .build/<name>.mjs, with
 * its worker threads beside it, where the bundle loads them from: the speech recognizer's as
 * .build/stt-worker.mjs (gateway/upstreams/pocketsphinx/recognizer.ts), voice activity
 * detection's as .build/vad-worker.mjs (gateway/stt/silero-vad.ts).
 * @param {string} root
 * @param {string} name
 * @param {string} entry path relative to root
 * @returns {string} the bundle's path
 */
export function bundleGateway(root, name, entry) {
  // An older checkout (bench/ab-gateway.ts, a bench's --base) may not have every worker yet.
  const workers = Object.entries(GATEWAY_WORKERS).filter(([, file]) => existsSync(join(root, file)));
  return bundle(root, { [name]: entry, ...Object.fromEntries(workers) })[name];
}
