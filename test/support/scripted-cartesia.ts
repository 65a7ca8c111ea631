// A scripted Cartesia API on 127.0.0.1 (node:http + ws), written from Cartesia's API reference,
// for what the real service cannot show on demand: exact requests, refusals, errors, streams that
// die or hang. It checks the key (`Authorization: Bearer`, `X-API-Key`, or `?api_key=` /
// `?access_token=` on sockets) and `Cartesia-Version` (`?cartesia_version=` wins on sockets), and
// answers errors in the structured shape of 2026-03-01 (`{error_code, title, message, request_id}`).
//   POST /tts/bytes     a 440 Hz tone at the asked rate, `msPerChar` per character / speed, in
//                       odd-sized chunks (a chunk may end mid-sample); or, `endless`, without end
//   POST /stt           batch: one scripted word per voiced burst of the WAV it is sent
//   WS   /stt/websocket binary PCM in; an interim whenever a burst starts or ends; `finalize` ->
//                       the utterance's final (text a delta since the last final, with Cartesia's
//                       leading space after the first), then `flush_done`; `close`/`done` -> the
//                       final, `done`, close 1000; no audio for `sttIdleMs` -> close 1000
//   POST /voices/clone  multipart clip/name/language -> a new voice, added to `voices`
//   GET  /voices        `{data, has_more, next_page}` paged by `limit` and `starting_after`
//   DELETE /voices/{id} 204, the voice gone from `voices` and its id added to `deleted`; 404 for a voice it does not have
// Words: an energy detector over 20 ms frames; a burst ends after 100 ms of silence; word times
// are seconds from the start of the audio received (of the session, on sockets).
// References: https://docs.cartesia.ai/use-the-api/api-conventions,
// https://docs.cartesia.ai/use-the-api/api-errors, https://docs.cartesia.ai/api-reference/tts/bytes,
// https://docs.cartesia.ai/api-reference/stt/websocket, https://docs.cartesia.ai/2024-11-13/api-reference/stt/stt,
// https://docs.cartesia.ai/2026-03-01/api-reference/voices/clone,
// https://docs.cartesia.ai/2024-11-13/api-reference/voices/list, https://docs.cartesia.ai/api-reference/voices/delete;
// SDK @cartesia/cartesia-js 4.2.0.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { floatToS16, s16leBytes, s16leToS16 } from '../../gateway/audio/pcm.ts';
import { parseWav } from '../../gateway/audio/wav.ts';
import { EventLog } from './socket-events.ts';
import { faultySender, type SocketFault } from './socket-faults.ts';

export type CartesiaBehaviour =
  | { kind: 'ok' }
  /** Every request (and socket upgrade) answered with this status and Cartesia's error body. */
  | { kind: 'error'; status: number; message: string }
  /** HTTP: headers and the start of the body, then the connection dropped. Sockets: dropped after the first transcript. */
  | { kind: 'die' }
  /** Never answers: no HTTP response, no upgrade. */
  | { kind: 'hang' }
  /** Sockets: takes audio and commands, answers nothing. */
  | { kind: 'mute' }
  /** POST /tts/bytes: headers and the first chunk of audio, then nothing, the connection kept open. */
  | { kind: 'stall' }
  /** POST /tts/bytes: the tone without end, however short the transcript, until the client goes away (a broken engine). */
  | { kind: 'endless' }
  /** Sockets: an error event after the first audio, then the close. */
  | { kind: 'stream_error'; status: number; message: string };

/**
 * A fault on one POST /tts/bytes (engines failing as the gateway's TTS failover must survive):
 * reset (the connection dropped before any answer), status_500, stall_first (headers and no audio),
 * close_mid / stall_mid (half the audio, then the connection dropped / nothing more), malformed
 * (a 200 whose body is JSON, not audio).
 */
export type TtsFault = 'reset' | 'status_500' | 'stall_first' | 'close_mid' | 'stall_mid' | 'malformed';

export interface CatalogueVoice {
  id: string;
  name: string;
  description: string;
  language: string;
  gender: 'masculine' | 'feminine' | 'gender_neutral' | null;
}

export interface ReceivedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** Multipart bodies, parsed. */
  form: FormData | null;
  /** Resolves when the client's connection for this request closes. */
  closed: Promise<void>;
}

export interface SttSocketRecord {
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  audioBytes: number;
  /** Resolves once at least `bytes` of audio have arrived on this socket. */
  audioReached(bytes: number): Promise<void>;
  commands: string[];
  closed: Promise<{ code: number; reason: string }>;
}

export interface ScriptedCartesiaOptions {
  apiKey?: string;
  /** Scripted transcript words, one per voiced burst, in turn. */
  words?: string[];
  msPerChar?: number;
  /** POST /tts/bytes: audio made this many times faster than real time, the first chunk after `firstAudioMs` (benchmarks); unset: at once. */
  pace?: { realtimeFactor: number; firstAudioMs: number };
  voices?: CatalogueVoice[];
  /** How long a socket may get no audio before the peer closes it (Cartesia: 20 s). */
  sttIdleMs?: number;
}

export interface ScriptedCartesia {
  url: string;
  apiKey: string;
  behaviour: CartesiaBehaviour;
  /** Transcription sockets opened from now on fail this way (test/support/socket-faults.ts). */
  sttFault?: SocketFault;
  received: ReceivedRequest[];
  sttSockets: SttSocketRecord[];
  voices: CatalogueVoice[];
  /** Ids of the voices deleted (DELETE /voices/{id}), in order. */
  deleted: string[];
  /** Chooses a fault for each POST /tts/bytes by its transcript and its place (0-based) among them; null: none. */
  ttsFault: ((transcript: string, index: number) => TtsFault | null) | null;
  /** Transcripts of POST /tts/bytes answered in full, in order. */
  spoken: string[];
  /** Resolves with the nth request (1-based) once it has arrived. */
  request(n: number): Promise<ReceivedRequest>;
  /** Resolves with the nth socket (1-based) once it has been accepted. */
  sttSocket(n: number): Promise<SttSocketRecord>;
  close(): Promise<void>;
}

export const TONE_HZ = 440;
const FRAME_SECONDS = 0.02;
const VOICED_RMS = 0.01 * 32768;
const SILENT_FRAMES_ENDING_A_BURST = 5;
const TTS_CHUNK_BYTES = 4095;
const RATES = new Set([8000, 16000, 22050, 24000, 44100, 48000]);
const DEFAULT_WORDS = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot'];

const errorBody = (title: string, message: string, errorCode: string | null = null) =>
  JSON.stringify({ error_code: errorCode, title, message, request_id: randomUUID() });

/** Voiced bursts of 16-bit audio, found frame by frame as it arrives. */
class BurstDetector {
  readonly bursts: { startFrame: number; endFrame: number; closed: boolean }[] = [];
  private frame: number[] = [];
  private frames = 0;
  private silentRun = 0;
  private readonly frameSize: number;

  constructor(readonly rate: number) {
    this.frameSize = Math.round(rate * FRAME_SECONDS);
  }

  push(samples: Int16Array): void {
    for (const s of samples) {
      this.frame.push(s);
      if (this.frame.length === this.frameSize) this.endFrame();
    }
  }

  /** Ends the open burst where its voice ended (a finalize). */
  settle(): void {
    const open = this.bursts.at(-1);
    if (open && !open.closed) open.closed = true;
  }

  private endFrame(): void {
    const rms = Math.sqrt(this.frame.reduce((sum, s) => sum + s * s, 0) / this.frame.length);
    this.frame = [];
    const open = this.bursts.at(-1);
    if (rms >= VOICED_RMS) {
      if (open && !open.closed) open.endFrame = this.frames + 1;
      else this.bursts.push({ startFrame: this.frames, endFrame: this.frames + 1, closed: false });
      this.silentRun = 0;
    } else if (open && !open.closed && ++this.silentRun >= SILENT_FRAMES_ENDING_A_BURST) open.closed = true;
    this.frames += 1;
  }
}

function wordsOf(detector: BurstDetector, from: number, words: string[]) {
  return detector.bursts.slice(from).map((b, i) => ({
    word: words[(from + i) % words.length]!,
    start: Number((b.startFrame * FRAME_SECONDS).toFixed(3)),
    end: Number((b.endFrame * FRAME_SECONDS).toFixed(3)),
  }));
}

function tone(rate: number, samples: number): Buffer {
  const out = new Float32Array(samples);
  for (let i = 0; i < samples; i++) out[i] = 0.5 * Math.sin((2 * Math.PI * TONE_HZ * i) / rate);
  return s16leBytes(floatToS16(out));
}

export async function startScriptedCartesia(options: ScriptedCartesiaOptions = {}): Promise<ScriptedCartesia> {
  const words = options.words ?? DEFAULT_WORDS;
  const msPerChar = options.msPerChar ?? 20;
  const pace = options.pace;
  const connections = new Set<Socket>();
  const requests = new EventLog<ReceivedRequest>((r) => `${r.method} ${r.path}`);
  const sttSockets = new EventLog<SttSocketRecord>(() => 'socket');
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  const state: ScriptedCartesia = {
    url: '',
    apiKey: options.apiKey ?? 'sk_car_secret',
    behaviour: { kind: 'ok' },
    received: requests.events,
    sttSockets: sttSockets.events,
    voices: options.voices ?? [],
    deleted: [],
    ttsFault: null,
    spoken: [],
    request: (n) => requests.first(() => true, { from: n - 1 }),
    sttSocket: (n) => sttSockets.first(() => true, { from: n - 1 }),
    close: async () => {
      for (const c of connections) c.destroy();
      wss.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  /** Runs the waiters, keeping those still waiting. */
  const notify = (waiters: (() => boolean)[]) => waiters.splice(0, waiters.length, ...waiters.filter((check) => !check()));

  /** The refusal for a request's credentials or version, as Cartesia answers them; null when both are fine. */
  function refusal(headers: IncomingHttpHeaders, query: URLSearchParams | null): { status: number; body: string } | null {
    const bearer = /^Bearer (.+)$/.exec(headers.authorization ?? '')?.[1];
    const key = bearer ?? (headers['x-api-key'] as string | undefined) ?? query?.get('api_key') ?? query?.get('access_token') ?? undefined;
    if (key !== state.apiKey) return { status: 401, body: errorBody('Unauthorized', key ? 'Invalid API key.' : 'No API key was provided.') };
    const version = query?.get('cartesia_version') ?? headers['cartesia-version'];
    if (typeof version !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(version))
      return { status: 400, body: errorBody('Invalid version', 'A Cartesia-Version header (YYYY-MM-DD) is required.') };
    return null;
  }

  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => void handle(req, res, Buffer.concat(parts)));
  });
  server.on('connection', (c) => {
    connections.add(c);
    c.on('close', () => connections.delete(c));
  });

  async function handle(req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://peer');
    const type = req.headers['content-type'] ?? '';
    const form = type.startsWith('multipart/form-data')
      ? await new Request(url, { method: 'POST', headers: { 'content-type': type }, body: new Uint8Array(body) }).formData().catch(() => null)
      : null;
    const closed = new Promise<void>((resolve) => res.on('close', () => resolve()));
    requests.push({ method: req.method ?? 'GET', path: url.pathname, query: url.searchParams, headers: req.headers, body, form, closed });

    const json = (status: number, payload: string) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(payload);
    };
    const b = state.behaviour;
    if (b.kind === 'hang') return;
    if (b.kind === 'error') return json(b.status, errorBody('Request failed', b.message));
    const refused = refusal(req.headers, null);
    if (refused) return json(refused.status, refused.body);
    const route = `${req.method} ${url.pathname}`;
    if (route === 'POST /tts/bytes') return speak(body, res);
    if (route === 'POST /stt') return transcribe(form, res);
    if (route === 'POST /voices/clone') return clone(form, res);
    if (route === 'GET /voices') return listVoices(url.searchParams, res);
    const deleting = /^DELETE \/voices\/([^/]+)$/.exec(route);
    if (deleting) return deleteVoice(decodeURIComponent(deleting[1]!), res);
    json(404, errorBody('Not found', `No route ${route}.`, 'not_found'));
  }

  async function speak(raw: Buffer, res: ServerResponse): Promise<void> {
    let request: {
      model_id?: unknown;
      transcript?: unknown;
      voice?: { id?: unknown };
      output_format?: { container?: unknown; encoding?: unknown; sample_rate?: unknown };
      generation_config?: { speed?: unknown };
    };
    try {
      request = JSON.parse(raw.toString()) as typeof request;
    } catch {
      request = {};
    }
    const format = request.output_format;
    const rate = Number(format?.sample_rate);
    if (
      typeof request.model_id !== 'string' ||
      typeof request.transcript !== 'string' ||
      typeof request.voice?.id !== 'string' ||
      format?.container !== 'raw' ||
      format.encoding !== 'pcm_s16le' ||
      !RATES.has(rate)
    ) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(errorBody('Invalid request', 'model_id, transcript, voice.id and a raw pcm_s16le output_format are required.', 'invalid_request'));
      return;
    }
    const speed = typeof request.generation_config?.speed === 'number' ? request.generation_config.speed : 1;
    const audio = tone(rate, Math.round((rate * msPerChar * request.transcript.length) / 1000 / speed));
    const fault = state.ttsFault?.(request.transcript, ttsRequests++) ?? null;
    if (fault) return faulty(fault, audio, res);
    res.writeHead(200, { 'content-type': 'audio/pcm' });
    if (state.behaviour.kind === 'endless') {
      // A second of tone after another, as fast as the client takes it.
      const second = tone(rate, rate);
      const taken = () =>
        new Promise<void>((resolve) => {
          const go = () => {
            res.off('drain', go);
            res.off('close', go);
            resolve();
          };
          res.on('drain', go);
          res.on('close', go);
        });
      while (!res.destroyed) if (!res.write(second)) await taken();
      return;
    }
    for (let at = 0; at < audio.length; at += TTS_CHUNK_BYTES) {
      if (res.destroyed) return;
      const chunk = audio.subarray(at, at + TTS_CHUNK_BYTES);
      if (state.behaviour.kind === 'die') {
        res.write(chunk, () => res.socket?.destroy());
        return;
      }
      if (pace) await new Promise((resolve) => setTimeout(resolve, at === 0 ? pace.firstAudioMs : (chunk.length / 2 / rate) * (1000 / pace.realtimeFactor)));
      if (res.destroyed) return;
      res.write(chunk);
      if (state.behaviour.kind === 'stall') return;
      await new Promise((resolve) => setImmediate(resolve));
    }
    res.end();
    state.spoken.push(request.transcript);
  }

  let ttsRequests = 0;
  function faulty(fault: TtsFault, audio: Buffer, res: ServerResponse): void {
    if (fault === 'reset') return void res.socket?.destroy();
    if (fault === 'status_500') {
      res.writeHead(500, { 'content-type': 'application/json' });
      return void res.end(errorBody('Internal server error', 'The scripted engine failed.'));
    }
    if (fault === 'malformed') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ audio: 'not here' }));
    }
    res.writeHead(200, { 'content-type': 'audio/pcm' });
    if (fault === 'stall_first') return void res.flushHeaders();
    const half = audio.subarray(0, Math.floor(audio.length / 4) * 2);
    res.write(half, () => {
      if (fault === 'close_mid') res.socket?.destroy();
    });
  }

  async function transcribe(form: FormData | null, res: ServerResponse): Promise<void> {
    const file = form?.get('file');
    if (!(file instanceof File) || typeof form?.get('model') !== 'string') {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(errorBody('Invalid request', 'A file and a model are required.', 'invalid_request'));
      return;
    }
    const wav = parseWav(new Uint8Array(await file.arrayBuffer()));
    const detector = new BurstDetector(wav.sampleRate);
    detector.push(floatToS16(wav.samples));
    detector.settle();
    const heard = wordsOf(detector, 0, words);
    const payload = JSON.stringify({
      type: 'transcript',
      request_id: randomUUID(),
      text: heard.map((w) => w.word).join(' '),
      language: form!.get('language') ?? 'en',
      duration: wav.frameCount / wav.sampleRate,
      words: heard,
    });
    res.writeHead(200, { 'content-type': 'application/json' });
    if (state.behaviour.kind === 'die') res.write(payload.slice(0, 20), () => res.socket?.destroy());
    else res.end(payload);
  }

  function clone(form: FormData | null, res: ServerResponse): void {
    const clip = form?.get('clip');
    const name = form?.get('name');
    const language = form?.get('language');
    if (!(clip instanceof File) || clip.size === 0 || typeof name !== 'string' || typeof language !== 'string') {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(errorBody('Invalid request', 'clip, name and language are required.', 'invalid_request'));
      return;
    }
    const description = form!.get('description');
    const voice: CatalogueVoice = { id: randomUUID(), name, description: typeof description === 'string' ? description : '', language, gender: null };
    state.voices.push(voice);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: voice.id,
        user_id: 'user_scripted',
        name,
        description: voice.description,
        tagline: '',
        language,
        created_at: new Date().toISOString(),
        access: 'private',
        visibility: 'owner',
      }),
    );
  }

  function deleteVoice(id: string, res: ServerResponse): void {
    const at = state.voices.findIndex((v) => v.id === id);
    if (at < 0) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(errorBody('Not found', `Voice ${id} not found.`, 'not_found'));
      return;
    }
    state.voices.splice(at, 1);
    state.deleted.push(id);
    res.writeHead(204).end();
  }

  function listVoices(query: URLSearchParams, res: ServerResponse): void {
    const limit = Math.min(100, Math.max(1, Number(query.get('limit') ?? 10) || 10));
    const after = query.get('starting_after');
    const from = after ? state.voices.findIndex((v) => v.id === after) + 1 : 0;
    const data = state.voices.slice(from, from + limit);
    const hasMore = from + limit < state.voices.length;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        data: data.map((v) => ({ ...v, is_owner: false, is_public: true, created_at: '2026-01-01T00:00:00Z' })),
        has_more: hasMore,
        next_page: hasMore ? data.at(-1)!.id : null,
      }),
    );
  }

  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://peer');
    const reject = (status: number, body: string) => {
      socket.end(
        `HTTP/1.1 ${status} Refused\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    };
    const b = state.behaviour;
    if (b.kind === 'hang') return;
    if (b.kind === 'error') return reject(b.status, errorBody('Request failed', b.message));
    if (url.pathname !== '/stt/websocket') return reject(404, errorBody('Not found', `No socket at ${url.pathname}.`, 'not_found'));
    const refused = refusal(req.headers, url.searchParams);
    if (refused) return reject(refused.status, refused.body);
    const rate = Number(url.searchParams.get('sample_rate'));
    if (!url.searchParams.get('model') || url.searchParams.get('encoding') !== 'pcm_s16le' || !RATES.has(rate)) {
      return reject(400, errorBody('Invalid request', 'model, encoding=pcm_s16le and a supported sample_rate are required.', 'invalid_request'));
    }
    wss.handleUpgrade(req, socket, head, (ws) => transcribeLive(ws, req, url.searchParams, rate));
  });

  function transcribeLive(ws: WebSocket, req: IncomingMessage, query: URLSearchParams, rate: number): void {
    const requestId = randomUUID();
    const audioWaiters: (() => boolean)[] = [];
    const record: SttSocketRecord = {
      query,
      headers: req.headers,
      audioBytes: 0,
      audioReached: (bytes) =>
        new Promise((resolve) => {
          const check = () => {
            if (record.audioBytes < bytes) return false;
            resolve();
            return true;
          };
          if (!check()) audioWaiters.push(check);
        }),
      commands: [],
      closed: new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }))),
    };
    sttSockets.push(record);
    const detector = new BurstDetector(rate);
    let carry: Buffer | null = null;
    let settled = 0; // bursts already reported final
    let lastInterim = '';
    let dropAfterTranscript = false;
    const faulty = faultySender(ws, state.sttFault);
    const send = (message: Record<string, unknown>) => {
      if (!faulty(JSON.stringify(message))) return;
      if (dropAfterTranscript && message.type === 'transcript') ws.terminate();
    };
    const transcript = (isFinal: boolean) => {
      const heard = wordsOf(detector, settled, words);
      const text = (settled > 0 ? ' ' : '') + heard.map((w) => w.word).join(' ');
      const last = detector.bursts.at(-1);
      send({
        type: 'transcript',
        is_final: isFinal,
        request_id: requestId,
        text,
        duration: heard.length && last ? last.endFrame * FRAME_SECONDS : 0,
        language: query.get('language') ?? 'en',
        words: heard,
      });
    };
    const finalize = () => {
      detector.settle();
      if (detector.bursts.length > settled) transcript(true);
      settled = detector.bursts.length;
      lastInterim = '';
    };
    const idleMs = options.sttIdleMs ?? 20_000;
    let idle = setTimeout(() => ws.close(1000), idleMs);
    ws.on('close', () => clearTimeout(idle));

    ws.on('message', (data: Buffer, isBinary) => {
      const b = state.behaviour;
      if (isBinary) {
        clearTimeout(idle);
        idle = setTimeout(() => ws.close(1000), idleMs);
        record.audioBytes += data.length;
        notify(audioWaiters);
        const bytes: Buffer = carry ? Buffer.concat([carry, data]) : data;
        const even = bytes.length & ~1;
        carry = even < bytes.length ? bytes.subarray(even) : null;
        detector.push(s16leToS16(bytes.subarray(0, even)));
        if (b.kind === 'mute') return;
        if (b.kind === 'stream_error') {
          send({
            type: 'error',
            done: true,
            status_code: b.status,
            error_code: null,
            title: 'Transcription failed',
            message: b.message,
            request_id: requestId,
          });
          ws.close(1000);
          return;
        }
        dropAfterTranscript = b.kind === 'die';
        const signature = detector.bursts
          .slice(settled)
          .map((burst) => `${burst.startFrame}-${burst.closed}`)
          .join(',');
        if (signature && signature !== lastInterim) {
          lastInterim = signature;
          transcript(false);
        }
        return;
      }
      const command = data.toString();
      record.commands.push(command);
      if (b.kind === 'mute') return;
      if (command === 'finalize') {
        finalize();
        send({ type: 'flush_done', request_id: requestId });
      } else if (command === 'close' || command === 'done') {
        finalize();
        send({ type: 'done', request_id: requestId });
        ws.close(1000);
      }
    });
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return state;
}
