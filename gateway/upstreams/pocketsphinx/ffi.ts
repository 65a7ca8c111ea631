// koffi bindings to Debian's libpocketsphinx.so.3 (package libpocketsphinx3, "0.8+5prealpha":
// the sphinxbase cmd_ln configuration API, not pocketsphinx 5.0's ps_config_*). Only what the
// decoder uses. Every call here is synchronous and CPU-heavy: load and call this module only
// inside the recognizer's worker threads, never on the gateway's event loop.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import koffi, { type IKoffiLib } from 'koffi';

export const NOT_INSTALLED = 'pocketsphinx is not installed; npm run setup installs it';

/** Opaque C pointers (ps_decoder_t *, cmd_ln_t *, ps_seg_t *, ps_nbest_t *). */
export type Ptr = unknown;

export interface PocketsphinxLib {
  ps_args(): Ptr;
  cmd_ln_parse_r(inout: Ptr, defn: Ptr, argc: number, argv: string[], strict: number): Ptr;
  cmd_ln_free_r(config: Ptr): number;
  ps_init(config: Ptr): Ptr;
  ps_free(ps: Ptr): number;
  ps_lookup_word(ps: Ptr, word: string): string | null;
  ps_add_word(ps: Ptr, word: string, phones: string, update: number): number;
  ps_set_jsgf_string(ps: Ptr, name: string, jsgf: string): number;
  ps_set_search(ps: Ptr, name: string): number;
  ps_start_stream(ps: Ptr): number;
  ps_start_utt(ps: Ptr): number;
  ps_process_raw(ps: Ptr, data: Int16Array, nSamples: number, noSearch: number, fullUtt: number): number;
  ps_end_utt(ps: Ptr): number;
  ps_get_hyp(ps: Ptr, outScore: number[]): string | null;
  ps_seg_iter(ps: Ptr): Ptr;
  ps_seg_next(seg: Ptr): Ptr;
  ps_seg_word(seg: Ptr): string;
  ps_seg_frames(seg: Ptr, outSf: number[], outEf: number[]): void;
  ps_seg_free(seg: Ptr): void;
  ps_nbest(ps: Ptr): Ptr;
  ps_nbest_next(nbest: Ptr): Ptr;
  ps_nbest_hyp(nbest: Ptr, outScore: number[]): string | null;
  ps_nbest_seg(nbest: Ptr): Ptr;
  ps_nbest_free(nbest: Ptr): void;
}

let lib: PocketsphinxLib | null = null;

function loadLibrary(name: string): IKoffiLib {
  try {
    return koffi.load(name);
  } catch (err) {
    throw new Error(`${NOT_INSTALLED} (${name}: ${(err as Error).message})`, { cause: err });
  }
}

export function pocketsphinx(): PocketsphinxLib {
  if (lib) return lib;
  const ps = loadLibrary('libpocketsphinx.so.3');
  // libpocketsphinx links libsphinxbase, so this is already in the process: just its symbols.
  const sb = loadLibrary('libsphinxbase.so.3');
  const f = {
    ps_args: ps.func('void *ps_args()'),
    cmd_ln_parse_r: sb.func('void *cmd_ln_parse_r(void *inout, void *defn, int argc, const char **argv, int strict)'),
    cmd_ln_free_r: sb.func('int cmd_ln_free_r(void *config)'),
    ps_init: ps.func('void *ps_init(void *config)'),
    ps_free: ps.func('int ps_free(void *ps)'),
    ps_lookup_word: ps.func('const char *ps_lookup_word(void *ps, const char *word)'),
    ps_add_word: ps.func('int ps_add_word(void *ps, const char *word, const char *phones, int update)'),
    ps_set_jsgf_string: ps.func('int ps_set_jsgf_string(void *ps, const char *name, const char *jsgf)'),
    ps_set_search: ps.func('int ps_set_search(void *ps, const char *name)'),
    ps_start_stream: ps.func('int ps_start_stream(void *ps)'),
    ps_start_utt: ps.func('int ps_start_utt(void *ps)'),
    ps_process_raw: ps.func('int ps_process_raw(void *ps, const int16_t *data, size_t n, int no_search, int full_utt)'),
    ps_end_utt: ps.func('int ps_end_utt(void *ps)'),
    ps_get_hyp: ps.func('const char *ps_get_hyp(void *ps, _Out_ int32_t *score)'),
    ps_seg_iter: ps.func('void *ps_seg_iter(void *ps)'),
    ps_seg_next: ps.func('void *ps_seg_next(void *seg)'),
    ps_seg_word: ps.func('const char *ps_seg_word(void *seg)'),
    ps_seg_frames: ps.func('void ps_seg_frames(void *seg, _Out_ int *sf, _Out_ int *ef)'),
    ps_seg_free: ps.func('void ps_seg_free(void *seg)'),
    ps_nbest: ps.func('void *ps_nbest(void *ps)'),
    ps_nbest_next: ps.func('void *ps_nbest_next(void *nbest)'),
    ps_nbest_hyp: ps.func('const char *ps_nbest_hyp(void *nbest, _Out_ int32_t *score)'),
    ps_nbest_seg: ps.func('void *ps_nbest_seg(void *nbest)'),
    ps_nbest_free: ps.func('void ps_nbest_free(void *nbest)'),
  };
  lib = f as unknown as PocketsphinxLib;
  return lib;
}

export interface ModelPaths {
  hmm: string;
  lm: string;
  dict: string;
}

/**
 * The model files in `dir`, the configured model directory (SVC_POCKETSPHINX_MODEL; by default
 * Debian's pocketsphinx-en-us, /usr/share/pocketsphinx/model/en-us, whose layout it must have).
 */
export function modelPaths(dir: string): ModelPaths {
  const paths = { hmm: join(dir, 'en-us'), lm: join(dir, 'en-us.lm.bin'), dict: join(dir, 'cmudict-en-us.dict') };
  for (const p of Object.values(paths)) {
    if (!existsSync(p)) throw new Error(`${NOT_INSTALLED} (missing model file ${p})`);
  }
  return paths;
}
