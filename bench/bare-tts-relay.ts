// The floor for a TTS socket in Node: a `ws` server that takes Cartesia-shaped generation
// requests ({context_id, transcript, continue}) and, for each transcript, POSTs it to a
// Cartesia-protocol engine's /tts/bytes (BARE_TTS_ENGINE, key BARE_TTS_KEY, voice
// BARE_TTS_VOICE) and relays the audio as Cartesia's `chunk` events (base64 in JSON), a
// context's requests one after another, `done` after its last (continue: false). Nothing else:
// no auth, no validation, no cutting into sentences, no metering, no sample alignment.
// GET /stats answers its event-loop delay since the last call (bench/lib/loop-stats.ts).
// Listens on a free port and prints "listening <url>" (bench/lib/processes.ts startBundled, runtime 'node').
import { createServer } from 'node:http';
import { Agent, request } from 'undici';
import { WebSocketServer } from 'ws';
import { loopStats } from './lib/loop-stats.ts';

const engine = process.env.BARE_TTS_ENGINE ?? 'http://127.0.0.1:1';
const key = process.env.BARE_TTS_KEY ?? '';
const voice = process.env.BARE_TTS_VOICE ?? 'voice';
const agent = new Agent({ connections: 1024, keepAliveTimeout: 30_000 });

const server = createServer((req, res) => {
  if (!loopStats(req, res)) res.writeHead(404).end();
});
const wss = new WebSocketServer({ server });
wss.on('connection', (client) => {
  const contexts = new Map<string, Promise<void>>();
  client.on('message', (data) => {
    const m = JSON.parse(data.toString()) as { context_id: string; transcript?: string; continue?: boolean; model_id: string; output_format: unknown };
    const id = m.context_id;
    let chain = contexts.get(id) ?? Promise.resolve();
    if (m.transcript) chain = chain.then(() => speak(id, m.model_id, m.transcript!, m.output_format));
    if (m.continue) return void contexts.set(id, chain);
    contexts.delete(id);
    void chain.then(() => client.send(JSON.stringify({ type: 'done', done: true, status_code: 200, context_id: id })));
  });

  async function speak(contextId: string, model: string, transcript: string, outputFormat: unknown): Promise<void> {
    const res = await request(`${engine}/tts/bytes`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'cartesia-version': '2026-03-01' },
      body: JSON.stringify({ model_id: model, transcript, voice: { mode: 'id', id: voice }, output_format: outputFormat }),
    });
    for await (const chunk of res.body) {
      const data = (chunk as Buffer).toString('base64');
      client.send(JSON.stringify({ type: 'chunk', data, done: false, status_code: 206, context_id: contextId }));
    }
  }
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  console.log(`listening http://127.0.0.1:${port}`);
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(0));
