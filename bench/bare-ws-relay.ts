// The floor for a live STT relay in Node: a `ws` server that opens one engine socket per client
// socket (the client's query string passed on to BARE_RELAY_TARGET, the engine key in
// BARE_RELAY_AUTH) and pipes every frame both ways, nothing else (no auth, no metering, no
// translation). Client frames sent before the engine socket is open are queued.
// GET /stats answers its event-loop delay since the last call (bench/lib/loop-stats.ts).
// Listens on a free port and prints "listening <url>" (bench/lib/processes.ts startBundled, runtime 'node').
import { createServer } from 'node:http';
import WebSocket, { WebSocketServer } from 'ws';
import { loopStats } from './lib/loop-stats.ts';

const target = (process.env.BARE_RELAY_TARGET ?? 'ws://127.0.0.1:1/v1/listen').replace(/^http/, 'ws');
const auth = process.env.BARE_RELAY_AUTH ?? '';
const server = createServer((req, res) => {
  if (!loopStats(req, res)) res.writeHead(404).end();
});
const wss = new WebSocketServer({ server });
wss.on('connection', (client, req) => {
  const query = new URL(req.url ?? '/', 'http://relay').search;
  const engine = new WebSocket(`${target}${query}`, { headers: { authorization: auth } });
  const queued: [WebSocket.RawData, boolean][] = [];
  engine.on('open', () => {
    for (const [data, isBinary] of queued.splice(0)) engine.send(data, { binary: isBinary });
  });
  client.on('message', (data, isBinary) => {
    if (engine.readyState === WebSocket.OPEN) engine.send(data, { binary: isBinary });
    else queued.push([data, isBinary]);
  });
  engine.on('message', (data, isBinary) => client.send(data, { binary: isBinary }));
  client.on('close', () => engine.close());
  engine.on('close', () => client.close());
  client.on('error', () => engine.terminate());
  engine.on('error', () => client.terminate());
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  console.log(`listening http://127.0.0.1:${port}`);
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(0));
