// One pocketsphinx decoder (ps_decoder_t) at 16 kHz: synchronous, CPU-heavy, so only ever used
// inside a recognizer worker thread (worker.ts). Knows nothing of sessions or sample rates.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';
import { modelPaths, pocketsphinx, type PocketsphinxLib, type Ptr } from './ffi.ts';
import { guessPronunciations } from './g2p.ts';
import { jsgfForSentences, transcriptWord } from './words.ts';

export const DECODER_RATE = 16000;
/** pocketsphinx's frame shift: 100 frames a second. */
const SAMPLES_PER_FRAME = DECODER_RATE / 100;

export interface Word {
  word: string;
  start: number;
  end: number;
}
export interface Hypothesis {
  text: string;
  words: Word[];
}

export interface Pronunciation {
  word: string;
  /** CMU phones, space-separated ("K UW B ER N EH T IY Z"). */
  phones: string;
}

/**
 * The process's decoder settings (SVC_POCKETSPHINX_*, validated in server/config/env.ts), which
 * the worker thread receives from the pool (recognizer.ts) in its workerData.
 */
export interface DecoderSettings {
  /** The model directory (en-us/, en-us.lm.bin, cmudict-en-us.dict). */
  modelDir: string;
  /** Where pocketsphinx writes its log (-logfn). */
  logFile: string;
  /** More pocketsphinx arguments, "-name value ...", over the ones set here. */
  extraArgs: string;
  /**
   * Log-probability bonus per keyterm found in an n-best hypothesis (see keytermBest; log base
   * 1.0001: 10000 * ln(x)). The default, 20000, is set from the test sentences: large enough to
   * prefer "sunny" over "sunday" when it is a keyterm, small enough not to put a keyterm in an
   * utterance that does not say it.
   */
  keytermBonus: number;
}

export interface DecoderSetup {
  /** Normalized sentences: recognize only these (a JSGF grammar search instead of the n-gram). */
  grammar?: string[][];
  /**
   * Words the decoder must be able to recognize (keyterms): those missing from the dictionary
   * get an espeak-ng pronunciation and are added to it and, as unigrams, to the language model.
   */
  vocabulary?: string[];
  /** Audio upsampled from 8 kHz (no energy above 4 kHz): start from a matching cepstral mean. */
  narrowband?: boolean;
}

/**
 * Search settings. The n-gram defaults of this pocketsphinx (maxhmmpf 30000, no word cap) cost
 * ~0.3 s of CPU per second of audio; capping the active HMMs and word exits halves that for one
 * word more in error on the test sentences (6.2 % -> 6.9 % WER, measured on flite voices).
 * The configured extra arguments (SVC_POCKETSPHINX_ARGS, "-name value ...") override any of them.
 */
const SEARCH_ARGS: Record<string, string> = {
  // Silence removal drops frames, and word times are frame counts: after a pause of 0.5 s or
  // more every later word would be placed wrongly. Decoding silence costs some CPU; times are
  // worth it.
  '-remove_silence': 'no',
  '-maxhmmpf': '3000',
  '-maxwpf': '5',
  '-pl_window': '5',
};

/**
 * pocketsphinx normalizes cepstra by a running mean that starts at the model's -cmninit (in its
 * feat.params, which overrides the command line) and only moves at the end of an utterance. Audio
 * upsampled from 8 kHz has no energy in the model's upper filters, so its mean is far from that
 * start: a new decoder then misses most of its first utterances (80 % WER on flite speech). This
 * starting mean was measured on espeak-ng speech taken to 8 kHz and back (pocketsphinx's own
 * cmn_live log after 20 utterances); with it, flite speech at 8 kHz decodes at ~28 % WER.
 */
const NARROWBAND_CMNINIT = '48.73,24.37,-32.51,47.19,-26.23,-4.01,3.38,-32.52,20.03,-11.93,-2.39,7.62,-12.49';
let narrowbandParams: string | null = null;

/** The model's feat.params with the narrowband starting mean, written once per process. */
function narrowbandFeatParams(hmm: string): string {
  if (narrowbandParams) return narrowbandParams;
  const params = readFileSync(join(hmm, 'feat.params'), 'utf8')
    .split('\n')
    .filter((l) => !l.startsWith('-cmninit'));
  const text = [...params.filter((l) => l.trim()), `-cmninit ${NARROWBAND_CMNINIT}`, ''].join('\n');
  // Named by content, so every worker and process shares one file; written whole, then renamed.
  const file = join(tmpdir(), `svc-pocketsphinx-narrowband-${createHash('sha256').update(text).digest('hex').slice(0, 16)}.params`);
  if (!existsSync(file)) {
    const partial = `${file}.${process.pid}.${threadId}`;
    writeFileSync(partial, text);
    renameSync(partial, file);
  }
  narrowbandParams = file;
  return file;
}

function configArgs(settings: DecoderSettings, narrowband: boolean): string[] {
  const model = modelPaths(settings.modelDir);
  const args: Record<string, string> = {
    '-hmm': model.hmm,
    '-lm': model.lm,
    '-dict': model.dict,
    // pocketsphinx logs a few hundred lines per decoder; failures are reported by return codes.
    '-logfn': settings.logFile,
    ...SEARCH_ARGS,
    ...(narrowband ? { '-featparams': narrowbandFeatParams(model.hmm) } : {}),
  };
  const extra = settings.extraArgs.trim().split(/\s+/).filter(Boolean);
  for (let i = 0; i + 1 < extra.length; i += 2) args[extra[i]!] = extra[i + 1]!;
  // cmd_ln_parse_r skips argv[0], like main()'s.
  return ['pocketsphinx', ...Object.entries(args).flat()];
}

const GRAMMAR_SEARCH = 'grammar';

export class Decoder {
  private readonly lib: PocketsphinxLib;
  private ps: Ptr | null;
  /** Words added to the dictionary, with their guessed pronunciations. */
  readonly added: Pronunciation[] = [];
  /** Wanted words neither the dictionary has nor espeak-ng could pronounce. */
  readonly unknown: string[] = [];
  private inUtterance = false;
  /** 16 kHz samples fed since the decoder was (re)set: times continue across utterances. */
  private consumed = 0;
  private utteranceStart = 0;
  /** Word sequences whose presence earns an n-best hypothesis a bonus at finalize. */
  keyterms: string[][] = [];
  private readonly keytermBonus: number;

  constructor(settings: DecoderSettings, setup: DecoderSetup = {}) {
    this.keytermBonus = settings.keytermBonus;
    this.lib = pocketsphinx();
    const lib = this.lib;
    const argv = configArgs(settings, !!setup.narrowband);
    const config = lib.cmd_ln_parse_r(null, lib.ps_args(), argv.length, argv, 1);
    if (!config) throw new Error(`pocketsphinx rejected its configuration (${argv.slice(1).join(' ')})`);
    const ps = lib.ps_init(config);
    // ps_init holds its own reference to the configuration.
    lib.cmd_ln_free_r(config);
    if (!ps) throw new Error('pocketsphinx could not load its model (set SVC_POCKETSPHINX_LOG=/dev/stderr to see why)');
    this.ps = ps;
    try {
      const wanted = [...new Set([...(setup.grammar ?? []).flat(), ...(setup.vocabulary ?? [])])];
      const unknown = wanted.filter((w) => lib.ps_lookup_word(ps, w) === null);
      const prons = guessPronunciations(unknown);
      prons.forEach((p, i) => {
        // update=1 (rebuild the search) only once, after the last word
        if (lib.ps_add_word(ps, p.word, p.phones, i === prons.length - 1 ? 1 : 0) < 0) {
          throw new Error(`pocketsphinx could not add the word "${p.word}" (${p.phones})`);
        }
      });
      this.added = prons;
      this.unknown = unknown.filter((w) => !prons.some((p) => p.word === w));
      if (setup.grammar?.length) {
        if (this.unknown.length) throw new Error(`grammar words pocketsphinx cannot pronounce: ${this.unknown.join(', ')}`);
        if (lib.ps_set_jsgf_string(ps, GRAMMAR_SEARCH, jsgfForSentences(setup.grammar)) < 0 || lib.ps_set_search(ps, GRAMMAR_SEARCH) < 0) {
          throw new Error('pocketsphinx rejected the grammar');
        }
      }
    } catch (err) {
      this.free();
      throw err;
    }
  }

  /** Whether the dictionary has the word. */
  knows(word: string): boolean {
    return this.lib.ps_lookup_word(this.live(), word) !== null;
  }

  /** Feeds 16 kHz samples; returns the partial hypothesis of the current utterance. */
  push(samples: Int16Array): Hypothesis {
    const ps = this.live();
    if (samples.length === 0) return this.inUtterance ? this.hypothesis(false) : { text: '', words: [] };
    if (!this.inUtterance) {
      // A new stream per utterance restarts pocketsphinx's frame count (with its silence removal,
      // frames are otherwise numbered from the decoder's first audio, drifting a few frames per
      // utterance), so an utterance's frame n is at utteranceStart + n * 10 ms.
      if (this.lib.ps_start_stream(ps) < 0 || this.lib.ps_start_utt(ps) < 0) throw new Error('pocketsphinx could not start an utterance');
      this.inUtterance = true;
      this.utteranceStart = this.consumed;
    }
    if (this.lib.ps_process_raw(ps, samples, samples.length, 0, 0) < 0) throw new Error('pocketsphinx could not process audio');
    this.consumed += samples.length;
    return this.hypothesis(false);
  }

  /** Ends the utterance: its final hypothesis. The next push starts a new one. */
  finalize(): Hypothesis {
    const ps = this.live();
    if (!this.inUtterance) return { text: '', words: [] };
    this.inUtterance = false;
    if (this.lib.ps_end_utt(ps) < 0) throw new Error('pocketsphinx could not end the utterance');
    return this.hypothesis(true);
  }

  free(): void {
    if (this.ps) this.lib.ps_free(this.ps);
    this.ps = null;
  }

  private live(): Ptr {
    if (!this.ps) throw new Error('decoder already freed');
    return this.ps;
  }

  private hypothesis(final: boolean): Hypothesis {
    const ps = this.live();
    if (final && this.keyterms.length) {
      const rescored = this.keytermBest();
      if (rescored) return rescored;
    }
    const words = this.segments(this.lib.ps_seg_iter(ps));
    if (words.length) return { text: words.map((w) => w.word).join(' '), words };
    // A hypothesis without a segmentation (should not happen): its text, no times.
    const text = (this.lib.ps_get_hyp(ps, [0]) ?? '')
      .split(/\s+/)
      .map(transcriptWord)
      .filter((w): w is string => w !== null)
      .join(' ');
    return { text, words: [] };
  }

  /** Walks (and so frees) a segment iterator into transcript words with times in seconds. */
  private segments(seg: Ptr): Word[] {
    const words: Word[] = [];
    const end = this.consumed / DECODER_RATE;
    const sf = [0];
    const ef = [0];
    for (let s = seg; s; s = this.lib.ps_seg_next(s)) {
      const word = transcriptWord(this.lib.ps_seg_word(s));
      if (word === null) continue;
      this.lib.ps_seg_frames(s, sf, ef);
      const start = (this.utteranceStart + sf[0]! * SAMPLES_PER_FRAME) / DECODER_RATE;
      const stop = (this.utteranceStart + (ef[0]! + 1) * SAMPLES_PER_FRAME) / DECODER_RATE;
      words.push({ word, start: round(Math.min(start, end)), end: round(Math.min(stop, end)) });
    }
    return words;
  }

  /**
   * Keyterm bias for words the dictionary already has: among the N best hypotheses of the
   * utterance's lattice, the one with the best path score plus keytermBonus per keyterm it
   * contains. Null when the lattice has no n-best list (grammar search, no speech).
   */
  private keytermBest(): Hypothesis | null {
    let nbest = this.lib.ps_nbest(this.live());
    const score = [0];
    const candidates: { score: number; words: string[]; nbest: number }[] = [];
    for (let i = 0; nbest && i < NBEST; i++) {
      const hyp = this.lib.ps_nbest_hyp(nbest, score);
      if (hyp !== null) {
        const words = hyp
          .split(/\s+/)
          .map(transcriptWord)
          .filter((w): w is string => w !== null);
        candidates.push({ score: score[0]! + this.keytermBonus * countKeyterms(words, this.keyterms), words, nbest: i });
      }
      nbest = this.lib.ps_nbest_next(nbest);
    }
    if (nbest) this.lib.ps_nbest_free(nbest);
    if (!candidates.length) return null;
    const winner = candidates.reduce((a, b) => (b.score > a.score ? b : a));
    // Walk the n-best list again to the winner for its segmentation (times).
    nbest = this.lib.ps_nbest(this.live());
    for (let i = 0; nbest && i < winner.nbest; i++) nbest = this.lib.ps_nbest_next(nbest);
    if (!nbest) return null;
    const words = this.segments(this.lib.ps_nbest_seg(nbest));
    this.lib.ps_nbest_free(nbest);
    return { text: words.length ? words.map((w) => w.word).join(' ') : winner.words.join(' '), words };
  }
}

const NBEST = 20;

function countKeyterms(words: string[], keyterms: string[][]): number {
  let n = 0;
  for (const term of keyterms) {
    if (!term.length) continue;
    for (let i = 0; i + term.length <= words.length; i++) {
      if (term.every((w, j) => words[i + j] === w)) n++;
    }
  }
  return n;
}

function round(seconds: number): number {
  return Math.round(seconds * 1000) / 1000;
}
