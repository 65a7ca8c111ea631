// A scripted Realtime API transcription server (a real node:http + `ws` server on 127.0.0.1) in
// the dialects the `openai-realtime` protocol speaks, written from:
// - OpenAI GA: developers.openai.com/api/docs/guides/realtime-transcription, /api/reference/
//   resources/realtime/client-events and /server-events, the `openai` package's
//   resources/realtime/realtime.d.ts (event shapes), error code `input_audio_buffer_commit_empty`
//   (github.com/openai/openai-agents-js/issues/748) and OpenAI's 401 body;
// - beta: the same package's TranscriptionSessionUpdate / TranscriptionSessionUpdatedEvent;
// - speaches: speaches-ai/speaches src/speaches/routers/realtime_ws.py, realtime/
//   session_event_router.py, input_audio_buffer_event_router.py (model required in the query,
//   `session.update` only, errors for input_audio_format / prefix_padding_ms, partials as
//   `input_audio_buffer.partial_transcription`, empty commits refused without a code). Unlike
//   speaches, VAD times here count from the session's start, as OpenAI's do;
// - vLLM: vllm/entrypoints/speech_to_text/realtime/{connection,protocol}.py.
// Transcripts come from the audio: an energy detector over 20 ms frames, one scripted word per
// voiced burst; server VAD opens a turn at a burst (audio_start_ms = burst start - prefix padding)
// and closes it after silence_duration_ms of silence (audio_end_ms = last voiced frame + silence).
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

export type RealtimeDialect = 'ga' | 'beta' | 'speaches' | 'vllm';

export type RealtimeBehaviour =
  | { kind: 'ok' }
  /** Refuses the upgrade with 401 and OpenAI's body (echoing the whole key, which OpenAI only partly does). */
  | { kind: 'refuse-auth' }
  | { kind: 'http-error'; status: number; body: string }
  /** Answers the session configuration, or the first transcript, with an `error` event. */
  | { kind: 'error-event'; at: 'session' | 'first-transcript'; message: string; code: string }
  /** Drops the connection right after the first transcript. */
  | { kind: 'die' }
  /** Accepts the socket and never confirms the session (vLLM: never creates it). */
  | { kind: 'hang' }
  /** Never answers the upgrade request. */
  | { kind: 'hang-upgrade' }
  /** Never answers `input_audio_buffer.commit`. */
  | { kind: 'ignore-commit' };

export interface PeerSocket {
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  /** The session configuration event as received (`session.update` / `transcription_session.update`). */
  sessionConfig: Record<string, unknown> | null;
  /** Bytes of PCM decoded from `input_audio_buffer.append`. */
  audioBytes: number;
  /** Client events in order, `audio` replaced by its decoded byte count. */
  received: Record<string, unknown>[];
  /** Resolves when the session configuration has arrived. */
  configReceived: Promise<void>;
  /** Resolves when the connection is closed (by either side). */
  closed: Promise<{ code: number }>;
}

export interface ScriptedRealtime {
  /** API base with /v1, as a target's url. */
  url: string;
  apiKey: string;
  dialect: RealtimeDialect;
  behaviour: RealtimeBehaviour;
  /** Answer of GET /v1/models. */
  modelsStatus: number;
  sockets: PeerSocket[];
  /** Resolves with the index-th connection once it is open. */
  socketAt(index: number): Promise<PeerSocket>;
  close(): Promise<void>;
}

export const SCRIPTED_WORDS = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliett'];
const FRAME_MS = 20;
/** RMS (of full scale) above which a frame counts as voiced. */
const VOICED_RMS = 0.05;
const MIN_COMMIT_MS = 100;

interface Vad {
  threshold: number;
  prefixPaddingMs: number;
  silenceDurationMs: number;
}

export async function startScriptedRealtime(
  options: { dialect?: RealtimeDialect; behaviour?: RealtimeBehaviour; apiKey?: string } = {},
): Promise<ScriptedRealtime> {
  const connections = new Set<Socket>();
  const http: Server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.writeHead(peer.modelsStatus, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'gpt-4o-transcribe', object: 'model' }] }));
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'Not found', type: 'invalid_request_error' } }));
  });
  http.on('connection', (s) => {
    connections.add(s);
    s.on('close', () => connections.delete(s));
  });
  const wss = new WebSocketServer({ noServer: true });
  const socketWaiters: { index: number; resolve: (s: PeerSocket) => void }[] = [];
  const peer: ScriptedRealtime = {
    url: '',
    apiKey: options.apiKey ?? 'sk-secret-realtime-key',
    dialect: options.dialect ?? 'ga',
    behaviour: options.behaviour ?? { kind: 'ok' },
    modelsStatus: 200,
    sockets: [],
    socketAt(index) {
      const open = peer.sockets[index];
      return open ? Promise.resolve(open) : new Promise((resolve) => socketWaiters.push({ index, resolve }));
    },
    async close() {
      for (const client of wss.clients) client.terminate();
      for (const s of connections) s.destroy();
      await new Promise<void>((r) => wss.close(() => r()));
      await new Promise<void>((r) => http.close(() => r()));
    },
  };

  const addSocket = (record: PeerSocket) => {
    peer.sockets.push(record);
    for (const w of socketWaiters.filter((w) => w.index === peer.sockets.length - 1)) w.resolve(record);
  };

  const refuse = (socket: Socket, status: number, body: string) => {
    socket.end(
      `HTTP/1.1 ${status} Refused\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  };

  http.on('upgrade', (req, socket: Socket, head) => {
    const url = new URL(req.url ?? '/', 'http://peer');
    const behaviour = peer.behaviour;
    const given = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    if (url.pathname !== '/v1/realtime')
      return refuse(socket, 404, JSON.stringify({ error: { message: `Unknown path ${url.pathname}`, type: 'invalid_request_error' } }));
    if (behaviour.kind === 'refuse-auth' || given !== peer.apiKey) {
      const message = `Incorrect API key provided: ${given}. You can find your API key at https://platform.openai.com/account/api-keys.`;
      return refuse(socket, 401, JSON.stringify({ error: { message, type: 'invalid_request_error', code: 'invalid_api_key', param: null } }));
    }
    if (behaviour.kind === 'http-error') return refuse(socket, behaviour.status, behaviour.body);
    if (behaviour.kind === 'hang-upgrade') return addSocket(unanswered(url, req.headers, socket));
    // speaches' `model` query parameter is required (FastAPI refuses the upgrade without it).
    if (peer.dialect === 'speaches' && !url.searchParams.get('model')) return refuse(socket, 403, JSON.stringify({ detail: 'model is required' }));
    wss.handleUpgrade(req, socket, head, (ws) => {
      let markClosed!: (v: { code: number }) => void;
      let markConfigured!: () => void;
      const record: PeerSocket = {
        path: url.pathname,
        query: Object.fromEntries(url.searchParams),
        headers: req.headers,
        sessionConfig: null,
        audioBytes: 0,
        received: [],
        configReceived: new Promise((r) => (markConfigured = r)),
        closed: new Promise((r) => (markClosed = r)),
      };
      ws.on('close', (code) => markClosed({ code }));
      if (peer.dialect === 'vllm') new VllmSession(ws, record, peer);
      else new OpenAiSession(ws, record, peer);
      // After the session's own listener, which records the configuration.
      ws.on('message', () => record.sessionConfig && markConfigured());
      addSocket(record);
    });
  });

  await new Promise<void>((r) => http.listen(0, '127.0.0.1', () => r()));
  peer.url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/v1`;
  return peer;
}

/** The record of an upgrade request left unanswered: only its close is of interest. */
function unanswered(url: URL, headers: IncomingHttpHeaders, socket: Socket): PeerSocket {
  const closed = new Promise<{ code: number }>((r) => socket.once('close', () => r({ code: 1006 })));
  // The upgrade's socket is half-open after the client leaves: end it so that it closes.
  socket.once('end', () => socket.destroy());
  return {
    path: url.pathname,
    query: Object.fromEntries(url.searchParams),
    headers,
    sessionConfig: null,
    audioBytes: 0,
    received: [],
    configReceived: new Promise(() => {}),
    closed,
  };
}

/** Voiced bursts of the audio received, one 20 ms frame at a time. */
class BurstDetector {
  /** Session position, ms (whole frames processed). */
  positionMs = 0;
  /** Start of the burst being heard, if one is. */
  openBurstMs: number | null = null;
  lastVoicedEndMs = 0;
  private carry: Int16Array = new Int16Array(0);
  private readonly frameSamples: number;

  constructor(rate: number) {
    this.frameSamples = (rate * FRAME_MS) / 1000;
  }

  /** Feeds PCM; calls back per frame with whether it was voiced and where it started. */
  push(pcm: Int16Array, onFrame: (voiced: boolean, atMs: number) => void): void {
    const all = new Int16Array(this.carry.length + pcm.length);
    all.set(this.carry);
    all.set(pcm, this.carry.length);
    let at = 0;
    for (; at + this.frameSamples <= all.length; at += this.frameSamples) {
      let sum = 0;
      for (let i = at; i < at + this.frameSamples; i++) sum += (all[i]! / 32768) ** 2;
      const voiced = Math.sqrt(sum / this.frameSamples) > VOICED_RMS;
      const frameAt = this.positionMs;
      this.positionMs += FRAME_MS;
      if (voiced) {
        this.openBurstMs ??= frameAt;
        this.lastVoicedEndMs = frameAt + FRAME_MS;
      }
      onFrame(voiced, frameAt);
    }
    this.carry = all.slice(at);
  }

  /** Audio received, ms, including a partial frame. */
  receivedMs(rate: number): number {
    return this.positionMs + (this.carry.length * 1000) / rate;
  }
}

const decode = (b64: unknown): Int16Array => {
  const bytes = Buffer.from(typeof b64 === 'string' ? b64 : '', 'base64');
  const copy = new Uint8Array(bytes.length - (bytes.length % 2));
  copy.set(bytes.subarray(0, copy.length));
  return new Int16Array(copy.buffer);
};

abstract class PeerSessionBase {
  protected wordIndex = 0;
  protected transcripts = 0;

  constructor(
    protected readonly ws: WebSocket,
    protected readonly record: PeerSocket,
    protected readonly peer: ScriptedRealtime,
  ) {
    ws.on('message', (data: Buffer) => {
      let event: Record<string, unknown>;
      try {
        event = JSON.parse(data.toString()) as Record<string, unknown>;
      } catch {
        return this.send({ type: 'error', error: { type: 'invalid_request_error', code: 'invalid_json', message: 'Invalid JSON', param: null } });
      }
      if (event.type === 'input_audio_buffer.append') {
        const pcm = decode(event.audio);
        this.record.audioBytes += pcm.length * 2;
        this.record.received.push({ ...event, audio: pcm.length * 2 });
        return this.onAudio(pcm);
      }
      this.record.received.push(event);
      this.onEvent(event);
    });
  }

  protected abstract onEvent(event: Record<string, unknown>): void;
  protected abstract onAudio(pcm: Int16Array): void;

  protected send(event: Record<string, unknown>): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify({ event_id: `event_${Math.random().toString(36).slice(2)}`, ...event }));
  }

  protected nextWord(): string {
    return SCRIPTED_WORDS[this.wordIndex++ % SCRIPTED_WORDS.length]!;
  }

  /** After a transcript: the behaviours that break the session there. */
  protected afterTranscript(): void {
    this.transcripts++;
    const b = this.peer.behaviour;
    if (this.transcripts !== 1) return;
    if (b.kind === 'die') this.ws.terminate();
    if (b.kind === 'error-event' && b.at === 'first-transcript') this.sendError(b.message, b.code);
  }

  protected abstract sendError(message: string, code: string | null): void;
}

/** OpenAI GA and beta, and speaches. */
class OpenAiSession extends PeerSessionBase {
  private readonly detector = new BurstDetector(24000);
  private vad: Vad | null = { threshold: 0.5, prefixPaddingMs: 300, silenceDurationMs: 500 };
  private configured = false;
  private itemCount = 0;
  private lastItemId: string | null = null;
  /** The input buffer: where it began, and the bursts heard in it. */
  private bufferStartMs = 0;
  private bufferBursts = 0;
  private speech: { itemId: string } | null = null;

  constructor(ws: WebSocket, record: PeerSocket, peer: ScriptedRealtime) {
    super(ws, record, peer);
    const type = peer.dialect === 'beta' ? 'transcription_session.created' : 'session.created';
    this.send({ type, session: { id: 'sess_scripted', object: 'realtime.transcription_session', type: 'transcription' } });
  }

  private get dialect() {
    return this.peer.dialect;
  }

  protected sendError(message: string, code: string | null, param: string | null = null): void {
    this.send({ type: 'error', error: { type: 'invalid_request_error', code, message, param, event_id: null } });
  }

  protected onEvent(event: Record<string, unknown>): void {
    const configType = this.dialect === 'beta' ? 'transcription_session.update' : 'session.update';
    switch (event.type) {
      case configType:
        return this.configure(event);
      case 'input_audio_buffer.commit':
        return this.commitByClient();
      default:
        // speaches: "Invalid client event"; OpenAI: an unknown event type.
        return this.sendError(`Invalid client event: unknown type ${JSON.stringify(event.type)}`, 'invalid_value');
    }
  }

  private configure(event: Record<string, unknown>): void {
    this.record.sessionConfig ??= event;
    const session = (event.session ?? {}) as Record<string, any>;
    const b = this.peer.behaviour;
    if (b.kind === 'error-event' && b.at === 'session') return this.sendError(b.message, b.code, 'session.audio.input.transcription.model');
    if (this.dialect === 'ga' && session.type !== 'transcription')
      return this.sendError("Invalid value: session.type must be 'transcription'.", 'invalid_value', 'session.type');
    if (this.dialect === 'speaches') {
      if (session.input_audio_format !== undefined)
        this.sendError(
          'Specifying `session.input_audio_format` is not supported. The server either does not support this field or it is not configurable.',
          null,
        );
      if (session.turn_detection?.prefix_padding_ms !== undefined)
        this.sendError(
          'Specifying `session.turn_detection.prefix_padding_ms` is not supported. The server either does not support this field or it is not configurable.',
          null,
        );
    }
    const td = this.dialect === 'ga' ? session.audio?.input?.turn_detection : session.turn_detection;
    if (td === null) this.vad = null;
    else if (td) this.vad = { threshold: td.threshold ?? 0.5, prefixPaddingMs: td.prefix_padding_ms ?? 300, silenceDurationMs: td.silence_duration_ms ?? 500 };
    if (b.kind === 'hang') return;
    this.configured = true;
    this.send({ type: this.dialect === 'beta' ? 'transcription_session.updated' : 'session.updated', session });
  }

  protected onAudio(pcm: Int16Array): void {
    if (!this.configured) return;
    this.detector.push(pcm, (voiced, atMs) => this.frame(voiced, atMs));
  }

  private newItemId(): string {
    return `item_${String(++this.itemCount).padStart(3, '0')}`;
  }

  private frame(voiced: boolean, atMs: number): void {
    const d = this.detector;
    if (!voiced && d.openBurstMs !== null) {
      d.openBurstMs = null;
      this.bufferBursts++;
      // speaches re-transcribes the speech so far while it goes on.
      if (this.dialect === 'speaches' && this.speech)
        this.send({ type: 'input_audio_buffer.partial_transcription', item_id: this.speech.itemId, transcript: this.peekWords(this.bufferBursts).join(' ') });
    }
    if (!this.vad) return;
    if (voiced && !this.speech) {
      this.speech = { itemId: this.newItemId() };
      this.send({
        type: 'input_audio_buffer.speech_started',
        item_id: this.speech.itemId,
        audio_start_ms: Math.max(this.bufferStartMs, atMs - this.vad.prefixPaddingMs),
      });
    } else if (!voiced && this.speech && atMs + FRAME_MS - d.lastVoicedEndMs >= this.vad.silenceDurationMs) {
      const { itemId } = this.speech;
      const endMs = atMs + FRAME_MS;
      this.speech = null;
      this.send({ type: 'input_audio_buffer.speech_stopped', item_id: itemId, audio_end_ms: endMs });
      this.commit(itemId, endMs);
    }
  }

  private commitByClient(): void {
    if (this.peer.behaviour.kind === 'ignore-commit') return;
    const d = this.detector;
    const bufferMs = d.receivedMs(24000) - this.bufferStartMs;
    if (bufferMs < MIN_COMMIT_MS) {
      const message = `Error committing input audio buffer: buffer too small. Expected at least ${MIN_COMMIT_MS}ms of audio, but buffer only has ${bufferMs.toFixed(2)}ms of audio.`;
      return this.sendError(message, this.dialect === 'speaches' ? null : 'input_audio_buffer_commit_empty');
    }
    if (d.openBurstMs !== null) {
      d.openBurstMs = null;
      this.bufferBursts++;
    }
    const itemId = this.speech?.itemId ?? this.newItemId();
    this.speech = null;
    this.commit(itemId, d.receivedMs(24000));
  }

  private peekWords(count: number): string[] {
    return Array.from({ length: count }, (_, i) => SCRIPTED_WORDS[(this.wordIndex + i) % SCRIPTED_WORDS.length]!);
  }

  /** Commits the buffer as an item and transcribes it: one word per burst heard in it. */
  private commit(itemId: string, atMs: number): void {
    const words = Array.from({ length: this.bufferBursts }, () => this.nextWord());
    this.send({ type: 'input_audio_buffer.committed', item_id: itemId, previous_item_id: this.lastItemId });
    this.lastItemId = itemId;
    const seconds = (atMs - this.bufferStartMs) / 1000;
    this.bufferStartMs = atMs;
    this.bufferBursts = 0;
    if (this.dialect !== 'speaches') {
      for (const [i, word] of words.entries())
        this.send({ type: 'conversation.item.input_audio_transcription.delta', item_id: itemId, content_index: 0, delta: i ? ` ${word}` : word });
    }
    this.send({
      type: 'conversation.item.input_audio_transcription.completed',
      item_id: itemId,
      content_index: 0,
      transcript: words.join(' '),
      usage: { type: 'duration', seconds },
    });
    this.afterTranscript();
  }
}

/** vLLM: commit starts a generation over the audio queue, commit {final:true} ends it. */
class VllmSession extends PeerSessionBase {
  private readonly detector = new BurstDetector(16000);
  private validated = false;
  private generating = false;
  private queue: Int16Array[] = [];
  private text = '';
  private tokens = 0;

  constructor(ws: WebSocket, record: PeerSocket, peer: ScriptedRealtime) {
    super(ws, record, peer);
    if (peer.behaviour.kind !== 'hang') this.send({ type: 'session.created', id: 'sess-scripted', created: 1_700_000_000 });
  }

  // vLLM's errors are a string and a code, not OpenAI's object.
  protected sendError(message: string, code: string | null): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify({ type: 'error', error: message, code }));
  }

  protected onEvent(event: Record<string, unknown>): void {
    const b = this.peer.behaviour;
    if (event.type === 'session.update') {
      this.record.sessionConfig ??= event;
      if (typeof event.model !== 'string') return this.sendError('Missing required field: model', 'invalid_event');
      if (b.kind === 'error-event' && b.at === 'session') return this.sendError(b.message, b.code);
      this.validated = true;
      return;
    }
    if (event.type !== 'input_audio_buffer.commit') return this.sendError(`Unknown event type: ${String(event.type)}`, 'unknown_event');
    if (!this.validated)
      return this.sendError('Model not validated. Make sure to validate the model by sending a session.update event.', 'model_not_validated');
    if (b.kind === 'ignore-commit') return;
    if (event.final === true) return this.endGeneration();
    if (this.generating) return;
    this.generating = true;
    const queued = this.queue;
    this.queue = [];
    for (const pcm of queued) this.hear(pcm);
  }

  protected onAudio(pcm: Int16Array): void {
    if (this.generating) this.hear(pcm);
    else this.queue.push(pcm);
  }

  private hear(pcm: Int16Array): void {
    this.detector.push(pcm, (voiced) => {
      if (!voiced && this.detector.openBurstMs !== null) {
        this.detector.openBurstMs = null;
        this.delta();
      }
    });
  }

  private delta(): void {
    const word = this.nextWord();
    const delta = this.text ? ` ${word}` : word;
    this.text += delta;
    this.tokens++;
    this.send({ type: 'transcription.delta', delta });
  }

  private endGeneration(): void {
    if (!this.generating) return;
    if (this.detector.openBurstMs !== null) {
      this.detector.openBurstMs = null;
      this.delta();
    }
    this.send({ type: 'transcription.done', text: this.text, usage: { prompt_tokens: 100, completion_tokens: this.tokens, total_tokens: 100 + this.tokens } });
    this.generating = false;
    this.text = '';
    this.tokens = 0;
    this.queue = [];
    this.afterTranscript();
  }
}
