// The `openai-realtime` protocol against a scripted Realtime server (test/support/
// scripted-openai-realtime.ts) in each dialect: what goes on the wire, transcripts from the audio
// (one scripted word per tone burst), turn events and their order, finalize, and every failure.
import { createServer } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startScriptedRealtime, type RealtimeDialect, type ScriptedRealtime } from '../../../test/support/scripted-openai-realtime.ts';
import { floatToS16 } from '../../audio/pcm.ts';
import { tone } from '../../audio/test-signals.ts';
import { UpstreamError, type StreamingTranscriptionOptions, type TranscriptionEvent, type TranscriptionStream, type TargetOf, type Word } from '../contract.ts';
import { openaiRealtime } from './openai-realtime/index.ts';
import { loadConfig } from '../../../server/config/env.ts';

const runtime = openaiRealtime.create(loadConfig({ SVC_DATA_DIR: '/tmp' }).engines);
const stt = runtime.streamingTranscription;
const KEY = 'sk-secret-realtime-key';
const RATE = 24000;

const target = (url: string, dialect: RealtimeDialect, settings: Record<string, unknown> = {}): TargetOf<typeof openaiRealtime> => ({
  id: 'ups_test',
  modelId: 'stt-test',
  url,
  protocol: 'openai-realtime',
  upstreamModel: 'gpt-4o-transcribe',
  apiKey: KEY,
  settings: openaiRealtime.settings.parse({ dialect, ...settings }),
});

const call = (over: Partial<StreamingTranscriptionOptions> = {}): StreamingTranscriptionOptions => ({
  signal: new AbortController().signal,
  timeoutMs: 5000,
  sampleRate: RATE,
  language: 'en-US',
  keyterms: [],
  engineTurns: true,
  ...over,
});

/** Tone bursts and silences (ms) as 16-bit PCM at 24 kHz. */
function audio(...parts: ['tone' | 'silence', number][]): Int16Array {
  const chunks = parts.map(([kind, ms]) => (kind === 'tone' ? tone(440, RATE, ms / 1000, 0.5) : new Float32Array((RATE * ms) / 1000)));
  const all = new Float32Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.length;
  }
  return floatToS16(all);
}

/** Writes in 20 ms frames, as the gateway does. */
function speak(stream: TranscriptionStream, pcm: Int16Array): void {
  for (let at = 0; at < pcm.length; at += RATE / 50) stream.write(pcm.slice(at, at + RATE / 50));
}

/** The events up to the `count`-th finalized. */
async function untilFinalized(stream: TranscriptionStream, count: number): Promise<TranscriptionEvent[]> {
  const seen: TranscriptionEvent[] = [];
  for await (const event of stream.events) {
    seen.push(event);
    if (seen.filter((e) => e.type === 'finalized').length === count) break;
  }
  return seen;
}

/** The events until the stream ends, and how it ended. */
async function drain(stream: TranscriptionStream): Promise<{ events: TranscriptionEvent[]; error: unknown }> {
  const events: TranscriptionEvent[] = [];
  try {
    for await (const event of stream.events) events.push(event);
    return { events, error: null };
  } catch (error) {
    return { events, error };
  }
}

/** Everything but interim transcripts, as short strings. */
const settled = (events: TranscriptionEvent[]) =>
  events.flatMap((e) => {
    if (e.type === 'transcript') return e.isFinal ? [`final ${e.text}`] : [];
    if (e.type === 'finalized') return ['finalized'];
    return [`${e.type} ${e.atSeconds}`];
  });

const finals = (events: TranscriptionEvent[]) =>
  events.filter((e): e is Extract<TranscriptionEvent, { type: 'transcript' }> => e.type === 'transcript' && e.isFinal);

function expectWordsWithin(words: Word[], text: string, from: number, to: number) {
  expect(words.map((w) => w.word).join(' ')).toBe(text);
  for (const w of words) {
    expect(w.start).toBeGreaterThanOrEqual(from);
    expect(w.end).toBeLessThanOrEqual(to);
    expect(w.end).toBeGreaterThan(w.start);
  }
}

async function upstreamError(promise: Promise<unknown>): Promise<UpstreamError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UpstreamError);
  return error as UpstreamError;
}

let peer: ScriptedRealtime;
afterEach(async () => {
  await peer?.close();
});

/** What each OpenAI-flavoured dialect must send to open the session. */
function expectSessionSetup(dialect: RealtimeDialect, engineTurns: boolean) {
  const socket = peer.sockets[0]!;
  expect(socket.path).toBe('/v1/realtime');
  expect(socket.headers.authorization).toBe(`Bearer ${KEY}`);
  const prompt = 'Radio alphabet. Kubernetes, Istio';
  const vad = { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 };
  if (dialect === 'ga') {
    expect(socket.query).toEqual({ intent: 'transcription' });
    expect(socket.headers['openai-beta']).toBeUndefined();
    expect(socket.sessionConfig).toEqual({
      type: 'session.update',
      session: {
        type: 'transcription',
        audio: {
          input: {
            format: { type: 'audio/pcm', rate: 24000 },
            transcription: { model: 'gpt-4o-transcribe', language: 'en', prompt },
            turn_detection: engineTurns ? vad : null,
          },
        },
      },
    });
  } else if (dialect === 'beta') {
    expect(socket.query).toEqual({ intent: 'transcription' });
    expect(socket.headers['openai-beta']).toBe('realtime=v1');
    expect(socket.sessionConfig).toEqual({
      type: 'transcription_session.update',
      session: {
        input_audio_format: 'pcm16',
        input_audio_transcription: { model: 'gpt-4o-transcribe', language: 'en', prompt },
        turn_detection: engineTurns ? vad : null,
      },
    });
  } else {
    expect(socket.query).toEqual({ model: 'gpt-4o-transcribe', intent: 'transcription' });
    expect(socket.sessionConfig).toEqual({
      type: 'session.update',
      session: {
        input_audio_transcription: { model: 'gpt-4o-transcribe', language: 'en' },
        turn_detection: engineTurns ? { type: 'server_vad', threshold: 0.5, silence_duration_ms: 500 } : null,
      },
    });
  }
}

describe.each(['ga', 'beta', 'speaches'] as const)('dialect %s', (dialect) => {
  beforeEach(async () => {
    peer = await startScriptedRealtime({ dialect });
  });

  it('reports server-VAD turns: speech_started, the final, then end_of_turn, with words inside the turn', async () => {
    // speaches times its VAD from its buffer, not the session: the gateway finds its turns (the module still speaks its VAD when asked).
    expect(stt.findsTurns(target(peer.url, dialect))).toBe(dialect !== 'speaches');
    const stream = await stt.open(target(peer.url, dialect, { prompt: 'Radio alphabet.' }), call({ keyterms: ['Kubernetes', 'Istio'] }));
    const pcm = audio(['silence', 300], ['tone', 400], ['silence', 200], ['tone', 300], ['silence', 800], ['tone', 400], ['silence', 800]);
    speak(stream, pcm);
    stream.finalize();
    const events = await untilFinalized(stream, 1);
    stream.close();

    // Turn 1: speech from 300 ms (less 300 ms of padding) to 1200 ms (+500 ms of silence).
    expect(settled(events)).toEqual([
      'speech_started 0',
      'final alpha bravo',
      'end_of_turn 1.7',
      'speech_started 1.7',
      'final charlie',
      'end_of_turn 2.9',
      'finalized',
    ]);
    const [first, second] = finals(events);
    expectWordsWithin(first!.words, 'alpha bravo', 0, 1.7);
    expectWordsWithin(second!.words, 'charlie', 1.7, 2.9);
    // Interim text is the item's text so far (deltas accumulated, or speaches' partials).
    const interims = events.filter((e) => e.type === 'transcript' && !e.isFinal).map((e) => (e as { text: string }).text);
    expect(interims.slice(0, 2)).toEqual(['alpha', 'alpha bravo']);
    expect(peer.sockets[0]!.audioBytes).toBe(pcm.length * 2);
    expectSessionSetup(dialect, true);
  });

  it('finalizes utterances with turn_detection null: each final, then finalized, in order', async () => {
    const stream = await stt.open(target(peer.url, dialect, { prompt: 'Radio alphabet.' }), call({ engineTurns: false, keyterms: ['Kubernetes', 'Istio'] }));
    const first = audio(['silence', 200], ['tone', 300], ['silence', 200], ['tone', 300], ['silence', 200]);
    const second = audio(['tone', 300], ['silence', 200]);
    speak(stream, first);
    stream.finalize();
    speak(stream, second);
    stream.finalize();
    // Nothing new: the engine refuses the empty commit, and the finalize still completes.
    stream.finalize();
    const events = await untilFinalized(stream, 3);
    stream.close();

    expect(settled(events)).toEqual(['final alpha bravo', 'finalized', 'final charlie', 'finalized', 'finalized']);
    const [one, two] = finals(events);
    expectWordsWithin(one!.words, 'alpha bravo', 0, 1.2);
    expectWordsWithin(two!.words, 'charlie', 1.2, 1.7);
    expect(peer.sockets[0]!.audioBytes).toBe((first.length + second.length) * 2);
    expect(peer.sockets[0]!.received.filter((e) => e.type === 'input_audio_buffer.commit')).toHaveLength(3);
    expectSessionSetup(dialect, false);
  });

  it('a finalize with nothing written yields just finalized', async () => {
    const stream = await stt.open(target(peer.url, dialect), call({ engineTurns: false }));
    stream.finalize();
    expect(await untilFinalized(stream, 1)).toEqual([{ type: 'finalized' }]);
    stream.close();
    expect((await drain(stream)).error).toBeNull();
  });

  it('an error event answering the session configuration rejects the opening with its message', async () => {
    peer.behaviour = { kind: 'error-event', at: 'session', message: "Invalid value: 'gpt-nope'. Supported values are: 'whisper-1'.", code: 'invalid_value' };
    const error = await upstreamError(stt.open(target(peer.url, dialect), call()));
    expect(error.kind).toBe('status');
    expect(error.message).toContain("Invalid value: 'gpt-nope'");
    expect(error.details.engineMessage).toBe("Invalid value: 'gpt-nope'. Supported values are: 'whisper-1'.");
    await peer.sockets[0]!.closed;
  });
});

describe('dialect vllm', () => {
  beforeEach(async () => {
    peer = await startScriptedRealtime({ dialect: 'vllm' });
  });

  it('finds no turns itself', () => {
    expect(stt.findsTurns(target(peer.url, 'vllm'))).toBe(false);
    expect(stt.engineRate(24000)).toBe(24000);
  });

  it('transcribes utterances: a commit starts each, the final commit ends it; audio written meanwhile waits for done', async () => {
    const stream = await stt.open(target(peer.url, 'vllm'), call({ engineTurns: false }));
    const first = audio(['silence', 200], ['tone', 300], ['silence', 200], ['tone', 300], ['silence', 200]);
    const second = audio(['tone', 300], ['silence', 200]);
    speak(stream, first);
    stream.finalize();
    speak(stream, second);
    // Held until vLLM's `done`: sent earlier, vLLM would drop it with its queue.
    expect(stream.pendingSamples).toBeGreaterThanOrEqual(second.length);
    stream.finalize();
    stream.finalize();
    const events = await untilFinalized(stream, 3);
    stream.close();

    expect(settled(events)).toEqual(['final alpha bravo', 'finalized', 'final charlie', 'finalized', 'finalized']);
    const [one, two] = finals(events);
    expectWordsWithin(one!.words, 'alpha bravo', 0, 1.2);
    expectWordsWithin(two!.words, 'charlie', 1.19, 1.7);
    const interims = events.filter((e) => e.type === 'transcript' && !e.isFinal).map((e) => (e as { text: string }).text);
    expect(interims).toEqual(['alpha', 'alpha bravo', 'charlie']);

    const socket = peer.sockets[0]!;
    expect(socket.path).toBe('/v1/realtime');
    expect(socket.query).toEqual({});
    expect(socket.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(socket.sessionConfig).toEqual({ type: 'session.update', model: 'gpt-4o-transcribe' });
    const commits = socket.received.filter((e) => e.type === 'input_audio_buffer.commit').map((e) => e.final === true);
    expect(commits).toEqual([false, true, false, true]);
    // 1.7 s resampled to 16 kHz, less the resampler's filter delay (a few ms).
    const expected = 1.7 * 16000 * 2;
    expect(socket.audioBytes).toBeLessThanOrEqual(expected);
    expect(socket.audioBytes).toBeGreaterThanOrEqual(expected - 2 * 64);
  });

  it('a finalize with nothing written yields just finalized, without a commit', async () => {
    const stream = await stt.open(target(peer.url, 'vllm'), call({ engineTurns: false }));
    stream.finalize();
    expect(await untilFinalized(stream, 1)).toEqual([{ type: 'finalized' }]);
    await peer.sockets[0]!.configReceived;
    stream.close();
    await peer.sockets[0]!.closed;
    expect(peer.sockets[0]!.received.map((e) => e.type)).toEqual(['session.update']);
  });

  it('an error event for the model fails the stream with its message', async () => {
    peer.behaviour = { kind: 'error-event', at: 'session', message: 'The model `gpt-4o-transcribe` does not exist.', code: 'model_not_found' };
    const stream = await stt.open(target(peer.url, 'vllm'), call({ engineTurns: false }));
    const { error } = await drain(stream);
    expect(error).toBeInstanceOf(UpstreamError);
    expect((error as UpstreamError).kind).toBe('status');
    expect((error as UpstreamError).message).toContain('The model `gpt-4o-transcribe` does not exist.');
  });
});

describe.each(['ga', 'vllm'] as const)('failures mid-session (%s)', (dialect) => {
  beforeEach(async () => {
    peer = await startScriptedRealtime({ dialect });
  });
  const utterance = () => audio(['silence', 200], ['tone', 300], ['silence', 200]);

  it('an error event after the first transcript fails the events with its message (status)', async () => {
    peer.behaviour = { kind: 'error-event', at: 'first-transcript', message: 'The server had an error while processing your request.', code: 'server_error' };
    const stream = await stt.open(target(peer.url, dialect), call({ engineTurns: false }));
    speak(stream, utterance());
    stream.finalize();
    const { events, error } = await drain(stream);
    expect(finals(events).map((e) => e.text)).toEqual(['alpha']);
    expect(error).toBeInstanceOf(UpstreamError);
    expect((error as UpstreamError).kind).toBe('status');
    expect((error as UpstreamError).message).toContain('The server had an error while processing your request.');
    await peer.sockets[0]!.closed;
  });

  it('the engine dying mid-stream fails the events (broken)', async () => {
    peer.behaviour = { kind: 'die' };
    const stream = await stt.open(target(peer.url, dialect), call({ engineTurns: false }));
    speak(stream, utterance());
    stream.finalize();
    const { events, error } = await drain(stream);
    expect(finals(events).map((e) => e.text)).toEqual(['alpha']);
    expect(error).toBeInstanceOf(UpstreamError);
    expect((error as UpstreamError).kind).toBe('broken');
  });

  it('a finalize the engine never answers fails the events (timeout)', async () => {
    peer.behaviour = { kind: 'ignore-commit' };
    // Long enough for the open to succeed on a loaded machine; only the unanswered finalize may time out.
    const stream = await stt.open(target(peer.url, dialect), call({ engineTurns: false, timeoutMs: 1_000 }));
    speak(stream, utterance());
    stream.finalize();
    const { error } = await drain(stream);
    expect(error).toBeInstanceOf(UpstreamError);
    expect((error as UpstreamError).kind).toBe('timeout');
    await peer.sockets[0]!.closed;
  });

  // vLLM's session is set up once the socket is open: only its upgrade can hang.
  const hang = dialect === 'vllm' ? ({ kind: 'hang-upgrade' } as const) : ({ kind: 'hang' } as const);

  it('an engine that never sets up the session: timeout, and the connection is closed', async () => {
    peer.behaviour = hang;
    const error = await upstreamError(stt.open(target(peer.url, dialect), call({ timeoutMs: 300 })));
    expect(error.kind).toBe('timeout');
    await peer.sockets[0]!.closed;
  });

  it('the caller aborting while the session is set up closes the connection', async () => {
    peer.behaviour = hang;
    const controller = new AbortController();
    const opening = stt.open(target(peer.url, dialect), call({ signal: controller.signal }));
    const socket = await peer.socketAt(0);
    if (dialect === 'ga') await socket.configReceived;
    controller.abort();
    await expect(opening).rejects.toMatchObject({ name: 'AbortError' });
    await socket.closed;
  });

  it('close() ends the events and the connection', async () => {
    const stream = await stt.open(target(peer.url, dialect), call({ engineTurns: false }));
    speak(stream, utterance());
    stream.close();
    stream.close();
    expect(await drain(stream)).toEqual({ events: [], error: null });
    await peer.sockets[0]!.closed;
  });
});

describe('refusals and health', () => {
  beforeEach(async () => {
    peer = await startScriptedRealtime({ dialect: 'ga' });
  });

  it('a refused key: status 401 with OpenAI message, the key cut out', async () => {
    peer.behaviour = { kind: 'refuse-auth' };
    const error = await upstreamError(stt.open(target(peer.url, 'ga'), call()));
    expect(error.kind).toBe('status');
    expect(error.details.status).toBe(401);
    expect(error.message).toContain('Incorrect API key provided: [redacted]');
    expect(error.message).not.toContain(KEY);
    expect(error.details.engineMessage).not.toContain(KEY);
  });

  it('engine 4xx and 5xx at the upgrade: status with the engine message', async () => {
    peer.behaviour = {
      kind: 'http-error',
      status: 403,
      body: JSON.stringify({
        error: { message: 'Project does not have access to model gpt-4o-transcribe', type: 'invalid_request_error', code: 'model_not_found' },
      }),
    };
    const forbidden = await upstreamError(stt.open(target(peer.url, 'ga'), call()));
    expect(forbidden).toMatchObject({ kind: 'status', details: { status: 403, engineMessage: 'Project does not have access to model gpt-4o-transcribe' } });
    peer.behaviour = { kind: 'http-error', status: 503, body: JSON.stringify({ error: { message: 'The server is overloaded.', type: 'server_error' } }) };
    const unavailable = await upstreamError(stt.open(target(peer.url, 'ga'), call()));
    expect(unavailable).toMatchObject({ kind: 'status', details: { status: 503, engineMessage: 'The server is overloaded.' } });
  });

  it('a refused connection: connect', async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    const error = await upstreamError(stt.open(target(`http://127.0.0.1:${closedPort}/v1`, 'ga'), call()));
    expect(error.kind).toBe('connect');
    const health = await runtime.health(target(`http://127.0.0.1:${closedPort}/v1`, 'ga'), new AbortController().signal);
    expect(health.ok).toBe(false);
  });

  it('health: GET /models answering 2xx is up, 5xx is down', async () => {
    expect(await runtime.health(target(peer.url, 'ga'), new AbortController().signal)).toMatchObject({ ok: true });
    peer.modelsStatus = 503;
    const down = await runtime.health(target(peer.url, 'ga'), new AbortController().signal);
    expect(down.ok).toBe(false);
    expect(down.error).toContain('503');
  });

  it('settings: defaults, and unknown keys or bad values are refused', () => {
    expect(openaiRealtime.settings.parse({})).toEqual({
      dialect: 'ga',
      model_in_url: false,
      vad_threshold: 0.5,
      silence_duration_ms: 500,
      prefix_padding_ms: 300,
    });
    expect(openaiRealtime.settings.safeParse({ dialects: 'ga' }).success).toBe(false);
    expect(openaiRealtime.settings.safeParse({ dialect: 'azure' }).success).toBe(false);
    expect(openaiRealtime.settings.safeParse({ vad_threshold: 1.5 }).success).toBe(false);
    expect(openaiRealtime.capabilities).toEqual(['streaming_transcription']);
  });

  it('model_in_url adds the model to the socket URL (LocalAI)', async () => {
    const stream = await stt.open(target(peer.url, 'ga', { model_in_url: true }), call());
    stream.close();
    expect(peer.sockets[0]!.query).toEqual({ intent: 'transcription', model: 'gpt-4o-transcribe' });
  });
});
