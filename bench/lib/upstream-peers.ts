// The scripted engine peers of bench/upstream-streaming.ts, in a process of their own (neither
// the gateway's nor the measuring client's event loop): Deepgram, Cartesia, ElevenLabs, the
// OpenAI Realtime API (GA dialect) and an OpenAI-compatible transcription server ('energy'
// words), all from test/support/scripted-*.ts, unchanged. Each peer records its connections;
// this process time-stamps when each engine connection of interest arrives and closes
// (performance.timeOrigin + performance.now(): comparable across processes once the client has
// measured the offset with GET /clock), and answers a small control API on a port of its own:
//   GET  /peers                 {deepgram|cartesia|elevenlabs|realtime|openai: {url, key}}
//   GET  /clock                 {now}
//   GET  /count?kind=K          {count}: connections of kind K so far (the next one is index count)
//   GET  /wait?kind=K&index=N&what=open|close[&timeoutMs=5000]
//                               {openedAt, closedAt, early} once connection N has arrived / closed
//                               (closedAt null on timeout); early: it closed before its answer
//                               was complete, where the peer records that (else null)
//   POST /openai-hold?on=1|0    holds (or not) every answer of POST /v1/audio/transcriptions until
//                               the client goes away (for the client-leaving measurement)
// Kinds: deepgram-speak (POST /v1/speak), deepgram-listen (WS /v1/listen), cartesia-tts
// (POST /tts/bytes), cartesia-stt (WS /stt/websocket), elevenlabs-tts (POST
// /v1/text-to-speech/{voice}/stream), realtime (WS /v1/realtime), openai-transcription
// (POST /v1/audio/transcriptions).
// Prints "listening <control url>" (bench/lib/processes.ts startTs).
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startScriptedCartesia } from '../../test/support/scripted-cartesia.ts';
import { startScriptedDeepgram } from '../../test/support/scripted-deepgram.ts';
import { startScriptedElevenLabs } from '../../test/support/scripted-elevenlabs.ts';
import { startScriptedRealtime } from '../../test/support/scripted-openai-realtime.ts';
import { startScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';

export const PEER_KINDS = ['deepgram-speak', 'deepgram-listen', 'cartesia-tts', 'cartesia-stt', 'elevenlabs-tts', 'realtime', 'openai-transcription'] as const;
export type PeerKind = (typeof PEER_KINDS)[number];

export interface PeerInfo {
  url: string;
  key: string;
}
export type Peers = Record<'deepgram' | 'cartesia' | 'elevenlabs' | 'realtime' | 'openai', PeerInfo>;

export interface ConnectionTimes {
  openedAt: number;
  closedAt: number | null;
  early: boolean | null;
}

const now = () => performance.timeOrigin + performance.now();

interface Tracked extends ConnectionTimes {
  closed: Promise<void>;
}

const connections = new Map<PeerKind, Tracked[]>(PEER_KINDS.map((k) => [k, []]));
const arrivalWaiters: (() => void)[] = [];

function track(kind: PeerKind, closed: Promise<boolean | null>): void {
  const entry = { openedAt: now(), closedAt: null, early: null } as Tracked;
  entry.closed = closed.then((early) => {
    entry.closedAt = now();
    entry.early = early;
  });
  connections.get(kind)!.push(entry);
  for (const wake of arrivalWaiters.splice(0)) wake();
}

/** Runs `fn` on every item a peer pushes onto one of its record lists (the peers push through the property each time). */
function onPush<T>(list: T[], fn: (item: T) => void): void {
  const push = list.push;
  list.push = function (this: T[], ...items: T[]) {
    const n = push.apply(this, items);
    for (const item of items) fn(item);
    return n;
  };
}

const KEYS = {
  deepgram: 'dg_bench_peer_key',
  cartesia: 'sk_car_bench_peer',
  elevenlabs: 'xi_bench_peer_key',
  realtime: 'sk-bench-realtime-peer',
  openai: 'sk-bench-openai-peer',
};

const [deepgram, cartesia, elevenlabs, realtime, openai] = await Promise.all([
  // 40 ms of tone per character (its default is 10), as ElevenLabs' peer: a 5,000-character answer
  // (9.6 MB at 24 kHz) outlasts the loopback socket buffers, so a client can leave while it streams.
  startScriptedDeepgram({ apiKey: KEYS.deepgram, ttsMsPerChar: 40 }),
  startScriptedCartesia({ apiKey: KEYS.cartesia }),
  startScriptedElevenLabs({ apiKey: KEYS.elevenlabs }),
  startScriptedRealtime({ dialect: 'ga', apiKey: KEYS.realtime }),
  startScriptedUpstream({ kind: 'ok' }),
]);
let holdTranscriptions = false;
openai.transcription = { kind: 'energy', hold: () => holdTranscriptions };

onPush(deepgram.received, (r) => {
  if (r.method === 'POST' && r.path === '/v1/speak')
    track(
      'deepgram-speak',
      r.closed.then(() => r.closedEarly),
    );
});
onPush(deepgram.sockets, (s) =>
  track(
    'deepgram-listen',
    s.closed.then(() => null),
  ),
);
onPush(cartesia.received, (r) => {
  if (r.method === 'POST' && r.path === '/tts/bytes')
    track(
      'cartesia-tts',
      r.closed.then(() => null),
    );
});
onPush(cartesia.sttSockets, (s) =>
  track(
    'cartesia-stt',
    s.closed.then(() => null),
  ),
);
onPush(elevenlabs.received, (r) => {
  if (r.method === 'POST' && r.path.startsWith('/v1/text-to-speech/')) track('elevenlabs-tts', r.closed);
});
onPush(realtime.sockets, (s) =>
  track(
    'realtime',
    s.closed.then(() => null),
  ),
);
onPush(openai.transcriptions, (t) =>
  track(
    'openai-transcription',
    t.done.then((d) => d.closedEarly),
  ),
);

const peers: Peers = {
  deepgram: { url: deepgram.url, key: KEYS.deepgram },
  cartesia: { url: cartesia.url, key: KEYS.cartesia },
  elevenlabs: { url: elevenlabs.url, key: KEYS.elevenlabs },
  realtime: { url: realtime.url, key: KEYS.realtime },
  openai: { url: openai.baseUrl, key: KEYS.openai },
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(kind: PeerKind, index: number, what: 'open' | 'close', timeoutMs: number): Promise<ConnectionTimes | null> {
  const deadline = now() + timeoutMs;
  const list = connections.get(kind)!;
  while (!list[index]) {
    const left = deadline - now();
    if (left <= 0) return null;
    await Promise.race([new Promise<void>((r) => arrivalWaiters.push(r)), sleep(left)]);
  }
  const entry = list[index]!;
  if (what === 'close') await Promise.race([entry.closed, sleep(Math.max(0, deadline - now()))]);
  return { openedAt: entry.openedAt, closedAt: entry.closedAt, early: entry.early };
}

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
};

const control = createServer((req, res) => {
  req.resume();
  const url = new URL(req.url ?? '/', 'http://control');
  const kind = url.searchParams.get('kind') as PeerKind | null;
  if (url.pathname === '/clock') return json(res, 200, { now: now() });
  if (url.pathname === '/peers') return json(res, 200, peers);
  if (url.pathname === '/openai-hold' && req.method === 'POST') {
    holdTranscriptions = url.searchParams.get('on') === '1';
    return json(res, 200, { hold: holdTranscriptions });
  }
  if (!kind || !connections.has(kind)) return json(res, 400, { error: `kind must be one of ${PEER_KINDS.join(', ')}` });
  if (url.pathname === '/count') return json(res, 200, { count: connections.get(kind)!.length });
  if (url.pathname === '/wait') {
    const index = Number(url.searchParams.get('index'));
    const what = url.searchParams.get('what') === 'close' ? 'close' : 'open';
    const timeoutMs = Number(url.searchParams.get('timeoutMs') ?? 5000);
    void waitFor(kind, index, what, timeoutMs).then((times) =>
      times ? json(res, 200, times) : json(res, 408, { error: `no ${kind} connection #${index} within ${timeoutMs} ms` }),
    );
    return;
  }
  json(res, 404, { error: 'not found' });
});
control.keepAliveTimeout = 60_000;
control.listen(0, '127.0.0.1', () => console.log(`listening http://127.0.0.1:${(control.address() as AddressInfo).port}`));
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(0));
