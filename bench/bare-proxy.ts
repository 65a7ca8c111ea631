// The floor for any Node gateway: node:http in, an undici pool out, bytes piped both ways,
// nothing else. Listens on a free port and prints "listening <url>".
import { createServer } from 'node:http';
import { Pool } from 'undici';

const target = new URL(process.env.BARE_PROXY_TARGET ?? 'http://127.0.0.1:1');
const pool = new Pool(target.origin, { connections: 256, pipelining: 1, keepAliveTimeout: 30_000 });
const prefix = target.pathname.replace(/\/v1\/?$/, '');

const server = createServer(async (req, res) => {
  try {
    const upstream = await pool.request({
      path: prefix + (req.url ?? '/'),
      method: req.method as 'GET' | 'POST',
      headers: { 'content-type': req.headers['content-type'] ?? 'application/json' },
      body: req.method === 'GET' ? null : req,
    });
    res.writeHead(upstream.statusCode, { 'content-type': String(upstream.headers['content-type'] ?? '') });
    for await (const chunk of upstream.body) res.write(chunk);
    res.end();
  } catch {
    if (!res.headersSent) res.writeHead(502);
    res.end();
  }
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  console.log(`listening http://127.0.0.1:${port}`);
});
// Exit normally on a signal, so that exit-time hooks (a --cpu-prof profile) run.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(0));
