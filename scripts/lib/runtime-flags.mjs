// How the gateway's process runs: the Node flags and environment that `svc start|gateway|worker`
// re-execute themselves with (bin/svc.mjs), and that the benches start their gateway with
// (bench/lib/processes.ts), so that the benches measure what runs in production.
//
// - --heap-growing-percent=30: a full GC once the old generation has grown 30 % past what was
//   live. By default V8 lets it grow to ~4x under sustained load and the process keeps that
//   RSS afterwards (~330-370 MB measured while requests were still promoted; 194-224 MB now).
//   A bound for bursts, at ~3 % of maximum throughput (docs/performance.md, "Memory"). A
//   smaller young generation (--max-semi-space-size=4) cost 8-15 % of maximum throughput.
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
