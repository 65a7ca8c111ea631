import { createServer } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { encodeWav } from '../../audio/wav.ts';
import { tone, zeroCrossingFrequency } from '../../audio/test-signals.ts';
import { peerVoice, startScriptedElevenLabs, type ElevenLabsBehaviour, type ScriptedElevenLabs } from '../../../test/support/scripted-elevenlabs.ts';
import { UpstreamError, type CallOptions, type TargetOf } from '../contract.ts';
import { elevenlabs } from './elevenlabs.ts';
import { loadConfig } from '../../../server/config/env.ts';

const API_KEY = 'xi_secret_key';
const runtime = elevenlabs.create(loadConfig({ SVC_DATA_DIR: '/tmp' }).engines);
const speech = runtime.speech;
const transcription = runtime.transcription;
const clone = runtime.clone;
const catalogue = runtime.voiceCatalogue;

let peer: ScriptedElevenLabs;
beforeEach(async () => {
  peer = await startScriptedElevenLabs({ apiKey: API_KEY });
});
afterEach(async () => {
  await peer.close();
});

type Target = TargetOf<typeof elevenlabs>;

function target(overrides: Partial<Target> = {}, settings: Record<string, unknown> = {}): Target {
  return {
    id: 'ups_test',
    modelId: 'test-model',
    url: peer.url,
    protocol: 'elevenlabs',
    upstreamModel: 'eleven_flash_v2_5',
    apiKey: API_KEY,
    settings: elevenlabs.settings.parse(settings),
    ...overrides,
  };
}

const call = (overrides: Partial<CallOptions> = {}): CallOptions => ({ signal: new AbortController().signal, timeoutMs: 5000, ...overrides });

const speechRequest = (text = 'Hello there.', overrides: Partial<Parameters<typeof speech.synthesize>[1]> = {}) => ({
  ...call(),
  text,
  voice: { upstreamId: 'JBFqnCBsd6RMkjVDRZzb', params: null },
  language: undefined,
  speed: 1,
  ...overrides,
});

async function drain(chunks: AsyncIterable<Float32Array | Int16Array>): Promise<{ pcm: Int16Array; chunkCount: number }> {
  const parts: Int16Array[] = [];
  for await (const chunk of chunks) {
    expect(chunk).toBeInstanceOf(Int16Array);
    parts.push(chunk as Int16Array);
  }
  const pcm = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    pcm.set(p, at);
    at += p.length;
  }
  return { pcm, chunkCount: parts.length };
}

async function upstreamError(promise: Promise<unknown>, kind: UpstreamError['kind']): Promise<UpstreamError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UpstreamError);
  expect((error as UpstreamError).kind).toBe(kind);
  return error as UpstreamError;
}

/** Silence and 440 Hz bursts at 16 kHz, as [seconds, voiced] pieces. */
function bursts(pieces: [number, boolean][], rate = 16000): Float32Array {
  const parts = pieces.map(([seconds, voiced]) => (voiced ? tone(440, rate, seconds, 0.5) : new Float32Array(Math.round(rate * seconds))));
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function clip() {
  const samples = bursts([
    [0.2, false],
    [1, true],
    [0.2, false],
  ]);
  return { samples, sampleRate: 16000, wav: encodeWav(samples, 16000, 'pcm_s16le') };
}

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

describe('elevenlabs: definition', () => {
  it('defaults to 24 kHz PCM and refuses unknown settings and rates', () => {
    expect(elevenlabs.settings.parse({})).toEqual({ output_sample_rate: 24000 });
    expect(elevenlabs.settings.parse({ output_sample_rate: 44100, stability: 0.4, similarity_boost: 0.9 })).toEqual({
      output_sample_rate: 44100,
      stability: 0.4,
      similarity_boost: 0.9,
    });
    expect(elevenlabs.settings.safeParse({ output_sample_rate: 48000 }).success).toBe(false);
    expect(elevenlabs.settings.safeParse({ stability: 1.5 }).success).toBe(false);
    // Deprecated in the API definition, so not offered.
    expect(elevenlabs.settings.safeParse({ optimize_streaming_latency: 3 }).success).toBe(false);
  });

  it('offers what create() provides, and no inline phonemes', () => {
    expect(elevenlabs.name).toBe('elevenlabs');
    expect([...elevenlabs.capabilities].sort()).toEqual(['clone', 'speech', 'transcription', 'voice_catalogue']);
    expect(runtime.chat).toBeUndefined();
    expect(runtime.streamingTranscription).toBeUndefined();
    expect(speech.formatPhoneme).toBeNull();
  });
});

describe('elevenlabs: speech', () => {
  it("streams the engine's PCM whole, at the rate asked for", async () => {
    const text = 'Hello there, how are you?';
    const stream = await speech.synthesize(target({}, { output_sample_rate: 16000 }), speechRequest(text));
    expect(stream.sampleRate).toBe(16000);
    const { pcm, chunkCount } = await drain(stream.chunks);

    const [req] = peer.received;
    expect(req!.method).toBe('POST');
    expect(req!.path).toBe('/v1/text-to-speech/JBFqnCBsd6RMkjVDRZzb/stream');
    expect(req!.query).toEqual({ output_format: 'pcm_16000' });
    expect(req!.headers['xi-api-key']).toBe(API_KEY);
    // At speed 1 with no settings, the voice keeps its stored settings.
    expect(req!.json).toEqual({ text, model_id: 'eleven_flash_v2_5' });

    expect(pcm.length).toBe(Math.round((16000 * text.length * 40) / 1000));
    expect(Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength).equals(req!.sent)).toBe(true);
    expect(chunkCount).toBeGreaterThan(1);
    expect(
      zeroCrossingFrequency(
        Float32Array.from(pcm, (s) => s / 32768),
        16000,
      ),
    ).toBeCloseTo(440, 0);
  });

  it('sends the speed (clamped to 0.7-1.2), the voice settings and the language where the model takes one', async () => {
    const text = 'Olá, tudo bem?';
    const stream = await speech.synthesize(target({}, { stability: 0.3, similarity_boost: 0.8 }), speechRequest(text, { speed: 1.5, language: 'pt-BR' }));
    const { pcm } = await drain(stream.chunks);
    expect(peer.received[0]!.json).toEqual({
      text,
      model_id: 'eleven_flash_v2_5',
      voice_settings: { stability: 0.3, similarity_boost: 0.8, speed: 1.2 },
      language_code: 'pt',
    });
    expect(peer.received[0]!.query.output_format).toBe('pcm_24000');
    expect(stream.sampleRate).toBe(24000);
    expect(pcm.length).toBe(Math.round((24000 * text.length * 40) / 1000 / 1.2));

    await drain((await speech.synthesize(target(), speechRequest('Slow.', { speed: 0.6 }))).chunks);
    expect((peer.received[1]!.json as { voice_settings: unknown }).voice_settings).toEqual({ speed: 0.7 });
  });

  it('leaves language_code out for models without language enforcement', async () => {
    await drain((await speech.synthesize(target({ upstreamModel: 'eleven_multilingual_v2' }), speechRequest('Bonjour.', { language: 'fr' }))).chunks);
    expect(peer.received[0]!.json).toEqual({ text: 'Bonjour.', model_id: 'eleven_multilingual_v2' });
  });

  it('reports a stream that stalls after it started as a timeout', async () => {
    peer.behaviour = { kind: 'partial', afterBytes: 801, then: 'hang' };
    // Long enough for the stream to start on a loaded machine; only the stall after it may time out.
    const stream = await speech.synthesize(target(), speechRequest('Hello.', { timeoutMs: 1_000 }));
    await upstreamError(drain(stream.chunks), 'timeout');
  });

  it('stops the engine when the caller leaves mid-stream', async () => {
    peer.behaviour = { kind: 'partial', afterBytes: 4001, then: 'hang' };
    const controller = new AbortController();
    const stream = await speech.synthesize(target(), speechRequest('Hello.', { signal: controller.signal }));
    const iterator = stream.chunks[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first.done).toBe(false);
    controller.abort();
    await expect(iterator.next()).rejects.toThrow();
    expect(await peer.received[0]!.closed).toBe(true);
  });

  it('keeps the key out of an error message that echoes it', async () => {
    peer.behaviour = { kind: 'error', status: 400, body: { detail: { status: 'bad_request', message: `Key ${API_KEY} cannot use this voice.` } } };
    const error = await upstreamError(speech.synthesize(target(), speechRequest()), 'status');
    expect(error.message).toContain('[redacted]');
    expect(error.message).not.toContain(API_KEY);
  });
});

describe('elevenlabs: transcription', () => {
  const audio = bursts([
    [0.3, false],
    [0.4, true],
    [0.3, false],
    [0.5, true],
    [0.2, false],
  ]);

  it('returns the words with their times, from the whole audio', async () => {
    const transcript = await transcription.transcribe(target({ upstreamModel: 'scribe_v1' }), {
      ...call(),
      samples: audio,
      sampleRate: 16000,
      language: 'en-US',
      keyterms: ['Acme'],
    });
    expect(transcript.text).toBe('alpha bravo');
    expect(transcript.words.map((w) => w.word)).toEqual(['alpha', 'bravo']);
    expect(transcript.words[0]!.start).toBeCloseTo(0.3, 2);
    expect(transcript.words[0]!.end).toBeCloseTo(0.7, 2);
    expect(transcript.words[1]!.start).toBeCloseTo(1.0, 2);
    expect(transcript.words[1]!.end).toBeCloseTo(1.5, 2);

    const [req] = peer.received;
    expect(req!.path).toBe('/v1/speech-to-text');
    expect(req!.headers['xi-api-key']).toBe(API_KEY);
    expect(req!.audio).toEqual({ sampleRate: 16000, samples: audio.length });
    expect(req!.files.file![0]).toMatchObject({ filename: 'audio.wav', type: 'audio/wav' });
    // Keyterms start with Scribe v2.
    expect(req!.fields).toEqual({ model_id: ['scribe_v1'], timestamps_granularity: ['word'], tag_audio_events: ['false'], language_code: ['en'] });
  });

  it('sends keyterms to Scribe v2, without the ones over 50 characters', async () => {
    await transcription.transcribe(target({ upstreamModel: 'scribe_v2' }), {
      ...call(),
      samples: audio,
      sampleRate: 16000,
      language: undefined,
      keyterms: ['Acme', 'x'.repeat(51), 'Zyxel router'],
    });
    expect(peer.received[0]!.fields.keyterms).toEqual(['Acme', 'Zyxel router']);
    expect(peer.received[0]!.fields.language_code).toBeUndefined();
  });

  it('refuses JSON without a transcript', async () => {
    peer.behaviour = { kind: 'error', status: 200, body: { status: 'ok' } };
    await upstreamError(
      transcription.transcribe(target({ upstreamModel: 'scribe_v1' }), { ...call(), samples: audio, sampleRate: 16000, language: undefined, keyterms: [] }),
      'protocol',
    );
  });
});

describe('elevenlabs: clone', () => {
  it('uploads the clip with its name and language, and keeps the voice id', async () => {
    const c = clip();
    const prepared = await clone.clone(target(), { ...call(), clip: c, name: 'Ada', language: 'de', transcript: 'Guten Tag.', mode: 'similarity' });
    expect(prepared).toEqual({
      upstreamId: 'cloned0001',
      params: null,
      expiresAt: null,
      metadata: { engine: 'elevenlabs', upstream_voice_id: 'cloned0001', requires_verification: false },
    });

    const [req] = peer.received;
    expect(req!.path).toBe('/v1/voices/add');
    expect(req!.headers['xi-api-key']).toBe(API_KEY);
    expect(req!.fields).toEqual({ name: ['Ada'], labels: [JSON.stringify({ language: 'de' })] });
    expect(req!.files.files).toHaveLength(1);
    expect(req!.files.files![0]!.filename).toBe('clip.wav');
    expect(req!.files.files![0]!.type).toBe('audio/wav');
    expect(req!.files.files![0]!.bytes.equals(c.wav)).toBe(true);
    expect(peer.voices.at(-1)).toMatchObject({ voice_id: 'cloned0001', name: 'Ada', category: 'cloned', labels: { language: 'de' } });
  });

  it('passes on that ElevenLabs wants the voice verified', async () => {
    await peer.close();
    peer = await startScriptedElevenLabs({ apiKey: API_KEY, requiresVerification: true });
    const prepared = await clone.clone(target(), { ...call(), clip: clip(), name: 'Ada', language: 'en', transcript: null, mode: 'stability' });
    expect(prepared.metadata.requires_verification).toBe(true);
  });

  it('refuses an answer without a voice id', async () => {
    peer.behaviour = { kind: 'error', status: 200, body: { requires_verification: false } };
    await upstreamError(clone.clone(target(), { ...call(), clip: clip(), name: 'Ada', language: 'en', transcript: null, mode: 'stability' }), 'protocol');
  });
});

describe('elevenlabs: voice catalogue', () => {
  it('maps language, gender and description from the labels, falling back sensibly', async () => {
    peer.voices = [
      peerVoice('v1', { name: 'George', description: 'Warm narrator', labels: { language: 'en-GB', gender: 'male', accent: 'british' } }),
      peerVoice('v2', {
        name: 'Lea',
        labels: { gender: 'Female', accent: 'parisian', descriptive: 'calm', age: 'young' },
        verified_languages: [{ language: 'fr', model_id: 'eleven_multilingual_v2', accent: 'parisian' }],
      }),
      peerVoice('v3', { name: 'Robo', labels: { gender: 'non-binary' } }),
    ];
    const voices = await catalogue.listVoices(target(), call());
    expect(voices).toEqual([
      { id: 'v1', name: 'George', language: 'en-GB', gender: 'male', description: 'Warm narrator' },
      { id: 'v2', name: 'Lea', language: 'fr', gender: 'female', description: 'parisian, calm, young' },
      { id: 'v3', name: 'Robo', language: 'en', gender: null, description: '' },
    ]);
    expect(peer.received[0]!.path).toBe('/v2/voices');
    expect(peer.received[0]!.headers['xi-api-key']).toBe(API_KEY);
  });

  it('follows the pages, 100 voices at a time', async () => {
    peer.voices = Array.from({ length: 250 }, (_, i) => peerVoice(`v${i}`));
    const voices = await catalogue.listVoices(target(), call());
    expect(voices.map((v) => v.id)).toEqual(peer.voices.map((v) => v.voice_id));
    expect(peer.received.map((r) => r.query.page_size)).toEqual(['100', '100', '100']);
    expect(peer.received[0]!.query.next_page_token).toBeUndefined();
    expect(peer.received[1]!.query.next_page_token).toBeTruthy();
  });

  it('stops at 1,000 voices', async () => {
    peer.voices = Array.from({ length: 1050 }, (_, i) => peerVoice(`v${i}`));
    const voices = await catalogue.listVoices(target(), call());
    expect(voices).toHaveLength(1000);
    expect(voices.at(-1)!.id).toBe('v999');
    expect(peer.received).toHaveLength(10);
  });
});

// Every capability fails the same ways; `run` takes the call to the end (a stream drained).
const operations: { name: string; run: (t: Target, c: CallOptions) => Promise<unknown> }[] = [
  { name: 'speech', run: async (t, c) => drain((await speech.synthesize(t, { ...speechRequest(), ...c })).chunks) },
  {
    name: 'transcription',
    run: (t, c) =>
      transcription.transcribe(
        { ...t, upstreamModel: 'scribe_v1' },
        { ...c, samples: bursts([[0.2, true]]), sampleRate: 16000, language: undefined, keyterms: [] },
      ),
  },
  { name: 'clone', run: (t, c) => clone.clone(t, { ...c, clip: clip(), name: 'Ada', language: 'en', transcript: null, mode: 'stability' }) },
  { name: 'voice catalogue', run: (t, c) => catalogue.listVoices(t, c) },
];

describe.each(operations)('elevenlabs: $name fails as an UpstreamError', ({ run }) => {
  it("when the engine refuses the key (401, the engine's message, no key)", async () => {
    const error = await upstreamError(run(target({ apiKey: 'xi_wrong_key' }), call()), 'status');
    expect(error.details.status).toBe(401);
    expect(error.details.engineMessage).toBe('Invalid API key');
    expect(error.message).not.toContain('xi_wrong_key');
    expect(peer.received[0]!.headers['xi-api-key']).toBe('xi_wrong_key');
  });

  it('when the engine answers 4xx', async () => {
    peer.behaviour = { kind: 'error', status: 400, body: { detail: { status: 'voice_not_found', message: 'A voice with that id was not found.' } } };
    const error = await upstreamError(run(target(), call()), 'status');
    expect(error.details).toMatchObject({ status: 400, engineMessage: 'A voice with that id was not found.' });
  });

  it('when the engine answers 5xx', async () => {
    peer.behaviour = { kind: 'error', status: 503, body: { detail: { status: 'system_busy', message: 'The system is busy, try again.' } } };
    const error = await upstreamError(run(target(), call()), 'status');
    expect(error.details).toMatchObject({ status: 503, engineMessage: 'The system is busy, try again.' });
  });

  it('when the engine drops the connection mid-answer (broken)', async () => {
    peer.behaviour = { kind: 'partial', afterBytes: 11, then: 'die' };
    await upstreamError(run(target(), call()), 'broken');
    expect(peer.received[0]!.sent.length).toBe(11);
  });

  it('when the engine stays silent (timeout)', async () => {
    peer.behaviour = { kind: 'hang' };
    await upstreamError(run(target(), call({ timeoutMs: 300 })), 'timeout');
  });

  it('when nothing listens (connect)', async () => {
    await upstreamError(run(target({ url: `http://127.0.0.1:${await closedPort()}` }), call()), 'connect');
  });

  it("and closes the engine's connection when the caller leaves", async () => {
    peer.behaviour = { kind: 'hang' };
    const controller = new AbortController();
    const pending = run(target(), call({ signal: controller.signal }));
    await peer.requestsArrived(1);
    controller.abort();
    await expect(pending).rejects.toThrow();
    expect(await peer.received[0]!.closed).toBe(true);
  });
});

describe('elevenlabs: health', () => {
  it('is up when the key is accepted on GET /v1/models', async () => {
    const result = await runtime.health(target(), new AbortController().signal);
    expect(result.ok).toBe(true);
    expect(peer.received.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /v1/models']);
    expect(peer.received[0]!.headers['xi-api-key']).toBe(API_KEY);
  });

  it.each<[string, ElevenLabsBehaviour, string]>([
    ['the key is refused', { kind: 'auth_refused' }, 'Invalid API key'],
    ['the engine fails', { kind: 'error', status: 500, body: { detail: { status: 'internal_error', message: 'Internal error.' } } }, 'Internal error.'],
  ])('is down when %s', async (_, behaviour, message) => {
    peer.behaviour = behaviour;
    const result = await runtime.health(target(), new AbortController().signal);
    expect(result.ok).toBe(false);
    expect(result.error).toContain(message);
    expect(result.error).not.toContain(API_KEY);
  });

  it('is down when nothing listens', async () => {
    const result = await runtime.health(target({ url: `http://127.0.0.1:${await closedPort()}` }), new AbortController().signal);
    expect(result.ok).toBe(false);
  });
});
