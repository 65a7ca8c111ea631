// A scripted ElevenLabs API on 127.0.0.1, written from the public reference, for the `elevenlabs`
// protocol's tests: what a real account cannot show on demand (refused keys, errors, streams that
// die or stall) and exact answers to check against.
//   POST /v1/text-to-speech/{voice_id}/stream?output_format=pcm_<rate>   raw 16-bit PCM, chunked
//   POST /v1/speech-to-text          multipart (file, model_id, language_code, keyterms…) -> {text, words}
//   POST /v1/voices/add              multipart (name, files, labels, description) -> {voice_id, requires_verification}
//   GET  /v2/voices                  {voices, has_more, total_count, next_page_token} (page_size <= 100)
//   GET  /v1/voices                  {voices}
//   DELETE /v1/voices/{voice_id}     {status: "ok"}, the voice gone from `voices` and its id added to `deleted`; 404 for one it does not have
//   GET  /v1/models                  the health probe
// A refused key: 401 {"detail":{"status":"invalid_api_key","message":"Invalid API key"}}.
// Reference: https://elevenlabs.io/docs/api-reference/text-to-speech/stream,
// https://elevenlabs.io/docs/api-reference/speech-to-text/convert,
// https://elevenlabs.io/docs/api-reference/voices/ivc/create,
// https://elevenlabs.io/docs/api-reference/voices/search, https://elevenlabs.io/docs/api-reference/voices/delete,
// and the SDK github.com/elevenlabs/elevenlabs-js.
import { EventEmitter } from 'node:events';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { parseWav } from '../../gateway/audio/wav.ts';

export type ElevenLabsBehaviour =
  | { kind: 'ok' }
  /** Every key refused, as for a revoked one. */
  | { kind: 'auth_refused' }
  | { kind: 'error'; status: number; body: unknown }
  /** A 200 and the first `afterBytes` of the body, then a dropped connection ('die') or silence ('hang'). */
  | { kind: 'partial'; afterBytes: number; then: 'die' | 'hang' }
  /** The request is read and never answered. */
  | { kind: 'hang' };

/** A fault on one speech request (as test/support/scripted-cartesia.ts TtsFault). */
export type TtsFault = 'reset' | 'status_500' | 'stall_first' | 'close_mid' | 'stall_mid' | 'malformed';

/** A voice as GET /v2/voices lists it (the fields the gateway reads, and a few more). */
export interface PeerVoice {
  voice_id: string;
  name: string;
  category: 'premade' | 'cloned' | 'generated' | 'professional';
  description: string | null;
  labels: Record<string, string>;
  verified_languages: { language: string; model_id: string; accent: string | null }[];
}

export interface ReceivedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  body: Buffer;
  json: unknown;
  /** Multipart text fields, every value of each. */
  fields: Record<string, string[]>;
  files: Record<string, { filename: string; type: string; bytes: Buffer }[]>;
  /** Speech to text: the WAV received. */
  audio?: { sampleRate: number; samples: number };
  /** Body bytes written back (the PCM of a speech answer). */
  sent: Buffer;
  /** Resolves once the connection is done with: true if it closed before the answer was complete. */
  closed: Promise<boolean>;
}

export interface ScriptedElevenLabsOptions {
  apiKey?: string;
  /** Audio per character of text, at speed 1. */
  msPerCharacter?: number;
  toneHz?: number;
  /** How many writes a speech answer is cut into (odd-sized, so samples straddle chunks). */
  chunks?: number;
  /** Speech: audio made this many times faster than real time, the first piece after `firstAudioMs` (benchmarks); unset: at once. */
  pace?: { realtimeFactor: number; firstAudioMs: number };
  /** The words a transcription hears, one per voiced burst, in turn. */
  words?: string[];
  voices?: PeerVoice[];
  requiresVerification?: boolean;
}

export interface ScriptedElevenLabs {
  url: string;
  apiKey: string;
  behaviour: ElevenLabsBehaviour;
  received: ReceivedRequest[];
  voices: PeerVoice[];
  /** Ids of the voices deleted (DELETE /v1/voices/{voice_id}), in order. */
  deleted: string[];
  /** Chooses a fault for each speech request by its text and its place (0-based) among them; null: none. */
  ttsFault: ((text: string, index: number) => TtsFault | null) | null;
  /** Texts of speech requests answered in full, in order. */
  spoken: string[];
  /** Resolves when `count` requests have arrived (whole bodies read). */
  requestsArrived(count: number): Promise<void>;
  close(): Promise<void>;
}

const FRAME_SECONDS = 0.02;
const VOICED_RMS = 0.02;
const PCM_RATES = new Set([8000, 16000, 22050, 24000, 44100, 48000]);

export function peerVoice(id: string, overrides: Partial<PeerVoice> = {}): PeerVoice {
  return { voice_id: id, name: `Voice ${id}`, category: 'premade', description: null, labels: {}, verified_languages: [], ...overrides };
}

/** The sine tone a speech answer carries: `count` 16-bit samples at `rate`. */
export function peerTone(rate: number, count: number, hz: number): Buffer {
  const out = Buffer.alloc(count * 2);
  for (let i = 0; i < count; i++) out.writeInt16LE(Math.round(12000 * Math.sin((2 * Math.PI * hz * i) / rate)), i * 2);
  return out;
}

/** Voiced bursts of 20 ms frames: [start, end) in seconds. */
export function voicedBursts(samples: Float32Array, sampleRate: number): { start: number; end: number }[] {
  const frame = Math.round(sampleRate * FRAME_SECONDS);
  const bursts: { start: number; end: number }[] = [];
  let open: number | null = null;
  for (let at = 0; at < samples.length; at += frame) {
    const end = Math.min(samples.length, at + frame);
    let energy = 0;
    for (let i = at; i < end; i++) energy += samples[i]! * samples[i]!;
    const voiced = Math.sqrt(energy / (end - at)) > VOICED_RMS;
    if (voiced && open === null) open = at;
    if (!voiced && open !== null) {
      bursts.push({ start: open / sampleRate, end: at / sampleRate });
      open = null;
    }
  }
  if (open !== null) bursts.push({ start: open / sampleRate, end: samples.length / sampleRate });
  return bursts;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

export async function startScriptedElevenLabs(options: ScriptedElevenLabsOptions = {}): Promise<ScriptedElevenLabs> {
  const msPerCharacter = options.msPerCharacter ?? 40;
  const toneHz = options.toneHz ?? 440;
  const chunkCount = options.chunks ?? 5;
  const script = options.words ?? ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot'];
  const arrivals = new EventEmitter();
  const sockets = new Set<Socket>();
  let cloned = 0;

  const peer: ScriptedElevenLabs = {
    url: '',
    apiKey: options.apiKey ?? 'xi_secret_key',
    behaviour: { kind: 'ok' },
    received: [],
    voices: options.voices ?? [peerVoice('JBFqnCBsd6RMkjVDRZzb', { name: 'George', labels: { accent: 'british', gender: 'male', language: 'en' } })],
    deleted: [],
    ttsFault: null,
    spoken: [],
    requestsArrived: (count) =>
      new Promise((resolve) => {
        const check = () => {
          if (peer.received.length < count) return;
          arrivals.off('request', check);
          resolve();
        };
        arrivals.on('request', check);
        check();
      }),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };

  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      handle(req, res, Buffer.concat(parts)).catch((e: unknown) => {
        if (!res.headersSent) answer(res, 500, { detail: { status: 'internal_error', message: String(e) } });
      });
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  async function handle(req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://peer');
    const record: ReceivedRequest = {
      method: req.method ?? '',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers: req.headers,
      body,
      json: undefined,
      fields: {},
      files: {},
      sent: Buffer.alloc(0),
      closed: new Promise((resolve) => res.on('close', () => resolve(!res.writableFinished))),
    };
    const contentType = req.headers['content-type'] ?? '';
    if (contentType.startsWith('application/json')) record.json = JSON.parse(body.toString());
    if (contentType.startsWith('multipart/form-data')) await readForm(record, body, contentType);
    peer.received.push(record);
    arrivals.emit('request');

    const b = peer.behaviour;
    if (b.kind === 'hang') return;
    if (b.kind === 'auth_refused' || req.headers['xi-api-key'] !== peer.apiKey) {
      answer(res, 401, { detail: { status: 'invalid_api_key', message: 'Invalid API key' } });
      return;
    }
    if (b.kind === 'error') {
      answer(res, b.status, b.body);
      return;
    }
    const route = `${record.method} ${record.path}`;
    const tts = /^POST \/v1\/text-to-speech\/([^/]+)\/stream$/.exec(route);
    if (tts) return speak(record, res, b);
    let result: { status: number; body: unknown };
    if (route === 'POST /v1/speech-to-text') result = transcribe(record);
    else if (route === 'POST /v1/voices/add') result = addVoice(record);
    else if (route === 'GET /v2/voices') result = searchVoices(record);
    else if (route === 'GET /v1/voices') result = { status: 200, body: { voices: peer.voices } };
    else if (/^DELETE \/v1\/voices\/[^/]+$/.test(route)) result = deleteVoice(decodeURIComponent(record.path.slice('/v1/voices/'.length)));
    else if (route === 'GET /v1/models')
      result = {
        status: 200,
        body: [
          { model_id: 'eleven_flash_v2_5', can_do_text_to_speech: true },
          { model_id: 'scribe_v1', can_do_text_to_speech: false },
        ],
      };
    else result = { status: 404, body: { detail: 'Not Found' } };
    if (b.kind === 'partial' && result.status === 200) return partial(record, res, Buffer.from(JSON.stringify(result.body)), 'application/json', b);
    answer(res, result.status, result.body);
  }

  async function readForm(record: ReceivedRequest, body: Buffer, contentType: string): Promise<void> {
    const form = await new Response(new Uint8Array(body), { headers: { 'content-type': contentType } }).formData();
    for (const [name, value] of form.entries()) {
      if (typeof value === 'string') (record.fields[name] ??= []).push(value);
      else (record.files[name] ??= []).push({ filename: value.name, type: value.type, bytes: Buffer.from(await value.arrayBuffer()) });
    }
  }

  function speak(record: ReceivedRequest, res: ServerResponse, b: ElevenLabsBehaviour): void {
    const format = record.query.output_format ?? 'mp3_44100_128';
    const rate = Number(/^pcm_(\d+)$/.exec(format)?.[1]);
    if (!PCM_RATES.has(rate)) {
      answer(res, 400, { detail: { status: 'invalid_output_format', message: `This scripted peer speaks raw PCM only, not ${format}.` } });
      return;
    }
    const request = record.json as { text?: unknown; model_id?: unknown; voice_settings?: { speed?: unknown } } | undefined;
    if (typeof request?.text !== 'string' || !request.text) {
      answer(res, 422, { detail: [{ loc: ['body', 'text'], msg: 'field required', type: 'value_error.missing' }] });
      return;
    }
    const speed = typeof request.voice_settings?.speed === 'number' ? request.voice_settings.speed : 1;
    const samples = Math.round((rate * request.text.length * msPerCharacter) / 1000 / speed);
    const pcm = peerTone(rate, samples, toneHz);
    const text = request.text;
    if (b.kind === 'partial') return partial(record, res, pcm, 'audio/pcm', b);
    const fault = peer.ttsFault?.(request.text, ttsRequests++) ?? null;
    if (fault) return faulty(fault, pcm, res);
    res.writeHead(200, { 'content-type': 'audio/pcm' });
    res.socket?.setNoDelay(true);
    // Odd-sized pieces, each its own write: a sample straddles every boundary.
    const piece = Math.ceil(pcm.length / chunkCount) | 1;
    const writeFrom = (at: number) => {
      if (res.destroyed) return;
      if (at >= pcm.length) {
        res.end();
        peer.spoken.push(text);
        return;
      }
      const chunk = pcm.subarray(at, at + piece);
      record.sent = Buffer.concat([record.sent, chunk]);
      const pace = options.pace;
      const wait = pace ? (at === 0 ? 0 : (chunk.length / 2 / rate) * (1000 / pace.realtimeFactor)) : 0;
      res.write(chunk, () => (pace ? setTimeout(writeFrom, wait, at + piece) : setImmediate(writeFrom, at + piece)));
    };
    if (options.pace) setTimeout(writeFrom, options.pace.firstAudioMs, 0);
    else writeFrom(0);
  }

  let ttsRequests = 0;
  function faulty(fault: TtsFault, pcm: Buffer, res: ServerResponse): void {
    if (fault === 'reset') return void res.socket?.destroy();
    if (fault === 'status_500') return answer(res, 500, { detail: { status: 'internal_error', message: 'The scripted engine failed.' } });
    if (fault === 'malformed') return answer(res, 200, { audio: 'not here' });
    res.writeHead(200, { 'content-type': 'audio/pcm' });
    if (fault === 'stall_first') return void res.flushHeaders();
    res.write(pcm.subarray(0, Math.floor(pcm.length / 4) * 2), () => {
      if (fault === 'close_mid') res.socket?.destroy();
    });
  }

  function partial(
    record: ReceivedRequest,
    res: ServerResponse,
    full: Buffer,
    contentType: string,
    b: Extract<ElevenLabsBehaviour, { kind: 'partial' }>,
  ): void {
    res.writeHead(200, { 'content-type': contentType });
    record.sent = full.subarray(0, b.afterBytes);
    res.write(record.sent, () => {
      if (b.then === 'die') res.socket?.destroy();
    });
  }

  function transcribe(record: ReceivedRequest): { status: number; body: unknown } {
    const file = record.files.file?.[0];
    if (!file || !record.fields.model_id?.[0]) {
      return { status: 422, body: { detail: [{ loc: ['body', file ? 'model_id' : 'file'], msg: 'field required', type: 'value_error.missing' }] } };
    }
    const wav = parseWav(file.bytes);
    record.audio = { sampleRate: wav.sampleRate, samples: wav.samples.length };
    const words: { text: string; start: number; end: number; type: string; logprob: number }[] = [];
    for (const [i, burst] of voicedBursts(wav.samples, wav.sampleRate).entries()) {
      if (i > 0) words.push({ text: ' ', start: words.at(-1)!.end, end: round3(burst.start), type: 'spacing', logprob: 0 });
      words.push({ text: script[i % script.length]!, start: round3(burst.start), end: round3(burst.end), type: 'word', logprob: 0 });
    }
    const language = record.fields.language_code?.[0] ?? 'en';
    return { status: 200, body: { language_code: language, language_probability: 0.98, text: words.map((w) => w.text).join(''), words } };
  }

  function addVoice(record: ReceivedRequest): { status: number; body: unknown } {
    const name = record.fields.name?.[0];
    if (!name || !record.files.files?.length) {
      return { status: 422, body: { detail: [{ loc: ['body', name ? 'files' : 'name'], msg: 'field required', type: 'value_error.missing' }] } };
    }
    const voiceId = `cloned${String(++cloned).padStart(4, '0')}`;
    const labels = record.fields.labels?.[0] ? (JSON.parse(record.fields.labels[0]) as Record<string, string>) : {};
    peer.voices.push(peerVoice(voiceId, { name, category: 'cloned', description: record.fields.description?.[0] ?? null, labels }));
    return { status: 200, body: { voice_id: voiceId, requires_verification: options.requiresVerification ?? false } };
  }

  function deleteVoice(voiceId: string): { status: number; body: unknown } {
    const at = peer.voices.findIndex((v) => v.voice_id === voiceId);
    if (at < 0) return { status: 404, body: { detail: { status: 'voice_not_found', message: `A voice with the voice_id ${voiceId} was not found.` } } };
    peer.voices.splice(at, 1);
    peer.deleted.push(voiceId);
    return { status: 200, body: { status: 'ok' } };
  }

  // The page token is the offset, opaque to clients.
  function searchVoices(record: ReceivedRequest): { status: number; body: unknown } {
    const pageSize = Number(record.query.page_size ?? 10);
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 100) {
      return { status: 422, body: { detail: [{ loc: ['query', 'page_size'], msg: 'ensure this value is less than or equal to 100', type: 'value_error' }] } };
    }
    const from = record.query.next_page_token ? Number(Buffer.from(record.query.next_page_token, 'base64url').toString()) : 0;
    const voices = peer.voices.slice(from, from + pageSize);
    const next = from + voices.length;
    const hasMore = next < peer.voices.length;
    return {
      status: 200,
      body: { voices, has_more: hasMore, total_count: peer.voices.length, next_page_token: hasMore ? Buffer.from(String(next)).toString('base64url') : null },
    };
  }

  function answer(res: ServerResponse, status: number, body: unknown): void {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  peer.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return peer;
}
