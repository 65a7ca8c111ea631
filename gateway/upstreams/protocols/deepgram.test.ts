// The `deepgram` protocol against a scripted Deepgram (test/support/scripted-deepgram.ts): live and
// pre-recorded transcription, Aura speech, the voice list and health, with every way the engine
// can fail. The peer derives its words from the audio it receives (one word per tone burst).
import { createServer } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { scriptedToneSample, startScriptedDeepgram, type ScriptedDeepgram } from '../../../test/support/scripted-deepgram.ts';
import { parseWav } from '../../audio/wav.ts';
import { UpstreamError, type CallOptions, type TranscriptionEvent, type TargetOf, type TranscriptionStream } from '../contract.ts';
import { deepgram } from './deepgram.ts';
import { loadConfig } from '../../../server/config/env.ts';

const engines = loadConfig({ SVC_DATA_DIR: '/tmp' }).engines;
const runtime = deepgram.create(engines);
const live = runtime.streamingTranscription;
const KEY = 'dg_secret_key';

let peer: ScriptedDeepgram;
let refusedUrl: string;

beforeAll(async () => {
  peer = await startScriptedDeepgram({ apiKey: KEY });
  // A port nothing listens on: taken, then given back.
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  refusedUrl = `http://127.0.0.1:${(probe.address() as { port: number }).port}`;
  await new Promise<void>((r) => probe.close(() => r()));
});
afterEach(() => {
  peer.behaviour = { kind: 'ok' };
  peer.idleTimeoutMs = 10_000;
});
afterAll(() => peer.close());

type Target = TargetOf<typeof deepgram>;

function target(overrides: Partial<Target> = {}, settings: Record<string, unknown> = {}): Target {
  return {
    id: 'ups_test',
    modelId: 'stt-test',
    url: peer.url,
    protocol: 'deepgram',
    upstreamModel: 'nova-3',
    apiKey: KEY,
    settings: deepgram.settings.parse(settings),
    ...overrides,
  };
}

const call = (timeoutMs = 5000, signal = new AbortController().signal): CallOptions => ({ signal, timeoutMs });

/** Tone bursts (one scripted word each) at [start, end] seconds, silence elsewhere. */
function bursts(rate: number, spans: [number, number][], totalSeconds: number): Int16Array {
  const out = new Int16Array(Math.round(rate * totalSeconds));
  for (const [start, end] of spans) {
    for (let i = Math.round(start * rate); i < Math.round(end * rate); i++) out[i] = Math.round(16000 * Math.sin((2 * Math.PI * 300 * i) / rate));
  }
  return out;
}

/** Writes in 100 ms pieces, as a live source would. */
function writeLive(stream: TranscriptionStream, samples: Int16Array, rate: number): void {
  for (let at = 0; at < samples.length; at += rate / 10) stream.write(samples.subarray(at, at + rate / 10));
}

/** Events until `stop` says so (inclusive), or until the stream ends. */
async function eventsUntil(stream: TranscriptionStream, stop: (e: TranscriptionEvent) => boolean): Promise<TranscriptionEvent[]> {
  const seen: TranscriptionEvent[] = [];
  const iterator = stream.events[Symbol.asyncIterator]();
  for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
    seen.push(next.value);
    if (stop(next.value)) break;
  }
  return seen;
}

const allEvents = (stream: TranscriptionStream) => eventsUntil(stream, () => false);

async function failure(promise: Promise<unknown>): Promise<UpstreamError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UpstreamError);
  return error as UpstreamError;
}

const openLive = (t: Target, options: Partial<Parameters<typeof live.open>[1]> = {}) =>
  live.open(t, { ...call(), sampleRate: 16000, language: undefined, keyterms: [], engineTurns: true, ...options });

describe('settings and rates', () => {
  it('has the documented defaults and refuses what Deepgram does not take', () => {
    expect(deepgram.settings.parse({})).toEqual({ endpointing_ms: 300, utterance_end_ms: 1000, smart_format: true, tts_sample_rate: 24000 });
    expect(deepgram.settings.safeParse({ utterance_end_ms: 500 }).success).toBe(false);
    expect(deepgram.settings.safeParse({ tts_sample_rate: 22050 }).success).toBe(false);
    expect(deepgram.settings.safeParse({ endpointing_ms: 12.5 }).success).toBe(false);
    expect(deepgram.settings.safeParse({ model: 'nova-3' }).success).toBe(false);
  });

  it('takes the rates Deepgram decodes as they are and asks for 16 kHz otherwise', () => {
    expect([8000, 16000, 24000, 44100, 48000, 22050, 11025].map(live.engineRate)).toEqual([8000, 16000, 24000, 44100, 48000, 16000, 16000]);
    expect(live.findsTurns(target())).toBe(true);
    expect(deepgram.capabilities).toEqual(['transcription', 'streaming_transcription', 'speech', 'voice_catalogue']);
  });
});

describe('live transcription', () => {
  it('reports speech start, interims, the final with word times, one end of turn, then finalized', async () => {
    const stream = await openLive(target(), { language: 'en', keyterms: ['Acme', 'Zed Corp'] });
    const socket = peer.sockets.at(-1)!;
    expect(Object.fromEntries(socket.query)).toEqual({
      model: 'nova-3',
      punctuate: 'true',
      smart_format: 'true',
      language: 'en',
      keyterm: 'Zed Corp',
      encoding: 'linear16',
      sample_rate: '16000',
      channels: '1',
      interim_results: 'true',
      vad_events: 'true',
      endpointing: '300',
      utterance_end_ms: '1000',
    });
    expect(socket.query.getAll('keyterm')).toEqual(['Acme', 'Zed Corp']);
    expect(socket.headers.authorization).toBe(`Token ${KEY}`);
    expect(stream.pendingSamples).toBe(0);

    writeLive(
      stream,
      bursts(
        16000,
        [
          [0.2, 0.5],
          [0.7, 1.0],
        ],
        2.4,
      ),
      16000,
    );
    stream.finalize();
    const events = await eventsUntil(stream, (e) => e.type === 'finalized');
    expect(events).toEqual([
      { type: 'speech_started', atSeconds: 0.2 },
      { type: 'transcript', isFinal: false, text: 'Alpha.', words: [{ word: 'Alpha.', start: 0.2, end: 0.5 }] },
      {
        type: 'transcript',
        isFinal: false,
        text: 'Alpha bravo.',
        words: [
          { word: 'Alpha', start: 0.2, end: 0.5 },
          { word: 'bravo.', start: 0.7, end: 1.0 },
        ],
      },
      {
        type: 'transcript',
        isFinal: true,
        text: 'Alpha bravo.',
        words: [
          { word: 'Alpha', start: 0.2, end: 0.5 },
          { word: 'bravo.', start: 0.7, end: 1.0 },
        ],
      },
      // speech_final after 300 ms of silence; the UtteranceEnd that followed ended no second turn.
      { type: 'end_of_turn', atSeconds: 1.3 },
      { type: 'finalized' },
    ]);
    expect(socket.sent.map((m) => m.type)).toContain('UtteranceEnd');
    expect(socket.audioBytes).toBe(2.4 * 16000 * 2);

    stream.close();
    expect(await allEvents(stream)).toEqual([]);
    expect((await socket.closed).code).toBe(1000);
    expect(socket.controls.map((c) => c.type)).toEqual(['Finalize', 'CloseStream']);
  });

  it('without engine turns: no endpointing, finals only on finalize(), word times from the start of the stream', async () => {
    const stream = await openLive(target(), { sampleRate: 8000, engineTurns: false });
    const socket = peer.sockets.at(-1)!;
    expect(socket.query.get('endpointing')).toBe('false');
    expect(socket.query.has('vad_events') || socket.query.has('utterance_end_ms')).toBe(false);

    writeLive(
      stream,
      bursts(
        8000,
        [
          [0.1, 0.3],
          [0.5, 0.8],
        ],
        1.0,
      ),
      8000,
    );
    stream.finalize();
    const first = await eventsUntil(stream, (e) => e.type === 'finalized');
    expect(first.filter((e) => e.type === 'transcript' && e.isFinal)).toEqual([
      {
        type: 'transcript',
        isFinal: true,
        text: 'Alpha bravo.',
        words: [
          { word: 'Alpha', start: 0.1, end: 0.3 },
          { word: 'bravo.', start: 0.5, end: 0.8 },
        ],
      },
    ]);
    expect(first.at(-1)).toEqual({ type: 'finalized' });

    writeLive(stream, bursts(8000, [[0.2, 0.4]], 0.6), 8000);
    stream.finalize();
    const second = await eventsUntil(stream, (e) => e.type === 'finalized');
    expect(second).toEqual([
      { type: 'transcript', isFinal: false, text: 'Charlie.', words: [{ word: 'Charlie.', start: 1.2, end: 1.4 }] },
      { type: 'transcript', isFinal: true, text: 'Charlie.', words: [{ word: 'Charlie.', start: 1.2, end: 1.4 }] },
      { type: 'finalized' },
    ]);
    expect([...first, ...second].some((e) => e.type === 'end_of_turn' || e.type === 'speech_started')).toBe(false);
    stream.close();
    await socket.closed;
    expect(socket.audioBytes).toBe(1.6 * 8000 * 2);
  });

  it('answers every finalize() exactly once and in order: at once when nothing is pending, after a wait when Deepgram stays silent', async () => {
    const stream = await openLive(target(), { ...call(300), engineTurns: false });
    const socket = peer.sockets.at(-1)!;
    const finalized = (e: TranscriptionEvent) => e.type === 'finalized';
    writeLive(stream, bursts(16000, [[0.1, 0.3]], 0.5), 16000);
    stream.finalize();
    expect((await eventsUntil(stream, finalized)).map((e) => e.type)).toEqual(['transcript', 'transcript', 'finalized']);

    // Everything written is covered by that answer: nothing to ask Deepgram.
    stream.finalize();
    expect(await eventsUntil(stream, finalized)).toEqual([{ type: 'finalized' }]);

    // 40 ms of silence: too little for Deepgram to answer (the peer leaves the Finalize unanswered).
    stream.write(new Int16Array(640));
    stream.finalize();
    expect(await eventsUntil(stream, finalized)).toEqual([{ type: 'finalized' }]);

    // Two utterances finalized back to back: each finalized follows its own final.
    writeLive(stream, bursts(16000, [[0.1, 0.3]], 0.4), 16000);
    stream.finalize();
    writeLive(stream, bursts(16000, [[0.1, 0.3]], 0.4), 16000);
    stream.finalize();
    stream.finalize();
    let count = 0;
    const lastEvents = await eventsUntil(stream, (e) => finalized(e) && ++count === 3);
    expect(lastEvents.filter((e) => e.type !== 'transcript' || e.isFinal)).toEqual([
      { type: 'transcript', isFinal: true, text: 'Bravo.', words: [{ word: 'Bravo.', start: 0.64, end: 0.84 }] },
      { type: 'finalized' },
      { type: 'transcript', isFinal: true, text: 'Charlie.', words: [{ word: 'Charlie.', start: 1.04, end: 1.24 }] },
      { type: 'finalized' },
      { type: 'finalized' },
    ]);

    stream.close();
    expect(await allEvents(stream)).toEqual([]);
    await socket.closed;
    expect(socket.controls.filter((c) => c.type === 'Finalize')).toHaveLength(4);
    expect(socket.unansweredFinalizes).toBe(1);
  });

  it('ends the turn at an UtteranceEnd: after the final when its words were still interim, at once after a final', async () => {
    // Endpointing longer than the utterance gap: Deepgram's UtteranceEnd comes before any final.
    const stream = await openLive(target({}, { endpointing_ms: 5000 }));
    writeLive(stream, bursts(16000, [[0.2, 0.4]], 1.6), 16000);
    stream.finalize();
    expect(await eventsUntil(stream, (e) => e.type === 'finalized')).toEqual([
      { type: 'speech_started', atSeconds: 0.2 },
      { type: 'transcript', isFinal: false, text: 'Alpha.', words: [{ word: 'Alpha.', start: 0.2, end: 0.4 }] },
      { type: 'transcript', isFinal: true, text: 'Alpha.', words: [{ word: 'Alpha.', start: 0.2, end: 0.4 }] },
      { type: 'end_of_turn', atSeconds: 0.4 },
      { type: 'finalized' },
    ]);

    writeLive(stream, bursts(16000, [[0.2, 0.4]], 1.0), 16000);
    stream.finalize();
    expect((await eventsUntil(stream, (e) => e.type === 'finalized')).map((e) => e.type)).toEqual(['speech_started', 'transcript', 'transcript', 'finalized']);
    // A second of silence after the word: Deepgram's UtteranceEnd ends the turn at the word's end.
    writeLive(stream, new Int16Array(16000 * 1.2), 16000);
    expect(await eventsUntil(stream, (e) => e.type === 'end_of_turn')).toEqual([{ type: 'end_of_turn', atSeconds: 2.0 }]);
    stream.close();
  });

  it('sends a KeepAlive every 5 s', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const stream = await openLive(target());
      const socket = peer.sockets.at(-1)!;
      vi.advanceTimersByTime(5000);
      await socket.waitForControl('KeepAlive');
      expect(socket.controls).toEqual([{ type: 'KeepAlive' }]);
      stream.close();
      await socket.closed;
    } finally {
      vi.useRealTimers();
    }
  });

  it("fails the events with the engine's close code when Deepgram closes an idle stream (NET-0001)", async () => {
    peer.idleTimeoutMs = 200;
    const stream = await openLive(target());
    const error = await failure(allEvents(stream));
    expect(error.kind).toBe('broken');
    expect(error.details.status).toBe(1011);
    expect(error.message).toContain('NET-0001');
  });

  it('fails the events as broken when the engine drops the connection mid-stream', async () => {
    peer.behaviour = { kind: 'die', after: 2 };
    const stream = await openLive(target());
    writeLive(
      stream,
      bursts(
        16000,
        [
          [0.1, 0.3],
          [0.5, 0.7],
          [0.9, 1.1],
        ],
        1.2,
      ),
      16000,
    );
    const seen: TranscriptionEvent[] = [];
    const error = await failure(
      (async () => {
        for await (const e of stream.events) seen.push(e);
      })(),
    );
    expect(error.kind).toBe('broken');
    expect(seen.map((e) => e.type)).toEqual(['speech_started', 'transcript']);
  });

  it("rejects the open with the engine's message when the key is refused, without the key", async () => {
    const wrong = await failure(openLive(target({ apiKey: 'dg_wrong_key' })));
    expect(wrong.kind).toBe('status');
    expect(wrong.details.status).toBe(401);
    expect(wrong.details.engineMessage).toBe('Invalid credentials.');
    expect(wrong.message).not.toContain('dg_wrong_key');

    peer.behaviour = { kind: 'auth_refused' };
    const revoked = await failure(openLive(target()));
    expect(revoked.details.status).toBe(401);
    expect(revoked.message).toContain('Invalid credentials.');
    expect(revoked.message).not.toContain(KEY);
  });

  it('rejects the open with the status and message of a refused upgrade (4xx and 5xx)', async () => {
    peer.behaviour = {
      kind: 'error',
      status: 400,
      body: { err_code: 'Bad Request', err_msg: 'Bad Request: No such model/version/tier combination found.', request_id: 'r1' },
    };
    const bad = await failure(openLive(target()));
    expect([bad.kind, bad.details.status, bad.details.engineMessage]).toEqual(['status', 400, 'Bad Request: No such model/version/tier combination found.']);

    peer.behaviour = { kind: 'error', status: 503, body: { err_code: 'SERVICE_UNAVAILABLE', err_msg: 'Service is temporarily unavailable.' } };
    const down = await failure(openLive(target()));
    expect([down.kind, down.details.status, down.details.engineMessage]).toEqual(['status', 503, 'Service is temporarily unavailable.']);
  });

  it('times out an upgrade the engine never answers', async () => {
    peer.behaviour = { kind: 'hang' };
    const error = await failure(openLive(target(), call(200)));
    expect(error.kind).toBe('timeout');
  });

  it('reports a refused connection as connect', async () => {
    const error = await failure(openLive(target({ url: refusedUrl })));
    expect(error.kind).toBe('connect');
  });

  it("closes the engine's socket when the caller aborts, and ends the events", async () => {
    const controller = new AbortController();
    const stream = await openLive(target(), call(5000, controller.signal));
    const socket = peer.sockets.at(-1)!;
    writeLive(stream, bursts(16000, [[0.1, 0.3]], 0.4), 16000);
    controller.abort();
    expect((await socket.closed).code).toBe(1000);
    expect(socket.controls.map((c) => c.type)).toEqual(['CloseStream']);
    // The events end without an error (the caller left; nothing failed).
    await expect(allEvents(stream)).resolves.toBeInstanceOf(Array);
  });
});

describe('pre-recorded transcription', () => {
  const transcribe = (t: Target, options: Partial<CallOptions> = {}) => {
    const samples = Float32Array.from(
      bursts(
        24000,
        [
          [0.3, 0.6],
          [1.0, 1.2],
        ],
        1.5,
      ),
      (v) => v / 32768,
    );
    return runtime.transcription.transcribe(t, { ...call(), ...options, samples, sampleRate: 24000, language: 'en-US', keyterms: ['Acme', 'Zed'] });
  };

  it('posts the audio as a 16-bit WAV and returns the words with their times', async () => {
    const result = await transcribe(target());
    expect(result).toEqual({
      text: 'Alpha bravo.',
      words: [
        { word: 'Alpha', start: 0.3, end: 0.6 },
        { word: 'bravo.', start: 1.0, end: 1.2 },
      ],
    });
    const sent = peer.received.at(-1)!;
    expect([sent.method, sent.path]).toEqual(['POST', '/v1/listen']);
    expect(Object.fromEntries(sent.query)).toMatchObject({ model: 'nova-3', punctuate: 'true', smart_format: 'true', language: 'en-US' });
    expect(sent.query.getAll('keyterm')).toEqual(['Acme', 'Zed']);
    expect(sent.headers['content-type']).toBe('audio/wav');
    expect(sent.headers.authorization).toBe(`Token ${KEY}`);
    const wav = parseWav(sent.body);
    expect([wav.format, wav.sampleRate, wav.channels, wav.frameCount]).toEqual(['pcm_s16le', 24000, 1, 1.5 * 24000]);
  });

  it('sends smart_format=false when the upstream turns it off', async () => {
    await transcribe(target({}, { smart_format: false }));
    expect(peer.received.at(-1)!.query.get('smart_format')).toBe('false');
  });

  it('treats an answer without results as a protocol error', async () => {
    peer.behaviour = { kind: 'raw', status: 200, contentType: 'application/json', body: JSON.stringify({ metadata: {}, results: { channels: [] } }) };
    expect((await failure(transcribe(target()))).kind).toBe('protocol');
    peer.behaviour = { kind: 'raw', status: 200, contentType: 'text/html', body: '<html>gateway</html>' };
    expect((await failure(transcribe(target()))).kind).toBe('protocol');
  });

  it("reports a refused key, 4xx and 5xx with the engine's message and never the key", async () => {
    peer.behaviour = { kind: 'auth_refused' };
    const refused = await failure(transcribe(target()));
    expect([refused.kind, refused.details.status, refused.details.engineMessage]).toEqual(['status', 401, 'Invalid credentials.']);
    expect(refused.message).not.toContain(KEY);

    peer.behaviour = {
      kind: 'error',
      status: 400,
      body: { err_code: 'Bad Request', err_msg: 'Bad Request: failed to process audio: corrupt or unsupported data' },
    };
    const bad = await failure(transcribe(target()));
    expect([bad.details.status, bad.details.engineMessage]).toEqual([400, 'Bad Request: failed to process audio: corrupt or unsupported data']);

    peer.behaviour = { kind: 'error', status: 502, body: 'upstream connect error' };
    const down = await failure(transcribe(target()));
    expect([down.kind, down.details.status, down.details.engineMessage]).toEqual(['status', 502, 'upstream connect error']);
  });

  it('reports a dropped answer as broken, a silent engine as timeout, a refused connection as connect', async () => {
    peer.behaviour = { kind: 'die', after: 20 };
    expect((await failure(transcribe(target()))).kind).toBe('broken');
    peer.behaviour = { kind: 'hang' };
    expect((await failure(transcribe(target(), { timeoutMs: 200 }))).kind).toBe('timeout');
    expect((await failure(transcribe(target({ url: refusedUrl })))).kind).toBe('connect');
  });

  it('drops the request when the caller aborts', async () => {
    peer.behaviour = { kind: 'hang' };
    const controller = new AbortController();
    const pending = transcribe(target(), { signal: controller.signal });
    await vi.waitFor(() => expect(peer.received.at(-1)?.path).toBe('/v1/listen'));
    const request = peer.received.at(-1)!;
    controller.abort();
    await expect(pending).rejects.toBeDefined();
    await request.closed;
    expect(request.closedEarly).toBe(true);
  });
});

describe('speech (Aura)', () => {
  const synthesize = (t: Target, options: { voice?: string; speed?: number; timeoutMs?: number; signal?: AbortSignal } = {}) =>
    runtime.speech.synthesize(t, {
      ...call(options.timeoutMs, options.signal),
      text: 'Hello there',
      voice: { upstreamId: options.voice ?? 'aura-2-thalia-en', params: null },
      language: undefined,
      speed: options.speed ?? 1,
    });

  async function samplesOf(chunks: AsyncIterable<Int16Array | Float32Array>): Promise<Int16Array> {
    const parts: Int16Array[] = [];
    for await (const chunk of chunks) {
      expect(chunk).toBeInstanceOf(Int16Array);
      parts.push(chunk as Int16Array);
    }
    const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }

  it("asks for raw linear16 at the upstream's rate with the voice as the model, and streams every sample", async () => {
    const stream = await synthesize(target());
    expect(stream.sampleRate).toBe(24000);
    const samples = await samplesOf(stream.chunks);
    // 10 ms of tone per character, cut by the peer into odd-sized writes.
    expect(samples.length).toBe(24000 * 0.11);
    expect(samples).toEqual(Int16Array.from({ length: samples.length }, (_, i) => scriptedToneSample(i, 24000)));
    const sent = peer.received.at(-1)!;
    expect([sent.method, sent.path]).toEqual(['POST', '/v1/speak']);
    expect(Object.fromEntries(sent.query)).toEqual({ model: 'aura-2-thalia-en', encoding: 'linear16', sample_rate: '24000', container: 'none' });
    expect(JSON.parse(sent.body.toString())).toEqual({ text: 'Hello there' });
    expect(sent.headers.authorization).toBe(`Token ${KEY}`);
    expect(runtime.speech.formatPhoneme).toBeNull();
  });

  it('uses the tts_sample_rate setting', async () => {
    const stream = await synthesize(target({}, { tts_sample_rate: 16000 }));
    expect(stream.sampleRate).toBe(16000);
    expect((await samplesOf(stream.chunks)).length).toBe(16000 * 0.11);
    expect(peer.received.at(-1)!.query.get('sample_rate')).toBe('16000');
  });

  it('sends speed to Aura-2 voices within 0.7-1.5 and none to Aura-1 voices', async () => {
    const speedSent = async (voice: string, speed: number) => {
      await samplesOf((await synthesize(target(), { voice, speed })).chunks);
      return peer.received.at(-1)!.query.get('speed');
    };
    expect(await speedSent('aura-2-thalia-en', 1.2)).toBe('1.2');
    expect(await speedSent('aura-2-thalia-en', 0.6)).toBe('0.7');
    expect(await speedSent('aura-asteria-en', 1.2)).toBeNull();
  });

  it("reports a refused key, 4xx and 5xx with the engine's message and never the key", async () => {
    peer.behaviour = { kind: 'auth_refused' };
    const refused = await failure(synthesize(target()));
    expect([refused.kind, refused.details.status, refused.details.engineMessage]).toEqual(['status', 401, 'Invalid credentials.']);
    expect(refused.message).not.toContain(KEY);
    peer.behaviour = { kind: 'error', status: 400, body: { err_code: 'INVALID_QUERY_PARAMETER', err_msg: 'No such model: aura-2-nobody-en' } };
    expect((await failure(synthesize(target()))).details.engineMessage).toBe('No such model: aura-2-nobody-en');
    peer.behaviour = { kind: 'error', status: 500, body: { err_code: 'INTERNAL_SERVER_ERROR', err_msg: 'Something went wrong.' } };
    const down = await failure(synthesize(target()));
    expect([down.kind, down.details.status]).toEqual(['status', 500]);
  });

  it('fails the chunks as broken when the engine drops the stream, as timeout when it goes silent', async () => {
    peer.behaviour = { kind: 'die', after: 1001 };
    const dropped = await synthesize(target());
    expect((await failure(samplesOf(dropped.chunks))).kind).toBe('broken');

    peer.behaviour = { kind: 'stall', after: 1001 };
    // Long enough for the stream to start on a loaded machine; only the stall after it may time out.
    const stalled = await synthesize(target(), { timeoutMs: 1_000 });
    expect((await failure(samplesOf(stalled.chunks))).kind).toBe('timeout');

    peer.behaviour = { kind: 'hang' };
    expect((await failure(synthesize(target(), { timeoutMs: 200 }))).kind).toBe('timeout');
    expect((await failure(synthesize(target({ url: refusedUrl })))).kind).toBe('connect');
  });

  it("drops the engine's connection when the caller aborts mid-stream", async () => {
    peer.behaviour = { kind: 'stall', after: 1001 };
    const controller = new AbortController();
    const stream = await synthesize(target(), { signal: controller.signal });
    const iterator = stream.chunks[Symbol.asyncIterator]();
    // 1001 bytes: 500 whole samples, the odd byte held for the next chunk.
    expect((await iterator.next()).value).toHaveLength(500);
    const request = peer.received.at(-1)!;
    controller.abort();
    await request.closed;
    expect(request.closedEarly).toBe(true);
    await expect(iterator.next()).rejects.toBeDefined();
  });
});

describe('voice catalogue', () => {
  it('lists the Aura models as voices: id, language, gender from the tags, accent and use cases', async () => {
    const voices = await runtime.voiceCatalogue.listVoices(target(), call());
    expect(voices).toEqual([
      { id: 'aura-2-thalia-en', name: 'thalia', language: 'en', gender: 'female', description: 'American accent; Casual chat, Customer service' },
      { id: 'aura-2-apollo-en', name: 'apollo', language: 'en', gender: 'male', description: 'American accent; Interview' },
      { id: 'aura-2-celeste-es', name: 'celeste', language: 'es', gender: null, description: 'Colombian accent' },
      { id: 'aura-orion-en', name: 'orion', language: 'en', gender: null, description: '' },
    ]);
    const sent = peer.received.at(-1)!;
    expect([sent.method, sent.path, sent.headers.authorization]).toEqual(['GET', '/v1/models', `Token ${KEY}`]);
  });

  it("refuses a model list without a tts array, and reports the engine's errors", async () => {
    peer.behaviour = { kind: 'raw', status: 200, contentType: 'application/json', body: JSON.stringify({ stt: [] }) };
    expect((await failure(runtime.voiceCatalogue.listVoices(target(), call()))).kind).toBe('protocol');
    peer.behaviour = { kind: 'auth_refused' };
    const refused = await failure(runtime.voiceCatalogue.listVoices(target(), call()));
    expect([refused.kind, refused.details.status]).toEqual(['status', 401]);
    peer.behaviour = { kind: 'error', status: 503, body: { err_code: 'SERVICE_UNAVAILABLE', err_msg: 'Try again later.' } };
    expect((await failure(runtime.voiceCatalogue.listVoices(target(), call()))).details.engineMessage).toBe('Try again later.');
  });
});

describe('health', () => {
  const health = (t: Target) => runtime.health(t, new AbortController().signal);

  it('is up when GET /v1/projects answers 2xx with the key', async () => {
    expect((await health(target())).ok).toBe(true);
    const sent = peer.received.at(-1)!;
    expect([sent.method, sent.path, sent.headers.authorization]).toEqual(['GET', '/v1/projects', `Token ${KEY}`]);
  });

  it('is down when the key is refused, the engine errs, or nothing listens', async () => {
    peer.behaviour = { kind: 'auth_refused' };
    const refused = await health(target());
    expect(refused.ok).toBe(false);
    expect(refused.error).toContain('401');
    expect(refused.error).not.toContain(KEY);
    peer.behaviour = { kind: 'error', status: 500, body: { err_msg: 'Internal error' } };
    expect(await health(target())).toMatchObject({ ok: false, error: expect.stringContaining('Internal error') });
    expect((await health(target({ url: refusedUrl }))).ok).toBe(false);
  });
});
