// LLM stream failover (gateway/llm/chat-failover.ts): the extra time to the next token when the
// engine serving a chat completion stream dies, against the same stream with no fault. The real
// gateway runtime in this process on a throw-away SQLite database (test/support/gateway-harness.ts:
// key auth, reservations and debits on) and two scripted OpenAI-compatible engines behind one model
// (test/support/scripted-chat-faults.ts, --token-ms between pieces, 12 pieces). Per run the client
// (undici fetch) times each content chunk at receipt. Reported over --runs runs, medians in ms:
// - first token: request sent → first content chunk;
// - largest gap: the longest wait between two content chunks (with no fault: the token time);
// - added: the fault run's figure less the no-fault run's median (start faults: first token;
//   mid-stream faults: largest gap).
// Faults: connection reset at the start, 500 at the start, stream closed before the first token,
// closed after 6 pieces, a malformed chunk after 6 pieces, a stall after 6 pieces (ended by
// SVC_LLM_STALL_SECONDS, set here to --stall-seconds). Every run must read the whole answer.
//
//   npx tsx bench/failover-llm.ts [--runs 20] [--token-ms 20] [--stall-seconds 0.3]
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { checkProtocol } from '../gateway/upstreams/protocols/index.ts';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../test/support/gateway-harness.ts';
import { startFaultyEngines, type Fault } from '../test/support/scripted-chat-faults.ts';
import { median, table } from './lib/load.ts';

const PIECES = Array.from({ length: 12 }, (_, i) => `w${i} `);

interface Timing {
  firstMs: number;
  gapMs: number;
}

async function oneRun(h: GatewayHarness, fault: Fault, tokenMs: number, model: { n: number }): Promise<Timing> {
  const engines = await startFaultyEngines({ faults: [fault], pieces: PIECES, pieceMs: tokenMs });
  const id = `bench-failover-${++model.n}`;
  for (const e of engines.engines) {
    await upsertModel(h.testDb.db.prisma, checkProtocol, { id, modality: 'llm', upstream: { url: e.baseUrl, protocol: 'openai' } });
  }
  await h.runtime.ctx.registry.refresh();
  const sent = performance.now();
  const res = await fetch(`${h.url}/v1/chat/completions`, {
    method: 'POST',
    headers: h.headers,
    body: JSON.stringify({ model: id, stream: true, messages: [{ role: 'user', content: 'count' }] }),
  });
  const decoder = new TextDecoder();
  let text = '';
  let buffered = '';
  const arrivals: number[] = [];
  for await (const bytes of res.body! as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(bytes, { stream: true });
    let end: number;
    while ((end = buffered.indexOf('\n\n')) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = event.replace(/^data: ?/, '');
      if (data === '[DONE]' || !data.startsWith('{')) continue;
      const content = (JSON.parse(data) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content;
      if (content) {
        arrivals.push(performance.now());
        text += content;
      }
    }
  }
  await engines.close();
  if (text !== PIECES.join('')) throw new Error(`incomplete answer after ${fault.kind}: ${JSON.stringify(text)}`);
  let gap = 0;
  for (let i = 1; i < arrivals.length; i++) gap = Math.max(gap, arrivals[i]! - arrivals[i - 1]!);
  return { firstMs: arrivals[0]! - sent, gapMs: gap };
}

export async function run(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { runs: { type: 'string', default: '20' }, 'token-ms': { type: 'string', default: '20' }, 'stall-seconds': { type: 'string', default: '0.3' } },
    strict: false,
  });
  const runs = Number(values.runs);
  const tokenMs = Number(values['token-ms']);
  const h = await startGateway({
    creditsMicros: 1_000_000_000n,
    env: { SVC_HEALTH_CHECK_SECONDS: '3600', SVC_LLM_STALL_SECONDS: String(values['stall-seconds']), SVC_LLM_FIRST_TOKEN_SECONDS: '10' },
  });
  const model = { n: 0 };
  const cases: { name: string; fault: Fault; start: boolean }[] = [
    { name: 'no fault', fault: { kind: 'none' }, start: true },
    { name: 'reset at the start', fault: { kind: 'reset' }, start: true },
    { name: '500 at the start', fault: { kind: 'status', status: 500 }, start: true },
    { name: 'closed before the first token', fault: { kind: 'close', after: 0 }, start: true },
    { name: 'closed after 6 pieces', fault: { kind: 'close', after: 6 }, start: false },
    { name: 'malformed chunk after 6 pieces', fault: { kind: 'malformed', after: 6 }, start: false },
    { name: `stall after 6 pieces (${String(values['stall-seconds'])} s)`, fault: { kind: 'stall', after: 6 }, start: false },
  ];
  try {
    await oneRun(h, { kind: 'none' }, tokenMs, model); // warm-up
    const rows: Record<string, string>[] = [];
    let base: { first: number; gap: number } | undefined;
    for (const c of cases) {
      const timings: Timing[] = [];
      for (let i = 0; i < runs; i++) timings.push(await oneRun(h, c.fault, tokenMs, model));
      const first = median(timings.map((t) => t.firstMs));
      const gap = median(timings.map((t) => t.gapMs));
      base ??= { first, gap };
      const added = c.start ? first - base.first : gap - base.gap;
      rows.push({ fault: c.name, 'first token': first.toFixed(1), 'largest gap': gap.toFixed(1), added: c.fault.kind === 'none' ? '—' : added.toFixed(1) });
    }
    console.log(`LLM stream failover: ${runs} runs each, ${tokenMs} ms per token, medians in ms`);
    console.log(table(rows));
  } finally {
    await h.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run(process.argv.slice(2));
