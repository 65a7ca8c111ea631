// How the gateway's process runs: the Node flags and environment that `svc start|gateway|worker`
// re-execute themselves with (bin/svc.mjs), and that the benches start their gateway with
// (bench/lib/processes.ts), so that the benches measure what runs in production. Together they
// take the peak RSS with 1,000 open LLM streams from ~290-350 MB to ~230-250 MB, at the same
// maximum throughput (paired ratio 0.997).
//
// - --max-semi-space-size=4: V8 otherwise grows its young generation to 32 MB (16 MB
//   semi-spaces) under allocation-heavy load, and keeps it; 4 MB semi-spaces cap it at 8 MB.
// - MALLOC_ARENA_MAX=2: glibc otherwise gives the process's threads (libuv's pool, V8's GC
//   helpers, worker threads) up to 8 malloc arenas per core, each keeping memory once freed.
//
// An operator's own setting wins: a semi-space flag on the node command line or in
// NODE_OPTIONS, MALLOC_ARENA_MAX in the environment.
import { setSourceMapsSupport } from 'node:module';

const SEMI_SPACE = /--(max|min)[-_]semi[-_]space[-_]size/;

/**
 * The node flags to add for a gateway process, given the flags it would have anyway.
 * @param {string[]} execArgv
 * @param {string} nodeOptions
 * @returns {string[]}
 */
export function gatewayNodeFlags(execArgv = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? '') {
  return [...execArgv, nodeOptions].some((flag) => SEMI_SPACE.test(flag)) ? [] : ['--max-semi-space-size=4'];
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
