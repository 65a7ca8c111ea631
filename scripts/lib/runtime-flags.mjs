// How the gateway's process runs: the Node flags and environment that `svc start|gateway|worker`
// re-execute themselves with (bin/svc.mjs), and that the benches start their gateway with
// (bench/lib/processes.ts), so that the benches measure what runs in production.
//
// - --heap-growing-percent=30: under sustained load V8 lets the old generation grow to ~4x
//   what is live before a full GC (150-190 MB of heap for ~50 MB live at maximum throughput
//   here), and the process keeps that RSS afterwards (~330-370 MB). A fixed growing factor
//   of 1.3 holds it at ~70 MB of heap and ~220-240 MB of RSS through the same load, at about
//   the same maximum throughput (paired ratio 0.95-1.0). A smaller young generation
//   (--max-semi-space-size=4) was tried first: it promotes more short-lived objects, so the
//   old generation grew just the same, and it cost 8-15 % of maximum throughput.
// - MALLOC_ARENA_MAX=2: glibc otherwise gives the process's threads (libuv's pool, V8's GC
//   helpers, worker threads) up to 8 malloc arenas per core, each keeping memory once freed.
//
// An operator's own setting wins: SVC_NODE_FLAGS (space-separated; replaces the default
// flags, empty for none; V8 flags like this one are not allowed in NODE_OPTIONS), a
// heap-growing flag on the node command line, MALLOC_ARENA_MAX in the environment.
import { setSourceMapsSupport } from 'node:module';

const HEAP_GROWING = /--heap[-_]growing[-_]percent/;

/**
 * The node flags to add for a gateway process, given the flags it would have anyway.
 * @param {string[]} execArgv
 * @param {string | undefined} operatorFlags SVC_NODE_FLAGS
 * @returns {string[]}
 */
export function gatewayNodeFlags(execArgv = process.execArgv, operatorFlags = process.env.SVC_NODE_FLAGS) {
  if (operatorFlags !== undefined) return operatorFlags.split(/\s+/).filter(Boolean);
  return execArgv.some((flag) => HEAP_GROWING.test(flag)) ? [] : ['--heap-growing-percent=30'];
}

/**
 * The environment of a gateway process.
 * @param {NodeJS.ProcessEnv} env
 * @returns {NodeJS.ProcessEnv}
 */
export function gatewayEnv(env = process.env) {
  return { MALLOC_ARENA_MAX: '2', ...env };
}

/**
 * Stack traces point at the TypeScript sources: Node reads a module's source map when it loads
 * the module, so this runs before a bundle is imported. Only for the project's own code:
 * mapping node_modules as well (what --enable-source-maps does) reads the maps of ~950
 * dependency files, ~7 MB more RSS in the gateway; this costs none measurable.
 */
export function enableSourceMaps() {
  setSourceMapsSupport(true, { nodeModules: false, generatedCode: false });
}
