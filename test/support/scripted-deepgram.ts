// A scripted Deepgram: a real HTTP + WebSocket server speaking Deepgram's wire protocol, for what
// the hosted API cannot show on demand (refused keys, error statuses, dropped streams, silence).
// Its transcripts come from the audio it receives: an energy detector over 20 ms frames, one
// word per voiced burst ("alpha", "bravo", ...), word times from the burst's place in the
// received audio, so a test can check that no audio was lost and that times are right.
//
// Written from Deepgram's reference:
//   Live audio (WS /v1/listen), messages Results / SpeechStarted / UtteranceEnd / Metadata:
//     https://developers.deepgram.com/reference/speech-to-text/listen-streaming
//     https://github.com/deepgram/deepgram-js-sdk src/api/resources/listen/resources/v1/types/*
//   Finalize (from_finalize; "not guaranteed if there is no significant amount of audio data"):
//     https://developers.deepgram.com/docs/finalize
//   CloseStream (final results, a Metadata summary, then the close): https://developers.deepgram.com/docs/close-stream
//   KeepAlive, and the idle close 1011 NET-0001 after ~10 s without audio or a text message:
//     https://developers.deepgram.com/docs/keep-alive
//     https://enterprise-docs.deepgram.com/guides/streaming/error-handling
//   Pre-recorded (POST /v1/listen): https://developers.deepgram.com/reference/speech-to-text/listen-pre-recorded
//   Speak (POST /v1/speak, raw linear16 with container=none): https://developers.deepgram.com/reference/text-to-speech/speak-request
//   Models (GET /v1/models, tts[].metadata tags/use_cases): https://developers.deepgram.com/reference/manage/models/list
//   Projects (GET /v1/projects): https://developers.deepgram.com/reference/manage/projects/list
//   Refused key: 401 {"err_code":"INVALID_AUTH","err_msg":"Invalid credentials.","request_id":...}
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { parseWav } from '../../gateway/audio/wav.ts';
import { EventLog } from './socket-events.ts';
import { faultySender, type SocketFault } from './socket-faults.ts';

export type DeepgramBehaviour =
  | { kind: 'ok' }
  /** Every request refused as Deepgram refuses a bad key (401 INVALID_AUTH), whatever the key. */
  | { kind: 'auth_refused' }
  | { kind: 'error'; status: number; body: unknown }
  /** A 2xx answer of this exact body (a malformed answer). */
  | { kind: 'raw'; status: number; contentType: string; body: string }
  /** Never answers: no HTTP headers, no WebSocket upgrade. */
  | { kind: 'hang' }
  /** Starts normally, then goes silent after `after` body bytes (HTTP) or server messages (WS). */
  | { kind: 'stall'; after: number }
  /** Starts normally, then drops the connection after `after` body bytes (HTTP) or server messages (WS). */
  | { kind: 'die'; after: number };

export interface ReceivedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** Resolves when the connection of this answer closes (finished, or dropped by either side). */
  closed: Promise<void>;
  /** The connection went before the answer was complete. */
  closedEarly: boolean;
}

export interface ListenSocket {
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  /** Binary audio bytes received. */
  audioBytes: number;
  /** Text messages received (KeepAlive, Finalize, CloseStream), parsed. */
  controls: { type?: string }[];
  /** Messages this peer sent, in order. */
  sent: Record<string, unknown>[];
  /** Finalize messages left unanswered (too little audio pending, as Deepgram may do). */
  unansweredFinalizes: number;
  isClosed: boolean;
  closed: Promise<{ code: number; reason: string }>;
  /** Resolves once a text message of this type has been received. */
  waitForControl(type: string): Promise<void>;
}

export interface ScriptedDeepgramOptions {
  apiKey?: string;
  /** Deepgram closes a socket that received neither audio nor a text message for 10 s. */
  idleTimeoutMs?: number;
  /** Less audio than this pending at a Finalize gets no answer (Deepgram: "not guaranteed"). */
  finalizeMinMs?: number;
  /** Length of the synthesized tone per character of text. */
  ttsMsPerChar?: number;
}

export interface ScriptedDeepgram {
  url: string;
  apiKey: string;
  behaviour: DeepgramBehaviour;
  /** Live transcription sockets opened from now on fail this way (test/support/socket-faults.ts). */
  sttFault?: SocketFault;
  idleTimeoutMs: number;
  finalizeMinMs: number;
  ttsMsPerChar: number;
  received: ReceivedRequest[];
  sockets: ListenSocket[];
  close(): Promise<void>;
}

/** The voiced-frame threshold: RMS above 5 % of full scale. */
const VOICED_RMS = 0.05 * 32768;
const FRAME_SECONDS = 0.02;
const TTS_TONE_HZ = 440;
const NATO = [
  'alpha',
  'bravo',
  'charlie',
  'delta',
  'echo',
  'foxtrot',
  'golf',
  'hotel',
  'india',
  'juliett',
  'kilo',
  'lima',
  'mike',
  'november',
  'oscar',
  'papa',
  'quebec',
  'romeo',
  'sierra',
  'tango',
  'uniform',
  'victor',
  'whiskey',
  'xray',
  'yankee',
  'zulu',
];
const NET_0001 = 'NET-0001';
const AUTH_REFUSED = () => ({ err_code: 'INVALID_AUTH', err_msg: 'Invalid credentials.', request_id: randomUUID() });

/** The word of the n-th voiced burst of a session (0-based). */
export const scriptedWord = (n: number): string => NATO[n % NATO.length]!;

/** The sample the scripted TTS sends at index i (a 440 Hz tone at half scale). */
export const scriptedToneSample = (i: number, sampleRate: number): number => Math.round(16384 * Math.sin((2 * Math.PI * TTS_TONE_HZ * i) / sampleRate));

interface SpokenWord {
  word: string;
  start: number;
  end: number;
}

const seconds = (samples: number, rate: number) => Math.round((samples / rate) * 1000) / 1000;

function isVoiced(frame: Int16Array): boolean {
  let sum = 0;
  for (let i = 0; i < frame.length; i++) sum += frame[i]! * frame[i]!;
  return frame.length > 0 && Math.sqrt(sum / frame.length) > VOICED_RMS;
}

/** Deepgram's word objects; punctuation and capitals go to punctuated_word only. */
function wordObjects(words: SpokenWord[], punctuate: boolean) {
  return words.map((w, i) => {
    let punctuated = w.word;
    if (punctuate && i === 0) punctuated = punctuated[0]!.toUpperCase() + punctuated.slice(1);
    if (punctuate && i === words.length - 1) punctuated += '.';
    return { word: w.word, start: w.start, end: w.end, confidence: 0.99, punctuated_word: punctuated };
  });
}

/** Voiced bursts of a whole clip, as words. */
function wordsOfClip(samples: Int16Array, rate: number): SpokenWord[] {
  const frame = Math.round(rate * FRAME_SECONDS);
  const words: SpokenWord[] = [];
  let burstStart: number | null = null;
  for (let at = 0; at < samples.length; at += frame) {
    const voiced = isVoiced(samples.subarray(at, at + frame));
    if (voiced && burstStart === null) burstStart = at;
    if (!voiced && burstStart !== null) {
      words.push({ word: scriptedWord(words.length), start: seconds(burstStart, rate), end: seconds(at, rate) });
      burstStart = null;
    }
  }
  if (burstStart !== null) words.push({ word: scriptedWord(words.length), start: seconds(burstStart, rate), end: seconds(samples.length, rate) });
  return words;
}

/** One live transcription session: frames in, Deepgram's messages out. */
class ListenSession {
  readonly rate: number;
  private readonly frame: number;
  private readonly punctuate: boolean;
  private readonly endpointingSamples: number | null;
  private readonly utteranceEndSamples: number | null;
  private readonly vadEvents: boolean;
  private pending = new Int16Array(0);
  private oddByte: number | null = null;
  /** Samples processed so far. */
  private pos = 0;
  private burstStart: number | null = null;
  private segStart = 0;
  private segWords: SpokenWord[] = [];
  private lastWordEnd = 0;
  private wordCount = 0;
  private turnActive = false;
  private utteranceEndDue = false;

  constructor(
    query: URLSearchParams,
    private readonly emit: (msg: Record<string, unknown>) => void,
    private readonly finalizeMinMs: () => number,
  ) {
    this.rate = Number(query.get('sample_rate') ?? 16000);
    this.frame = Math.round(this.rate * FRAME_SECONDS);
    this.punctuate = query.get('punctuate') === 'true' || query.get('smart_format') === 'true';
    const endpointing = query.get('endpointing');
    this.endpointingSamples = endpointing === null || endpointing === 'false' ? null : (Number(endpointing) / 1000) * this.rate;
    const utteranceEnd = query.get('utterance_end_ms');
    this.utteranceEndSamples = utteranceEnd === null ? null : (Number(utteranceEnd) / 1000) * this.rate;
    this.vadEvents = query.get('vad_events') === 'true';
  }

  audio(bytes: Buffer): void {
    let data = bytes;
    if (this.oddByte !== null) data = Buffer.concat([Buffer.from([this.oddByte]), bytes]);
    this.oddByte = data.length % 2 ? data[data.length - 1]! : null;
    const whole = data.length - (data.length % 2);
    const samples = new Int16Array(whole / 2);
    for (let i = 0; i < samples.length; i++) samples[i] = data.readInt16LE(i * 2);
    const all = new Int16Array(this.pending.length + samples.length);
    all.set(this.pending);
    all.set(samples, this.pending.length);
    let at = 0;
    for (; at + this.frame <= all.length; at += this.frame) this.step(all.subarray(at, at + this.frame));
    this.pending = all.slice(at);
  }

  /** Finalize: everything received is transcribed; answered when there is something to flush. */
  finalize(): boolean {
    this.flushPending();
    const pendingMs = ((this.pos - this.segStart) / this.rate) * 1000;
    if (this.segWords.length === 0 && pendingMs < this.finalizeMinMs()) return false;
    this.final({ speechFinal: false, fromFinalize: true });
    return true;
  }

  /** CloseStream: the last results, then the summary. */
  closeStream(): void {
    this.flushPending();
    if (this.pos > this.segStart) this.final({ speechFinal: false, fromFinalize: false });
    this.emit({
      type: 'Metadata',
      transaction_key: 'deprecated',
      request_id: randomUUID(),
      sha256: 'scripted',
      created: new Date().toISOString(),
      duration: seconds(this.pos, this.rate),
      channels: 1,
    });
  }

  private flushPending(): void {
    if (this.pending.length) this.step(this.pending);
    this.pending = new Int16Array(0);
    if (this.burstStart !== null) this.endWord(this.pos);
  }

  private step(frame: Int16Array): void {
    const voiced = isVoiced(frame);
    if (voiced && this.burstStart === null) {
      this.burstStart = this.pos;
      if (this.vadEvents && !this.turnActive) this.emit({ type: 'SpeechStarted', channel: [0, 1], timestamp: seconds(this.pos, this.rate) });
      this.turnActive = true;
    }
    if (!voiced && this.burstStart !== null) this.endWord(this.pos);
    this.pos += frame.length;
    if (voiced) return;
    const silence = this.pos - this.lastWordEnd;
    if (this.endpointingSamples !== null && this.segWords.length > 0 && silence >= this.endpointingSamples) {
      this.final({ speechFinal: true, fromFinalize: false });
      if (this.utteranceEndSamples === null) this.turnActive = false;
    }
    if (this.utteranceEndSamples !== null && this.utteranceEndDue && silence >= this.utteranceEndSamples) {
      this.emit({ type: 'UtteranceEnd', channel: [0, 1], last_word_end: seconds(this.lastWordEnd, this.rate) });
      this.utteranceEndDue = false;
      this.turnActive = false;
    }
  }

  private endWord(end: number): void {
    this.segWords.push({ word: scriptedWord(this.wordCount++), start: seconds(this.burstStart!, this.rate), end: seconds(end, this.rate) });
    this.burstStart = null;
    this.lastWordEnd = end;
    this.utteranceEndDue = true;
    this.results({ isFinal: false, speechFinal: false, fromFinalize: false, end });
  }

  private final(flags: { speechFinal: boolean; fromFinalize: boolean }): void {
    this.results({ isFinal: true, ...flags, end: this.pos });
    this.segStart = this.pos;
    this.segWords = [];
  }

  private results(r: { isFinal: boolean; speechFinal: boolean; fromFinalize: boolean; end: number }): void {
    const words = wordObjects(this.segWords, this.punctuate);
    const start = seconds(this.segStart, this.rate);
    this.emit({
      type: 'Results',
      channel_index: [0, 1],
      duration: Math.round((seconds(r.end, this.rate) - start) * 1000) / 1000,
      start,
      is_final: r.isFinal,
      speech_final: r.speechFinal,
      from_finalize: r.fromFinalize,
      channel: { alternatives: [{ transcript: words.map((w) => (this.punctuate ? w.punctuated_word : w.word)).join(' '), confidence: 0.99, words }] },
      metadata: { request_id: 'scripted', model_info: { name: 'scripted', version: '1', arch: 'scripted' }, model_uuid: 'scripted' },
    });
  }
}

const MODELS = {
  stt: [
    {
      name: 'general',
      canonical_name: 'nova-3-general',
      architecture: 'nova-3',
      languages: ['en', 'en-US'],
      version: '2025-01-09.0',
      uuid: randomUUID(),
      batch: true,
      streaming: true,
      formatted_output: true,
    },
  ],
  tts: [
    {
      name: 'thalia',
      canonical_name: 'aura-2-thalia-en',
      architecture: 'aura-2',
      languages: ['en', 'en-US'],
      version: '2025-04-07.0',
      uuid: randomUUID(),
      metadata: {
        accent: 'American',
        age: 'Adult',
        color: '#DB96F5',
        image: 'https://example.invalid/thalia.png',
        sample: 'https://example.invalid/thalia.wav',
        tags: ['feminine', 'Clear', 'Confident'],
        use_cases: ['Casual chat', 'Customer service'],
      },
    },
    {
      name: 'apollo',
      canonical_name: 'aura-2-apollo-en',
      architecture: 'aura-2',
      languages: ['en', 'en-US'],
      version: '2025-04-07.0',
      uuid: randomUUID(),
      metadata: { accent: 'American', age: 'Adult', color: '#96F5DB', image: '', sample: '', tags: ['masculine', 'Comfortable'], use_cases: ['Interview'] },
    },
    {
      name: 'celeste',
      canonical_name: 'aura-2-celeste-es',
      architecture: 'aura-2',
      languages: ['es', 'es-CO'],
      version: '2025-04-07.0',
      uuid: randomUUID(),
      metadata: { accent: 'Colombian', tags: [], use_cases: [] },
    },
    { name: 'orion', canonical_name: 'aura-orion-en', architecture: 'aura', version: '2024-11-19.0', uuid: randomUUID() },
  ],
};

export async function startScriptedDeepgram(options: ScriptedDeepgramOptions = {}): Promise<ScriptedDeepgram> {
  const connections = new Set<Socket>();
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  const peer: ScriptedDeepgram = {
    url: '',
    apiKey: options.apiKey ?? 'dg_secret_key',
    behaviour: { kind: 'ok' },
    idleTimeoutMs: options.idleTimeoutMs ?? 10_000,
    finalizeMinMs: options.finalizeMinMs ?? 100,
    ttsMsPerChar: options.ttsMsPerChar ?? 10,
    received: [],
    sockets: [],
    close: async () => {
      for (const ws of wss.clients) ws.terminate();
      for (const c of connections) c.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const authorized = (headers: IncomingHttpHeaders) => peer.behaviour.kind !== 'auth_refused' && headers.authorization === `Token ${peer.apiKey}`;

  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => handle(req, res, Buffer.concat(parts)));
  });
  server.on('connection', (c) => {
    connections.add(c);
    c.on('close', () => connections.delete(c));
  });

  function handle(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://peer');
    const record: ReceivedRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      body,
      closed: Promise.resolve(),
      closedEarly: false,
    };
    record.closed = new Promise((resolve) =>
      res.on('close', () => {
        record.closedEarly = !res.writableFinished;
        resolve();
      }),
    );
    peer.received.push(record);
    const b = peer.behaviour;
    if (!authorized(req.headers)) return sendJson(res, 401, AUTH_REFUSED());
    if (b.kind === 'hang') return;
    if (b.kind === 'error') return typeof b.body === 'string' ? sendRaw(res, b.status, 'text/plain', Buffer.from(b.body)) : sendJson(res, b.status, b.body);
    if (b.kind === 'raw') return sendRaw(res, b.status, b.contentType, Buffer.from(b.body));
    const answer = route(record);
    if (answer.status >= 300 || (b.kind !== 'stall' && b.kind !== 'die')) return sendRaw(res, answer.status, answer.contentType, answer.body, answer.headers);
    // stall / die: headers and the first bytes of the answer, then silence or a dropped connection.
    res.writeHead(answer.status, { 'content-type': answer.contentType });
    res.write(answer.body.subarray(0, b.after), () => {
      if (b.kind === 'die') res.socket?.destroy();
    });
  }

  function route(r: ReceivedRequest): { status: number; contentType: string; body: Buffer; headers?: Record<string, string> } {
    const json = (status: number, value: unknown) => ({ status, contentType: 'application/json', body: Buffer.from(JSON.stringify(value)) });
    if (r.method === 'GET' && r.path === '/v1/projects') return json(200, { projects: [{ project_id: 'proj-scripted', name: 'Scripted project' }] });
    if (r.method === 'GET' && r.path === '/v1/models') return json(200, MODELS);
    if (r.method === 'POST' && r.path === '/v1/listen') {
      let samples: Int16Array;
      let rate: number;
      try {
        const wav = parseWav(r.body);
        rate = wav.sampleRate;
        samples = Int16Array.from(wav.samples, (v) => Math.round(v * 32768));
      } catch {
        return json(400, { err_code: 'Bad Request', err_msg: 'Bad Request: failed to process audio: corrupt or unsupported data', request_id: randomUUID() });
      }
      const punctuate = r.query.get('punctuate') === 'true' || r.query.get('smart_format') === 'true';
      const words = wordObjects(wordsOfClip(samples, rate), punctuate);
      const transcript = words.map((w) => (punctuate ? w.punctuated_word : w.word)).join(' ');
      return json(200, {
        metadata: {
          transaction_key: 'deprecated',
          request_id: randomUUID(),
          sha256: 'scripted',
          created: new Date().toISOString(),
          duration: samples.length / rate,
          channels: 1,
          models: ['scripted'],
        },
        results: { channels: [{ alternatives: [{ transcript, confidence: 0.99, words }] }] },
      });
    }
    if (r.method === 'POST' && r.path === '/v1/speak') {
      const rate = Number(r.query.get('sample_rate') ?? 24000);
      if (r.query.get('encoding') !== 'linear16' || r.query.get('container') !== 'none')
        return json(400, {
          err_code: 'INVALID_QUERY_PARAMETER',
          err_msg: 'The scripted peer speaks linear16 without a container only.',
          request_id: randomUUID(),
        });
      let text: unknown;
      try {
        text = (JSON.parse(r.body.toString()) as { text?: unknown }).text;
      } catch {
        text = undefined;
      }
      if (typeof text !== 'string' || !text)
        return json(400, { err_code: 'INVALID_TEXT', err_msg: 'Text must be a non-empty string.', request_id: randomUUID() });
      const count = Math.round((rate * text.length * peer.ttsMsPerChar) / 1000);
      const audio = Buffer.alloc(count * 2);
      for (let i = 0; i < count; i++) audio.writeInt16LE(scriptedToneSample(i, rate), i * 2);
      return { status: 200, contentType: 'audio/l16', body: audio, headers: { 'dg-char-count': String(text.length), 'dg-request-id': randomUUID() } };
    }
    return json(404, { err_code: 'NOT_FOUND', err_msg: `No route ${r.method} ${r.path}.`, request_id: randomUUID() });
  }

  /** Bodies go out in several writes of odd lengths, as a network would cut them. */
  function sendRaw(res: ServerResponse, status: number, contentType: string, body: Buffer, headers: Record<string, string> = {}): void {
    res.writeHead(status, { 'content-type': contentType, 'content-length': body.length, ...headers });
    const piece = Math.max(1, Math.ceil(body.length / 4) | 1);
    const writeFrom = (at: number): void => {
      if (at >= body.length) {
        res.end();
        return;
      }
      res.write(body.subarray(at, at + piece), () => setImmediate(() => writeFrom(at + piece)));
    };
    writeFrom(0);
  }

  function sendJson(res: ServerResponse, status: number, value: unknown): void {
    sendRaw(res, status, 'application/json', Buffer.from(JSON.stringify(value)));
  }

  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://peer');
    peer.received.push({
      method: 'GET',
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      body: Buffer.alloc(0),
      closed: Promise.resolve(),
      closedEarly: false,
    });
    const b = peer.behaviour;
    const refuse = (status: number, body: unknown) => {
      const text = typeof body === 'string' ? body : JSON.stringify(body);
      socket.end(
        `HTTP/1.1 ${status} Refused\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
      );
    };
    if (url.pathname !== '/v1/listen') return refuse(404, { err_code: 'NOT_FOUND', err_msg: 'Not found.' });
    if (!authorized(req.headers)) return refuse(401, AUTH_REFUSED());
    if (b.kind === 'hang') return;
    if (b.kind === 'error') return refuse(b.status, b.body);
    wss.handleUpgrade(req, socket, head, (ws) => listen(ws, url.searchParams, req.headers));
  });

  function listen(ws: WebSocket, query: URLSearchParams, headers: IncomingHttpHeaders): void {
    const behaviour = peer.behaviour;
    const controls = new EventLog<{ type?: string }>();
    let resolveClosed!: (v: { code: number; reason: string }) => void;
    const record: ListenSocket = {
      query,
      headers,
      audioBytes: 0,
      controls: controls.events,
      sent: [],
      unansweredFinalizes: 0,
      isClosed: false,
      closed: new Promise((r) => (resolveClosed = r)),
      waitForControl: async (type) => void (await controls.first((c) => c.type === type)),
    };
    peer.sockets.push(record);
    const limited = behaviour.kind === 'stall' || behaviour.kind === 'die' ? behaviour : null;
    let silenced = false;

    const faulty = faultySender(ws, peer.sttFault);
    const emit = (msg: Record<string, unknown>) => {
      if (silenced || ws.readyState !== ws.OPEN) return;
      if (!limited) {
        if (faulty(JSON.stringify(msg))) record.sent.push(msg);
        return;
      }
      record.sent.push(msg);
      const last = limited !== null && record.sent.length >= limited.after;
      if (last) silenced = true;
      ws.send(JSON.stringify(msg), () => {
        if (last && limited.kind === 'die') ws.terminate();
      });
    };
    const session = new ListenSession(query, emit, () => peer.finalizeMinMs);

    let idle: NodeJS.Timeout | null = null;
    const touch = () => {
      if (idle) clearTimeout(idle);
      idle = silenced ? null : setTimeout(() => ws.close(1011, NET_0001), peer.idleTimeoutMs);
    };
    touch();
    if (limited?.after === 0) {
      silenced = true;
      if (limited.kind === 'die') ws.terminate();
    }

    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) {
        record.audioBytes += data.length;
        if (!silenced) session.audio(data);
      } else {
        let msg: { type?: string };
        try {
          msg = JSON.parse(data.toString()) as { type?: string };
        } catch {
          msg = { type: 'unparsable' };
        }
        controls.push(msg);
        if (!silenced && msg.type === 'Finalize' && !session.finalize()) record.unansweredFinalizes += 1;
        if (!silenced && msg.type === 'CloseStream') {
          session.closeStream();
          ws.close(1000);
        }
      }
      touch();
    });
    ws.on('close', (code: number, reason: Buffer) => {
      if (idle) clearTimeout(idle);
      record.isClosed = true;
      resolveClosed({ code, reason: reason.toString() });
    });
    ws.on('error', () => {});
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  peer.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return peer;
}
