// An engine's WebSocket takes turns of the event loop, as a client's does: an engine that floods
// the gateway with messages (a scripted one, sending 1 MiB of transcripts at once and closing)
// has at most BYTES_PER_TURN of them (and the message that passes it) handed on per turn, every
// one in order, and its close (or a socket error) only after the last of them. For each protocol that reads an
// engine's socket: Deepgram, Cartesia, and the OpenAI Realtime protocol (vLLM's dialect, which
// needs no session handshake).
import { once } from 'node:events';
import type { AddressInfo, Socket } from 'node:net';
import { describe, expect, it, onTestFinished } from 'vitest';
import { WebSocketServer } from 'ws';
import { loadConfig } from '../../server/config/env.ts';
import type { StreamingTranscriptionOptions, TranscriptionStream } from './contract.ts';
import { BYTES_PER_TURN } from './loop-turns.ts';
import { cartesia } from './protocols/cartesia/index.ts';
import { deepgram } from './protocols/deepgram.ts';
import { openaiRealtime } from './protocols/openai-realtime/index.ts';

const engines = loadConfig({ SVC_DATA_DIR: '/tmp' }).engines;
const FLOOD = 256;
const PAD = 'x'.repeat(4000);
type Ending = 'close' | 'a malformed frame';

/** Turns of the event loop, counted in its check phase, until stopped. */
function turnCounter() {
  let turn = 0;
  let counting = true;
  const count = () => {
    turn++;
    if (counting) setImmediate(count);
  };
  setImmediate(count);
  return { now: () => turn, stop: () => (counting = false) };
}

/**
 * An engine that answers the gateway's first message with `FLOOD` messages sent at once, then
 * closes (1000) or sends a frame ws refuses (opcode 3: the socket errors, then closes 1002).
 */
async function floodingEngine(message: (i: number) => object, ending: Ending) {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  onTestFinished(async () => {
    for (const c of server.clients) c.terminate();
    await new Promise((r) => server.close(r));
  });
  await once(server, 'listening');
  const sent: string[] = Array.from({ length: FLOOD }, (_, i) => JSON.stringify({ ...message(i), pad: PAD }));
  server.on('connection', (ws) => {
    ws.once('message', () => {
      for (const m of sent) ws.send(m);
      if (ending === 'close') ws.close(1000);
      else (ws as unknown as { _socket: Socket })._socket.write(Buffer.from([0x83, 0x00]));
    });
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sent };
}

const options = (sampleRate: number): StreamingTranscriptionOptions => ({
  signal: new AbortController().signal,
  timeoutMs: 5000,
  sampleRate,
  language: 'en',
  keyterms: [],
  engineTurns: false,
});

const base = { id: 'ups_test', modelId: 'stt-test', apiKey: 'key' };

const cases: { name: string; message: (i: number) => object; open: (url: string) => Promise<TranscriptionStream> }[] = [
  {
    name: 'deepgram',
    message: (i) => ({ type: 'Results', is_final: false, channel: { alternatives: [{ transcript: `w${i}`, words: [] }] } }),
    open: (url) =>
      deepgram
        .create(engines)
        .streamingTranscription.open({ ...base, url, protocol: 'deepgram', upstreamModel: 'nova-3', settings: deepgram.settings.parse({}) }, options(16000)),
  },
  {
    name: 'cartesia',
    message: (i) => ({ type: 'transcript', is_final: false, text: `w${i}` }),
    open: (url) =>
      cartesia
        .create(engines)
        .streamingTranscription.open(
          { ...base, url, protocol: 'cartesia', upstreamModel: 'ink-whisper', settings: cartesia.settings.parse({}) },
          options(16000),
        ),
  },
  {
    name: 'openai-realtime (vllm)',
    message: (i) => ({ type: 'transcription.delta', delta: ` w${i}` }),
    open: (url) =>
      openaiRealtime
        .create(engines)
        .streamingTranscription.open(
          { ...base, url, protocol: 'openai-realtime', upstreamModel: 'voxtral', settings: openaiRealtime.settings.parse({ dialect: 'vllm' }) },
          options(16000),
        ),
  },
];

describe('an engine WebSocket', () => {
  for (const { name, message, open } of cases) {
    for (const ending of ['close', 'a malformed frame'] as const) {
      it(`${name}: a flood then ${ending} is handed on at most BYTES_PER_TURN (and one message) per turn of the event loop, in order, the end after it`, async () => {
        const engine = await floodingEngine(message, ending);
        const stream = await open(engine.url);
        onTestFinished(() => stream.close());
        const turns = turnCounter();
        const handedOn: { text: string; turn: number }[] = [];
        stream.write(new Int16Array(1600));
        try {
          for await (const event of stream.events) {
            if (event.type === 'transcript') handedOn.push({ text: event.text, turn: turns.now() });
          }
        } catch {
          // The engine's close or error as the stream's failure (Cartesia's and the Realtime protocol's close, any error).
        }
        turns.stop();
        // Every message, in order, before the stream ended.
        expect(handedOn.map((e) => e.text.split(' ').at(-1))).toEqual(Array.from({ length: FLOOD }, (_, i) => `w${i}`));
        const size = Buffer.byteLength(engine.sent[FLOOD - 1]!);
        const bytesByTurn = new Map<number, number>();
        handedOn.forEach(({ turn }, i) => bytesByTurn.set(turn, (bytesByTurn.get(turn) ?? 0) + Buffer.byteLength(engine.sent[i]!)));
        expect(Math.max(...bytesByTurn.values())).toBeLessThanOrEqual(BYTES_PER_TURN + size);
        const total = engine.sent.reduce((n, m) => n + Buffer.byteLength(m), 0);
        expect(bytesByTurn.size).toBeGreaterThanOrEqual(Math.floor(total / (BYTES_PER_TURN + size)));
      });
    }
  }
});
