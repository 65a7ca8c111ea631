// POST /v1/audio/transcriptions `response_format` and `timestamp_granularities[]` over real HTTP
// (real gateway runtime, throw-away database, the local pocketsphinx recogniser on speech flite
// makes here): json (the spec's default shape, unchanged), verbose_json (OpenAI's fields, the
// segments made from the engine's word times), text, srt and vtt; refusals; OpenAI's `prompt`
// read as keyterms, also through a gateway behind a gateway; the official `openai` client.
import OpenAI from 'openai';
import { toFile } from 'openai/uploads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import {
  STT_PRICE,
  audioCost,
  concat,
  expectDebited,
  expectTimedWords,
  ledgerRowCount,
  requestId,
  settleRecognizers,
  silence,
  speech,
  startSttGateway,
  transcribe,
  wavFile,
  wer,
  words,
} from '../../test/support/stt-routes.ts';
import { expectError, usd } from '../../test/support/tts-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const FIRST = 'please call me tomorrow morning about the meeting';
const SECOND = 'she bought three apples and a loaf of bread';
const WEATHER = 'the weather today is sunny with a light breeze';
const HOP_KEY_ENV = 'TRANSCRIPTION_FORMATS_TEST_KEY';

let h: GatewayHarness;
/** Two sentences with a second of silence between them, 16 kHz. */
let twoSentences: { wav: Buffer; seconds: number; millis: number };
/** verbose_json with words and segments of twoSentences, made once (the engine is deterministic). */
let reference: Promise<Verbose> | undefined;
const referenceAnswer = () =>
  (reference ??= send({ response_format: 'verbose_json' }, requestId('ref'), [
    ['timestamp_granularities[]', 'word'],
    ['timestamp_granularities[]', 'segment'],
  ]).then(async (res) => (await res.json()) as Verbose));

interface Segment {
  id: number;
  start: number;
  end: number;
  text: string;
  compression_ratio: number;
}
interface Verbose {
  task: string;
  language?: string;
  duration: number;
  text: string;
  segments?: Segment[];
  words?: { word: string; start: number; end: number }[];
  usage: { type: string; seconds: number };
}

beforeAll(async () => {
  h = await startSttGateway();
  // The gateway as its own engine: an stt model over protocol `openai` at its own /v1.
  process.env[HOP_KEY_ENV] = h.key;
  await upsertModel(h.testDb.db.prisma, checkProtocol, {
    id: 'hop-stt',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: `${h.url}/v1`, protocol: 'openai', upstreamModel: 'local-stt', apiKeyEnv: HOP_KEY_ENV },
  });
  await h.runtime.ctx.registry.refresh();
  const [a, b] = await Promise.all([speech(FIRST), speech(SECOND, 'rms'), speech(WEATHER)]);
  const samples = concat(a!.samples, silence(1), b!.samples);
  twoSentences = { wav: wavFile([samples], 16000), seconds: samples.length / 16000, millis: Math.round((samples.length / 16000) * 1000) };
}, 120_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
  delete process.env[HOP_KEY_ENV];
});

/** A 200 whose cost is exactly the audio's, debited once. */
async function billed(res: Response, id: string, millis = twoSentences.millis): Promise<void> {
  expect(res.status).toBe(200);
  const cost = audioCost(millis);
  expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
  const b = await expectDebited(h, id, cost);
  expect(b.usage).toHaveLength(1);
  expect(b.usage[0]).toMatchObject({ route: 'audio.transcriptions', audioMillis: millis });
}

const send = (fields: Record<string, string>, id: string, extra: [string, string][] = []) => {
  const all: Record<string, string> = { model: 'local-stt', ...fields };
  if (extra.length === 0) return transcribe(h, twoSentences.wav, all, { requestId: id });
  // Repeated fields: FormData by hand.
  const form = new FormData();
  for (const [k, v] of [...Object.entries(all), ...extra]) form.append(k, v);
  form.append('file', new Blob([new Uint8Array(twoSentences.wav)]), 'audio.wav');
  return fetch(`${h.url}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${h.key}`, 'x-request-id': id }, body: form });
};

/** Ids from 0, times inside the audio and in order, texts that add up to the words. */
function expectSegments(segments: Segment[] | undefined, text: string, duration: number): Segment[] {
  expect(Array.isArray(segments)).toBe(true);
  const list = segments!;
  expect(list.length).toBeGreaterThan(0);
  let last = 0;
  list.forEach((s, i) => {
    // Whisper's whole shape; its decoder internals at their documented neutral values.
    expect(Object.keys(s)).toEqual(['id', 'seek', 'start', 'end', 'text', 'tokens', 'temperature', 'avg_logprob', 'compression_ratio', 'no_speech_prob']);
    expect(s).toMatchObject({ seek: Math.round(s.start * 100), tokens: [], temperature: 0, avg_logprob: 0, no_speech_prob: 0 });
    expect(s.id).toBe(i);
    expect(s.start).toBeGreaterThanOrEqual(last);
    expect(s.end).toBeGreaterThan(s.start);
    expect(s.end).toBeLessThanOrEqual(duration);
    expect(s.compression_ratio).toBeGreaterThan(0);
    last = s.end;
  });
  expect(words(list.map((s) => s.text).join(' '))).toEqual(words(text));
  return list;
}

describe('response_format', { timeout: 120_000 }, () => {
  it('default and json: the spec shape, exactly {text, words, duration_seconds}', async () => {
    const ref = await referenceAnswer();
    for (const fields of [{}, { response_format: 'json' }] as Record<string, string>[]) {
      const id = requestId('json');
      const res = await send(fields, id);
      const body = (await res.json()) as Record<string, unknown>;
      expect(Object.keys(body).sort()).toEqual(['duration_seconds', 'text', 'words']);
      expect(body).toEqual({ text: ref.text, words: ref.words, duration_seconds: twoSentences.millis / 1000 });
      expect(wer(`${FIRST} ${SECOND}`, body.text as string)).toBeLessThanOrEqual(0.25);
      await billed(res, id);
    }
  });

  it('verbose_json: task, language, duration in seconds, text, segments split at the pause, usage; words only when asked', async () => {
    const id = requestId('verbose');
    const res = await send({ response_format: 'verbose_json', language: 'en' }, id);
    const body = (await res.json()) as Verbose;
    expect(Object.keys(body).sort()).toEqual(['duration', 'language', 'segments', 'task', 'text', 'usage']);
    expect(body).toMatchObject({
      task: 'transcribe',
      language: 'en',
      duration: twoSentences.millis / 1000,
      usage: { type: 'duration', seconds: twoSentences.millis / 1000 },
    });
    expect(wer(`${FIRST} ${SECOND}`, body.text)).toBeLessThanOrEqual(0.25);
    const segments = expectSegments(body.segments, body.text, body.duration);
    // The second of silence separates the sentences: a segment ends before it and the next starts after.
    const first = (await speech(FIRST)).samples.length / 16000;
    expect(segments.some((s) => s.end <= first + 0.05)).toBe(true);
    expect(segments.some((s) => s.start >= first + 0.5)).toBe(true);
    await billed(res, id);
  });

  it('timestamp_granularities[]: word gives words and no segments; both (repeated, or without brackets) give both', async () => {
    const wordsOnly = (await (await send({ response_format: 'verbose_json' }, requestId('w'), [['timestamp_granularities[]', 'word']])).json()) as Verbose;
    expect(wordsOnly.segments).toBeUndefined();
    expect(wordsOnly.language).toBeUndefined();
    const timed = expectTimedWords(wordsOnly.words, 0, twoSentences.seconds);
    expect(timed.map((w) => w.word).join(' ')).toBe(wordsOnly.text);

    const unbracketed = (await (
      await send({ response_format: 'verbose_json' }, requestId('ws'), [['timestamp_granularities', 'segment,word']])
    ).json()) as Verbose;
    for (const both of [await referenceAnswer(), unbracketed]) {
      expect(both.words).toEqual(timed);
      const segments = expectSegments(both.segments, both.text, both.duration);
      // Each segment spans its words exactly.
      for (const s of segments) {
        const inside = timed.filter((w) => w.start >= s.start && w.end <= s.end);
        expect(inside.map((w) => w.word).join(' ')).toBe(s.text);
      }
    }
  });

  it('text: the transcript as text/plain', async () => {
    const id = requestId('text');
    const res = await send({ response_format: 'text' }, id);
    expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(await res.text()).toBe((await referenceAnswer()).text);
    await billed(res, id);
  });

  it('srt and vtt: numbered cues with the segments times, in each format own timestamp notation', async () => {
    const segments = (await referenceAnswer()).segments!;
    const stamp = (s: number, sep: string) => {
      const ms = Math.round(s * 1000);
      return `${String(Math.floor(ms / 3_600_000)).padStart(2, '0')}:${String(Math.floor(ms / 60_000) % 60).padStart(2, '0')}:${String(Math.floor(ms / 1000) % 60).padStart(2, '0')}${sep}${String(ms % 1000).padStart(3, '0')}`;
    };

    const srtId = requestId('srt');
    const srt = await send({ response_format: 'srt' }, srtId);
    expect(srt.headers.get('content-type')).toBe('application/x-subrip; charset=utf-8');
    expect(await srt.text()).toBe(segments.map((s, i) => `${i + 1}\n${stamp(s.start, ',')} --> ${stamp(s.end, ',')}\n${s.text}\n\n`).join(''));
    await billed(srt, srtId);

    const vttId = requestId('vtt');
    const vtt = await send({ response_format: 'vtt' }, vttId);
    expect(vtt.headers.get('content-type')).toBe('text/vtt; charset=utf-8');
    const body = await vtt.text();
    expect(body).toBe(`WEBVTT\n\n${segments.map((s) => `${stamp(s.start, '.')} --> ${stamp(s.end, '.')}\n${s.text}\n\n`).join('')}`);
    expect(body).toMatch(/^WEBVTT\n\n\d{2}:\d{2}:\d{2}\.\d{3} --> \d{2}:\d{2}:\d{2}\.\d{3}\n/);
    await billed(vtt, vttId);
  });

  it.each([
    ['an unknown format', { response_format: 'xml' }, [], 'response_format'],
    ['diarized_json', { response_format: 'diarized_json' }, [], 'response_format'],
    ['an unknown granularity', { response_format: 'verbose_json' }, [['timestamp_granularities[]', 'sentence']], 'timestamp_granularities[]'],
  ] as [string, Record<string, string>, [string, string][], string][])(
    '%s: 400 invalid_request naming the param, nothing billed',
    async (_name, fields, extra, param) => {
      const before = await ledgerRowCount(h);
      const err = await expectError(await send(fields, requestId('bad'), extra), {
        status: 400,
        code: 'invalid_request',
        param,
        type: 'invalid_request_error',
      });
      expect(err.message).toMatch(/json|granularit/);
      expect(await ledgerRowCount(h)).toBe(before);
    },
  );
});

describe('hints: OpenAI prompt is read as keyterms', { timeout: 120_000 }, () => {
  it('prompt "sunny" turns the engine "sunday" into "sunny", as the keyterms field does', async () => {
    const wav = (await speech(WEATHER)).wav;
    const plain = (await (await transcribe(h, wav, { model: 'local-stt' })).json()) as { text: string };
    expect(plain.text).toContain('sunday');
    // A prompt is cut into phrases at commas and new lines, as keyterms are.
    for (const fields of [{ prompt: 'sunny' }, { prompt: 'Grafana, sunny.' }, { keyterms: 'sunny' }] as Record<string, string>[]) {
      const hinted = (await (await transcribe(h, wav, { model: 'local-stt', ...fields })).json()) as { text: string };
      expect(hinted.text, JSON.stringify(fields)).toContain('sunny');
      expect(hinted.text).not.toContain('sunday');
    }
  });

  it('a gateway behind a gateway keeps them: keyterms sent on as prompt still bias the engine', async () => {
    const wav = (await speech(WEATHER)).wav;
    const plain = (await (await transcribe(h, wav, { model: 'hop-stt' })).json()) as { text: string };
    expect(plain.text).toContain('sunday');
    const hinted = (await (await transcribe(h, wav, { model: 'hop-stt', keyterms: 'sunny' })).json()) as { text: string };
    expect(hinted.text).toContain('sunny');
  });
});

describe('the official openai client', { timeout: 120_000 }, () => {
  const client = () => new OpenAI({ baseURL: `${h.url}/v1`, apiKey: h.key, maxRetries: 0 });

  it('verbose_json with word and segment granularities, text and srt', async () => {
    const file = await toFile(twoSentences.wav, 'speech.wav', { type: 'audio/wav' });
    const verbose = await client().audio.transcriptions.create({
      model: 'local-stt',
      file,
      response_format: 'verbose_json',
      timestamp_granularities: ['word', 'segment'],
    });
    expect(verbose.duration).toBe(twoSentences.millis / 1000);
    expect(verbose.text).toBe((await referenceAnswer()).text);
    expect(verbose.words!.length).toBeGreaterThan(10);
    expectSegments(verbose.segments as unknown as Segment[], verbose.text, verbose.duration);
    const text = await client().audio.transcriptions.create({
      model: 'local-stt',
      file: await toFile(twoSentences.wav, 'speech.wav'),
      response_format: 'text',
    });
    expect(text).toBe(verbose.text);
    const srt = await client().audio.transcriptions.create({ model: 'local-stt', file: await toFile(twoSentences.wav, 'speech.wav'), response_format: 'srt' });
    expect(srt).toMatch(/^1\n00:00:0\d,\d{3} --> 00:00:0\d,\d{3}\n\S/);
  });
});
