// "Cloning" with the local engines, honestly: flite and espeak-ng cannot imitate a timbre, so a
// clone is an engine voice of the measured gender, set to the clip's median pitch and speaking
// rate (gateway/audio/voice-analysis.ts measures them). The engine settings come from
// calibration curves: each base voice was synthesised at several settings and measured with the
// same analyzeVoice, so that a clip re-synthesised with the derived voice measures like the clip
// (`npx tsx bench/voice-calibration.ts` re-measures everything below; flite 2.2 and espeak-ng
// 1.51 of Debian 12).
//
// Modes: `similarity` follows the measurements; `stability` goes halfway (on a log scale: the
// geometric mean) from the base voice's natural pitch and rate toward them, which keeps the
// engine nearer the settings it sounds best at. Everything is clamped to ranges the engines
// render cleanly.
import type { VoiceAnalysis } from '../../audio/voice-analysis.ts';

export interface DerivedVoice {
  upstreamId: string;
  params: Record<string, number>;
  description: string;
}

export interface DeriveOptions {
  /** BCP 47-ish tag (en, en-US, pt-BR, zh...); picks the espeak-ng voice, ignored by flite (English only). */
  language: string;
  mode: 'stability' | 'similarity';
}

interface FliteVoice {
  id: 'slt' | 'rms' | 'awb';
  /** Median F0 (Hz) and syllables/s at the voice's own settings. */
  naturalF0: number;
  naturalRate: number;
  /** Measured median F0 = a + b · int_f0_target_mean; null when the voice ignores the setting. */
  pitch: { a: number; b: number } | null;
  /** Measured syllables/s = naturalRate · duration_stretch^exponent. */
  rateExponent: number;
}

// Fitted by bench/voice-calibration.ts: pitch settings 120-270 Hz (slt) or 70-170 Hz (awb),
// residuals under 1.5 Hz; duration_stretch 0.6-1.5, residuals under 4% (ln 0.04).
const FLITE: Record<FliteVoice['id'], FliteVoice> = {
  slt: { id: 'slt', naturalF0: 164.2, naturalRate: 4.471, pitch: { a: -3.81, b: 0.9805 }, rateExponent: -0.728 },
  awb: { id: 'awb', naturalF0: 126.5, naturalRate: 4.708, pitch: { a: -1.34, b: 0.9729 }, rateExponent: -0.755 },
  // rms ignores int_f0_target_mean (byte-identical output at 80-250 Hz), so it is used only for
  // male clips within RMS_PITCH_TOLERANCE of its own pitch; other male clips get awb, whose
  // pitch can be set.
  rms: { id: 'rms', naturalF0: 101.8, naturalRate: 4.289, pitch: null, rateExponent: -0.694 },
};
const RMS_PITCH_TOLERANCE = 1.08;
const FLITE_PITCH_HZ = { min: 60, max: 350 };
const DURATION_STRETCH = { min: 0.5, max: 2 };

interface EspeakVariant {
  /** Appended to the language voice: '' is the language's own (male) voice. */
  suffix: '' | '+f3';
  /** Measured median F0 at -p 0, 10, ..., 90, 99 (espeak-ng's pitch setting is convex, not linear). */
  pitchTable: readonly number[];
  naturalF0: number;
  /** Measured syllables/s = naturalRate · (wpm / 175)^exponent. */
  naturalRate: number;
  rateExponent: number;
}

const ESPEAK_PITCH_SETTINGS = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 99];
// Measured on en-us and en-us+f3 by bench/voice-calibration.ts (rates fitted over 100-250 wpm,
// residuals under 5%). Other languages measured close to these (de, fr+f3: pitch within 3%, rate
// within 7%), so the English curves serve every language.
const ESPEAK: Record<'male' | 'female', EspeakVariant> = {
  male: {
    suffix: '',
    pitchTable: [69.6, 73.5, 79.1, 84.1, 91.8, 101.0, 111.0, 123.2, 137.3, 153.3, 169.5],
    naturalF0: 101.0,
    naturalRate: 4.683,
    rateExponent: 0.754,
  },
  female: {
    suffix: '+f3',
    pitchTable: [144.5, 154.0, 164.3, 178.1, 192.0, 209.6, 228.7, 250.9, 276.3, 306.7, 335.4],
    naturalF0: 209.6,
    naturalRate: 4.855,
    rateExponent: 0.853,
  },
};
const ESPEAK_NATURAL_WPM = 175;
/** espeak-ng renders 80-450 wpm; past ~350 the analysis (and listeners) lose syllables. */
const ESPEAK_WPM = { min: 80, max: 350 };

// `espeak-ng --voices` of espeak-ng 1.51 (Debian 12): the language voices a tag can map to.
const ESPEAK_LANGUAGES = new Set(
  (
    'af am an ar as az ba be bg bn bpy bs ca chr-us-qaaa-x-west cmn cmn-latn-pinyin cs cv cy da de el en-029 en-gb ' +
    'en-gb-scotland en-gb-x-gbclan en-gb-x-gbcwmd en-gb-x-rp en-us en-us-nyc eo es es-419 et eu fa fa-latn fi fr-be fr-ch ' +
    'fr-fr ga gd gn grc gu hak haw he hi hr ht hu hy hyw ia id io is it ja jbo ka kk kl kn ko kok ku ky la lb lfn lt ltg ' +
    'lv mi mk ml mr ms mt my nb nci ne nl nog om or pa pap piqd pl pt pt-br py qdb qu quc qya ro ru ru-lv sd shn si sjn ' +
    'sk sl smj sq sr sv sw ta te th tk tn tr tt ug uk ur uz vi vi-vn-x-central vi-vn-x-south yue'
  ).split(' '),
);
/** Common tags whose espeak-ng voice has another name. */
const ESPEAK_ALIASES: Record<string, string> = {
  en: 'en-us',
  'en-au': 'en-gb',
  'en-ie': 'en-gb',
  'en-nz': 'en-gb',
  'en-ca': 'en-us',
  fr: 'fr-fr',
  'fr-ca': 'fr-fr',
  'pt-pt': 'pt',
  'es-es': 'es',
  'es-mx': 'es-419',
  'es-us': 'es-419',
  'es-ar': 'es-419',
  zh: 'cmn',
  'zh-cn': 'cmn',
  'zh-hans': 'cmn',
  'zh-tw': 'cmn',
  'zh-hant': 'cmn',
  'zh-hk': 'yue',
  no: 'nb',
  'nb-no': 'nb',
  iw: 'he',
  in: 'id',
  fil: 'id',
  'de-de': 'de',
  'de-at': 'de',
  'de-ch': 'de',
  'it-it': 'it',
};
const ESPEAK_FALLBACK_LANGUAGE = 'en-us';

/** The installed espeak-ng language voice for a language tag: exact, alias, base language, else en-us. */
export function espeakLanguageVoice(language: string): string {
  const tag = language.trim().toLowerCase().replace(/_/g, '-');
  const base = tag.split('-')[0] ?? '';
  for (const candidate of [tag, ESPEAK_ALIASES[tag], base, ESPEAK_ALIASES[base]]) {
    if (candidate && ESPEAK_LANGUAGES.has(candidate)) return candidate;
  }
  return ESPEAK_FALLBACK_LANGUAGE;
}

function clamp(x: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, x));
}

/** The measured value, or halfway to it (geometric mean) from the base voice's natural value. */
function target(measured: number | null, natural: number, mode: DeriveOptions['mode']): number {
  if (measured === null || !(measured > 0)) return natural;
  return mode === 'similarity' ? measured : Math.sqrt(measured * natural);
}

/** Inverse of a monotone piecewise-linear table: the setting whose F0 is `f0Hz`, clamped to 0-99. */
function espeakPitchFor(f0Hz: number, table: readonly number[]): number {
  if (f0Hz <= table[0]!) return 0;
  for (let i = 1; i < table.length; i++) {
    if (f0Hz <= table[i]!) {
      const lo = ESPEAK_PITCH_SETTINGS[i - 1]!;
      const hi = ESPEAK_PITCH_SETTINGS[i]!;
      return lo + ((hi - lo) * (f0Hz - table[i - 1]!)) / (table[i]! - table[i - 1]!);
    }
  }
  return 99;
}

/** Which base gender to use: the estimate, or for an unknown estimate the nearer side of 165 Hz. */
function baseGender(analysis: VoiceAnalysis): 'male' | 'female' {
  if (analysis.gender !== 'unknown') return analysis.gender;
  return analysis.medianF0Hz !== null && analysis.medianF0Hz < 165 ? 'male' : 'female';
}

function fmt(x: number, digits: number): string {
  return x.toFixed(digits).replace(/\.0+$/, '');
}

function describeClip(analysis: VoiceAnalysis): string {
  const seconds = fmt(analysis.durationMs / 1000, 1);
  if (analysis.medianF0Hz === null) return `Derived from a ${seconds} s clip with no voiced speech measured`;
  const parts = [analysis.gender === 'unknown' ? 'gender unclear' : analysis.gender, `median pitch ${Math.round(analysis.medianF0Hz)} Hz`];
  if (analysis.syllablesPerSecond !== null) parts.push(`${fmt(analysis.syllablesPerSecond, 1)} syllables/s`);
  return `Derived from a ${seconds} s clip: ${parts.join(', ')}`;
}

export function deriveLocalVoice(engine: 'flite' | 'espeak-ng', analysis: VoiceAnalysis, options: DeriveOptions): DerivedVoice {
  const gender = baseGender(analysis);
  const modeNote = options.mode === 'stability' ? ', pulled halfway toward its natural settings (stability)' : '';
  const clip = describeClip(analysis);

  if (engine === 'flite') {
    const measuredF0 = analysis.medianF0Hz;
    const voice =
      gender === 'female'
        ? FLITE.slt
        : measuredF0 !== null && Math.abs(Math.log(measuredF0 / FLITE.rms.naturalF0)) > Math.log(RMS_PITCH_TOLERANCE)
          ? FLITE.awb
          : FLITE.rms;
    const f0 = target(measuredF0, voice.naturalF0, options.mode);
    const rate = target(analysis.syllablesPerSecond, voice.naturalRate, options.mode);
    const durationStretch = Math.round(clamp((rate / voice.naturalRate) ** (1 / voice.rateExponent), DURATION_STRETCH.min, DURATION_STRETCH.max) * 1000) / 1000;
    const params: Record<string, number> = { durationStretch };
    let pitchText = `its own pitch (about ${Math.round(voice.naturalF0)} Hz)`;
    if (voice.pitch) {
      params.pitchHz = Math.round(clamp((f0 - voice.pitch.a) / voice.pitch.b, FLITE_PITCH_HZ.min, FLITE_PITCH_HZ.max) * 10) / 10;
      pitchText = `pitch target ${fmt(params.pitchHz, 1)} Hz`;
    }
    return {
      upstreamId: voice.id,
      params,
      description: `${clip}; rendered by flite voice ${voice.id} with ${pitchText} and duration stretch ${fmt(durationStretch, 3)}${modeNote}.`,
    };
  }

  const variant = ESPEAK[gender];
  const upstreamId = `${espeakLanguageVoice(options.language)}${variant.suffix}`;
  const f0 = target(analysis.medianF0Hz, variant.naturalF0, options.mode);
  const rate = target(analysis.syllablesPerSecond, variant.naturalRate, options.mode);
  const pitch = Math.round(espeakPitchFor(f0, variant.pitchTable));
  const wordsPerMinute = Math.round(clamp(ESPEAK_NATURAL_WPM * (rate / variant.naturalRate) ** (1 / variant.rateExponent), ESPEAK_WPM.min, ESPEAK_WPM.max));
  return {
    upstreamId,
    params: { pitch, wordsPerMinute },
    description: `${clip}; rendered by espeak-ng voice ${upstreamId} at pitch ${pitch} (0-99) and ${wordsPerMinute} words per minute${modeNote}.`,
  };
}
