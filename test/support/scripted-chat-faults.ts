// OpenAI-compatible chat engines that fail on cue, for the failover tests (gateway/llm/chat-failover.ts):
// POST /v1/chat/completions streams a fixed answer as chat.completion.chunk events
// (platform.openai.com/docs/api-reference/chat-streaming: a role chunk, one content chunk per
// piece, a finish_reason chunk, the usage chunk when stream_options.include_usage, `data: [DONE]`),
// or answers it whole (.../chat/object). A request whose last message is an assistant message with
// `continue_final_message: true` is continued as vLLM does (docs.vllm.ai, "Extra parameters for Chat
// API"): the answer's pieces after that prefix, which must end on a piece boundary.
// Several engines share one `FaultScript`: the n-th request to reach any of them meets its n-th
// fault, so a test does not depend on which engine the gateway's weighted order picks first.
// GET /v1/models answers 200 (the health check).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Socket } from 'node:net';

export type Fault =
  /** The connection reset before any answer. */
  | { kind: 'reset' }
  /** HTTP 500 with an error body. */
  | { kind: 'status'; status: number }
  /** The stream dropped after `after` content pieces. */
  | { kind: 'close'; after: number }
  /** The stream holds still after `after` content pieces until the engine is closed. */
  | { kind: 'stall'; after: number }
  /** A chunk that is not JSON after `after` content pieces. */
  | { kind: 'malformed'; after: number }
  /** The stream ends with an error object after `after` content pieces. */
  | { kind: 'error-event'; after: number }
  | { kind: 'none' };

export interface FaultScript {
  /** Consumed in order by the requests as they arrive (none left: no fault). */
  faults: Fault[];
  /** The answer, in the pieces it is streamed in. */
  pieces: string[];
  /** A pause before each piece (the benchmark's token time); none by default. */
  pieceMs?: number;
  /** Stream the answer (its usage chunk included) even to a request that asked for JSON (`stream` false or absent), as a misbehaving engine does. */
  alwaysStream?: boolean;
  /** Stream the pieces over and over, never ending, as fast as the gateway reads them, or one every pieceMs (with alwaysStream). */
  endless?: boolean;
}

export interface ChatRequestRecord {
  engine: string;
  body: { messages?: { role: string; content: string }[]; continue_final_message?: boolean; add_generation_prompt?: boolean; [k: string]: unknown };
  fault: Fault;
  /** Settles when the answer's connection is done with. */
  closed: Promise<void>;
}

export interface FaultyEngine {
  name: string;
  baseUrl: string;
  close(): Promise<void>;
}

export interface FaultyEngines {
  engines: FaultyEngine[];
  requests: ChatRequestRecord[];
  /** Resolves once `count` chat requests have arrived at any engine. */
  arrived(count: number): Promise<ChatRequestRecord[]>;
  close(): Promise<void>;
}

const PROMPT_TOKENS = 10;

export async function startFaultyEngines(script: FaultScript, names: string[] = ['a', 'b']): Promise<FaultyEngines> {
  const requests: ChatRequestRecord[] = [];
  const waiters: { count: number; resolve: (r: ChatRequestRecord[]) => void }[] = [];
  const note = () => {
    for (const w of [...waiters]) {
      if (requests.length < w.count) continue;
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(requests.slice(0, w.count));
    }
  };
  const engines = await Promise.all(names.map((name) => startEngine(name, script, requests, note)));
  return {
    engines,
    requests,
    arrived: (count) =>
      new Promise((resolve) => {
        waiters.push({ count, resolve });
        note();
      }),
    close: async () => {
      await Promise.all(engines.map((e) => e.close()));
    },
  };
}

async function startEngine(name: string, script: FaultScript, requests: ChatRequestRecord[], note: () => void): Promise<FaultyEngine> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => void answer(req, res, Buffer.concat(parts)));
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  async function answer(req: IncomingMessage, res: ServerResponse, raw: Buffer) {
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'scripted', object: 'model' }] }));
      return;
    }
    if (req.url !== '/v1/chat/completions') {
      // A server with chat completions only (POST /v1/responses: the gateway translates).
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'File Not Found', type: 'not_found_error' } }));
      return;
    }
    const body = JSON.parse(raw.toString()) as ChatRequestRecord['body'];
    const fault = script.faults.shift() ?? { kind: 'none' };
    const closed = new Promise<void>((resolve) => res.on('close', () => resolve()));
    requests.push({ engine: name, body, fault, closed });
    note();
    if (fault.kind === 'reset') return void req.socket.destroy();
    if (fault.kind === 'status') {
      res.writeHead(fault.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `engine ${name} failed`, type: 'server_error' } }));
      return;
    }
    const pieces = piecesAfterPrefix(script.pieces, body);
    if (pieces === null) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'the assistant prefix does not match the answer', type: 'invalid_request_error' } }));
      return;
    }
    const usage = { prompt_tokens: PROMPT_TOKENS + (script.pieces.length - pieces.length), completion_tokens: pieces.length };
    if (body.stream !== true && !script.alwaysStream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: `chatcmpl-${name}`,
          object: 'chat.completion',
          created: 1,
          model: body.model,
          choices: [{ index: 0, message: { role: 'assistant', content: pieces.join('') }, finish_reason: 'stop' }],
          usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
        }),
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const chunk = (choices: unknown[], extra: object = {}) =>
      res.write(`data: ${JSON.stringify({ id: `chatcmpl-${name}`, object: 'chat.completion.chunk', created: 1, model: body.model, choices, ...extra })}\n\n`);
    chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]);
    while (script.endless && !res.destroyed) {
      // With pieceMs, a trickle: a piece every pieceMs, forever.
      if (script.pieceMs) await new Promise((r) => setTimeout(r, script.pieceMs));
      if (res.destroyed) return;
      // Only as fast as the gateway reads: what it leaves unread waits here, not in memory.
      if (!chunk([{ index: 0, delta: { content: pieces.join('') }, finish_reason: null }])) await new Promise((r) => res.once('drain', r));
    }
    if (script.endless) return;
    for (const [i, piece] of pieces.entries()) {
      if (script.pieceMs) await new Promise((r) => setTimeout(r, script.pieceMs));
      if (res.destroyed) return;
      if ('after' in fault && fault.after === i) return misbehave(fault, res);
      chunk([{ index: 0, delta: { content: piece }, finish_reason: null }]);
    }
    if ('after' in fault && fault.after >= pieces.length) return misbehave(fault, res);
    chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]);
    // An engine that streams what was asked as JSON sends its usage as well.
    if ((body.stream_options as { include_usage?: boolean } | undefined)?.include_usage || body.stream !== true) {
      chunk([], { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } });
    }
    res.end('data: [DONE]\n\n');
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  return {
    name,
    baseUrl: `http://127.0.0.1:${port}/v1`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function misbehave(fault: Fault, res: ServerResponse): void {
  // The chunks written so far reach the gateway first, then the connection ends mid-answer.
  if (fault.kind === 'close') res.socket?.end();
  else if (fault.kind === 'malformed') res.write('data: {"choices": [{"delta": {"content": "bro\n\n');
  else if (fault.kind === 'error-event') res.end(`data: ${JSON.stringify({ error: { message: 'engine overloaded', code: 'overloaded' } })}\n\n`);
  // 'stall': nothing more until the engine is closed.
}

/** The pieces still to say: all of them, or after a continued assistant prefix (null: the prefix is not a run of pieces). */
function piecesAfterPrefix(pieces: string[], body: ChatRequestRecord['body']): string[] | null {
  const last = body.messages?.at(-1);
  if (last?.role !== 'assistant' || body.continue_final_message !== true) return pieces;
  let said = '';
  for (let i = 0; i <= pieces.length; i++) {
    if (said === last.content) return pieces.slice(i);
    said += pieces[i] ?? '';
  }
  return null;
}
