// A raw `ws` client of WS /tts/websocket (Cartesia's TTS WebSocket protocol) for the route
// tests: it records every event, waits on events (never on time), and decodes each
// context's audio.
import type { IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import type { GatewayHarness } from './gateway-harness.ts';
import { socketEvents } from './socket-events.ts';
import { refusedUpgrade } from './stt-routes.ts';

export interface TtsEvent {
  type: string;
  context_id?: string;
  [k: string]: unknown;
}

export interface TtsSocket {
  ws: WebSocket;
  events: TtsEvent[];
  /** Resolves with the close code and reason (the socket closed, by either side). */
  closed: Promise<{ code: number; reason: string }>;
  send(message: unknown): void;
  /** The first event (from index `from`) matching `pred`; rejects if the socket closes first. */
  until(pred: (e: TtsEvent) => boolean, options?: { from?: number; timeoutMs?: number }): Promise<TtsEvent>;
  /** The context's `done` or `error` event (the first from index `from`). */
  end(contextId: string, from?: number): Promise<TtsEvent>;
  of(contextId: string): TtsEvent[];
  /** The context's audio: its chunks' data, decoded from base64 and joined. */
  audio(contextId: string): Buffer;
}

export function ttsSocketUrl(h: Pick<GatewayHarness, 'url'>, query: Record<string, string> = {}): string {
  return `${h.url.replace(/^http/, 'ws')}/tts/websocket?${new URLSearchParams(query)}`;
}

/** Opens a session and waits for the upgrade (the key goes in the headers or the query, as the caller says). */
export async function openTtsSocket(
  h: Pick<GatewayHarness, 'url'>,
  options: { query?: Record<string, string>; headers?: Record<string, string> } = {},
): Promise<TtsSocket> {
  const ws = new WebSocket(ttsSocketUrl(h, options.query), { headers: options.headers });
  const { log, closed } = socketEvents<TtsEvent>(ws, { describe: describeEvent });
  const { events } = log;
  ws.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (req, res) => {
      req.destroy();
      reject(new Error(`upgrade refused: ${res.statusCode}`));
    });
    ws.once('error', reject);
  });
  const until: TtsSocket['until'] = (pred, options) => log.first(pred, options);
  return {
    ws,
    events,
    closed,
    send: (message) => ws.send(typeof message === 'string' ? message : JSON.stringify(message)),
    until,
    end: (contextId, from = 0) => until((e) => e.context_id === contextId && (e.type === 'done' || e.type === 'error'), { from }),
    of: (contextId) => events.filter((e) => e.context_id === contextId),
    audio: (contextId) =>
      Buffer.concat(events.filter((e) => e.context_id === contextId && e.type === 'chunk').map((e) => Buffer.from(e.data as string, 'base64'))),
  };
}

const describeEvent = (e: TtsEvent) => `${e.type}${e.context_id ? `(${e.context_id})` : ''}${e.code ? `:${String(e.code)}` : ''}`;

/** The events in short, for failure messages. */
export function summary(events: TtsEvent[]): string {
  return events.map(describeEvent).join(' ');
}

/** An upgrade the gateway refuses: the HTTP status, headers and body it answered with. */
export function refusedTtsUpgrade(
  h: Pick<GatewayHarness, 'url'>,
  query: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: IncomingMessage['headers']; body: string }> {
  return refusedUpgrade(h, query, headers, '/tts/websocket');
}
