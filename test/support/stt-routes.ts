// Shared pieces of the speech-to-text route tests (gateway/routes/transcriptions.test.ts and
// gateway/routes/stt-websocket.test.ts): a gateway with the local recogniser registered, speech
// made by flite, word error rate, exact audio pricing, multipart requests, a WebSocket client
// that records the session's events, and a scripted OpenAI-compatible transcription server.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, vi } from 'vitest';
import WebSocket from 'ws';
import { resample } from '../../gateway/audio/resample.ts';
import { parseWav } from '../../gateway/audio/wav.ts';
import { recognizerStats } from '../../gateway/upstreams/pocketsphinx/recognizer.ts';
import type { Clock } from '../../server/clock.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from './gateway-harness.ts';
import { until } from './poll.ts';
import { socketEvents } from './socket-events.ts';
import { usageRows } from './usage-rows.ts';
import { checkProtocol } from '../../gateway/upstreams/protocols/index.ts';

/** 0.0001 USD per second of audio (100 micro-USD), in pico-USD. */
export const STT_PRICE = 100_000_000n;

export interface SttGatewayOptions {
  creditsMicros?: bigint;
  env?: Record<string, string>;
  clock?: Clock;
}

/**
 * The real gateway with `local-stt` (pocketsphinx, any rate), `local-stt-16k` (the same engine,
 * sampleRates [16000]) and `chat-model` (an llm, for "not an stt model").
 */
export async function startSttGateway(options: SttGatewayOptions = {}): Promise<GatewayHarness> {
  const h = await startGateway({
    creditsMicros: options.creditsMicros ?? 100_000_000n,
    env: { SVC_HEALTH_CHECK_SECONDS: '3600', ...options.env },
    clock: options.clock,
  });
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'local-stt',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'local-stt-16k',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    sampleRates: [16000],
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'chat-model',
    modality: 'llm',
    prices: { inputPicoPerToken: 1n, outputPicoPerToken: 1n },
    upstream: { url: 'http://127.0.0.1:9/v1', protocol: 'openai' },
  });
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
  return h;
}

/**
 * Waits (best effort, up to 10 s) until the recogniser threads are idle: `openSessions` sessions
 * open (whose audio the caller knows to be decoded) and their spare decoders loaded. Stopping a thread in the middle of a native call aborts the whole
 * process (shutdownRecognizers terminates the threads; see the report), so tests stop them only
 * when idle, including through the gateway's close.
 */
export async function settleRecognizers(openSessions = 0): Promise<void> {
  await until(
    'the recogniser threads to be idle',
    async () => {
      const stats = await recognizerStats();
      return stats.reduce((n, w) => n + w.sessions, 0) === openSessions && stats.every((w) => !w.loadingSpare);
    },
    { timeoutMs: 10_000, intervalMs: 50 },
  ).catch(() => {}); // best effort: the caller goes on either way
}

// ---------------------------------------------------------------------------------------
// Money, independent of the product's pricing code

/** Exact cost of `millis` of audio at `picoPerSecond`: the pico-USD total rounded up to a micro-USD. */
export function audioCost(millis: number, picoPerSecond: bigint = STT_PRICE): bigint {
  const femto = BigInt(millis) * picoPerSecond; // pico-USD x 1000
  return (femto + 999_999_999n) / 1_000_000_000n;
}

export async function ledgerOf(h: GatewayHarness, requestId: string) {
  const prisma = h.testDb.db.prisma;
  const ledger = await prisma.ledgerEntry.findMany({ where: { requestId } });
  const usage = await usageRows(prisma, { requestId });
  return {
    ledger,
    usage,
    debited: -ledger.reduce((s, l) => s + l.amountMicros, 0n),
    usageMicros: usage.reduce((s, u) => s + u.costMicros, 0n),
    audioMillis: usage.reduce((s, u) => s + u.audioMillis, 0),
  };
}

/** Waits until the request's ledger rows add up to `micros` (debits are written asynchronously). */
export async function expectDebited(h: GatewayHarness, requestId: string, micros: bigint): Promise<Awaited<ReturnType<typeof ledgerOf>>> {
  await vi.waitFor(
    async () => {
      expect((await ledgerOf(h, requestId)).debited).toBe(micros);
    },
    { timeout: 10_000, interval: 25 },
  );
  return ledgerOf(h, requestId);
}

export async function ledgerRowCount(h: GatewayHarness): Promise<number> {
  return h.testDb.db.prisma.ledgerEntry.count();
}

// ---------------------------------------------------------------------------------------
// Speech

export const VOICES = ['slt', 'rms', 'awb'] as const;
export type Voice = (typeof VOICES)[number];

export interface Speech {
  text: string;
  voice: Voice;
  /** flite's own WAV file (16 kHz, s16, mono). */
  wav: Buffer;
  samples: Float32Array;
  sampleRate: 16000;
}

const run = promisify(execFile);
const speechCache = new Map<string, Promise<Speech>>();

/** `text` spoken by flite with `voice`, as its 16 kHz WAV file and float samples. */
export function speech(text: string, voice: Voice = 'slt'): Promise<Speech> {
  const key = `${voice}\0${text}`;
  let p = speechCache.get(key);
  if (!p) {
    p = (async () => {
      const dir = mkdtempSync(join(tmpdir(), 'stt-test-'));
      try {
        const file = join(dir, 'speech.wav');
        await run('flite', ['-voice', voice, '-t', text, '-o', file]);
        const wav = readFileSync(file);
        const parsed = parseWav(wav);
        expect(parsed.sampleRate).toBe(16000);
        expect(parsed.channels).toBe(1);
        return { text, voice, wav, samples: parsed.samples, sampleRate: 16000 as const };
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    })();
    speechCache.set(key, p);
  }
  return p;
}

/** The samples without their leading and trailing near-silence (kept: 60 ms either side). */
export function trimSilence(x: Float32Array, sampleRate = 16000, threshold = 0.005): Float32Array {
  let first = 0;
  while (first < x.length && Math.abs(x[first]!) < threshold) first++;
  let last = x.length - 1;
  while (last > first && Math.abs(x[last]!) < threshold) last--;
  const pad = Math.round(sampleRate * 0.06);
  return x.slice(Math.max(0, first - pad), Math.min(x.length, last + 1 + pad));
}

export function silence(seconds: number, sampleRate = 16000): Float32Array {
  return new Float32Array(Math.round(seconds * sampleRate));
}

export function concat(...parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function toRate(samples: Float32Array, rate: number): Float32Array {
  return rate === 16000 ? samples : resample(samples, 16000, rate);
}

/** 16-bit little-endian PCM, written here (clamped, rounded). */
export function s16le(samples: Float32Array): Buffer {
  const out = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(samples[i]! * 32767))), i * 2);
  return out;
}

/** A canonical WAV file, written here: PCM s16 (format 1) or IEEE float 32 (format 3), any channels. */
export function wavFile(channels: Float32Array[], sampleRate: number, format: 's16' | 'f32' = 's16'): Buffer {
  const n = channels[0]!.length;
  const bytes = format === 's16' ? 2 : 4;
  const blockAlign = channels.length * bytes;
  const data = Buffer.alloc(n * blockAlign);
  for (let i = 0; i < n; i++) {
    for (let c = 0; c < channels.length; c++) {
      const v = channels[c]![i]!;
      const at = i * blockAlign + c * bytes;
      if (format === 's16') data.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(v * 32767))), at);
      else data.writeFloatLE(v, at);
    }
  }
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVE', 8, 'latin1');
  h.write('fmt ', 12, 'latin1');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(format === 's16' ? 1 : 3, 20);
  h.writeUInt16LE(channels.length, 22);
  h.writeUInt32LE(sampleRate, 24);
  h.writeUInt32LE(sampleRate * blockAlign, 28);
  h.writeUInt16LE(blockAlign, 32);
  h.writeUInt16LE(bytes * 8, 34);
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

// ---------------------------------------------------------------------------------------
// Word error rate

export function words(text: string): string[] {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9' ]+/g, ' ')
    .split(/\s+/)
    .filter(Boolean);
}

/** Word-level Levenshtein distance: substitutions + insertions + deletions. */
export function wordErrors(ref: string[], hyp: string[]): number {
  let prev = Array.from({ length: hyp.length + 1 }, (_, j) => j);
  for (let i = 1; i <= ref.length; i++) {
    const cur = [i];
    for (let j = 1; j <= hyp.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (ref[i - 1] === hyp[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[hyp.length]!;
}

export function wer(reference: string, hypothesis: string): number {
  const ref = words(reference);
  return wordErrors(ref, words(hypothesis)) / ref.length;
}

export interface TimedWord {
  word: string;
  start: number;
  end: number;
}

/** Words in order, each with start < end, starts non-decreasing, all within [from, to]. */
export function expectTimedWords(list: unknown, from: number, to: number): TimedWord[] {
  expect(Array.isArray(list)).toBe(true);
  const ws = list as TimedWord[];
  let last = from;
  for (const w of ws) {
    expect(Object.keys(w).sort()).toEqual(['end', 'start', 'word']);
    expect(typeof w.word).toBe('string');
    expect(w.word).toMatch(/^\S+$/);
    expect(w.start, JSON.stringify(w)).toBeLessThan(w.end);
    expect(w.start, JSON.stringify(w)).toBeGreaterThanOrEqual(last);
    expect(w.end, JSON.stringify(w)).toBeLessThanOrEqual(to + 1e-9);
    last = w.start;
  }
  return ws;
}

// ---------------------------------------------------------------------------------------
// Batch requests

export interface TranscribeOptions {
  key?: string | null;
  requestId?: string;
  filename?: string;
  fileField?: string;
}

/** POST /v1/audio/transcriptions as multipart; `file` null sends no file part. */
export function transcribe(
  h: GatewayHarness,
  file: Buffer | null,
  fields: Record<string, string> = { model: 'local-stt' },
  options: TranscribeOptions = {},
): Promise<Response> {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  if (file) form.append(options.fileField ?? 'file', new Blob([new Uint8Array(file)]), options.filename ?? 'audio.wav');
  const key = options.key === undefined ? h.key : options.key;
  return fetch(`${h.url}/v1/audio/transcriptions`, {
    method: 'POST',
    headers: { ...(key !== null ? { authorization: `Bearer ${key}` } : {}), ...(options.requestId ? { 'x-request-id': options.requestId } : {}) },
    body: form,
  });
}

let rid = 0;
export const requestId = (label: string) => `stt-${label}-${++rid}-${Date.now()}`;

// ---------------------------------------------------------------------------------------
// WebSocket

export type SttEvent = { type: string; [k: string]: unknown };

/** The URL of a streaming STT route (`path`, default /stt/websocket) with `query`. */
export function wsUrl(h: Pick<GatewayHarness, 'url'>, query: Record<string, string | string[]>, path = '/stt/websocket'): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) for (const one of Array.isArray(v) ? v : [v]) q.append(k, one);
  return `${h.url.replace(/^http/, 'ws')}${path}?${q}`;
}

export interface SttClient {
  ws: WebSocket;
  events: SttEvent[];
  /** Resolves with the close code and reason (the socket closed, by either side). */
  closed: Promise<{ code: number; reason: string }>;
  /** The first event (from index `from`) matching `pred`; rejects if the socket closes first. */
  until(pred: (e: SttEvent) => boolean, options?: { from?: number; timeoutMs?: number }): Promise<SttEvent>;
  /** Sends `bytes` as binary frames of `frameBytes`, `intervalMs` apart; stops if the socket closes. */
  stream(bytes: Buffer, options: { frameBytes: number; intervalMs: number }): Promise<number>;
  command(message: unknown): void;
  ofType(type: string): SttEvent[];
}

/** Opens a session (query includes the key as api_key unless headers carry it) and waits for the upgrade. */
export async function openSession(
  h: GatewayHarness,
  query: Record<string, string | string[]>,
  options: { headers?: Record<string, string>; path?: string } = {},
): Promise<SttClient> {
  const ws = new WebSocket(wsUrl(h, query, options.path), { headers: options.headers });
  const { log, closed } = socketEvents<SttEvent>(ws, { describe: describeEvent });
  ws.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (req, res) => {
      req.destroy();
      reject(new Error(`upgrade refused: ${res.statusCode}`));
    });
    ws.once('error', reject);
  });
  const { events } = log;
  const client: SttClient = {
    ws,
    events,
    closed,
    until: (pred, { from = 0, timeoutMs = 20_000 } = {}) => log.first(pred, { from, timeoutMs }),
    async stream(bytes, { frameBytes, intervalMs }) {
      let sent = 0;
      for (let at = 0; at < bytes.length; at += frameBytes) {
        if (ws.readyState !== WebSocket.OPEN) break;
        const frame = bytes.subarray(at, Math.min(bytes.length, at + frameBytes));
        ws.send(frame);
        sent += frame.length;
        if (intervalMs > 0) await new Promise((r) => setTimeout(r, intervalMs));
      }
      return sent;
    },
    command(message) {
      ws.send(typeof message === 'string' ? message : JSON.stringify(message));
    },
    ofType: (type) => events.filter((e) => e.type === type),
  };
  return client;
}

const describeEvent = (e: SttEvent) => (e.type === 'transcript' ? `transcript(${e.is_final ? 'final' : 'interim'}: ${String(e.text)})` : e.type);

/** A compact view of the events, for failure messages. */
export function summary(events: SttEvent[]): string {
  return events.map(describeEvent).join(', ');
}

/** An upgrade the gateway must refuse: the raw HTTP response (status, headers, JSON body). */
export function refusedUpgrade(
  h: Pick<GatewayHarness, 'url'>,
  query: Record<string, string | string[]>,
  headers: Record<string, string> = {},
  path?: string,
): Promise<{ status: number; headers: IncomingMessage['headers']; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl(h, query, path), { headers });
    ws.on('open', () => {
      ws.terminate();
      reject(new Error('the upgrade was accepted'));
    });
    ws.on('unexpected-response', (req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        // With this listener, ws leaves the request to us: end it, or its socket stays open.
        req.destroy();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
      });
    });
    ws.on('error', (err) => reject(err));
  });
}

// ---------------------------------------------------------------------------------------
// A scripted OpenAI-compatible transcription server: GET /v1/models, POST /v1/audio/transcriptions.

export interface ReceivedTranscription {
  headers: IncomingMessage['headers'];
  fields: Record<string, string[]>;
  file: Buffer;
  filename: string;
  fileType: string;
}

export type TranscriptionBehaviour = { kind: 'ok'; body: unknown } | { kind: 'error'; status: number; body: unknown };

export interface TranscriptionServer {
  baseUrl: string;
  behaviour: TranscriptionBehaviour;
  received: ReceivedTranscription[];
  close(): Promise<void>;
}

export async function startTranscriptionServer(initial: TranscriptionBehaviour): Promise<TranscriptionServer> {
  const sockets = new Set<Socket>();
  const state: TranscriptionServer = {
    baseUrl: '',
    behaviour: initial,
    received: [],
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      void (async () => {
        const json = (status: number, body: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(body));
        };
        if (req.method === 'GET' && req.url === '/v1/models') return json(200, { object: 'list', data: [{ id: 'scripted-stt', object: 'model' }] });
        if (req.method !== 'POST' || req.url !== '/v1/audio/transcriptions') return json(404, { error: { message: 'not found' } });
        // The multipart body, parsed by the platform's own FormData reader.
        const form = await new Request('http://upstream.invalid/', {
          method: 'POST',
          headers: req.headers as Record<string, string>,
          body: Buffer.concat(parts),
        }).formData();
        const fields: Record<string, string[]> = {};
        let file = Buffer.alloc(0);
        let filename = '';
        let fileType = '';
        for (const [name, value] of form.entries()) {
          if (typeof value === 'string') (fields[name] ??= []).push(value);
          else {
            file = Buffer.from(await value.arrayBuffer());
            filename = value.name;
            fileType = value.type;
          }
        }
        state.received.push({ headers: req.headers, fields, file, filename, fileType });
        const b = state.behaviour;
        if (b.kind === 'error') return json(b.status, b.body);
        return json(200, b.body);
      })().catch((err: unknown) => {
        res.writeHead(500);
        res.end(String(err));
      });
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  state.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return state;
}
