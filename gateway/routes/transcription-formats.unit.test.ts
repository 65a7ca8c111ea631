// Unit tests of the transcription answer shapes (segments from word times, SRT/WebVTT, the
// parameters). The route over real HTTP: transcriptions.formats.test.ts.
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../server/services/errors.ts';
import { compressionRatio, parseGranularities, parseResponseFormat, segmentsOf, srt, timestamp, verboseJson, vtt } from './transcription-formats.ts';

const w = (word: string, start: number, end: number) => ({ word, start, end });

describe('segmentsOf', () => {
  it('splits at a pause of 0.5 s or more, not at shorter gaps', () => {
    const words = [w('hello', 0.1, 0.4), w('there', 0.45, 0.8), w('how', 1.3, 1.5), w('are', 1.55, 1.7), w('you', 1.75, 2.0)];
    const segs = segmentsOf({ text: 'hello there how are you', words }, 2.5);
    expect(segs.map((s) => [s.id, s.start, s.end, s.text])).toEqual([
      [0, 0.1, 0.8, 'hello there'],
      [1, 1.3, 2.0, 'how are you'],
    ]);
    // Whisper's whole segment shape; seek in its 10 ms frames.
    expect(Object.keys(segs[1]!)).toEqual([
      'id',
      'seek',
      'start',
      'end',
      'text',
      'tokens',
      'temperature',
      'avg_logprob',
      'compression_ratio',
      'no_speech_prob',
    ]);
    expect(segs[1]!.seek).toBe(130);
  });

  it('splits after a sentence end, spelling segments as the transcript does when it has one token per word', () => {
    const words = [w('hi', 0, 0.2), w('there', 0.25, 0.5), w('how', 0.55, 0.7), w('are', 0.72, 0.8), w('you', 0.82, 1)];
    const segs = segmentsOf({ text: 'Hi there. How are you?', words }, 1.2);
    expect(segs.map((s) => s.text)).toEqual(['Hi there.', 'How are you?']);
    // Tokens that do not line up with the words: the words' own spelling.
    expect(segmentsOf({ text: 'Hi there, how are you?', words: words.slice(0, 4) }, 1.2).map((s) => s.text)).toEqual(['hi there how are']);
  });

  it('no segment is longer than 30 s', () => {
    const words = Array.from({ length: 80 }, (_, i) => w(`w${i}`, i * 0.9, i * 0.9 + 0.5));
    const segs = segmentsOf({ text: words.map((x) => x.word).join(' '), words }, 80);
    expect(segs.length).toBeGreaterThan(2);
    for (const s of segs) expect(s.end - s.start).toBeLessThanOrEqual(30);
    expect(segs.map((s) => s.text).join(' ')).toBe(words.map((x) => x.word).join(' '));
  });

  it('text without word times is one segment over the whole audio; nothing heard is no segment', () => {
    expect(segmentsOf({ text: ' Hello world. ', words: [] }, 3.2004)).toEqual([
      {
        id: 0,
        seek: 0,
        start: 0,
        end: 3.2,
        text: 'Hello world.',
        tokens: [],
        temperature: 0,
        avg_logprob: 0,
        compression_ratio: compressionRatio('Hello world.'),
        no_speech_prob: 0,
      },
    ]);
    expect(segmentsOf({ text: '', words: [] }, 3)).toEqual([]);
  });
});

describe('compressionRatio', () => {
  it('is Whisper’s: repetitive text compresses well (above 2.4), ordinary text does not', () => {
    expect(compressionRatio('the '.repeat(50))).toBeGreaterThan(2.4);
    expect(compressionRatio('the quick brown fox jumps over the lazy dog')).toBeLessThan(2.4);
    expect(compressionRatio('')).toBe(0);
  });
});

describe('srt and vtt', () => {
  it('timestamps: hours, minutes, seconds and milliseconds, each format with its separator', () => {
    expect(timestamp(0, ',')).toBe('00:00:00,000');
    expect(timestamp(3725.0456, ',')).toBe('01:02:05,046');
    expect(timestamp(59.9996, '.')).toBe('00:01:00.000');
  });

  it('cues: numbered in SRT, under a WEBVTT header in VTT; cue text on one line and never "-->"', () => {
    const segs = [
      { start: 0.5, end: 1.25, text: 'one\ntwo' },
      { start: 2, end: 3, text: 'a --> b' },
    ];
    expect(srt(segs)).toBe('1\n00:00:00,500 --> 00:00:01,250\none two\n\n2\n00:00:02,000 --> 00:00:03,000\na -> b\n\n');
    expect(vtt(segs)).toBe('WEBVTT\n\n00:00:00.500 --> 00:00:01.250\none two\n\n00:00:02.000 --> 00:00:03.000\na -> b\n\n');
    expect(srt([])).toBe('');
    expect(vtt([])).toBe('WEBVTT\n\n');
  });
});

describe('parameters', () => {
  it('response_format: default json; the five formats; anything else refused naming the param', () => {
    expect(parseResponseFormat(undefined)).toBe('json');
    expect(parseResponseFormat('')).toBe('json');
    for (const f of ['json', 'text', 'srt', 'verbose_json', 'vtt']) expect(parseResponseFormat(f)).toBe(f);
    for (const f of ['xml', 'diarized_json', 'JSON']) {
      const e = (() => {
        try {
          parseResponseFormat(f);
        } catch (err) {
          return err as ServiceError;
        }
      })();
      expect(e).toBeInstanceOf(ServiceError);
      expect([e!.code, e!.param]).toEqual(['invalid_request', 'response_format']);
    }
  });

  it('timestamp_granularities: repeated or comma separated; segment by default; unknown values refused', () => {
    expect([...parseGranularities([])]).toEqual(['segment']);
    expect([...parseGranularities(['word'])]).toEqual(['word']);
    expect(new Set(parseGranularities(['word', 'segment']))).toEqual(new Set(['word', 'segment']));
    expect(new Set(parseGranularities(['segment, word']))).toEqual(new Set(['word', 'segment']));
    expect(() => parseGranularities(['char'])).toThrow(ServiceError);
  });

  it('verbose_json: language only when given, words and segments only when asked, duration and usage in seconds', () => {
    const t = { text: 'hi there', words: [w('hi', 0, 0.2), w('there', 0.3, 0.6)] };
    expect(verboseJson(t, 1.23456, undefined, new Set(['word']))).toEqual({
      task: 'transcribe',
      duration: 1.235,
      text: 'hi there',
      words: t.words,
      usage: { type: 'duration', seconds: 1.235 },
    });
    const both = verboseJson(t, 1, 'en', new Set(['word', 'segment']));
    expect(Object.keys(both)).toEqual(['task', 'language', 'duration', 'text', 'segments', 'words', 'usage']);
  });
});
