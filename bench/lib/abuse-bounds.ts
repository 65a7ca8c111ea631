// The probes of issue 29 for bench/abuse.ts (one finding each; see its header): a client that
// stops reading, realtime `input` references and function names, out-of-band responses, the
// /v1/responses item references, a hostile engine (bench/hostile-engine.ts) and paid clones.
// Each reports what was refused, the gateway's RSS (peak, sampled every 50 ms) and /health.
import { spawn } from 'node:child_process';
import type { Agent } from 'undici';
import { request } from 'undici';
import WebSocket from 'ws';
import { checkProtocol } from '../../gateway/upstreams/protocols/index.ts';
import { loadConfig } from '../../server/config/env.ts';
import { openDatabase } from '../../server/db/database.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { speak } from '../../test/support/voice-routes.ts';
import { startTs } from './processes.ts';

export const BOUNDS_PROBES = ['outbuf', 'refs', 'names', 'oob', 'responses-refs', 'engine', 'clones'] as const;

// The daily cap at its default; the voice cap lowered so that the probe reaches it quickly.
const CLONE_CAPS = { voices: 40, clonesPerDay: loadConfig({}).voiceLimits.maxEngineClonesPerDay };

/**
 * The engines these probes need, in processes of their own, and their models in the database
 * (before the gateway starts): null when none of the probes is asked for. `env`: the gateway's.
 */
export async function startBoundsEngines(databaseUrl: string, only: Set<string>) {
  if (!BOUNDS_PROBES.some((p) => only.has(p))) return null;
  const hostile = await startTs('bench/hostile-engine.ts');
  const peers = only.has('clones') ? await startTs('bench/lib/upstream-peers.ts') : null;
  const cartesia = peers ? ((await (await request(`${peers.url}/peers`)).body.json()) as { cartesia: { url: string; key: string } }).cartesia : null;
  const db = openDatabase(databaseUrl);
  if (cartesia)
    await upsertModel(db.prisma, checkProtocol, {
      id: 'abuse-sonic',
      modality: 'tts',
      prices: { picoPerChar: 1_000_000n },
      upstream: { url: cartesia.url, protocol: 'cartesia', upstreamModel: 'sonic-3', apiKeyEnv: 'ABUSE_CARTESIA_KEY' },
    });
  for (const mode of ['ok', 'long', 'slow', 'huge', 'error', 'endless', 'bigevent'])
    await upsertModel(db.prisma, checkProtocol, {
      id: `abuse-${mode}`,
      modality: 'llm',
      prices: { inputPicoPerToken: 150_000n, outputPicoPerToken: 600_000n },
      upstream: { url: `${hostile.url}/${mode}/v1`, protocol: 'openai' },
    });
  await db.close();
  return {
    engine: hostile.url,
    env: {
      SVC_MAX_VOICES_PER_ORG: String(CLONE_CAPS.voices),
      SVC_MAX_ENGINE_CLONES_PER_ORG_PER_DAY: String(CLONE_CAPS.clonesPerDay),
      ABUSE_CARTESIA_KEY: cartesia?.key ?? '',
    },
    stop() {
      hostile.child.kill('SIGTERM');
      peers?.child.kill('SIGTERM');
    },
  };
}

export interface ProbeContext {
  base: string;
  agent: Agent;
  /** The hostile engine's control URL. */
  engine: string;
  rssMb(): number;
  /** CPU time the gateway process has used so far (user + system), ms. */
  cpuMs(): number;
  /** A fresh org with ample credit and one key. */
  key(): Promise<{ key: string; id: string }>;
  revoke(id: string): Promise<void>;
}

/**
 * Polls /health every 20 ms from a process of its own (this one's event loop is busy building
 * and sending the abuse) until stopped: the latency any other client sees meanwhile.
 */
function watchHealth(ctx: ProbeContext): () => Promise<string> {
  const poller = spawn(
    process.execPath,
    [
      '-e',
      `const http = require('node:http'); const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
       const latencies = []; let running = true;
       process.stdin.on('data', () => (running = false));
       (async () => {
         while (running) {
           const t = performance.now();
           await new Promise((r) => http.get('${ctx.base}/health', { agent }, (res) => { res.resume(); res.on('end', r); }).on('error', r));
           latencies.push(performance.now() - t);
           await new Promise((r) => setTimeout(r, 20));
         }
         process.stdout.write(JSON.stringify(latencies), () => process.exit(0));
       })();`,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  let out = '';
  poller.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  return async () => {
    const exited = new Promise((r) => poller.once('exit', r));
    poller.stdin!.end('stop');
    await exited;
    const sorted = (JSON.parse(out) as number[]).sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
    return `/health p50 ${at(0.5).toFixed(1)} ms, p99 ${at(0.99).toFixed(1)} ms, max ${(sorted.at(-1) ?? NaN).toFixed(1)} ms (${sorted.length} polls, target p99 ≤ 50)`;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MB = 900_000;

/** Samples the RSS every 50 ms; returns the growth over `before` at its peak, and the CPU the gateway used meanwhile. */
function peakGrowth(ctx: ProbeContext) {
  const { rssMb } = ctx;
  const cpuBefore = ctx.cpuMs();
  const before = rssMb();
  let peak = before;
  const timer = setInterval(() => (peak = Math.max(peak, rssMb())), 50);
  return () => {
    clearInterval(timer);
    peak = Math.max(peak, rssMb());
    return `RSS ${before.toFixed(0)} → peak ${peak.toFixed(0)} MB (+${(peak - before).toFixed(0)}; target ≤ +50), gateway CPU ${(ctx.cpuMs() - cpuBefore).toFixed(0)} ms`;
  };
}

interface Realtime {
  ws: WebSocket;
  events: { type: string; [k: string]: unknown }[];
  closed: Promise<{ code: number; reason: string; at: number }>;
  send(e: object): void;
}

function openRealtime(ctx: ProbeContext, key: string, model: string): Promise<Realtime> {
  const ws = new WebSocket(`${ctx.base.replace(/^http/, 'ws')}/v1/realtime?model=${model}`, { headers: { authorization: `Bearer ${key}` } });
  const events: Realtime['events'] = [];
  ws.on('message', (d) => events.push(JSON.parse(d.toString()) as Realtime['events'][number]));
  ws.on('error', () => {});
  const closed = new Promise<{ code: number; reason: string; at: number }>((r) =>
    ws.once('close', (code, reason) => r({ code, reason: reason.toString(), at: performance.now() })),
  );
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, events, closed, send: (e) => ws.send(JSON.stringify(e)) }));
    ws.once('unexpected-response', (_q, res) => reject(new Error(`realtime upgrade refused: ${res.statusCode}`)));
  });
}

const message = (text: string, id?: string) => ({
  type: 'conversation.item.create',
  item: { ...(id ? { id } : {}), type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
});

async function settle<T>(p: Promise<T>, ms: number): Promise<T | 'timeout'> {
  return Promise.race([p, sleep(ms).then(() => 'timeout' as const)]);
}
const errorCodes = (events: Realtime['events']) => {
  const codes = new Map<string, number>();
  for (const e of events)
    if (e.type === 'error') {
      const code = String((e.error as { code?: string }).code);
      codes.set(code, (codes.get(code) ?? 0) + 1);
    }
  return JSON.stringify(Object.fromEntries(codes));
};

async function outbuf(ctx: ProbeContext) {
  const { key } = await ctx.key();
  {
    const rt = await openRealtime(ctx, key, 'abuse-ok');
    rt.send(message('x'.repeat(MB), 'item_big'));
    await sleep(500);
    rt.ws.pause();
    const rss = peakGrowth(ctx);
    const stop = watchHealth(ctx);
    for (let i = 0; i < 250; i++) rt.send({ type: 'conversation.item.retrieve', item_id: 'item_big' });
    await sleep(4_000);
    const health = await stop();
    const grown = rss();
    rt.ws.resume();
    const end = await settle(rt.closed, 10_000);
    console.log(
      `outbuf: realtime, not reading, 250 conversation.item.retrieve of a ${MB.toLocaleString()}-character item: socket ${end === 'timeout' ? 'still open 10 s later' : `closed ${end.code} ${end.reason}`}; ${grown}; ${health}`,
    );
  }
  {
    const ws = new WebSocket(`${ctx.base.replace(/^http/, 'ws')}/stt/websocket?model=local-stt&api_key=${key}`);
    ws.on('error', () => {});
    const closed = new Promise<{ code: number; reason: string }>((r) => ws.once('close', (code, reason) => r({ code, reason: reason.toString() })));
    await new Promise((r) => ws.once('open', r));
    ws.pause();
    const rss = peakGrowth(ctx);
    const stop = watchHealth(ctx);
    for (let i = 0; i < 200_000; i++) {
      if (ws.readyState !== WebSocket.OPEN) break;
      ws.send('x');
      if (i % 5_000 === 0) await sleep(1);
    }
    await sleep(3_000);
    const health = await stop();
    const grown = rss();
    ws.resume();
    const end = await settle(closed, 10_000);
    console.log(
      `        /stt/websocket, not reading, 200,000 one-byte invalid text frames: socket ${end === 'timeout' ? 'still open 10 s later' : `closed ${end.code} ${end.reason}`}; ${grown}; ${health}\n`,
    );
  }
}

async function refs(ctx: ProbeContext) {
  const { key } = await ctx.key();
  const rt = await openRealtime(ctx, key, 'abuse-ok');
  rt.send(message('x'.repeat(MB), 'item_big'));
  await sleep(500);
  const rss = peakGrowth(ctx);
  const stop = watchHealth(ctx);
  const before = rt.events.length;
  for (let round = 0; round < 10; round++) {
    rt.send({
      type: 'response.create',
      response: { conversation: 'none', input: Array.from({ length: 300 }, () => ({ type: 'item_reference', id: 'item_big' })) },
    });
    await sleep(100);
  }
  await sleep(1_000);
  const health = await stop();
  const answers = rt.events.slice(before);
  console.log(
    `refs: 10 × response.create whose input names a ${MB.toLocaleString()}-character item 300 times: errors ${errorCodes(answers)}, responses started ${answers.filter((e) => e.type === 'response.created').length}; ${rss()}; ${health}\n`,
  );
  rt.ws.close();
}

async function names(ctx: ProbeContext) {
  const { key } = await ctx.key();
  const rt = await openRealtime(ctx, key, 'abuse-ok');
  const rss = peakGrowth(ctx);
  const stop = watchHealth(ctx);
  for (let i = 0; i < 120; i++) {
    rt.send({ type: 'conversation.item.create', item: { type: 'function_call', call_id: `call_${i}`, name: 'n'.repeat(MB), arguments: '{}' } });
    if (i % 10 === 9) await sleep(20);
  }
  await sleep(1_500);
  const health = await stop();
  console.log(
    `names: 120 function_call items with ${MB.toLocaleString()}-character names: errors ${errorCodes(rt.events)}, items kept ${rt.events.filter((e) => e.type === 'conversation.item.created' || e.type === 'conversation.item.added').length}; ${rss()}; ${health}\n`,
  );
  rt.ws.close();
}

const engineState = async (ctx: ProbeContext) =>
  (await (await request(`${ctx.engine}/open`, { dispatcher: ctx.agent })).body.json()) as { open: number; maxOpen: number; lastClosedAt: number };

/** Polls the engine until none of its answers is still being written: ms from `since` (performance.now()). */
async function untilEngineIdle(ctx: ProbeContext, since: number) {
  while ((await engineState(ctx)).open > 0) {
    if (performance.now() - since > 10_000) return 'not within 10 s';
    await sleep(10);
  }
  return `${(performance.now() - since).toFixed(0)} ms`;
}

async function oob(ctx: ProbeContext) {
  for (const end of ['close', 'revocation'] as const) {
    const k = await ctx.key();
    const rt = await openRealtime(ctx, k.key, 'abuse-slow');
    await request(`${ctx.engine}/reset`, { dispatcher: ctx.agent, method: 'POST' }).then((r) => r.body.dump());
    const rss = peakGrowth(ctx);
    const stop = watchHealth(ctx);
    for (let i = 0; i < 30; i++)
      rt.send({ type: 'response.create', response: { conversation: 'none', output_modalities: ['text'], input: [message(`q${i}`).item] } });
    await sleep(2_000);
    const state = await engineState(ctx);
    const started = rt.events.filter((e) => e.type === 'response.created').length;
    const refused = errorCodes(rt.events);
    let since: number;
    if (end === 'close') {
      since = performance.now();
      rt.ws.close();
    } else {
      await ctx.revoke(k.id);
      since = performance.now();
    }
    const idle = await untilEngineIdle(ctx, since);
    const closed = await settle(rt.closed, 5_000);
    const health = await stop();
    console.log(
      `oob (${end}): 30 out-of-band response.create on one session: ${started} started, errors ${refused}; engine streams open at most ${state.maxOpen}; after the ${end === 'close' ? "client's close" : "key's revocation committed"} the last engine stream ended ${idle} later${end === 'revocation' && closed !== 'timeout' ? ` (session closed ${closed.code} ${closed.reason} ${(closed.at - since).toFixed(0)} ms after)` : ''}; ${rss()}; ${health}`,
    );
  }
  console.log('');
}

async function responsesRefs(ctx: ProbeContext) {
  const { key } = await ctx.key();
  const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const post = async (body: unknown) => {
    const res = await request(`${ctx.base}/v1/responses`, { dispatcher: ctx.agent, method: 'POST', headers: auth, body: JSON.stringify(body) });
    return { status: res.statusCode, text: await res.body.text() };
  };
  const stored = await post({ model: 'abuse-long', store: true, input: 'Say z 16,000 times.' });
  const itemId = (JSON.parse(stored.text) as { output?: { id: string }[] }).output?.[0]?.id;
  if (!itemId) throw new Error(`responses-refs: could not store an item: ${stored.status} ${stored.text.slice(0, 200)}`);
  const reference = { type: 'item_reference', id: itemId };
  // Just under the 10 MiB body limit (a comma between references), and the most that may be counted.
  const many = Array.from({ length: Math.floor((10 * 1024 * 1024 - 200) / (JSON.stringify(reference).length + 1)) }, () => reference);
  const counted = many.slice(0, 1_000);
  const lines: string[] = [];
  for (const input of [many, counted]) {
    const rss = peakGrowth(ctx);
    const stop = watchHealth(ctx);
    const answers = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const a = await post({ model: 'abuse-ok', input });
      const error = (JSON.parse(a.text) as { error?: { code?: string; message?: string } }).error;
      answers.add(`${a.status} ${error?.code ?? ''} ${error?.message?.slice(0, 120) ?? ''}`);
    }
    await sleep(500);
    lines.push(`  3 × ${input.length.toLocaleString()} references: ${[...answers].join('; ')}; ${rss()}; ${await stop()}`);
  }
  console.log(`responses-refs: /v1/responses of item_references to one stored 16,000-character item\n${lines.join('\n')}\n`);
}

async function engine(ctx: ProbeContext) {
  const { key } = await ctx.key();
  const results = [];
  const rss = peakGrowth(ctx);
  const stop = watchHealth(ctx);
  for (const [mode, stream] of [
    ['huge', false],
    ['error', false],
    ['endless', false],
    ['bigevent', true],
  ] as const) {
    const started = performance.now();
    const res = await request(`${ctx.base}/v1/chat/completions`, {
      dispatcher: ctx.agent,
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: `abuse-${mode}`, stream, messages: [{ role: 'user', content: 'hi' }] }),
    });
    let received = '';
    let bytes = 0;
    res.body.on('data', (d: Buffer) => {
      bytes += d.length;
      if (received.length < 4096) received += d.toString();
    });
    const ended = await settle(new Promise((r) => res.body.once('end', r).once('error', r)), 30_000);
    if (ended === 'timeout') res.body.destroy();
    const shown = `${ended === 'timeout' ? `no end within 30 s, ${bytes.toLocaleString()} bytes received; begins` : 'ends'} ${(ended === 'timeout' ? received.slice(0, 160) : received.slice(-220)).replace(/\s+/g, ' ')}`;
    results.push(`  ${mode}${stream ? ' (stream)' : ''}: ${res.statusCode} in ${(performance.now() - started).toFixed(0)} ms: ${shown}`);
  }
  const health = await stop();
  console.log(`engine: a hostile engine's answers through /v1/chat/completions; ${rss()}; ${health}\n${results.join('\n')}\n`);
}

/** 30 concurrent clones through a billing engine (model `abuse-sonic`, scripted Cartesia), then voices past the org's cap through flite. */
async function clones(ctx: ProbeContext) {
  const clip = speak('flite', 'slt');
  const caps = CLONE_CAPS;
  const { key } = await ctx.key();
  const clone = async (model: string, i: number) => {
    const form = new FormData();
    form.set('file', new Blob([new Uint8Array(clip)], { type: 'audio/wav' }), 'clip.wav');
    form.set('name', `probe ${i}`);
    form.set('model_id', model);
    const res = await fetch(`${ctx.base}/voices/clone`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
    const body = (await res.json()) as { error?: { code?: string } };
    return `${res.status}${body.error?.code ? ` ${body.error.code}` : ''}${res.headers.get('retry-after') ? ` (Retry-After ${res.headers.get('retry-after')})` : ''}`;
  };
  const tally = (answers: string[]) => JSON.stringify(Object.fromEntries([...new Set(answers)].map((a) => [a, answers.filter((x) => x === a).length])));
  const rss = peakGrowth(ctx);
  const stop = watchHealth(ctx);
  // At most 5 voice jobs run per org (429 rate_limit_exceeded past them): the paid clones are sent
  // 5 at a time, a refused one again after a pause, until each has an answer of its own.
  const paid: string[] = [];
  const started = performance.now();
  let claimed = 0;
  await Promise.all(
    Array.from({ length: 5 }, async () => {
      while (claimed < caps.clonesPerDay + 10 && performance.now() - started < 60_000) {
        const i = claimed++;
        let answer = await clone('abuse-sonic', i);
        while (answer.startsWith('429 rate_limit_exceeded') && performance.now() - started < 60_000) {
          await sleep(300);
          answer = await clone('abuse-sonic', i);
        }
        paid.push(answer);
      }
    }),
  );
  const local: string[] = [];
  for (let batch = 0; batch < 5; batch++) local.push(...(await Promise.all(Array.from({ length: 10 }, (_, i) => clone('local-flite', batch * 10 + i)))));
  console.log(
    `clones: one org, ${paid.length} clones through a billing engine, 5 at a time (cap ${caps.clonesPerDay} a day): ${tally(paid)}; then ${local.length} flite clones, 10 at a time (cap ${caps.voices} voices, the engine's clones included): ${tally(local)}; ${rss()}; ${await stop()}\n`,
  );
}

export async function runBoundsProbes(ctx: ProbeContext, only: Set<string>) {
  if (only.has('outbuf')) await outbuf(ctx);
  if (only.has('refs')) await refs(ctx);
  if (only.has('names')) await names(ctx);
  if (only.has('oob')) await oob(ctx);
  if (only.has('responses-refs')) await responsesRefs(ctx);
  if (only.has('engine')) await engine(ctx);
  if (only.has('clones')) await clones(ctx);
}
