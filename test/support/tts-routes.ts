// Shared pieces of the TTS route tests (gateway/routes/tts*.test.ts): a gateway with the two
// local engines registered, request helpers, SSE parsing, decoders for the raw encodings that
// do not use the product's own code, the engines' natural output for comparison, and a tiny
// scripted OpenAI-compatible speech server.
import { sseData } from './sse-client.ts';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, vi } from 'vitest';
import { parseWav } from '../../gateway/audio/wav.ts';
import type { Clock } from '../../server/clock.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import { startGateway, type GatewayHarness } from './gateway-harness.ts';
import { usageRows } from './usage-rows.ts';
import { checkProtocol } from '../../gateway/upstreams/protocols/index.ts';

/** pico-USD per character: flite a whole 2 micro-USD, espeak a price that needs rounding up. */
export const FLITE_PRICE = 2_000_000n;
export const ESPEAK_PRICE = 1_000_001n;

export async function startTtsGateway(options: { creditsMicros?: bigint; env?: Record<string, string>; clock?: Clock } = {}): Promise<GatewayHarness> {
  const h = await startGateway({
    creditsMicros: options.creditsMicros ?? 100_000_000n,
    env: { SVC_HEALTH_CHECK_SECONDS: '3600', ...options.env },
    clock: options.clock,
  });
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'local-espeak',
    modality: 'tts',
    prices: { picoPerChar: ESPEAK_PRICE },
    upstream: { url: 'local:espeak-ng', protocol: 'espeak-ng' },
  });
  await seedPlatformVoices(prisma);
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
  return h;
}

/** Independent of the product's pricing code: exact pico total, rounded up to a micro-dollar. */
export const costOf = (characters: number, picoPerChar: bigint): bigint => (BigInt(characters) * picoPerChar + 999_999n) / 1_000_000n;
export const usd = (micros: bigint): string =>
  `${micros < 0n ? '-' : ''}${(micros < 0n ? -micros : micros) / 1_000_000n}.${((micros < 0n ? -micros : micros) % 1_000_000n).toString().padStart(6, '0')}`;
export const codePoints = (s: string) => Array.from(s).length;

export interface TtsBody {
  model_id?: unknown;
  transcript?: unknown;
  voice?: unknown;
  language?: unknown;
  output_format?: unknown;
  generation_config?: unknown;
  pronunciation_dict_id?: unknown;
  stream?: unknown;
  [k: string]: unknown;
}

export const FOX = 'The quick brown fox jumps over the lazy dog.';

export function ttsBody(over: TtsBody = {}): TtsBody {
  return {
    model_id: 'local-flite',
    transcript: FOX,
    voice: { mode: 'id', id: 'flite-slt' },
    output_format: { container: 'wav', sample_rate: 16000, encoding: 'pcm_s16le' },
    ...over,
  };
}

let rid = 0;
export const requestId = (label: string) => `tts-${label}-${++rid}-${Date.now()}`;

export function post(
  h: GatewayHarness,
  path: string,
  body: unknown,
  options: { headers?: Record<string, string>; signal?: AbortSignal; requestId?: string } = {},
) {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  return fetch(`${h.url}${path}`, {
    method: 'POST',
    headers: { ...h.headers, ...(options.requestId ? { 'x-request-id': options.requestId } : {}), ...options.headers },
    body: payload,
    signal: options.signal,
  });
}

export async function bytesOf(res: Response): Promise<Buffer> {
  return Buffer.from(await res.arrayBuffer());
}

export interface ErrorBody {
  message: string;
  type: string;
  code: string;
  param: string | null;
}

/** The exact error: status, code, param (and type when given), in the OpenAI envelope. */
export async function expectError(res: Response, expected: { status: number; code: string; param: string | null; type?: string }): Promise<ErrorBody> {
  const text = await res.text();
  let body: { error: ErrorBody };
  try {
    body = JSON.parse(text) as { error: ErrorBody };
  } catch {
    throw new Error(`expected a JSON error envelope, got ${res.status}: ${text.slice(0, 300)}`);
  }
  expect({ status: res.status, code: body.error?.code, param: body.error?.param }, body.error?.message).toEqual({
    status: expected.status,
    code: expected.code,
    param: expected.param,
  });
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(body.error.message.length).toBeGreaterThan(0);
  if (expected.type) expect(body.error.type).toBe(expected.type);
  return body.error;
}

// ---------------------------------------------------------------------------------------
// Server-sent events

export { sseData, sseReader } from './sse-client.ts';

export interface ChunkEvent {
  type: 'chunk';
  data: string;
  [k: string]: unknown;
}

/**
 * Checks the /tts/sse event sequence: every event but the last is a chunk with base64 data,
 * the last is the one done event. Returns the concatenated audio bytes and the chunk count.
 */
export function checkTtsEvents(text: string): { audio: Buffer; chunks: Buffer[]; events: Record<string, unknown>[] } {
  const events = sseData(text).map((d) => JSON.parse(d) as Record<string, unknown>);
  expect(events.length).toBeGreaterThanOrEqual(2);
  const last = events[events.length - 1]!;
  expect(last.type).toBe('done');
  expect(events.filter((e) => e.type === 'done')).toHaveLength(1);
  const chunks: Buffer[] = [];
  for (const e of events.slice(0, -1)) {
    expect(e.type).toBe('chunk');
    expect(typeof e.data).toBe('string');
    expect(e.data).toMatch(/^[A-Za-z0-9+/]+={0,2}$/);
    const bytes = Buffer.from(e.data as string, 'base64');
    expect(bytes.toString('base64')).toBe(e.data);
    expect(bytes.length).toBeGreaterThan(0);
    chunks.push(bytes);
  }
  return { audio: Buffer.concat(chunks), chunks, events };
}

// ---------------------------------------------------------------------------------------
// Decoding, written here rather than taken from gateway/audio so that an encoder bug cannot be
// cancelled out by the matching decoder bug.

export type Encoding = 'pcm_s16le' | 'pcm_f32le' | 'pcm_mulaw' | 'pcm_alaw';
export const BYTES_PER_SAMPLE: Record<Encoding, number> = { pcm_s16le: 2, pcm_f32le: 4, pcm_mulaw: 1, pcm_alaw: 1 };

/** G.711 mu-law byte to a linear value on the 16-bit scale (classic CCITT decoder). */
function mulaw(byte: number): number {
  const u = ~byte & 0xff;
  const exponent = (u >> 4) & 0x07;
  const magnitude = ((((u & 0x0f) << 3) + 0x84) << exponent) - 0x84;
  return u & 0x80 ? -magnitude : magnitude;
}

/** G.711 A-law byte to a linear value on the 16-bit scale (classic CCITT decoder). */
function alaw(byte: number): number {
  const a = byte ^ 0x55;
  const exponent = (a >> 4) & 0x07;
  let magnitude = (a & 0x0f) << 4;
  magnitude = exponent === 0 ? magnitude + 8 : (magnitude + 0x108) << (exponent - 1);
  return a & 0x80 ? magnitude : -magnitude;
}

export function decodeRaw(bytes: Buffer, encoding: Encoding): Float32Array {
  const n = Math.floor(bytes.length / BYTES_PER_SAMPLE[encoding]);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    switch (encoding) {
      case 'pcm_s16le':
        out[i] = bytes.readInt16LE(i * 2) / 32768;
        break;
      case 'pcm_f32le':
        out[i] = bytes.readFloatLE(i * 4);
        break;
      case 'pcm_mulaw':
        out[i] = mulaw(bytes[i]!) / 32768;
        break;
      case 'pcm_alaw':
        out[i] = alaw(bytes[i]!) / 32768;
        break;
    }
  }
  return out;
}

export function rms(x: Float32Array): number {
  let s = 0;
  for (let i = 0; i < x.length; i++) s += x[i]! * x[i]!;
  return Math.sqrt(s / Math.max(1, x.length));
}

export function peak(x: Float32Array): number {
  let p = 0;
  for (let i = 0; i < x.length; i++) p = Math.max(p, Math.abs(x[i]!));
  return p;
}

/** Speech, not silence nor noise floor: a clear level overall. */
export function expectSpeechLevel(samples: Float32Array): void {
  expect(samples.every((v) => Number.isFinite(v) && v >= -1 && v <= 1)).toBe(true);
  expect(rms(samples)).toBeGreaterThan(0.02);
  expect(peak(samples)).toBeGreaterThan(0.1);
}

export function expectWithin(actual: number, expected: number, fraction: number): void {
  expect(actual, `${actual} within ${fraction * 100} % of ${expected}`).toBeGreaterThanOrEqual(expected * (1 - fraction));
  expect(actual, `${actual} within ${fraction * 100} % of ${expected}`).toBeLessThanOrEqual(expected * (1 + fraction));
}

// ---------------------------------------------------------------------------------------
// The engines run directly, for the natural duration of a text.

const naturalCache = new Map<string, { sampleRate: number; samples: Float32Array; seconds: number }>();

/** What the engine itself makes of `text` with the platform voice's engine voice. */
export function natural(engine: 'flite' | 'espeak-ng', voice: string, text: string): { sampleRate: number; samples: Float32Array; seconds: number } {
  const key = `${engine}\0${voice}\0${text}`;
  const cached = naturalCache.get(key);
  if (cached) return cached;
  const dir = mkdtempSync(join(tmpdir(), 'tts-test-natural-'));
  try {
    const file = join(dir, 'out.wav');
    if (engine === 'flite') execFileSync('flite', ['-voice', voice, '-t', text, '-o', file]);
    else execFileSync('espeak-ng', ['-v', voice, '-s', '175', '-w', file, text]);
    const wav = parseWav(readFileSync(file));
    const result = { sampleRate: wav.sampleRate, samples: wav.samples, seconds: wav.frameCount / wav.sampleRate };
    naturalCache.set(key, result);
    return result;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------
// Processes

/**
 * PIDs of this process's descendants running `name` (the gateway runs in this process; the
 * engines are started by its engine-spawner child, so they are grandchildren).
 */
export function childPids(name: string): Promise<number[]> {
  return new Promise((resolve, reject) => {
    execFile('ps', ['-eo', 'pid=,ppid=,comm='], (err, stdout) => {
      if (err) return reject(err);
      const rows = stdout
        .split('\n')
        .filter(Boolean)
        .map((line) => {
          const [pid, ppid, ...comm] = line.trim().split(/\s+/);
          return { pid: Number(pid), ppid: Number(ppid), comm: comm.join(' ') };
        });
      const mine = new Set([process.pid]);
      // Walk down the process tree from this process.
      for (let grew = true; grew;) {
        grew = false;
        for (const r of rows)
          if (mine.has(r.ppid) && !mine.has(r.pid)) {
            mine.add(r.pid);
            grew = true;
          }
      }
      resolve(
        rows
          .filter((r) => r.pid !== process.pid && mine.has(r.pid) && r.comm === name)
          .map((r) => r.pid)
          .sort((a, b) => a - b),
      );
    });
  });
}

// ---------------------------------------------------------------------------------------
// Billing rows

export async function billingOf(h: GatewayHarness, id: string) {
  const prisma = h.testDb.db.prisma;
  await vi.waitFor(
    async () => {
      expect(await prisma.ledgerEntry.count({ where: { requestId: id } })).toBeGreaterThan(0);
    },
    { timeout: 10_000, interval: 20 },
  );
  return {
    ledger: await prisma.ledgerEntry.findMany({ where: { requestId: id } }),
    usage: await usageRows(prisma, { requestId: id }),
  };
}

export async function expectNotBilled(h: GatewayHarness, id: string) {
  const prisma = h.testDb.db.prisma;
  await h.settled();
  expect(await prisma.ledgerEntry.count({ where: { requestId: id } })).toBe(0);
}

// ---------------------------------------------------------------------------------------
// A scripted OpenAI-compatible speech server: GET /v1/models, POST /v1/audio/speech.

export type SpeechBehaviour =
  /** `contentType`: what the answer says it is ('audio/pcm' unless given; an engine that sends a WAV whatever was asked says 'audio/wav'). */
  | { kind: 'pcm'; pcm: Buffer; chunkBytes?: number; stopAfterBytes?: number; then?: 'die' | 'hang'; contentType?: string }
  | { kind: 'error'; status: number; body: unknown }
  | { kind: 'hang' };

export interface SpeechServer {
  baseUrl: string;
  behaviour: SpeechBehaviour;
  received: { path: string; headers: IncomingMessage['headers']; body: string }[];
  close(): Promise<void>;
}

export async function startSpeechServer(initial: SpeechBehaviour): Promise<SpeechServer> {
  const sockets = new Set<Socket>();
  const state: SpeechServer = {
    baseUrl: '',
    behaviour: initial,
    received: [],
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      if (req.method === 'GET' && path === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: [{ id: 'scripted-tts', object: 'model' }] }));
        return;
      }
      if (req.method !== 'POST' || path !== '/v1/audio/speech') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'not found' } }));
        return;
      }
      state.received.push({ path, headers: req.headers, body: Buffer.concat(parts).toString() });
      const b = state.behaviour;
      if (b.kind === 'hang') return;
      if (b.kind === 'error') {
        res.writeHead(b.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(b.body));
        return;
      }
      res.writeHead(200, { 'content-type': b.contentType ?? 'audio/pcm' });
      const step = b.chunkBytes ?? 4801; // odd on purpose: samples split across writes
      const end = b.stopAfterBytes ?? b.pcm.length;
      for (let at = 0; at < end; at += step) res.write(b.pcm.subarray(at, Math.min(end, at + step)));
      if (b.stopAfterBytes === undefined) res.end();
      // Dropped a moment later, so that the first bytes reach the gateway first; or kept open, silent.
      else if (b.then !== 'hang') setTimeout(() => res.socket?.destroy(), 200);
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

/** A loopback URL where nothing listens. */
export async function deadUrl(): Promise<string> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return `http://127.0.0.1:${port}/v1`;
}

/** A 24 kHz s16le tone burst with a silent gap, as an OpenAI-compatible server would send. */
export function pcmTone(seconds: number, frequency = 440): Buffer {
  const n = Math.round(24000 * seconds);
  const out = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) out.writeInt16LE(Math.round(0.4 * 32767 * Math.sin((2 * Math.PI * frequency * i) / 24000)), i * 2);
  return out;
}
