// The abuse probes of issue 17, re-run against one real gateway (bundled as `svc` runs it, on a
// throw-away SQLite database, with the production admission caps): for each probe, what was
// refused, the gateway's RSS, balances where money is involved, and how /health answered
// meanwhile (a client polling it every 20 ms: the latency everyone else sees).
//
//   npx tsx bench/abuse.ts [--sockets 1000] [--only idle,money,regex,quota,proclone,revoke,slow,conns,
//                           outbuf,refs,names,oob,responses-refs,engine,clones] [--profile DIR] [--top 30]
//
// --profile DIR: the gateway runs with its inspector open and its main thread is profiled over the
// probes of issue 29 (bench/lib/cpu-profile.ts): the profile goes to DIR, its tables to stdout.
//
// Probes:
//   idle      1,000 STT sessions that only send keepalives, spread over orgs and keys, plus
//             one attempt past each key's and org's cap: refusals, RSS with all of them open.
//   money     an org with $0.01 fires 200 concurrent /tts/bytes of 5,000 characters (one
//             costs exactly $0.01): served, refused, final balance, engine processes, RSS.
//   regex     9 requests a second of `GET /health?` + 16,000 `?` for 5 s: /health p50/p99.
//   quota     30 concurrent 10 MB POST /blobs from one org: 201s and bytes stored vs 250 MiB.
//   proclone  a pro-clone listing one 10 MB clip 20 times, then 10 distinct 10 MB clips:
//             answers, and the longest /health stall while they are handled.
//   revoke    20 open STT sessions on one key; the key is revoked in the database: the time
//             from the revocation's commit to each session's close (max).
//   slow      on a second gateway with every connection bound at its default: 150 connections
//             that stop half-way through their headers, 150 anonymous POST /oauth2/token with 1
//             byte of a 500-byte body then silence, 150 whose body trickles in a byte every 2 s:
//             how each group is answered, when the last of each is closed, RSS, /health.
//   conns     on that gateway: 2,000 connections from one address at once, held silent:
//             how many are accepted and how many closed at once, RSS, /health.
// The probes of issue 29 (bench/lib/abuse-bounds.ts; LLM models `abuse-<mode>` on the hostile
// engine of bench/hostile-engine.ts, in its own process):
//   outbuf    a realtime client that stops reading and asks 250 times for a ~1 MB item; an
//             /stt/websocket client that stops reading and sends 200,000 one-byte invalid frames.
//   refs      response.create whose input names a ~1 MB item 300 times, 10 times.
//   names     120 function_call items with ~1 MB names.
//   oob       30 out-of-band responses on one session (an endless slow stream each): how many run,
//             and when the last engine stream ends after the client's close / the key's revocation.
//   responses-refs  /v1/responses with ~10 MiB of item_references to one stored ~16 KB item.
//   engine    an engine answering 64 MiB of JSON, 64 MiB of error body, an endless stream
//             (stream:false) and one endless SSE event.
//   clones    clones through a billing engine (`abuse-sonic`, the scripted Cartesia of
//             bench/lib/upstream-peers.ts) past the org's daily cap, then flite clones past its
//             voice cap (SVC_MAX_VOICES_PER_ORG lowered to 40 for the probe).
import { execFileSync, spawn } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import WebSocket from 'ws';
import { loadConfig } from '../server/config/env.ts';
import { openDatabase } from '../server/db/database.ts';
import { createApiKey } from '../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../server/services/keys/revoke-api-key.ts';
import { createOrg } from '../server/services/orgs/create-org.ts';
import { wavHeader } from '../gateway/audio/wav.ts';
import { startBundled } from './lib/processes.ts';
import { voiceFixture } from './lib/voice-fixture.ts';
import { BOUNDS_PROBES, runBoundsProbes, startBoundsEngines } from './lib/abuse-bounds.ts';
import { INSPECT_ENV, profileTables, profileWhile, saveProfile } from './lib/cpu-profile.ts';

const { values } = parseArgs({
  options: {
    sockets: { type: 'string', default: '1000' },
    only: { type: 'string', default: `idle,money,regex,quota,proclone,revoke,slow,conns,${BOUNDS_PROBES.join(',')}` },
    profile: { type: 'string' },
    top: { type: 'string', default: '30' },
  },
});
const SOCKETS = Number(values.sockets);
const ONLY = new Set(values.only.split(','));

// The production caps (the benchmark helper lifts them for throughput benchmarks).
const limits = loadConfig({}).limits;
const fx = await voiceFixture();
const bounds = await startBoundsEngines(fx.databaseUrl, ONLY);
const gateway = await startBundled('bench/gateway-server.ts', {
  ...fx.env,
  SVC_MAX_REQUESTS_PER_KEY: String(limits.requestsPerKey),
  SVC_MAX_STREAMS_PER_KEY: String(limits.streamsPerKey),
  SVC_MAX_STREAMS_PER_ORG: String(limits.streamsPerOrg),
  SVC_MAX_STREAMS: String(limits.streamsPerProcess),
  SVC_STT_MAX_DECODERS: String(limits.sttDecoders),
  ...bounds?.env,
  ...(values.profile ? INSPECT_ENV : {}),
});
const base = gateway.url;
const db = openDatabase(fx.databaseUrl);
const agent = new Agent({ connections: 64 });

const rssOf = (pid: number | undefined) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
const rssMb = () => rssOf(gateway.child.pid);
const engineProcesses = () => {
  try {
    return execFileSync('pgrep', ['-c', '-x', 'flite'], { encoding: 'utf8' }).trim();
  } catch {
    return '0';
  }
};

async function account(micros: bigint, keys = 1) {
  const org = await createOrg(db, { name: 'abuse', creditsMicros: micros });
  const made = [];
  for (let i = 0; i < keys; i++) made.push(await createApiKey(db.prisma, { orgId: org.id, name: `k${i}`, rateLimitRpm: 1_000_000 }));
  return { orgId: org.id, keys: made };
}
const usd = (micros: bigint) => (Number(micros) / 1e6).toFixed(6);

/** Polls /health every 20 ms until stopped: the latency any other client sees meanwhile. */
function watchHealth(url = base, dispatcher = agent) {
  const latencies: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const t = performance.now();
      const res = await request(`${url}/health`, { dispatcher });
      await res.body.dump();
      latencies.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return async () => {
    running = false;
    await loop;
    const sorted = [...latencies].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
    return `/health p50 ${at(0.5).toFixed(1)} ms, p99 ${at(0.99).toFixed(1)} ms, max ${(sorted.at(-1) ?? NaN).toFixed(1)} ms (${sorted.length} polls)`;
  };
}

function openStt(key: string): Promise<{ ws: WebSocket; status: number; closed: Promise<{ code: number; at: number }> }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/stt/websocket?model=local-stt&api_key=${key}`);
    const closed = new Promise<{ code: number; at: number }>((r) => ws.once('close', (code) => r({ code, at: performance.now() })));
    ws.on('error', () => {});
    ws.once('open', () => resolve({ ws, status: 101, closed }));
    ws.once('unexpected-response', (req, res) => {
      req.destroy();
      resolve({ ws, status: res.statusCode ?? 0, closed });
    });
  });
}

const wavOf = (bytes: number) =>
  Buffer.concat([wavHeader({ sampleRate: 16000, channels: 1, encoding: 'pcm_s16le', dataByteLength: bytes }), randomBytes(bytes)]);

console.log(`abuse probes against one gateway (SQLite, 2 cores); caps: ${JSON.stringify(limits)}`);
console.log(`idle gateway RSS ${rssMb().toFixed(0)} MB\n`);

if (ONLY.has('idle')) {
  const perOrg = limits.streamsPerOrg;
  const perKey = limits.streamsPerKey;
  const orgs = Math.ceil(SOCKETS / perOrg);
  const rssBefore = rssMb();
  const stop = watchHealth();
  const open: WebSocket[] = [];
  let refusedKey = 0;
  let refusedOrg = 0;
  for (let o = 0; o < orgs; o++) {
    const want = Math.min(perOrg, SOCKETS - open.length);
    const a = await account(1_000_000_000n, Math.ceil(want / perKey));
    const batch = await Promise.all(Array.from({ length: want }, (_, i) => openStt(a.keys[Math.floor(i / perKey)]!.key)));
    for (const s of batch) if (s.status === 101) open.push(s.ws);
    // One more on a full key, one more on the full org (a new key of it).
    if ((await openStt(a.keys[0]!.key)).status === 429) refusedKey++;
    const extra = await createApiKey(db.prisma, { orgId: a.orgId, name: 'extra', rateLimitRpm: 1_000_000 });
    if (want === perOrg && (await openStt(extra.key)).status === 429) refusedOrg++;
  }
  const keepalive = setInterval(() => {
    for (const ws of open) if (ws.readyState === WebSocket.OPEN) ws.send('{"type":"keepalive"}');
  }, 5_000);
  await new Promise((r) => setTimeout(r, 3_000));
  const rssOpen = rssMb();
  clearInterval(keepalive);
  const health = await stop();
  for (const ws of open) ws.close();
  console.log(
    `idle: ${open.length} idle sessions open (keepalives only); past a full key refused ${refusedKey}/${orgs} (429), past a full org ${refusedOrg} (429)`,
  );
  console.log(`      RSS ${rssBefore.toFixed(0)} MB before, ${rssOpen.toFixed(0)} MB with them open (target <= 500 MB); ${health}\n`);
  await new Promise((r) => setTimeout(r, 2_000));
}

if (ONLY.has('money')) {
  const a = await account(10_000n); // $0.01
  const text = 'The quick brown fox jumps over the lazy dog. '.repeat(112).slice(0, 5000);
  const rssBefore = rssMb();
  let peakRss = rssBefore;
  let peakEngines = 0;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, rssMb());
    peakEngines = Math.max(peakEngines, Number(engineProcesses()));
  }, 50);
  const stop = watchHealth();
  const statuses = await Promise.all(
    Array.from({ length: 200 }, async () => {
      const res = await request(`${base}/tts/bytes`, {
        dispatcher: agent,
        method: 'POST',
        headers: { authorization: `Bearer ${a.keys[0]!.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model_id: 'local-flite',
          transcript: text,
          voice: { mode: 'id', id: 'flite-slt' },
          output_format: { container: 'wav', sample_rate: 16000, encoding: 'pcm_s16le' },
        }),
      });
      await res.body.dump();
      return res.statusCode;
    }),
  );
  clearInterval(sampler);
  const health = await stop();
  const count = (s: number) => statuses.filter((x) => x === s).length;
  const org = await db.prisma.org.findUniqueOrThrow({ where: { id: a.orgId } });
  console.log(
    `money: $0.01 org, 200 concurrent 5,000-character syntheses ($0.01 each): ${count(200)} served, ${count(402)} refused 402, ${count(429)} refused 429, other ${200 - count(200) - count(402) - count(429)}`,
  );
  console.log(
    `       balance $${usd(org.balanceMicros)} (held ${usd(org.heldMicros)}), peak engine processes ${peakEngines}, RSS ${rssBefore.toFixed(0)} -> peak ${peakRss.toFixed(0)} MB; ${health}\n`,
  );
}

if (ONLY.has('regex')) {
  const url = `${base}/health?${'?'.repeat(16_000)}`;
  const stop = watchHealth();
  const started = performance.now();
  let sent = 0;
  while (performance.now() - started < 5_000) {
    await request(url, { dispatcher: agent }).then((r) => r.body.dump());
    sent++;
    await new Promise((r) => setTimeout(r, 111));
  }
  console.log(`regex: ${sent} requests of GET /health? + 16,000 '?' over 5 s; ${await stop()} (target p99 <= 5 ms); RSS ${rssMb().toFixed(0)} MB\n`);
}

if (ONLY.has('quota')) {
  const a = await account(1_000_000n);
  const clip = wavOf(10 * 1000 * 1000);
  const stop = watchHealth();
  const statuses = await Promise.all(
    Array.from({ length: 30 }, async () => {
      const res = await request(`${base}/blobs`, {
        dispatcher: agent,
        method: 'POST',
        headers: { authorization: `Bearer ${a.keys[0]!.key}`, 'content-type': 'audio/wav' },
        body: clip,
      });
      await res.body.dump();
      return res.statusCode;
    }),
  );
  const health = await stop();
  const stored = await db.prisma.blob.aggregate({ where: { orgId: a.orgId, deletedAt: null }, _sum: { sizeBytes: true } });
  const bytes = stored._sum.sizeBytes ?? 0;
  console.log(
    `quota: 30 concurrent 10 MB uploads: ${statuses.filter((s) => s === 201).length} stored (201), ${statuses.filter((s) => s === 413).length} refused (413); ${(bytes / 1024 / 1024).toFixed(1)} MiB stored against the 250 MiB quota; ${health}; RSS ${rssMb().toFixed(0)} MB\n`,
  );
}

if (ONLY.has('proclone')) {
  const a = await account(1_000_000n);
  const auth = { authorization: `Bearer ${a.keys[0]!.key}` };
  const upload = async () => {
    const res = await request(`${base}/blobs`, {
      dispatcher: agent,
      method: 'POST',
      headers: { ...auth, 'content-type': 'audio/wav' },
      body: wavOf(10 * 1000 * 1000),
    });
    return ((await res.body.json()) as { id: string }).id;
  };
  const one = await upload();
  const many = [one];
  for (let i = 1; i < 10; i++) many.push(await upload());
  for (const [label, ids] of [
    ['one 10 MB clip listed 20 times', Array(20).fill(one)],
    ['10 distinct 10 MB clips', many],
  ] as const) {
    const stop = watchHealth();
    const res = await request(`${base}/voices/pro-clone`, {
      dispatcher: agent,
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'probe', blob_ids: ids }),
    });
    const body = await res.body.text();
    await new Promise((r) => setTimeout(r, 500));
    console.log(`proclone: ${label}: ${res.statusCode} ${body.slice(0, 140)}; ${await stop()}; RSS ${rssMb().toFixed(0)} MB`);
  }
  console.log('');
}

if (ONLY.has('revoke')) {
  const a = await account(1_000_000_000n);
  const sessions = await Promise.all(Array.from({ length: 20 }, () => openStt(a.keys[0]!.key)));
  await new Promise((r) => setTimeout(r, 500));
  await revokeApiKey(db.prisma, { id: a.keys[0]!.id });
  const revokedAt = performance.now();
  const closes = await Promise.all(sessions.map((s) => s.closed));
  const after = closes.map((c) => c.at - revokedAt);
  console.log(
    `revoke: ${sessions.filter((s) => s.status === 101).length} open sessions, close codes ${[...new Set(closes.map((c) => c.code))].join(',')}; closed ${Math.min(...after).toFixed(0)}-${Math.max(...after).toFixed(0)} ms after the revocation committed (target <= 1000 ms)\n`,
  );
}

if (ONLY.has('slow') || ONLY.has('conns')) {
  // Every connection bound at its default (bench/lib/processes.ts lifts the connection caps for the
  // throughput benchmarks, and the first gateway keeps them lifted for the 1,000 idle sessions).
  const defaults = loadConfig({}).http;
  const METRICS_TOKEN = 'abuse-probe-metrics-token';
  const bounded = await startBundled('bench/gateway-server.ts', {
    ...fx.env,
    // The registration routes' limit per address (60 a minute) would answer most probes 429 first.
    SVC_AGENT_AUTH_IP_RPM: '1000000',
    SVC_METRICS_TOKEN: METRICS_TOKEN,
    SVC_MAX_CONNECTIONS: String(defaults.maxConnections),
    SVC_MAX_CONNECTIONS_PER_ADDRESS: String(defaults.maxConnectionsPerAddress),
  });
  const { hostname, port } = new URL(bounded.url);
  // Its own pool, opened before the probes: the poller's connection is one of the address's.
  const poller = new Agent({ connections: 1 });
  await request(`${bounded.url}/health`, { dispatcher: poller }).then((r) => r.body.dump());

  /** A raw connection; resolves with what it received and when it closed. */
  const rawConnection = (send: (socket: Socket) => void) =>
    new Promise<{ socket: Socket; closed: Promise<{ text: string; at: number }> }>((resolve) => {
      const socket = connect(Number(port), hostname);
      let text = '';
      socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
      socket.on('error', () => {});
      const closed = new Promise<{ text: string; at: number }>((r) => socket.once('close', () => r({ text, at: performance.now() })));
      socket.once('connect', () => send(socket));
      resolve({ socket, closed });
    });
  /** The gateway's own count of connections it closed, by reason. */
  const droppedConnections = async () => {
    const res = await request(`${bounded.url}/metrics`, { dispatcher: poller, headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    const text = await res.body.text();
    return Object.fromEntries([...text.matchAll(/^svc_connections_dropped_total\{reason="(\w+)"\} (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
  };
  const statusOf = (text: string) => /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 'none';
  const peakRss = (pid: number | undefined) => {
    let peak = rssOf(pid);
    const timer = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 50);
    return () => {
      clearInterval(timer);
      return peak;
    };
  };

  if (ONLY.has('slow')) {
    const token = 'POST /oauth2/token HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/x-www-form-urlencoded\r\n';
    const groups = {
      'headers stop half-way': (s: Socket) => s.write(token),
      '1 byte of a 500-byte body, then silence': (s: Socket) => s.write(`${token}Content-Length: 500\r\n\r\ng`),
      'body trickles a byte every 2 s': (s: Socket) => {
        s.write(`${token}Content-Length: 500\r\n\r\n`);
        const timer = setInterval(() => s.write('x'), 2_000);
        s.once('close', () => clearInterval(timer));
      },
    };
    const rssBefore = rssOf(bounded.child.pid);
    const peak = peakRss(bounded.child.pid);
    const stop = watchHealth(bounded.url, poller);
    const started = performance.now();
    const results = await Promise.all(
      Object.entries(groups).map(async ([name, send]) => {
        const connections = await Promise.all(Array.from({ length: 150 }, () => rawConnection(send)));
        const closes = await Promise.all(connections.map((c) => c.closed));
        const statuses = [...new Set(closes.map((c) => statusOf(c.text)))].join(',');
        return `${name}: ${closes.length} answered ${statuses}, last closed ${((Math.max(...closes.map((c) => c.at)) - started) / 1000).toFixed(1)} s after opening`;
      }),
    );
    const health = await stop();
    console.log(`slow: ${results.join('; ')}; the gateway's count: ${JSON.stringify(await droppedConnections())}`);
    console.log(`      RSS ${rssBefore.toFixed(0)} MB before, peak ${peak().toFixed(0)} MB (target growth <= 50 MB); ${health} (target p99 <= 50 ms)\n`);
  }

  if (ONLY.has('conns')) {
    const rssBefore = rssOf(bounded.child.pid);
    const peak = peakRss(bounded.child.pid);
    const stop = watchHealth(bounded.url, poller);
    // From another process, so that opening them does not hold up this one's /health poller.
    const flood = spawn(
      process.execPath,
      [
        '-e',
        `const net = require('node:net'); const sockets = [];
         for (let i = 0; i < 2000; i++) { const s = net.connect(${port}, '${hostname}'); s.on('error', () => {}); sockets.push(s); }
         setTimeout(() => { for (const s of sockets) s.destroy(); }, 6000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    // Refused connections are closed at once; the accepted ones stay until their headers time out
    // (10 s). Connections past the listen backlog are retried by the client's kernel for a few seconds.
    await new Promise((r) => setTimeout(r, 5_000));
    const rssHeld = rssOf(bounded.child.pid);
    const refused = (await droppedConnections()).connections_per_address ?? 0;
    await new Promise((r) => flood.once('exit', r));
    const health = await stop();
    console.log(
      `conns: 2,000 connections from one address: ${refused} closed at once by the gateway, the rest held (cap ${defaults.maxConnectionsPerAddress} per address, the /health poller's included)`,
    );
    console.log(`       RSS ${rssBefore.toFixed(0)} MB before, ${rssHeld.toFixed(0)} MB with them held, peak ${peak().toFixed(0)} MB; ${health}\n`);
  }
  bounded.child.kill('SIGTERM');
}

if (bounds) {
  const probes = () =>
    runBoundsProbes(
      {
        base,
        agent,
        engine: bounds.engine,
        rssMb,
        // utime + stime, fields 14 and 15 of /proc/<pid>/stat, in clock ticks (100 a second).
        cpuMs: () => {
          const fields = readFileSync(`/proc/${gateway.child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
          return (Number(fields[11]) + Number(fields[12])) * 10;
        },
        key: async () => {
          const k = (await account(1_000_000_000n)).keys[0]!;
          return { key: k.key, id: k.id };
        },
        revoke: async (id) => void (await revokeApiKey(db.prisma, { id })),
      },
      ONLY,
    );
  if (values.profile) {
    const { profile } = await profileWhile(gateway.child.pid!, probes);
    console.log(`gateway main thread over the probes of issue 29 (profile in ${saveProfile(values.profile, 'abuse-bounds', profile)}), CPU in us\n`);
    console.log(profileTables(profile, 1, 'run', Number(values.top)));
  } else await probes();
  bounds.stop();
}

await db.close();
// Its data directory goes once it has exited: a voice preview still being written would make
// the removal fail (ENOTEMPTY).
const exited = new Promise((r) => gateway.child.once('exit', r));
gateway.child.kill('SIGTERM');
await exited;
fx.remove();
process.exit(0);
