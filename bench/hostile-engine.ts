// A scripted OpenAI-compatible engine for bench/abuse.ts, in a process of its own, with one
// behaviour per base URL (`<url>/<mode>/v1`), answering as OpenAI's chat completions API does
// (https://platform.openai.com/docs/api-reference/chat) unless the mode says otherwise:
//   ok        a short completion (streamed as SSE when asked), with usage
//   long      the same, but the completion is 16,000 characters (an item worth referring to)
//   slow      a stream of one-word deltas, one every 50 ms, without end (until the gateway hangs up)
//   huge      200 status, a JSON answer of 64 MiB
//   error     500 status, an error body of 64 MiB
//   endless   200 status, an SSE stream of small deltas as fast as the gateway reads them, without end
//   bigevent  200 status, one SSE event that never ends (data without a newline)
// GET <mode>/v1/models answers the health check. GET /open says how many answers are still being
// written ({open, maxOpen, lastClosedAt}, times as performance.timeOrigin + performance.now());
// POST /reset zeroes maxOpen. Prints "listening <url>" (bench/lib/processes.ts startTs).
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

const now = () => performance.timeOrigin + performance.now();
let open = 0;
let maxOpen = 0;
let lastClosedAt = 0;
const MiB = 1024 * 1024;

const chunk = (content: string) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

/** Writes `next()` until it is null (then ends) or the gateway hangs up; `everyMs` between writes (0: as fast as it reads). */
function pour(res: ServerResponse, next: () => string | null, everyMs: number) {
  open++;
  maxOpen = Math.max(maxOpen, open);
  let done = false;
  res.once('close', () => {
    done = true;
    open--;
    lastClosedAt = now();
  });
  const write = () => {
    while (!done) {
      const piece = next();
      if (piece === null) return void res.end();
      if (!res.write(piece)) return void res.once('drain', write);
      if (everyMs > 0) return void setTimeout(write, everyMs);
    }
  };
  write();
}

const server = createServer((req, res) => {
  const [, mode, rest] = /^\/(\w+)(\/.*)?$/.exec(req.url ?? '') ?? [];
  if (req.url === '/open') return void res.end(JSON.stringify({ open, maxOpen, lastClosedAt }));
  if (req.url === '/reset') {
    maxOpen = open;
    return void res.end('{}');
  }
  let body = '';
  req.on('data', (d: Buffer) => (body += d.toString()));
  req.on('end', () => {
    if (rest === '/v1/models') return void res.end(JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model' }] }));
    if (rest !== '/v1/chat/completions') return void res.writeHead(404).end('{"error":{"message":"not found"}}');
    const stream = (JSON.parse(body) as { stream?: boolean }).stream === true;
    const sse = { 'content-type': 'text/event-stream' };
    switch (mode) {
      case 'ok':
      case 'long': {
        const content = mode === 'long' ? 'z'.repeat(16_000) : 'Fine.';
        if (stream) {
          res.writeHead(200, sse);
          res.write(chunk(content));
          res.write(
            `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 } })}\n\n`,
          );
          return void res.end('data: [DONE]\n\n');
        }
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            id: 'c1',
            object: 'chat.completion',
            created: 0,
            model: 'm',
            choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
            usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
          }),
        );
      }
      case 'slow':
        res.writeHead(200, sse);
        return pour(res, () => chunk(' word'), 50);
      case 'huge': {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': 64 * MiB });
        const piece = `{"pad":"${'x'.repeat(MiB - 10)}"}`.slice(0, MiB);
        let sent = 0;
        return pour(res, () => (sent++ < 64 ? piece : null), 0);
      }
      case 'error': {
        res.writeHead(500, { 'content-type': 'application/json', 'content-length': 64 * MiB });
        const piece = 'e'.repeat(MiB);
        let sent = 0;
        return pour(res, () => (sent++ < 64 ? piece : null), 0);
      }
      case 'endless':
        res.writeHead(200, sse);
        return pour(res, () => chunk(' word'), 0);
      case 'bigevent':
        res.writeHead(200, sse);
        res.write('data: {"pad":"');
        return pour(res, () => 'x'.repeat(64 * 1024), 0);
      default:
        res.writeHead(404).end('{"error":{"message":"no such mode"}}');
    }
  });
});
server.listen(0, '127.0.0.1', () => console.log(`listening http://127.0.0.1:${(server.address() as AddressInfo).port}`));
