// A scripted OpenAI-compatible server for what a real engine cannot show on demand: exact
// bodies received, tool calls, errors, slow first tokens, streams that die, timeouts.
// Also the fast loopback upstream of the benchmarks.
// With `transcription` set it also answers POST /v1/audio/transcriptions as an OpenAI-compatible
// batch engine would (platform.openai.com/docs/api-reference/audio/createTranscription:
// multipart `file`, `model`, `response_format=verbose_json`, `timestamp_granularities[]=word`
// -> {task, language, duration, text, words:[{word,start,end}]}), words derived from the audio.
// POST /v1/responses answers the same behaviours in the shape of OpenAI's Responses API
// (platform.openai.com/docs/api-reference/responses/create: the Response object, `usage` with
// input_tokens/output_tokens; .../responses-streaming: response.created, response.in_progress,
// response.output_item.added, response.content_part.added, response.output_text.delta...,
// response.output_text.done, response.content_part.done, response.output_item.done,
// response.completed, each with its `event:` line and sequence_number), or 404 as a server
// without that API does when `responsesApi` is false.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { zeroCrossingFrequency } from '../../gateway/audio/test-signals.ts';
import { parseWav } from '../../gateway/audio/wav.ts';

/**
 * A streamed tool call as OpenAI streams one (platform.openai.com/docs/api-reference/chat-streaming:
 * the call's id and name first, its arguments in pieces, finish_reason tool_calls), then the usage
 * chunk: get_weather({"city":"Oslo"}) as call_7, 30 prompt and 9 completion tokens.
 */
export function toolCallStream(model: string): string {
  const chunk = (body: object) => `data: ${JSON.stringify({ id: 'chatcmpl-tool', object: 'chat.completion.chunk', created: 1, model, ...body })}\n\n`;
  return (
    chunk({
      choices: [
        {
          index: 0,
          delta: {
            role: 'assistant',
            content: null,
            tool_calls: [{ index: 0, id: 'call_7', type: 'function', function: { name: 'get_weather', arguments: '' } }],
          },
          finish_reason: null,
        },
      ],
    }) +
    chunk({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }, finish_reason: null }] }) +
    chunk({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }, finish_reason: null }] }) +
    chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] }) +
    chunk({ choices: [], usage: { prompt_tokens: 30, completion_tokens: 9, total_tokens: 39 } }) +
    'data: [DONE]\n\n'
  );
}

export type Behaviour =
  | { kind: 'ok'; text?: string; usage?: { prompt_tokens: number; completion_tokens: number } | null }
  | {
      kind: 'stream';
      chunks: string[];
      delayMs?: number;
      firstDelayMs?: number;
      usage?: { prompt_tokens: number; completion_tokens: number } | null;
      dieAfter?: number;
    }
  | { kind: 'error'; status: number; body: unknown }
  | { kind: 'hang' }
  | { kind: 'raw'; status: number; contentType: string; body: string }
  /** Headers and the start of a body, then nothing more ('hang') or a dropped connection ('die'). */
  | { kind: 'partial'; status: number; contentType: string; body: string; then: 'hang' | 'die' }
  /**
   * A broken or hostile engine's answer that does not stop: `head`, then `filler` again and again
   * (as fast as the reader takes it) up to `maxBytes` in all; each one recorded in `floods`.
   */
  | { kind: 'flood'; status: number; contentType: string; head?: string; filler: string; maxBytes: number };

/** One 'flood' answer: bytes written, and how its connection ended (closedEarly: before all `maxBytes` were written). */
export interface FloodRecord {
  path: string;
  written: number;
  done: Promise<{ written: number; closedEarly: boolean }>;
}

/**
 * How POST /v1/audio/transcriptions answers when `transcription` is set. 'energy': one word per
 * voiced burst of the uploaded WAV (20 ms frames above an RMS of 0.05), named after the burst's
 * pitch (zero-crossing frequency) to the nearest 10 Hz (`tone300`, or `tone120` for a voiced
 * burst at 120 Hz: the gateway's voice-activity detector hears speech only at 100-160 Hz), timed
 * by its place in the file; `hold(call)` true keeps that call's answer (0-based) until its
 * record's release().
 */
export type TranscriptionBehaviour = { kind: 'energy'; hold?: (call: number) => boolean } | { kind: 'error'; status: number; body: unknown } | { kind: 'hang' };

/** One transcription request, as the peer received it. */
export interface TranscriptionRecord {
  headers: IncomingMessage['headers'];
  fields: Record<string, string[]>;
  /** The uploaded WAV's rate and length in samples. */
  sampleRate: number;
  samples: number;
  /** Settles when the answer's connection is done with; closedEarly: it closed before the answer was complete (client gone). */
  done: Promise<{ closedEarly: boolean }>;
  /** Lets a held answer go. */
  release(): void;
}

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
  /** One record per 'flood' answer, in the order the requests arrived. */
  floods: FloodRecord[];
  behaviour: Behaviour;
  modelsStatus: number;
  /** Unset: /v1/audio/transcriptions gets the behaviour above, like any path. */
  transcription: TranscriptionBehaviour | null;
  /** False: POST /v1/responses is 404, as on a server with chat completions only (default true). */
  responsesApi: boolean;
  transcriptions: TranscriptionRecord[];
  /** The first `count` transcription requests, once they have arrived. */
  waitForTranscriptions(count: number): Promise<TranscriptionRecord[]>;
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
    floods: [],
    behaviour: initial,
    modelsStatus: 200,
    transcription: null,
    responsesApi: true,
    transcriptions: [],
    waitForTranscriptions: (count) =>
      new Promise((resolve) => {
        arrivalWaiters.push({ count, resolve });
        noteArrival();
      }),
    openConnections: () => sockets.size,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const sockets = new Set<import('node:net').Socket>();
  const arrivalWaiters: { count: number; resolve: (records: TranscriptionRecord[]) => void }[] = [];
  const noteArrival = () => {
    for (const waiter of [...arrivalWaiters]) {
      if (state.transcriptions.length < waiter.count) continue;
      arrivalWaiters.splice(arrivalWaiters.indexOf(waiter), 1);
      waiter.resolve(state.transcriptions.slice(0, waiter.count));
    }
  };
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
    if (req.method === 'POST' && path === '/v1/audio/transcriptions' && state.transcription) {
      await transcribe(state.transcription, req, res, body);
      return;
    }
    state.received.push({ path, headers: req.headers, body });
    const responsesApi = req.method === 'POST' && path === '/v1/responses';
    if (responsesApi && !state.responsesApi) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 404, message: 'File Not Found', type: 'not_found_error' } }));
      return;
    }
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
        if (responsesApi) {
          const usage = b.usage === undefined ? { prompt_tokens: 12, completion_tokens: 7 } : b.usage;
          const payload = JSON.stringify(responseObject(model, b.text ?? 'Hello from the scripted upstream.', usage));
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
          res.end(payload);
          return;
        }
        const payload = JSON.stringify(
          completion(model, b.text ?? 'Hello from the scripted upstream.', b.usage === undefined ? { prompt_tokens: 12, completion_tokens: 7 } : b.usage),
        );
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
      case 'flood':
        flood(res, path, b);
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
        if (responsesApi) {
          await streamResponse(res, record, model, b);
          return;
        }
        for (const [i, text] of b.chunks.entries()) {
          if (res.destroyed) return;
          if (b.dieAfter !== undefined && i >= b.dieAfter) {
            res.socket?.destroy();
            return;
          }
          send({
            id: 'chatcmpl-s',
            object: 'chat.completion.chunk',
            created: 1,
            model,
            choices: [{ index: 0, delta: { content: text }, finish_reason: null }],
          });
          if (b.delayMs) await sleep(b.delayMs);
        }
        send({ id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
        const usage = b.usage === undefined ? { prompt_tokens: 10, completion_tokens: b.chunks.length } : b.usage;
        if (wantsUsage && usage) {
          send({
            id: 'chatcmpl-s',
            object: 'chat.completion.chunk',
            created: 1,
            model,
            choices: [],
            usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
          });
        }
        record.sent += 1;
        res.end('data: [DONE]\n\n');
        record.ended = true;
        return;
      }
    }
  }

  function flood(res: ServerResponse, path: string, b: Extract<Behaviour, { kind: 'flood' }>): void {
    const record = { path, written: 0 } as FloodRecord;
    record.done = new Promise((resolve) => res.on('close', () => resolve({ written: record.written, closedEarly: record.written < b.maxBytes })));
    state.floods.push(record);
    res.writeHead(b.status, { 'content-type': b.contentType });
    const filler = Buffer.from(b.filler);
    const write = (): void => {
      if (record.written === 0 && b.head) {
        record.written += Buffer.byteLength(b.head);
        res.write(b.head);
      }
      while (!res.destroyed && record.written < b.maxBytes) {
        record.written += filler.length;
        if (!res.write(filler)) {
          res.once('drain', write);
          return;
        }
      }
      if (!res.destroyed) res.end();
    };
    write();
  }

  async function transcribe(b: TranscriptionBehaviour, req: IncomingMessage, res: ServerResponse, body: Buffer) {
    const json = (status: number, payload: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(payload));
    };
    const invalid = (message: string, param: string) => json(400, { error: { message, type: 'invalid_request_error', param, code: null } });
    const done = new Promise<{ closedEarly: boolean }>((resolve) => res.on('close', () => resolve({ closedEarly: !res.writableFinished })));
    const form = await new Request('http://peer.invalid/', {
      method: 'POST',
      headers: { 'content-type': req.headers['content-type'] ?? '' },
      body: new Uint8Array(body),
    })
      .formData()
      .catch(() => null);
    const file = form?.get('file');
    if (!form || !(file instanceof Blob)) return invalid('Missing file.', 'file');
    let wav: ReturnType<typeof parseWav>;
    try {
      wav = parseWav(new Uint8Array(await file.arrayBuffer()));
    } catch {
      return invalid('Invalid file format.', 'file');
    }
    const fields: Record<string, string[]> = {};
    for (const [name, value] of form.entries()) if (typeof value === 'string') (fields[name] ??= []).push(value);
    let release = () => {};
    const released = new Promise<void>((r) => (release = r));
    const call = state.transcriptions.length;
    state.transcriptions.push({ headers: req.headers, fields, sampleRate: wav.sampleRate, samples: wav.samples.length, done, release });
    noteArrival();
    if (b.kind === 'hang') return;
    if (b.kind === 'error') return json(b.status, b.body);
    if (b.hold?.(call)) await Promise.race([released, done]);
    if (res.destroyed) return;
    const words = toneWords(wav.samples, wav.sampleRate);
    const wantsWords = fields['timestamp_granularities[]']?.includes('word') && fields.response_format?.[0] === 'verbose_json';
    json(200, {
      task: 'transcribe',
      language: 'english',
      duration: wav.samples.length / wav.sampleRate,
      text: words.map((w) => w.word).join(' '),
      ...(wantsWords ? { words } : {}),
    });
  }

  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
  const { port: actual } = server.address() as AddressInfo;
  state.url = `http://127.0.0.1:${actual}`;
  state.baseUrl = `${state.url}/v1`;
  return state;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Usage = { prompt_tokens: number; completion_tokens: number } | null;

/** A Response object as OpenAI's reference shows it (status completed, one assistant message). */
function responseObject(model: string, text: string | null, usage: Usage, status: 'in_progress' | 'completed' = 'completed') {
  return {
    id: 'resp_scripted',
    object: 'response',
    created_at: 1_700_000_000,
    status,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model,
    output: text === null ? [] : [messageItem(text, 'completed')],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: true,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage: status === 'completed' && usage ? responsesUsage(usage) : null,
    user: null,
    metadata: {},
  };
}

const messageItem = (text: string, status: 'in_progress' | 'completed') => ({
  type: 'message',
  id: 'msg_scripted',
  status,
  role: 'assistant',
  content: status === 'completed' ? [{ type: 'output_text', text, annotations: [] }] : [],
});

const responsesUsage = (u: { prompt_tokens: number; completion_tokens: number }) => ({
  input_tokens: u.prompt_tokens,
  input_tokens_details: { cached_tokens: 0 },
  output_tokens: u.completion_tokens,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: u.prompt_tokens + u.completion_tokens,
});

/** The Responses stream of a 'stream' behaviour: one output_text.delta per chunk, usage in response.completed. */
async function streamResponse(res: ServerResponse, record: StreamRecord, model: string, b: Extract<Behaviour, { kind: 'stream' }>): Promise<void> {
  let sequence = 0;
  const send = (type: string, payload: object) => {
    record.sent += 1;
    return res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...payload, sequence_number: sequence++ })}\n\n`);
  };
  const usage = b.usage === undefined ? { prompt_tokens: 10, completion_tokens: b.chunks.length } : b.usage;
  send('response.created', { response: responseObject(model, null, usage, 'in_progress') });
  send('response.in_progress', { response: responseObject(model, null, usage, 'in_progress') });
  send('response.output_item.added', { output_index: 0, item: messageItem('', 'in_progress') });
  send('response.content_part.added', { item_id: 'msg_scripted', output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
  for (const [i, delta] of b.chunks.entries()) {
    if (res.destroyed) return;
    if (b.dieAfter !== undefined && i >= b.dieAfter) {
      res.socket?.destroy();
      return;
    }
    send('response.output_text.delta', { item_id: 'msg_scripted', output_index: 0, content_index: 0, delta });
    if (b.delayMs) await sleep(b.delayMs);
  }
  const text = b.chunks.join('');
  send('response.output_text.done', { item_id: 'msg_scripted', output_index: 0, content_index: 0, text });
  send('response.content_part.done', { item_id: 'msg_scripted', output_index: 0, content_index: 0, part: { type: 'output_text', text, annotations: [] } });
  send('response.output_item.done', { output_index: 0, item: messageItem(text, 'completed') });
  send('response.completed', { response: responseObject(model, text, usage) });
  res.end();
  record.ended = true;
}

/** One word per run of voiced 20 ms frames, named after its pitch, timed in seconds from the start of `samples`. */
function toneWords(samples: Float32Array, sampleRate: number): { word: string; start: number; end: number }[] {
  const frame = Math.round(sampleRate * 0.02);
  const seconds = (at: number) => Math.round((at / sampleRate) * 1000) / 1000;
  const words: { word: string; start: number; end: number }[] = [];
  let burstStart = -1;
  const endBurst = (end: number) => {
    const hz = Math.round(zeroCrossingFrequency(samples.subarray(burstStart, end), sampleRate) / 10) * 10;
    words.push({ word: `tone${hz}`, start: seconds(burstStart), end: seconds(end) });
    burstStart = -1;
  };
  for (let at = 0; at < samples.length; at += frame) {
    const chunk = samples.subarray(at, at + frame);
    let energy = 0;
    for (const v of chunk) energy += v * v;
    const voiced = Math.sqrt(energy / chunk.length) > 0.05;
    if (voiced && burstStart < 0) burstStart = at;
    if (!voiced && burstStart >= 0) endBurst(at);
  }
  if (burstStart >= 0) endBurst(samples.length);
  return words;
}
