// Fast loopback OpenAI-compatible speech upstreams for the load benchmark, in their own
// process (so they do not share an event loop with the load generator):
//   BENCH_VOICE=tts  POST /v1/audio/speech          -> BENCH_TTS_SECONDS (0.5) of 24 kHz s16le PCM
//   BENCH_VOICE=stt  POST /v1/audio/transcriptions  -> a fixed verbose_json transcript
// Both answer GET /v1/models (the gateway's health check). Prints "listening <base url>".
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const mode = process.env.BENCH_VOICE === 'stt' ? 'stt' : 'tts';
const seconds = Number(process.env.BENCH_TTS_SECONDS ?? 0.5);
const pcm = Buffer.alloc(Math.round(24000 * seconds) * 2);
for (let i = 0; i < pcm.length / 2; i++) pcm.writeInt16LE(Math.round(0.3 * 32767 * Math.sin((2 * Math.PI * 220 * i) / 24000)), i * 2);
const transcript = JSON.stringify({
  text: 'hello world',
  words: [
    { word: 'hello', start: 0.1, end: 0.4 },
    { word: 'world', start: 0.5, end: 0.9 },
  ],
});

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: `bench-${mode}`, object: 'model' }] }));
    } else if (mode === 'tts' && req.method === 'POST' && req.url === '/v1/audio/speech') {
      res.writeHead(200, { 'content-type': 'audio/pcm', 'content-length': pcm.length }).end(pcm);
    } else if (mode === 'stt' && req.method === 'POST' && req.url === '/v1/audio/transcriptions') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(transcript);
    } else {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
    }
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(`listening http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`));
