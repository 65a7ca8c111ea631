// A scripted OpenAI-compatible server for what a real engine cannot show on demand: exact
// bodies received, tool calls, errors, slow first tokens, streams that die, timeouts.
// Also the fast loopback upstream of the benchmarks.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Behaviour =
  | { kind: 'ok'; text?: string; usage?: { prompt_tokens: number; completion_tokens: number } | null }
  | { kind: 'stream'; chunks: string[]; delayMs?: number; firstDelayMs?: number; usage?: { prompt_tokens: number; completion_tokens: number } | null; dieAfter?: number }
  | { kind: 'error'; status: number; body: unknown }
  | { kind: 'hang' }
  | { kind: 'raw'; status: number; contentType: string; body: string }
  /** Headers and the start of a body, then nothing more ('hang') or a dropped connection ('die'). */
  | { kind: 'partial'; status: number; contentType: string; body: string; then: 'hang' | 'die' };

/** One streamed answer: events written so far, and whether its connection closed before the end (peer gone, or dieAfter). */
export interface StreamRecord {
  sent: number;
  ended: boolean;
  closedEarly: boolean;
}

export interface ScriptedUpstream {
  url: string;
  /** Base URL including /v1, as registered in the model registry. */
  baseUrl: string;
  received: { path: string; headers: IncomingMessage['headers']; body: Buffer }[];
  /** One record per 'stream' answer, in the order the requests arrived. */
  streams: StreamRecord[];
  behaviour: Behaviour;
  modelsStatus: number;
  openConnections(): number;
  close(): Promise<void>;
}

function completion(model: string, text: string, usage: { prompt_tokens: number; completion_tokens: number } | null) {
  return {
    id: 'chatcmpl-scripted',
    object: 'chat.completion',
    created: 1_700_000_000,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
    ...(usage ? { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } } : {}),
  };
}

export async function startScriptedUpstream(initial: Behaviour = { kind: 'ok' }, port = 0): Promise<ScriptedUpstream> {
  const state: ScriptedUpstream = {
    url: '',
    baseUrl: '',
    received: [],
    streams: [],
    behaviour: initial,
    modelsStatus: 200,
    openConnections: () => sockets.size,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const sockets = new Set<import('node:net').Socket>();
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => void handle(req, res, Buffer.concat(parts)));
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  async function handle(req: IncomingMessage, res: ServerResponse, body: Buffer) {
    const path = req.url ?? '/';
    if (req.method === 'GET' && path === '/v1/models') {
      res.writeHead(state.modelsStatus, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'scripted', object: 'model' }] }));
      return;
    }
    state.received.push({ path, headers: req.headers, body });
    let model = 'scripted';
    let wantsUsage = false;
    try {
      const parsed = JSON.parse(body.toString()) as { model?: string; stream_options?: { include_usage?: boolean } };
      model = parsed.model ?? model;
      wantsUsage = parsed.stream_options?.include_usage === true;
    } catch {
      // keep defaults
    }
    const b = state.behaviour;
    switch (b.kind) {
      case 'ok': {
        const payload = JSON.stringify(completion(model, b.text ?? 'Hello from the scripted upstream.', b.usage === undefined ? { prompt_tokens: 12, completion_tokens: 7 } : b.usage));
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
        res.end(payload);
        return;
      }
      case 'error':
        res.writeHead(b.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(b.body));
        return;
      case 'raw':
        res.writeHead(b.status, { 'content-type': b.contentType });
        res.end(b.body);
        return;
      case 'hang':
        return; // never answers
      case 'partial':
        res.writeHead(b.status, { 'content-type': b.contentType });
        res.write(b.body);
        // Dropped a moment later, so that the client has the headers when the connection goes.
        if (b.then === 'die') setTimeout(() => res.socket?.destroy(), 100);
        return;
      case 'stream': {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const record: StreamRecord = { sent: 0, ended: false, closedEarly: false };
        state.streams.push(record);
        res.on('close', () => {
          if (!res.writableFinished) record.closedEarly = true;
        });
        const send = (obj: unknown) => {
          record.sent += 1;
          return res.write(`data: ${JSON.stringify(obj)}\n\n`);
        };
        if (b.firstDelayMs) await sleep(b.firstDelayMs);
        for (const [i, text] of b.chunks.entries()) {
          if (res.destroyed) return;
          if (b.dieAfter !== undefined && i >= b.dieAfter) {
            res.socket?.destroy();
            return;
          }
          send({ id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta: { content: text }, finish_reason: null }] });
          if (b.delayMs) await sleep(b.delayMs);
        }
        send({ id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
        const usage = b.usage === undefined ? { prompt_tokens: 10, completion_tokens: b.chunks.length } : b.usage;
        if (wantsUsage && usage) {
          send({ id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 1, model, choices: [], usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } });
        }
        record.sent += 1;
        res.end('data: [DONE]\n\n');
        record.ended = true;
        return;
      }
    }
  }

  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
  const { port: actual } = server.address() as AddressInfo;
  state.url = `http://127.0.0.1:${actual}`;
  state.baseUrl = `${state.url}/v1`;
  return state;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
