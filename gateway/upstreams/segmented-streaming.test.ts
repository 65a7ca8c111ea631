// Streaming over a batch engine, against a real OpenAI-compatible server (the scripted peer: it
// names one word per tone burst of each uploaded WAV, timed within that file), through a small
// HTTP transcription capability built on engine-http. Sessions are made of tone bursts at known
// places, so the final word times show the session offsets, and the peer's sample counts show
// that each utterance went to the engine exactly once.
import { createServer } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { floatToS16, s16leBytes } from '../audio/pcm.ts';
import { tone } from '../audio/test-signals.ts';
import { wavHeader } from '../audio/wav.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { EventLog } from '../../test/support/socket-events.ts';
import {
  UpstreamError,
  type Transcript,
  type TranscriptionCapability,
  type TranscriptionEvent,
  type TranscriptionRequest,
  type TranscriptionStream,
  type UpstreamTarget,
} from './contract.ts';
import { engineJson, engineRequest } from './engine-http.ts';
import { segmentedStreaming, type SegmentLimits } from './segmented-streaming.ts';
import { probeModels } from './protocols/openai.ts';

const RATE = 16_000;
const API_KEY = 'sk-segmented-test-key-0123456789';

/** POST /audio/transcriptions, multipart WAV, verbose_json with word timestamps. */
const whisperApi: TranscriptionCapability = {
  async transcribe(target, req) {
    const pcm = s16leBytes(floatToS16(req.samples));
    const wav = Buffer.concat([wavHeader({ sampleRate: req.sampleRate, encoding: 'pcm_s16le', dataByteLength: pcm.length }), pcm]);
    const form = new FormData();
    form.set('file', new Blob([new Uint8Array(wav)], { type: 'audio/wav' }), 'utterance.wav');
    form.set('model', target.upstreamModel);
    form.set('response_format', 'verbose_json');
    form.append('timestamp_granularities[]', 'word');
    if (req.language) form.set('language', req.language);
    if (req.keyterms.length) form.set('prompt', req.keyterms.join(', '));
    const headers = target.apiKey ? { authorization: `Bearer ${target.apiKey}` } : undefined;
    const res = await engineRequest(target.url, target.apiKey, { method: 'POST', path: '/audio/transcriptions', headers, body: form }, req);
    return engineJson<Transcript>(res, req, 'the transcription');
  },
};

/** The HTTP capability, counting the calls in flight at once (a call counts until it settles or is aborted). */
function countingCalls(inner: TranscriptionCapability) {
  let inFlight = 0;
  const counter = { most: 0, calls: 0 };
  const capability: TranscriptionCapability = {
    async transcribe(target, req) {
      counter.calls += 1;
      counter.most = Math.max(counter.most, ++inFlight);
      let counted = true;
      const done = () => {
        if (counted) inFlight -= 1;
        counted = false;
      };
      req.signal.addEventListener('abort', done, { once: true });
      try {
        return await inner.transcribe(target, req);
      } finally {
        done();
      }
    },
  };
  return { capability, counter };
}

let peer: ScriptedUpstream;
beforeAll(async () => {
  peer = await startScriptedUpstream();
});
afterAll(() => peer.close());
beforeEach(() => {
  peer.transcription = { kind: 'energy' };
  peer.transcriptions.length = 0;
});

const target = (url = peer.baseUrl): UpstreamTarget => ({
  id: 'whisper-upstream',
  modelId: 'whisper',
  url,
  protocol: 'openai',
  upstreamModel: 'whisper-1',
  apiKey: API_KEY,
  settings: {},
});

interface Opened {
  stream: TranscriptionStream;
  events: TranscriptionEvent[];
  /** Settles when `events` ends (rejects with its error). */
  ended: Promise<void>;
  /** Resolves once `count` events match (rejects if the stream ends first). */
  until(test: (e: TranscriptionEvent) => boolean, count?: number): Promise<void>;
}

async function open(
  limits: SegmentLimits = {},
  options: { signal?: AbortSignal; timeoutMs?: number; capability?: TranscriptionCapability; url?: string } = {},
): Promise<Opened> {
  const streaming = segmentedStreaming(options.capability ?? whisperApi, probeModels, limits);
  const stream = await streaming.open(target(options.url), {
    signal: options.signal ?? new AbortController().signal,
    timeoutMs: options.timeoutMs ?? 10_000,
    sampleRate: streaming.engineRate(RATE),
    language: 'en',
    keyterms: [],
    engineTurns: false,
  });
  const log = new EventLog<TranscriptionEvent>((e) => JSON.stringify(e));
  const ended = (async () => {
    try {
      for await (const event of stream.events) log.push(event);
    } finally {
      log.end('the stream ended');
    }
  })();
  ended.catch(() => {});
  const until = (test: (e: TranscriptionEvent) => boolean, count = 1) => log.count(test, count);
  return { stream, events: log.events, ended, until };
}

const isFinal = (e: TranscriptionEvent) => e.type === 'transcript' && e.isFinal;
const isInterim = (e: TranscriptionEvent) => e.type === 'transcript' && !e.isFinal;
const isFinalized = (e: TranscriptionEvent) => e.type === 'finalized';
const finals = (events: TranscriptionEvent[]) =>
  events.filter((e) => e.type === 'transcript' && e.isFinal) as Extract<TranscriptionEvent, { type: 'transcript' }>[];
const interims = (events: TranscriptionEvent[]) =>
  events.filter((e) => e.type === 'transcript' && !e.isFinal) as Extract<TranscriptionEvent, { type: 'transcript' }>[];
/** The events as short names: final, interim, finalized. */
const kinds = (events: TranscriptionEvent[]) => events.map((e) => (e.type === 'transcript' ? (e.isFinal ? 'final' : 'interim') : e.type));

/** Audio from parts: a number is that many seconds of silence, a pair a tone burst [hz, seconds]. */
function audio(...parts: (number | [number, number])[]): Int16Array {
  return floatToS16(
    Float32Array.from(
      parts.flatMap((p) => (typeof p === 'number' ? Array.from(new Float32Array(Math.round(p * RATE))) : Array.from(tone(p[0], RATE, p[1], 0.5)))),
    ),
  );
}

/** Writes in 20 ms frames, as the gateway does. */
function writeFrames(stream: TranscriptionStream, samples: Int16Array): void {
  for (let at = 0; at < samples.length; at += RATE / 50) stream.write(samples.subarray(at, at + RATE / 50));
}

/** The same, handing the event loop a turn between frames so engine answers come in between. */
async function writeFramesLive(stream: TranscriptionStream, samples: Int16Array): Promise<void> {
  for (let at = 0; at < samples.length; at += RATE / 50) {
    stream.write(samples.subarray(at, at + RATE / 50));
    await new Promise((r) => setImmediate(r));
  }
}

function expectWords(t: { words: { word: string; start: number; end: number }[] }, expected: [string, number, number][]): void {
  expect(t.words.map((w) => w.word)).toEqual(expected.map(([word]) => word));
  t.words.forEach((w, i) => {
    expect(w.start).toBeCloseTo(expected[i]![1], 2);
    expect(w.end).toBeCloseTo(expected[i]![2], 2);
  });
}

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

describe('segmentedStreaming', () => {
  it('asks for 16 kHz and leaves turns to the gateway', () => {
    const streaming = segmentedStreaming(whisperApi, probeModels);
    expect([8000, 16000, 24000, 48000].map((r) => streaming.engineRate(r))).toEqual([16000, 16000, 16000, 16000]);
    expect(streaming.findsTurns(target())).toBe(false);
  });

  it('two utterances: one engine call each, word times in the session, every sample sent once', async () => {
    const s = await open({ interimEverySeconds: 100 });
    const first = audio(0.2, [300, 0.4], 0.4);
    const second = audio(0.3, [500, 0.5], 0.2);
    writeFrames(s.stream, first);
    s.stream.finalize();
    writeFrames(s.stream, second);
    s.stream.finalize();
    await s.until(isFinalized, 2);
    s.stream.close();
    await s.ended;

    expect(kinds(s.events)).toEqual(['final', 'finalized', 'final', 'finalized']);
    const [one, two] = finals(s.events);
    expect(one!.text).toBe('tone300');
    expectWords(one!, [['tone300', 0.2, 0.6]]);
    expect(two!.text).toBe('tone500');
    expectWords(two!, [['tone500', 1.3, 1.8]]);
    expect(peer.transcriptions.map((r) => [r.sampleRate, r.samples])).toEqual([
      [RATE, first.length],
      [RATE, second.length],
    ]);
    expect(peer.transcriptions[0]!.fields).toMatchObject({
      model: ['whisper-1'],
      response_format: ['verbose_json'],
      'timestamp_granularities[]': ['word'],
      language: ['en'],
    });
    expect(peer.transcriptions[0]!.headers.authorization).toBe(`Bearer ${API_KEY}`);
  });

  it('answers every finalize with one finalized, in order; an empty or too short utterance costs no engine call', async () => {
    const s = await open({ interimEverySeconds: 100 });
    s.stream.finalize(); // nothing written
    writeFrames(s.stream, audio([300, 0.04])); // 40 ms: too short to send
    s.stream.finalize();
    writeFrames(s.stream, audio(0.1, [400, 0.3], 0.1));
    s.stream.finalize();
    s.stream.finalize(); // empty again: answered after the engine call before it
    await s.until(isFinalized, 4);
    s.stream.close();
    await s.ended;

    expect(kinds(s.events)).toEqual(['finalized', 'finalized', 'final', 'finalized', 'finalized']);
    expectWords(finals(s.events)[0]!, [['tone400', 0.14, 0.44]]);
    expect(peer.transcriptions.map((r) => r.samples)).toEqual([0.5 * RATE]);
  });

  it('reports interims while an utterance grows, with at most one engine call at a time and a bounded number of them', async () => {
    const { capability, counter } = countingCalls(whisperApi);
    const s = await open({}, { capability });
    const speech = audio(0.2, [300, 0.4], 0.8, [400, 0.4], 0.8, [500, 0.4], 0.8, [600, 0.4], 0.8);
    expect(speech.length).toBe(5 * RATE);
    const firstInterimAt = 19_200; // 1.2 s
    writeFrames(s.stream, speech.subarray(0, firstInterimAt));
    await s.until(isInterim);
    await writeFramesLive(s.stream, speech.subarray(firstInterimAt));
    s.stream.finalize();
    await s.until(isFinalized);
    s.stream.close();
    await s.ended;

    const final = finals(s.events);
    expect(final).toHaveLength(1);
    expectWords(final[0]!, [
      ['tone300', 0.2, 0.6],
      ['tone400', 1.4, 1.8],
      ['tone500', 2.6, 3.0],
      ['tone600', 3.8, 4.2],
    ]);
    const heard = interims(s.events);
    expect(heard.length).toBeGreaterThanOrEqual(1);
    expectWords(heard[0]!, [['tone300', 0.2, 0.6]]);
    for (const interim of heard) expect(final[0]!.text.startsWith(interim.text)).toBe(true);
    // Each interim differs from the one before; nothing comes after the final but its finalized.
    heard.slice(1).forEach((interim, i) => expect(interim.text).not.toBe(heard[i]!.text));
    expect(kinds(s.events).slice(-2)).toEqual(['final', 'finalized']);
    // 5 s with an interim at most every second: at most 5 interim calls, and the final.
    expect(counter.calls).toBeLessThanOrEqual(6);
    expect(counter.most).toBe(1);
  });

  it('skips an interim whose text did not change', async () => {
    const s = await open();
    writeFrames(s.stream, audio(0.2, [300, 0.4], 0.6));
    await s.until(isInterim);
    // All written before the engine answers the next interim: one call covers the silence
    // (same text, not reported), the next one the new burst.
    writeFrames(s.stream, audio(1.2, 0.2, [400, 0.4], 0.6));
    await s.until(isInterim, 2);
    s.stream.close();
    await s.ended;

    expect(interims(s.events).map((e) => e.text)).toEqual(['tone300', 'tone300 tone400']);
    expect(peer.transcriptions.map((r) => r.samples / RATE)).toEqual([1, 2, 3.6]);
  });

  it('stops an interim in flight when its utterance is finalized: the peer sees it closed, the final goes at once', async () => {
    peer.transcription = { kind: 'energy', hold: (call) => call === 0 };
    const s = await open();
    writeFrames(s.stream, audio(0.2, [300, 0.4], 0.6));
    const [interimCall] = await peer.waitForTranscriptions(1);
    s.stream.finalize();
    expect(await interimCall!.done).toEqual({ closedEarly: true });
    await s.until(isFinalized);
    s.stream.close();
    await s.ended;

    expect(kinds(s.events)).toEqual(['final', 'finalized']);
    expect(peer.transcriptions.map((r) => r.samples)).toEqual([RATE, 19_200]);
  });

  it('drops an interim answer that arrives after its utterance was finalized', async () => {
    // An engine that answers whatever the signal says (as a local engine mid-inference may).
    const answers: Promise<Transcript>[] = [];
    const deaf: TranscriptionCapability = {
      transcribe(t, req: TranscriptionRequest) {
        const answer = whisperApi.transcribe(t, { ...req, signal: new AbortController().signal });
        answers.push(answer);
        return answer;
      },
    };
    peer.transcription = { kind: 'energy', hold: (call) => call === 0 };
    const s = await open({}, { capability: deaf });
    writeFrames(s.stream, audio(0.2, [300, 0.4], 0.6));
    const [interimCall] = await peer.waitForTranscriptions(1);
    writeFrames(s.stream, audio(0.2, [400, 0.3], 0.1));
    s.stream.finalize();
    await s.until(isFinalized);
    interimCall!.release();
    // The stream awaited this answer first, so it has dealt with it once the test sees it.
    expect((await answers[0]!).text).toBe('tone300');
    s.stream.close();
    await s.ended;

    expect(kinds(s.events)).toEqual(['final', 'finalized']);
    expect(finals(s.events)[0]!.text).toBe('tone300 tone400');
  });

  it('finalizes an utterance that reaches maxUtteranceSeconds by itself (a final without finalized)', async () => {
    const s = await open({ maxUtteranceSeconds: 2, interimEverySeconds: 100 });
    const speech = audio(0.5, [300, 0.5], 1.5, [400, 0.5], 1.2, [500, 0.4], 0.4);
    expect(speech.length).toBe(5 * RATE);
    writeFrames(s.stream, speech);
    await s.until(isFinal, 2);
    expect(kinds(s.events)).toEqual(['final', 'final']);
    s.stream.finalize();
    await s.until(isFinalized);
    s.stream.close();
    await s.ended;

    expect(kinds(s.events)).toEqual(['final', 'final', 'final', 'finalized']);
    const [a, b, c] = finals(s.events);
    expectWords(a!, [['tone300', 0.5, 1.0]]);
    expectWords(b!, [['tone400', 2.5, 3.0]]);
    expectWords(c!, [['tone500', 4.2, 4.6]]);
    // No sample lost or sent twice.
    expect(peer.transcriptions.map((r) => r.samples)).toEqual([2 * RATE, 2 * RATE, RATE]);
  });

  it('reports as pending only what waits beyond the utterance held by design', async () => {
    peer.transcription = { kind: 'hang' };
    const s = await open({ maxUtteranceSeconds: 1, interimEverySeconds: 100 });
    writeFrames(s.stream, audio(0.5));
    expect(s.stream.pendingSamples).toBe(0);
    writeFrames(s.stream, audio(3));
    // 3.5 s not yet in a final transcript, of which one utterance's worth (1 s) is held by design.
    expect(s.stream.pendingSamples).toBe(40_000);
    await peer.waitForTranscriptions(1);
    s.stream.close();
    expect((await peer.transcriptions[0]!.done).closedEarly).toBe(true);
    await s.ended;
    expect(peer.transcriptions).toHaveLength(1);
  });

  it.each([
    {
      status: 401,
      body: { error: { message: `Incorrect API key provided: ${API_KEY}.`, type: 'invalid_request_error', param: null, code: 'invalid_api_key' } },
    },
    { status: 400, body: { error: { message: 'Audio file is too short.', type: 'invalid_request_error', param: 'file', code: null } } },
    { status: 500, body: { error: { message: 'CUDA out of memory', type: 'server_error', param: null, code: null } } },
  ])('ends events with UpstreamError status when the engine answers $status to a final', async ({ status, body }) => {
    peer.transcription = { kind: 'error', status, body };
    const { capability, counter } = countingCalls(whisperApi);
    const s = await open({ interimEverySeconds: 100 }, { capability });
    writeFrames(s.stream, audio(0.5));
    s.stream.finalize();
    const error = await s.ended.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UpstreamError);
    const failure = error as UpstreamError;
    expect(failure.kind).toBe('status');
    expect(failure.details.status).toBe(status);
    expect(failure.details.engineMessage).toBe(body.error.message.replace(API_KEY, '[redacted]'));
    expect(failure.message).not.toContain(API_KEY);
    // The stream is over: later audio and finalizes reach no engine.
    writeFrames(s.stream, audio(0.5));
    s.stream.finalize();
    expect(counter.calls).toBe(1);
  });

  it('ignores a failed interim: the next interim and the final come as usual', async () => {
    peer.transcription = { kind: 'error', status: 503, body: { error: { message: 'busy' } } };
    const s = await open();
    writeFrames(s.stream, audio(0.2, [300, 0.4], 0.6));
    const [failed] = await peer.waitForTranscriptions(1);
    await failed!.done;
    peer.transcription = { kind: 'energy' };
    writeFrames(s.stream, audio(0.2, [400, 0.4], 0.6));
    await s.until(isInterim);
    s.stream.finalize();
    await s.until(isFinalized);
    s.stream.close();
    await s.ended;

    expect(kinds(s.events)).toEqual(['interim', 'final', 'finalized']);
    expect(finals(s.events)[0]!.text).toBe('tone300 tone400');
  });

  it('turns a silent engine into UpstreamError timeout', async () => {
    peer.transcription = { kind: 'hang' };
    // Long enough for the open to succeed on a loaded machine; only the silence after it may time out.
    const s = await open({ interimEverySeconds: 100 }, { timeoutMs: 1_000 });
    writeFrames(s.stream, audio(0.5));
    s.stream.finalize();
    await expect(s.ended).rejects.toMatchObject({ name: 'UpstreamError', kind: 'timeout' });
    const [call] = await peer.waitForTranscriptions(1);
    expect((await call!.done).closedEarly).toBe(true);
  });

  it('an engine that cannot be reached fails the open (UpstreamError connect: the gateway tries the next upstream)', async () => {
    await expect(open({ interimEverySeconds: 100 }, { url: `http://127.0.0.1:${await closedPort()}/v1` })).rejects.toMatchObject({
      name: 'UpstreamError',
      kind: 'connect',
    });
  });

  it('an engine that refuses our key fails the open with its status and message, before any audio is taken', async () => {
    peer.modelsStatus = 401;
    try {
      await expect(open()).rejects.toMatchObject({ name: 'UpstreamError', kind: 'status', details: { status: 401 } });
    } finally {
      peer.modelsStatus = 200;
    }
  });

  it('on abort, closes the engine call in flight and ends events', async () => {
    peer.transcription = { kind: 'hang' };
    const caller = new AbortController();
    const s = await open({ interimEverySeconds: 100 }, { signal: caller.signal });
    writeFrames(s.stream, audio(0.5));
    s.stream.finalize();
    const [call] = await peer.waitForTranscriptions(1);
    caller.abort();
    expect(await call!.done).toEqual({ closedEarly: true });
    await s.ended;
    expect(s.events).toEqual([]);
  });

  it('on close, closes the interim in flight and ends events; close is idempotent', async () => {
    peer.transcription = { kind: 'hang' };
    const s = await open();
    writeFrames(s.stream, audio(1));
    const [call] = await peer.waitForTranscriptions(1);
    s.stream.close();
    s.stream.close();
    expect(await call!.done).toEqual({ closedEarly: true });
    await s.ended;
    expect(s.events).toEqual([]);
  });

  it('told that no one speaks: silence gets no call, interim or final (a finalize of it is answered at once)', async () => {
    const s = await open();
    s.stream.speaking!(false);
    // Three seconds: three interims would be due by length alone.
    writeFrames(s.stream, audio(3));
    s.stream.finalize();
    await s.until(isFinalized);
    s.stream.close();
    await s.ended;
    expect(kinds(s.events)).toEqual(['finalized']);
    expect(peer.transcriptions).toEqual([]);
  });

  it('told who speaks: speech is sent with a second or two of the silence before it, at its session time; the silence after gets no call', async () => {
    const s = await open({ interimEverySeconds: 100 });
    s.stream.speaking!(false);
    writeFrames(s.stream, audio(6));
    writeFrames(s.stream, audio([300, 0.4]));
    // The detector confirms speech a little after it began.
    s.stream.speaking!(true);
    s.stream.speaking!(false);
    s.stream.finalize();
    await s.until(isFinalized);
    writeFrames(s.stream, audio(2.5));
    s.stream.finalize();
    await s.until(isFinalized, 2);
    s.stream.close();
    await s.ended;

    expect(kinds(s.events)).toEqual(['final', 'finalized', 'finalized']);
    expectWords(finals(s.events)[0]!, [['tone300', 6, 6.4]]);
    const [call, ...more] = peer.transcriptions;
    expect(more).toEqual([]);
    expect(call!.samples).toBeGreaterThanOrEqual(1.4 * RATE);
    expect(call!.samples).toBeLessThanOrEqual(2.4 * RATE);
  });
});
