// The `cartesia` protocol against a scripted Cartesia (test/support/scripted-cartesia.ts): what
// goes on the wire, what comes back, and every way the engine can fail.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { floatToS16, s16ToFloat, type PcmSamples } from '../../audio/pcm.ts';
import { tone, zeroCrossingFrequency } from '../../audio/test-signals.ts';
import { encodeWav } from '../../audio/wav.ts';
import { startScriptedCartesia, TONE_HZ, type CatalogueVoice, type ScriptedCartesia } from '../../../test/support/scripted-cartesia.ts';
import { UpstreamError, type CallOptions, type TranscriptionEvent, type TargetOf, type TranscriptionStream, type UpstreamTarget } from '../contract.ts';
import { cartesia } from './cartesia/index.ts';
import { loadConfig } from '../../../server/config/env.ts';

const runtime = cartesia.create(loadConfig({ SVC_DATA_DIR: '/tmp' }).engines);
const speech = runtime.speech;
const batch = runtime.transcription;
const live = runtime.streamingTranscription;
const KEY = 'sk_car_secret';

let peer: ScriptedCartesia;
beforeEach(async () => {
  peer = await startScriptedCartesia({ apiKey: KEY });
});
afterEach(async () => {
  await peer.close();
});

function target(overrides: Partial<UpstreamTarget> & { settings?: Record<string, unknown> } = {}): TargetOf<typeof cartesia> {
  return {
    id: 'ups_test',
    modelId: 'mdl_test',
    url: peer.url,
    protocol: 'cartesia',
    upstreamModel: 'ink-whisper',
    apiKey: KEY,
    ...overrides,
    settings: cartesia.settings.parse(overrides.settings ?? {}),
  };
}
const tts = (overrides: Partial<UpstreamTarget> & { settings?: Record<string, unknown> } = {}) => target({ upstreamModel: 'sonic-2', ...overrides });
const call = (timeoutMs = 5000, signal = new AbortController().signal): CallOptions => ({ signal, timeoutMs });

async function failure(promise: Promise<unknown>): Promise<UpstreamError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UpstreamError);
  return error as UpstreamError;
}

/** Tone bursts and silences, in order: the scripted engine hears one word per burst. */
function bursts(rate: number, parts: [kind: 'tone' | 'silence', seconds: number][]): Float32Array {
  const pieces = parts.map(([kind, seconds]) => (kind === 'tone' ? tone(TONE_HZ, rate, seconds) : new Float32Array(Math.round(rate * seconds))));
  const out = new Float32Array(pieces.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

async function allSamples(chunks: AsyncIterable<PcmSamples>): Promise<Float32Array> {
  const parts: Float32Array[] = [];
  for await (const chunk of chunks) {
    expect(chunk).toBeInstanceOf(Int16Array);
    parts.push(s16ToFloat(chunk as Int16Array));
  }
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

async function refusedPort(): Promise<string> {
  const gone = await startScriptedCartesia();
  await gone.close();
  return gone.url;
}

describe('settings', () => {
  it('default to the documented version and 24 kHz, and refuse what Cartesia would not take', () => {
    expect(cartesia.settings.parse({})).toEqual({ version: '2026-03-01', tts_sample_rate: 24000 });
    expect(cartesia.settings.safeParse({ tts_sample_rate: 32000 }).success).toBe(false);
    expect(cartesia.settings.safeParse({ version: 'latest' }).success).toBe(false);
    expect(cartesia.settings.safeParse({ voice: 'x' }).success).toBe(false);
  });
});

describe('speech (/tts/bytes)', () => {
  const request = { text: 'Hello there', voice: { upstreamId: 'voice-1', params: null }, language: 'en-US', speed: 1.25 };

  it('streams raw PCM at the configured rate, asking for it the way the reference shows', async () => {
    const stream = await speech.synthesize(tts({ settings: { tts_sample_rate: 16000 } }), { ...request, ...call() });
    expect(stream.sampleRate).toBe(16000);
    const samples = await allSamples(stream.chunks);
    // 20 ms per character, at 1.25x: no sample lost to the odd-sized chunks.
    expect(samples.length).toBe(Math.round((16000 * 20 * 11) / 1000 / 1.25));
    expect(zeroCrossingFrequency(samples, 16000)).toBeCloseTo(TONE_HZ, 0);

    const [received] = peer.received;
    expect(received!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(received!.headers['cartesia-version']).toBe('2026-03-01');
    expect(JSON.parse(received!.body.toString())).toEqual({
      model_id: 'sonic-2',
      transcript: 'Hello there',
      voice: { mode: 'id', id: 'voice-1' },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 },
      language: 'en',
      generation_config: { speed: 1.25 },
    });
  });

  it('leaves the speed out at the natural rate and uses the default rate of 24 kHz', async () => {
    const stream = await speech.synthesize(tts(), { ...request, speed: 1, language: undefined, ...call() });
    expect(stream.sampleRate).toBe(24000);
    expect((await allSamples(stream.chunks)).length).toBe((24000 * 20 * 11) / 1000);
    const body = JSON.parse(peer.received[0]!.body.toString()) as Record<string, unknown>;
    expect(body).not.toHaveProperty('generation_config');
    expect(body).not.toHaveProperty('language');
  });

  it("reports a refused key with Cartesia's message and without the key", async () => {
    const error = await failure(speech.synthesize(tts({ apiKey: 'sk_car_wrong' }), { ...request, ...call() }));
    expect(error.kind).toBe('status');
    expect(error.details.status).toBe(401);
    expect(error.details.engineMessage).toBe('Invalid API key.');

    peer.behaviour = { kind: 'error', status: 401, message: `Key ${KEY} is revoked.` };
    const echoed = await failure(speech.synthesize(tts(), { ...request, ...call() }));
    expect(echoed.message).toContain('is revoked');
    expect(echoed.message).not.toContain(KEY);
  });

  it("reports 4xx and 5xx answers as status errors with the engine's message", async () => {
    peer.behaviour = { kind: 'error', status: 422, message: 'Voice not found.' };
    const client = await failure(speech.synthesize(tts(), { ...request, ...call() }));
    expect([client.kind, client.details.status, client.details.engineMessage]).toEqual(['status', 422, 'Voice not found.']);

    peer.behaviour = { kind: 'error', status: 503, message: 'Overloaded.' };
    const server = await failure(speech.synthesize(tts(), { ...request, ...call() }));
    expect([server.kind, server.details.status, server.details.engineMessage]).toEqual(['status', 503, 'Overloaded.']);
  });

  it('throws a broken stream when the engine drops the connection mid-audio', async () => {
    peer.behaviour = { kind: 'die' };
    const stream = await speech.synthesize(tts(), { ...request, ...call() });
    const error = await failure(allSamples(stream.chunks));
    expect(error.kind).toBe('broken');
  });

  it('times out when the engine does not answer', async () => {
    peer.behaviour = { kind: 'hang' };
    const error = await failure(speech.synthesize(tts(), { ...request, ...call(300) }));
    expect(error.kind).toBe('timeout');
  });

  it('closes the engine connection when the caller aborts', async () => {
    peer.behaviour = { kind: 'hang' };
    const controller = new AbortController();
    const pending = speech.synthesize(tts(), { ...request, ...call(5000, controller.signal) });
    const received = await peer.request(1);
    controller.abort();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    await received.closed;
  });

  it('reports a refused connection as connect', async () => {
    const error = await failure(speech.synthesize(tts({ url: await refusedPort() }), { ...request, ...call() }));
    expect(error.kind).toBe('connect');
  });

  it("writes dictionary phonemes (eSpeak mnemonics) as Cartesia's inline IPA", () => {
    expect(speech.formatPhoneme!("h@l'oU w'3:ld")).toBe('<<h|ə|l|ˈ|oʊ>> <<w|ˈ|ɝ|l|d>>');
    expect(speech.formatPhoneme!("tS'Iz%")).toBe('<<tʃ|ˈ|ɪ|z>>');
  });
});

describe('transcription (/stt)', () => {
  const audio = bursts(16000, [
    ['silence', 0.2],
    ['tone', 0.3],
    ['silence', 0.3],
    ['tone', 0.3],
    ['silence', 0.2],
  ]);
  const request = () => ({ samples: audio, sampleRate: 16000, language: 'en-GB', keyterms: [], ...call() });

  it('sends a WAV with word timestamps asked for and reads the words with their times', async () => {
    const result = await batch.transcribe(target(), request());
    expect(result.text).toBe('alpha bravo');
    expect(result.words.map((w) => w.word)).toEqual(['alpha', 'bravo']);
    expect(result.words[0]!.start).toBeCloseTo(0.2, 5);
    expect(result.words[0]!.end).toBeCloseTo(0.5, 5);
    expect(result.words[1]!.start).toBeCloseTo(0.8, 5);
    expect(result.words[1]!.end).toBeCloseTo(1.1, 5);

    const form = peer.received[0]!.form!;
    expect(form.get('model')).toBe('ink-whisper');
    expect(form.get('language')).toBe('en');
    expect(form.getAll('timestamp_granularities[]')).toEqual(['word']);
    const file = form.get('file') as File;
    expect([file.name, file.type, file.size]).toEqual(['audio.wav', 'audio/wav', encodeWav(audio, 16000, 'pcm_s16le').length]);
    expect(peer.received[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
  });

  it('reports a refused key, and 4xx/5xx answers, as status errors', async () => {
    const refused = await failure(batch.transcribe(target({ apiKey: 'sk_car_wrong' }), request()));
    expect([refused.kind, refused.details.status, refused.details.engineMessage]).toEqual(['status', 401, 'Invalid API key.']);
    peer.behaviour = { kind: 'error', status: 400, message: 'Unsupported audio.' };
    expect((await failure(batch.transcribe(target(), request()))).details).toMatchObject({ status: 400, engineMessage: 'Unsupported audio.' });
    peer.behaviour = { kind: 'error', status: 500, message: 'Internal error.' };
    expect((await failure(batch.transcribe(target(), request()))).details).toMatchObject({ status: 500, engineMessage: 'Internal error.' });
  });

  it('throws broken when the answer is cut off, and timeout when none comes', async () => {
    peer.behaviour = { kind: 'die' };
    expect((await failure(batch.transcribe(target(), request()))).kind).toBe('broken');
    peer.behaviour = { kind: 'hang' };
    expect((await failure(batch.transcribe(target(), { ...request(), timeoutMs: 300 }))).kind).toBe('timeout');
  });
});

/** Events until (and including) the one the predicate picks. */
async function eventsUntil(stream: TranscriptionStream, last: (e: TranscriptionEvent) => boolean): Promise<TranscriptionEvent[]> {
  const seen: TranscriptionEvent[] = [];
  for await (const event of stream.events) {
    seen.push(event);
    if (last(event)) return seen;
  }
  throw new Error(`events ended before the expected one; saw ${JSON.stringify(seen)}`);
}

/** Writes 16 kHz audio in 100 ms pieces, as a live client would. */
function writeLive(stream: TranscriptionStream, audio: Float32Array): number {
  const pcm = floatToS16(audio);
  for (let at = 0; at < pcm.length; at += 1600) stream.write(pcm.subarray(at, at + 1600));
  return pcm.length;
}

const liveOptions = (overrides: Partial<CallOptions> = {}) => ({
  sampleRate: 16000,
  language: 'en-US',
  keyterms: [],
  engineTurns: false,
  ...call(),
  ...overrides,
});

describe('streaming transcription (/stt/websocket)', () => {
  it('asks for a rate Cartesia takes and leaves turns to the gateway', () => {
    expect([8000, 16000, 24000, 48000].map(live.engineRate)).toEqual([8000, 16000, 24000, 48000]);
    expect([11025, 32000].map(live.engineRate)).toEqual([16000, 16000]);
    expect(live.findsTurns(target())).toBe(false);
  });

  it('reports interims, a final per finalize with session times, then finalized; close ends the stream', async () => {
    const stream = await live.open(target(), { ...liveOptions(), keyterms: ['Cartesia', 'Ink'] });
    const socket = await peer.sttSocket(1);
    expect(Object.fromEntries(socket.query)).toMatchObject({ model: 'ink-whisper', encoding: 'pcm_s16le', sample_rate: '16000', language: 'en' });
    expect(socket.query.getAll('keyterm')).toEqual(['Cartesia', 'Ink']);
    expect(socket.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(socket.headers['cartesia-version']).toBe('2026-03-01');

    let written = writeLive(
      stream,
      bursts(16000, [
        ['silence', 0.2],
        ['tone', 0.3],
        ['silence', 0.3],
        ['tone', 0.3],
        ['silence', 0.3],
      ]),
    );
    stream.finalize();
    const first = await eventsUntil(stream, (e) => e.type === 'finalized');
    const interims = first.filter((e) => e.type === 'transcript' && !e.isFinal);
    expect(interims.map((e) => e.type === 'transcript' && e.text)).toContain('alpha bravo');
    expect(first.at(-2)).toEqual({
      type: 'transcript',
      isFinal: true,
      text: 'alpha bravo',
      words: [
        { word: 'alpha', start: 0.2, end: 0.5 },
        { word: 'bravo', start: 0.8, end: 1.1 },
      ],
    });

    // The next utterance: Cartesia's delta starts with a space, its words run on from the session's start.
    written += writeLive(
      stream,
      bursts(16000, [
        ['tone', 0.3],
        ['silence', 0.2],
      ]),
    );
    stream.finalize();
    const second = await eventsUntil(stream, (e) => e.type === 'finalized');
    expect(second.filter((e) => e.type === 'transcript' && !e.isFinal).map((e) => e.type === 'transcript' && e.text)).toContain('charlie');
    expect(second.at(-2)).toEqual({ type: 'transcript', isFinal: true, text: 'charlie', words: [{ word: 'charlie', start: 1.4, end: 1.7 }] });
    expect(socket.audioBytes).toBe(written * 2);

    stream.close();
    const after: TranscriptionEvent[] = [];
    for await (const event of stream.events) after.push(event);
    expect(after).toEqual([]);
    expect(await socket.closed).toMatchObject({ code: 1000 });
    expect(socket.commands).toEqual(['finalize', 'finalize', 'close']);
  });

  it("rejects the open with the engine's status when the key is refused or the engine fails", async () => {
    const refused = await failure(live.open(target({ apiKey: 'sk_car_wrong' }), liveOptions()));
    expect([refused.kind, refused.details.status, refused.details.engineMessage]).toEqual(['status', 401, 'Invalid API key.']);
    expect(refused.message).not.toContain('sk_car_wrong');
    peer.behaviour = { kind: 'error', status: 429, message: 'Too many concurrent requests.' };
    expect((await failure(live.open(target(), liveOptions()))).details).toMatchObject({ status: 429, engineMessage: 'Too many concurrent requests.' });
    peer.behaviour = { kind: 'error', status: 503, message: 'Unavailable.' };
    expect((await failure(live.open(target(), liveOptions()))).details).toMatchObject({ status: 503, engineMessage: 'Unavailable.' });
  });

  it("throws the engine's error event as a status error", async () => {
    peer.behaviour = { kind: 'stream_error', status: 400, message: 'The model is not valid.' };
    const stream = await live.open(target(), liveOptions());
    writeLive(stream, bursts(16000, [['tone', 0.1]]));
    const error = await failure(eventsUntil(stream, () => false));
    expect([error.kind, error.details.status, error.details.engineMessage]).toEqual(['status', 400, 'The model is not valid.']);
  });

  it('throws broken when the engine drops the connection mid-stream, or closes it unasked', async () => {
    peer.behaviour = { kind: 'die' };
    const dropped = await live.open(target(), liveOptions());
    writeLive(
      dropped,
      bursts(16000, [
        ['silence', 0.1],
        ['tone', 0.3],
      ]),
    );
    expect((await failure(eventsUntil(dropped, () => false))).kind).toBe('broken');

    await peer.close();
    peer = await startScriptedCartesia({ apiKey: KEY, sttIdleMs: 200 });
    const idle = await live.open(target(), liveOptions());
    expect((await failure(eventsUntil(idle, () => false))).kind).toBe('broken');
  });

  it('times out when the engine does not accept the socket, or does not answer a finalize', async () => {
    peer.behaviour = { kind: 'hang' };
    expect((await failure(live.open(target(), liveOptions({ timeoutMs: 300 })))).kind).toBe('timeout');

    peer.behaviour = { kind: 'mute' };
    // Long enough for the open to succeed on a loaded machine; only the unanswered finalize may time out.
    const stream = await live.open(target(), liveOptions({ timeoutMs: 1_000 }));
    writeLive(stream, bursts(16000, [['tone', 0.2]]));
    stream.finalize();
    expect((await failure(eventsUntil(stream, () => false))).kind).toBe('timeout');
  });

  it('closes the engine socket when the caller aborts', async () => {
    const controller = new AbortController();
    const stream = await live.open(target(), liveOptions({ signal: controller.signal }));
    const socket = await peer.sttSocket(1);
    controller.abort();
    await expect(eventsUntil(stream, () => false)).rejects.toMatchObject({ name: 'AbortError' });
    await socket.closed;
  });

  it('reports a refused connection as connect', async () => {
    expect((await failure(live.open(target({ url: await refusedPort() }), liveOptions()))).kind).toBe('connect');
  });
});

describe('clone (/voices/clone)', () => {
  const clip = bursts(16000, [['tone', 1]]);
  const wav = encodeWav(clip, 16000, 'pcm_s16le');
  const request = { clip: { samples: clip, sampleRate: 16000, wav }, name: 'Narrator', language: 'en-US', transcript: null, mode: 'stability' as const };

  it('sends the clip, name and language, and keeps the voice id Cartesia answers', async () => {
    const voice = await runtime.clone.clone(tts(), { ...request, ...call() });
    const created = peer.voices.at(-1)!;
    expect(voice).toEqual({ upstreamId: created.id, params: null, expiresAt: null, metadata: { engine: 'cartesia', upstream_voice_id: created.id } });
    const form = peer.received[0]!.form!;
    const file = form.get('clip') as File;
    expect([file.name, file.type, file.size]).toEqual(['clip.wav', 'audio/wav', wav.length]);
    expect([form.get('name'), form.get('language'), form.get('mode')]).toEqual(['Narrator', 'en', null]);
  });

  it('sends the mode to upstreams pinned to a version that reads it', async () => {
    await runtime.clone.clone(tts({ settings: { version: '2024-11-13' } }), { ...request, ...call() });
    expect(peer.received[0]!.form!.get('mode')).toBe('stability');
    expect(peer.received[0]!.headers['cartesia-version']).toBe('2024-11-13');
  });

  it('reports a refused key, and 4xx/5xx answers, as status errors', async () => {
    expect((await failure(runtime.clone.clone(tts({ apiKey: 'sk_car_wrong' }), { ...request, ...call() }))).details).toMatchObject({
      status: 401,
      engineMessage: 'Invalid API key.',
    });
    peer.behaviour = { kind: 'error', status: 400, message: 'The clip is too short.' };
    expect((await failure(runtime.clone.clone(tts(), { ...request, ...call() }))).details).toMatchObject({
      status: 400,
      engineMessage: 'The clip is too short.',
    });
    peer.behaviour = { kind: 'error', status: 502, message: 'Bad gateway.' };
    expect((await failure(runtime.clone.clone(tts(), { ...request, ...call() }))).details).toMatchObject({ status: 502 });
  });
});

describe('voice catalogue (GET /voices)', () => {
  const GENDERS = ['masculine', 'feminine', 'gender_neutral', null] as const;
  const catalogue = (n: number): CatalogueVoice[] =>
    Array.from({ length: n }, (_, i) => ({
      id: `voice-${i}`,
      name: `Voice ${i}`,
      description: `Described ${i}`,
      language: i % 2 ? 'fr' : 'en',
      gender: GENDERS[i % 4]!,
    }));

  it('follows the pages with starting_after and maps each voice', async () => {
    peer.voices.push(...catalogue(250));
    const voices = await runtime.voiceCatalogue.listVoices(tts(), call());
    expect(voices.map((v) => v.id)).toEqual(catalogue(250).map((v) => v.id));
    expect(voices.slice(0, 4)).toEqual([
      { id: 'voice-0', name: 'Voice 0', language: 'en', gender: 'male', description: 'Described 0' },
      { id: 'voice-1', name: 'Voice 1', language: 'fr', gender: 'female', description: 'Described 1' },
      { id: 'voice-2', name: 'Voice 2', language: 'en', gender: 'neutral', description: 'Described 2' },
      { id: 'voice-3', name: 'Voice 3', language: 'fr', gender: null, description: 'Described 3' },
    ]);
    expect(peer.received.map((r) => [r.query.get('limit'), r.query.get('starting_after')])).toEqual([
      ['100', null],
      ['100', 'voice-99'],
      ['100', 'voice-199'],
    ]);
  });

  it('stops at 1,000 voices', async () => {
    peer.voices.push(...catalogue(1050));
    const voices = await runtime.voiceCatalogue.listVoices(tts(), call());
    expect(voices).toHaveLength(1000);
    expect(peer.received).toHaveLength(10);
  });

  it('reports a refused key as a status error', async () => {
    expect((await failure(runtime.voiceCatalogue.listVoices(tts({ apiKey: 'sk_car_wrong' }), call()))).details).toMatchObject({
      status: 401,
      engineMessage: 'Invalid API key.',
    });
  });
});

describe('health', () => {
  it('is up when an authenticated GET /voices?limit=1 answers 2xx', async () => {
    expect(await runtime.health(tts(), new AbortController().signal)).toMatchObject({ ok: true });
    expect([peer.received[0]!.path, peer.received[0]!.query.get('limit'), peer.received[0]!.headers.authorization]).toEqual(['/voices', '1', `Bearer ${KEY}`]);
  });

  it('is down when the key is refused or the engine cannot be reached', async () => {
    const refused = await runtime.health(tts({ apiKey: 'sk_car_wrong' }), new AbortController().signal);
    expect(refused.ok).toBe(false);
    expect(refused.error).toContain('401');
    expect((await runtime.health(tts({ url: await refusedPort() }), new AbortController().signal)).ok).toBe(false);
  });
});
