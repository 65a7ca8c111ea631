// A bare Realtime-protocol client for tests (the `ws` package, events as parsed JSON): what the
// gateway sends, in order, and waiting on the next event of a type. The real clients' tests use
// the clients themselves; this one shows the wire.
import WebSocket from 'ws';
import type { GatewayHarness } from './gateway-harness.ts';
import { socketEvents } from './socket-events.ts';
import { concat, silence, speech, toRate } from './stt-routes.ts';

export type RealtimeEvent = { type: string; [k: string]: unknown };

export interface RealtimeClient {
  ws: WebSocket;
  events: RealtimeEvent[];
  send(event: object): void;
  /** The next event of `type` after the ones already taken by earlier calls (in arrival order). */
  next(type: string, timeoutMs?: number): Promise<RealtimeEvent>;
  /** Every event up to and including the next of `type`. */
  until(type: string, timeoutMs?: number): Promise<RealtimeEvent[]>;
  closed: Promise<{ code: number; reason: string }>;
  close(): Promise<void>;
}

export function realtimeUrl(h: Pick<GatewayHarness, 'url'>, query: Record<string, string>): string {
  return `${h.url.replace(/^http/, 'ws')}/v1/realtime?${new URLSearchParams(query).toString()}`;
}

export async function openRealtime(
  h: Pick<GatewayHarness, 'url'>,
  key: string,
  query: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<RealtimeClient> {
  const ws = new WebSocket(realtimeUrl(h, query), { headers: { authorization: `Bearer ${key}`, ...headers } });
  const { log, closed } = socketEvents<RealtimeEvent>(ws);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
  const until = (type: string, timeoutMs?: number) => log.through((e) => e.type === type, timeoutMs);
  return {
    ws,
    events: log.events,
    send: (event) => ws.send(JSON.stringify(event)),
    next: async (type, timeoutMs) => (await until(type, timeoutMs)).at(-1)!,
    until,
    closed,
    async close() {
      if (ws.readyState === ws.OPEN) ws.close();
      await closed;
    },
  };
}

/** `text` spoken by flite, as pcm16 at 24 kHz, followed by `silenceSeconds` of silence: what a realtime client sends. */
export async function spokenPcm24(text: string, silenceSeconds = 1.5): Promise<Buffer> {
  const s = await speech(text);
  const samples = toRate(concat(silence(0.3), s.samples, silence(silenceSeconds)), 24_000);
  const out = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(samples[i]! * 32767))), i * 2);
  return out;
}

/** Sends pcm16 as input_audio_buffer.append events of `frameMs` each. */
export function appendAudio(client: Pick<RealtimeClient, 'send'>, pcm: Buffer, frameMs = 100, sampleRate = 24_000): void {
  const bytes = ((sampleRate * frameMs) / 1000) * 2;
  for (let at = 0; at < pcm.length; at += bytes) client.send({ type: 'input_audio_buffer.append', audio: pcm.subarray(at, at + bytes).toString('base64') });
}

/** The audio of a response's output_audio.delta events, joined. */
export function responseAudio(events: RealtimeEvent[], type = 'response.output_audio.delta'): Buffer {
  return Buffer.concat(events.filter((e) => e.type === type).map((e) => Buffer.from(e.delta as string, 'base64')));
}
