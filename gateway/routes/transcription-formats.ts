// The answer shapes of POST /v1/audio/transcriptions (OpenAI's `response_format`), made from
// what every engine gives: the text and timed words (gateway/upstreams/contract.ts `Transcript`).
// Reference: platform.openai.com/docs/api-reference/audio/createTranscription and
// .../audio/verbose-json-object.
//
// Segments are not an engine output here: they are the words grouped at pauses and sentence
// ends. They carry Whisper's whole segment shape, which clients validate (the AI SDK refuses a
// segment without `seek` or `tokens`). No engine behind the gateway reports Whisper's decoder
// internals, so those are documented neutral values (docs/stt.md): `seek` the segment's start in
// Whisper's 10 ms frames, `tokens` empty (no tokenizer), `temperature` 0 (greedy decoding),
// `avg_logprob` 0 and `no_speech_prob` 0 (nothing known against the words). `compression_ratio`
// is a property of the text (Whisper's own formula) and is given.
import { deflateSync } from 'node:zlib';
import { ServiceError } from '../../server/services/errors.ts';
import type { Transcript, Word } from '../upstreams/contract.ts';

export const RESPONSE_FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt'] as const;
export type ResponseFormat = (typeof RESPONSE_FORMATS)[number];
export type Granularity = 'word' | 'segment';

/** A pause at least this long between two words ends a segment (Whisper's segments break at about the same places). */
export const SEGMENT_PAUSE_SECONDS = 0.5;
/** No segment is longer than Whisper's 30 s window: subtitle cues stay readable. */
export const SEGMENT_MAX_SECONDS = 30;

export interface Segment {
  id: number;
  seek: number;
  start: number;
  end: number;
  text: string;
  tokens: number[];
  temperature: number;
  avg_logprob: number;
  compression_ratio: number;
  no_speech_prob: number;
}

/** `response_format`, default json; anything else is the caller's error, named. */
export function parseResponseFormat(value: string | undefined): ResponseFormat {
  if (value === undefined || value === '') return 'json';
  if ((RESPONSE_FORMATS as readonly string[]).includes(value)) return value as ResponseFormat;
  const hint = value === 'diarized_json' ? ' (no engine here tells speakers apart)' : '';
  throw new ServiceError(
    'invalid_request',
    `response_format '${value}' is not supported${hint}; use one of ${RESPONSE_FORMATS.join(', ')}.`,
    'response_format',
  );
}

/**
 * `timestamp_granularities[]` (or `timestamp_granularities`), each value `word` or `segment`,
 * repeated or comma separated. Without any, verbose_json gives segments (OpenAI's default).
 */
export function parseGranularities(values: readonly string[]): Set<Granularity> {
  const out = new Set<Granularity>();
  for (const value of values
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter(Boolean)) {
    if (value !== 'word' && value !== 'segment') {
      throw new ServiceError(
        'invalid_request',
        `timestamp_granularities[]: '${value}' is not a granularity; use word, segment or both.`,
        'timestamp_granularities[]',
      );
    }
    out.add(value);
  }
  if (out.size === 0) out.add('segment');
  return out;
}

const roundMs = (seconds: number) => Math.round(seconds * 1000) / 1000;

/** Whisper's compression ratio: UTF-8 length over zlib-compressed length (above 2.4 reads as repetitive). */
export function compressionRatio(text: string): number {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length === 0) return 0;
  return Math.round((bytes.length / deflateSync(bytes).length) * 1000) / 1000;
}

const endsSentence = (word: string) => /[.?!…]["')\]]*$/.test(word);

/**
 * The words grouped into segments: a new one after a pause of SEGMENT_PAUSE_SECONDS, after a
 * word that ends a sentence, or before SEGMENT_MAX_SECONDS would be passed. Segment text uses the
 * transcript's own spelling (punctuation, case) when it has one token per word. A transcript with
 * text but no word times is one segment over the whole audio.
 */
export function segmentsOf(transcript: Transcript, durationSeconds: number): Segment[] {
  const { words } = transcript;
  if (words.length === 0) {
    const text = transcript.text.trim();
    return text ? [segment(0, 0, durationSeconds, text)] : [];
  }
  const tokens = transcript.text.split(/\s+/).filter(Boolean);
  const spelled = tokens.length === words.length ? tokens : words.map((w) => w.word);
  const segments: Segment[] = [];
  let first = 0;
  const close = (last: number) => {
    segments.push(segment(segments.length, words[first]!.start, words[last]!.end, spelled.slice(first, last + 1).join(' ')));
    first = last + 1;
  };
  for (let i = 1; i < words.length; i++) {
    const prev: Word = words[i - 1]!;
    const w: Word = words[i]!;
    if (w.start - prev.end >= SEGMENT_PAUSE_SECONDS || endsSentence(spelled[i - 1]!) || w.end - words[first]!.start > SEGMENT_MAX_SECONDS) close(i - 1);
  }
  close(words.length - 1);
  return segments;
}

function segment(id: number, start: number, end: number, text: string): Segment {
  return {
    id,
    seek: Math.round(start * 100),
    start: roundMs(start),
    end: roundMs(end),
    text,
    tokens: [],
    temperature: 0,
    avg_logprob: 0,
    compression_ratio: compressionRatio(text),
    no_speech_prob: 0,
  };
}

/** OpenAI's verbose_json object, with only the fields this gateway can fill honestly. */
export function verboseJson(transcript: Transcript, durationSeconds: number, language: string | undefined, granularities: Set<Granularity>) {
  const duration = roundMs(durationSeconds);
  return {
    task: 'transcribe' as const,
    // The engines here do not detect the language: the caller's hint, when there is one.
    ...(language ? { language } : {}),
    duration,
    text: transcript.text,
    ...(granularities.has('segment') ? { segments: segmentsOf(transcript, durationSeconds) } : {}),
    ...(granularities.has('word') ? { words: transcript.words } : {}),
    usage: { type: 'duration' as const, seconds: duration },
  };
}

/** HH:MM:SS plus milliseconds after `separator` (',' for SRT, '.' for WebVTT). */
export function timestamp(seconds: number, separator: ',' | '.'): string {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  return `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}${separator}${pad(ms % 1000, 3)}`;
}

type Cue = Pick<Segment, 'start' | 'end' | 'text'>;

/** A cue's text on one line, without the "-->" that would end it early. */
const cueText = (text: string) => text.replace(/\s+/g, ' ').trim().replace(/-->/g, '->');

export function srt(segments: readonly Cue[]): string {
  return segments.map((s, i) => `${i + 1}\n${timestamp(s.start, ',')} --> ${timestamp(s.end, ',')}\n${cueText(s.text)}\n\n`).join('');
}

export function vtt(segments: readonly Cue[]): string {
  return `WEBVTT\n\n${segments.map((s) => `${timestamp(s.start, '.')} --> ${timestamp(s.end, '.')}\n${cueText(s.text)}\n\n`).join('')}`;
}
