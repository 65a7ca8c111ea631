// LLM streams that survive their engine (gateway/llm/chat-failover.ts, docs/failover.md): two
// scripted OpenAI-compatible chat engines behind one model (test/support/scripted-chat-faults.ts),
// a fault at the start, in the middle or at the last piece; the openai client and the AI SDK read
// the whole answer with no error, billed once for what they received; the engine that failed gets
// no new work.
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { listModelHealth } from '../../server/services/models/list-model-health.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startFaultyEngines, type Fault, type FaultyEngines } from '../../test/support/scripted-chat-faults.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import { upstreamLabel } from '../metrics/gateway-metrics.ts';

const PRICE_IN = 150_001n;
const PRICE_OUT = 600_003n;
const llmCost = (input: number, output: number): bigint => (BigInt(input) * PRICE_IN + BigInt(output) * PRICE_OUT + 999_999n) / 1_000_000n;
const PIECES = ['The ', 'quick ', 'brown ', 'fox ', 'jumps.'];
const ANSWER = PIECES.join('');
const PROMPT = 10; // the scripted engines' prompt_tokens, plus one per piece of a continued prefix

// Health checks far apart: a failed engine comes back only when a test says so.
const SLOW_CHECKS = { SVC_HEALTH_CHECK_SECONDS: '3600' };
let h: GatewayHarness;
const openStalls: FaultyEngines[] = [];
let seq = 0;

beforeAll(async () => {
  h = await startGateway({ env: SLOW_CHECKS });
});
afterAll(async () => {
  await Promise.all(openStalls.map((e) => e.close()));
  await h?.close();
});

/** Two engines behind a fresh model, the faults met by the requests in order of arrival. */
async function twoEngines(g: GatewayHarness, faults: Fault[], options: { hedge?: boolean } = {}) {
  const engines = await startFaultyEngines({ faults, pieces: PIECES });
  const id = `failover-${++seq}`;
  for (const e of engines.engines) {
    await upsertModel(g.testDb.db.prisma, checkProtocol, {
      id,
      modality: 'llm',
      prices: { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT },
      ...(options.hedge !== undefined && { hedge: options.hedge }),
      upstream: { url: e.baseUrl, protocol: 'openai' },
    });
  }
  await g.runtime.ctx.registry.refresh();
  openStalls.push(engines);
  return { engines, id };
}

/** The one debit of a request: its cost and its usage row's tokens. */
async function billOf(g: GatewayHarness, requestId: string) {
  await g.settled();
  const ledger = await g.testDb.db.prisma.ledgerEntry.findMany({ where: { requestId } });
  const usage = await usageRows(g.testDb.db.prisma, { requestId });
  expect(ledger).toHaveLength(1);
  expect(usage).toHaveLength(1);
  return { cost: -ledger[0]!.amountMicros, input: usage[0]!.inputTokens, output: usage[0]!.outputTokens };
}

async function streamWithOpenAi(g: GatewayHarness, model: string) {
  const client = new OpenAI({ baseURL: `${g.url}/v1`, apiKey: g.key, maxRetries: 0 });
  const { data: stream, response } = await client.chat.completions
    .create({ model, stream: true, messages: [{ role: 'user', content: 'Say the sentence.' }] })
    .withResponse();
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  return { text, requestId: response.headers.get('x-request-id')! };
}

describe('chat completion streams fail over (openai client)', () => {
  const cases: { name: string; fault: Fault; delivered: number }[] = [
    { name: 'connection reset at the start', fault: { kind: 'reset' }, delivered: 0 },
    { name: '500 at the start', fault: { kind: 'status', status: 500 }, delivered: 0 },
    { name: 'closed before the first token', fault: { kind: 'close', after: 0 }, delivered: 0 },
    { name: 'closed in the middle', fault: { kind: 'close', after: 2 }, delivered: 2 },
    { name: 'closed after the last token', fault: { kind: 'close', after: PIECES.length }, delivered: PIECES.length },
    { name: 'a malformed chunk in the middle', fault: { kind: 'malformed', after: 3 }, delivered: 3 },
    { name: 'an error event in the middle', fault: { kind: 'error-event', after: 1 }, delivered: 1 },
  ];

  it.each(cases)('$name: the whole answer, no error, one debit of what was received', async ({ fault, delivered }) => {
    const { engines, id } = await twoEngines(h, [fault]);
    const { text, requestId } = await streamWithOpenAi(h, id);
    expect(text).toBe(ANSWER);
    expect(engines.requests).toHaveLength(2);
    const [failed, serving] = engines.requests;
    expect(serving!.engine).not.toBe(failed!.engine);
    if (delivered > 0) {
      // The next engine continues the text already sent, as a trailing assistant message.
      expect(serving!.body.messages!.at(-1)).toEqual({ role: 'assistant', content: PIECES.slice(0, delivered).join('') });
      expect(serving!.body).toMatchObject({ continue_final_message: true, add_generation_prompt: false });
    } else expect(serving!.body.messages!.map((m) => m.role)).toEqual(['user']);
    // Billed: the serving engine's prompt, and every piece the client received, once.
    const bill = await billOf(h, requestId);
    expect(bill).toEqual({ cost: llmCost(PROMPT + delivered, PIECES.length), input: PROMPT + delivered, output: PIECES.length });

    // The failed engine is out at once: the next request goes straight to the other one.
    const again = await streamWithOpenAi(h, id);
    expect(again.text).toBe(ANSWER);
    expect(engines.requests.slice(2).map((r) => r.engine)).toEqual([serving!.engine]);
    const ready = (await (await fetch(`${h.url}/ready`)).json()) as { models: { id: string; upstreams: { circuit: string }[] }[] };
    expect(
      ready.models
        .find((m) => m.id === id)!
        .upstreams.map((u) => u.circuit)
        .sort(),
    ).toEqual(['closed', 'open']);
  });

  it("the dashboard's model list shows the failed upstream's open circuit until a good health check", async () => {
    const { engines, id } = await twoEngines(h, [{ kind: 'close', after: 1 }]);
    expect((await streamWithOpenAi(h, id)).text).toBe(ANSWER);
    const failedUrl = engines.engines.find((e) => e.name === engines.requests[0]!.engine)!.baseUrl;
    const circuits = async () =>
      Object.fromEntries((await listModelHealth(h.testDb.db.prisma)).find((m) => m.id === id)!.upstreams.map((u) => [u.url === failedUrl, u.circuitOpen]));
    await vi.waitFor(async () => expect(await circuits()).toEqual({ true: true, false: false }));
    await h.runtime.ctx.health.checkAll();
    expect(await circuits()).toEqual({ true: false, false: false });
    expect(h.runtime.ctx.registry.circuits.stateOf(h.runtime.ctx.registry.all().find((m) => m.id === id)!.upstreams[0]!.id)).toBe('closed');
  });

  it('the request log names each engine tried with its outcome, the one that served, and why it moved', async () => {
    const { engines, id } = await twoEngines(h, [{ kind: 'status', status: 503 }]);
    const { requestId } = await streamWithOpenAi(h, id);
    const [failed, serving] = engines.requests.map((r) => r.engine);
    const upstreamIds = Object.fromEntries(
      h.runtime.ctx.registry
        .all()
        .find((m) => m.id === id)!
        .upstreams.map((u) => [engines.engines.find((e) => e.baseUrl === u.url)!.name, u.id]),
    );
    type Row = { upstreams: { upstream_id: string; outcome: string }[]; served_by: string; failover_reason: string };
    const row = await vi.waitFor(
      async () => {
        await h.runtime.ctx.requestLog!.flush();
        const list = (await (await fetch(`${h.url}/v1/logs?request_id=${requestId}`, { headers: h.headers })).json()) as { data: { id: string }[] };
        expect(list.data).toHaveLength(1);
        return (await (await fetch(`${h.url}/v1/logs/${list.data[0]!.id}`, { headers: h.headers })).json()) as Row;
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(row.upstreams.map((a) => [a.upstream_id, a.outcome])).toEqual([
      [upstreamIds[failed!], 'http_status'],
      [upstreamIds[serving!], 'ok'],
    ]);
    expect(row.served_by).toBe(upstreamIds[serving!]);
    expect(row.failover_reason).toBe('http_status (before first output)');
  });

  it('the usage chunk the client asked for counts what it received across both engines', async () => {
    const { id } = await twoEngines(h, [{ kind: 'close', after: 2 }]);
    const client = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: h.key, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: id,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'Say the sentence.' }],
    });
    let text = '';
    const usages: unknown[] = [];
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) usages.push(chunk.usage);
    }
    expect(text).toBe(ANSWER);
    expect(usages).toEqual([{ prompt_tokens: PROMPT + 2, completion_tokens: PIECES.length, total_tokens: PROMPT + 2 + PIECES.length }]);
  });

  it('a whole (not streamed) answer: an engine that answers 500 or drops the connection is replaced unseen', async () => {
    for (const fault of [{ kind: 'status', status: 503 }, { kind: 'reset' }] as Fault[]) {
      const { engines, id } = await twoEngines(h, [fault]);
      const client = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: h.key, maxRetries: 0 });
      const { data, response } = await client.chat.completions.create({ model: id, messages: [{ role: 'user', content: 'Say it.' }] }).withResponse();
      expect(data.choices[0]!.message.content).toBe(ANSWER);
      expect(engines.requests).toHaveLength(2);
      const bill = await billOf(h, response.headers.get('x-request-id')!);
      expect(bill).toEqual({ cost: llmCost(PROMPT, PIECES.length), input: PROMPT, output: PIECES.length });
    }
  });

  it('one debit for a failed-over stream: the balance falls by exactly its cost', async () => {
    const { id } = await twoEngines(h, [{ kind: 'close', after: 3 }]);
    const before = await h.balanceMicros();
    const { text } = await streamWithOpenAi(h, id);
    expect(text).toBe(ANSWER);
    expect(before - (await h.balanceMicros())).toBe(llmCost(PROMPT + 3, PIECES.length));
  });

  it('both engines fail mid-stream: the stream ends with the usual error event, billed for what was sent', async () => {
    const { engines, id } = await twoEngines(h, [
      { kind: 'close', after: 2 },
      { kind: 'close', after: 1 },
    ]);
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: h.headers,
      body: JSON.stringify({ model: id, stream: true, messages: [{ role: 'user', content: 'Say it.' }] }),
    });
    const body = await res.text();
    expect(body).toContain('"code":"upstream_error"');
    expect(body.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(engines.requests).toHaveLength(2);
    const bill = await billOf(h, res.headers.get('x-request-id')!);
    expect(bill.output).toBe(3);
  });
});

describe('the AI SDK through a failover', () => {
  it('streamText (chat completions) reads the whole answer with no error when the engine dies mid-stream', async () => {
    const { id } = await twoEngines(h, [{ kind: 'close', after: 2 }]);
    const provider = createOpenAI({ baseURL: `${h.url}/v1`, apiKey: h.key });
    const errors: unknown[] = [];
    const result = streamText({ model: provider.chat(id), prompt: 'Say the sentence.', maxRetries: 0, onError: ({ error }) => void errors.push(error) });
    expect(await result.text).toBe(ANSWER);
    expect(errors).toEqual([]);
    expect((await result.usage).outputTokens).toBe(PIECES.length);
  });

  it('streamText and generateText (Responses API through chat completions): an engine that answers 500 first is replaced unseen', async () => {
    const provider = createOpenAI({ baseURL: `${h.url}/v1`, apiKey: h.key });
    const streamedPair = await twoEngines(h, [{ kind: 'status', status: 500 }]);
    const errors: unknown[] = [];
    const streamed = streamText({ model: provider(streamedPair.id), prompt: 'Say it.', maxRetries: 0, onError: ({ error }) => void errors.push(error) });
    expect(await streamed.text).toBe(ANSWER);
    expect(errors).toEqual([]);
    const wholePair = await twoEngines(h, [{ kind: 'status', status: 502 }]);
    const whole = await generateText({ model: provider(wholePair.id), prompt: 'Say it.', maxRetries: 0 });
    expect(whole.text).toBe(ANSWER);
    expect(whole.usage.outputTokens).toBe(PIECES.length);
    for (const { engines } of [streamedPair, wholePair]) expect(engines.requests.map((r) => r.fault.kind)).toEqual(['status', 'none']);
  });

  it('streamText (Responses API, answered through chat completions) reads the whole answer when the engine dies mid-stream', async () => {
    const { engines, id } = await twoEngines(h, [{ kind: 'close', after: 3 }]);
    const provider = createOpenAI({ baseURL: `${h.url}/v1`, apiKey: h.key });
    const errors: unknown[] = [];
    const result = streamText({ model: provider(id), prompt: 'Say the sentence.', maxRetries: 0, onError: ({ error }) => void errors.push(error) });
    expect(await result.text).toBe(ANSWER);
    expect(errors).toEqual([]);
    expect(engines.requests.filter((r) => r.body.continue_final_message === true)).toHaveLength(1);
    expect((await result.usage).outputTokens).toBe(PIECES.length);
  });
});

describe('stalls (SVC_LLM_FIRST_TOKEN_SECONDS, SVC_LLM_STALL_SECONDS)', () => {
  let g: GatewayHarness;
  beforeAll(async () => {
    g = await startGateway({ env: { ...SLOW_CHECKS, SVC_LLM_FIRST_TOKEN_SECONDS: '1', SVC_LLM_STALL_SECONDS: '1' } });
  });
  afterAll(async () => {
    await g?.close();
  });

  it.each([
    { name: 'no first token', after: 0 },
    { name: 'silent in the middle', after: 2 },
  ])('$name: the engine that holds its stream open is left for the next', async ({ after }) => {
    const { engines, id } = await twoEngines(g, [{ kind: 'stall', after }]);
    const { text, requestId } = await streamWithOpenAi(g, id);
    expect(text).toBe(ANSWER);
    // The stalled engine's connection was given up by the gateway, not by the engine.
    await engines.requests[0]!.closed;
    const bill = await billOf(g, requestId);
    expect(bill.output).toBe(PIECES.length);
    expect(bill.input).toBe(PROMPT + after);
  });
});

describe('a model with one upstream', () => {
  it('is not cut off for a slow first token or slow chunks: with no engine to move to, silence is not a fault', async () => {
    const g = await startGateway({ env: { ...SLOW_CHECKS, SVC_LLM_FIRST_TOKEN_SECONDS: '0.3', SVC_LLM_STALL_SECONDS: '0.3' } });
    const engines = await startFaultyEngines({ faults: [], pieces: ['slow ', 'but ', 'whole'], pieceMs: 600 }, ['only']);
    try {
      await upsertModel(g.testDb.db.prisma, checkProtocol, {
        id: 'alone',
        modality: 'llm',
        upstream: { url: engines.engines[0]!.baseUrl, protocol: 'openai' },
      });
      await g.runtime.ctx.registry.refresh();
      expect((await streamWithOpenAi(g, 'alone')).text).toBe('slow but whole');
      expect(engines.requests).toHaveLength(1);
    } finally {
      await engines.close();
      await g.close();
    }
  });
});

describe('hedging (capabilities.hedge)', () => {
  it('both engines are asked, the first to answer is kept and the other cancelled; billed once', async () => {
    const { engines, id } = await twoEngines(h, [{ kind: 'stall', after: 0 }], { hedge: true });
    const { text, requestId } = await streamWithOpenAi(h, id);
    expect(text).toBe(ANSWER);
    expect(new Set(engines.requests.map((r) => r.engine)).size).toBe(2);
    await engines.requests[0]!.closed; // the stalled one, cancelled
    const bill = await billOf(h, requestId);
    expect(bill).toEqual({ cost: llmCost(PROMPT, PIECES.length), input: PROMPT, output: PIECES.length });
    // Counted by the engine that won (svc_hedges_total), not as a failover.
    const winner = engines.engines.find((e) => e.name !== engines.requests[0]!.engine)!;
    const metrics = await h.runtime.ctx.metrics.registry.metrics();
    expect(metrics).toContain(`svc_hedges_total{model="${id}",upstream="${upstreamLabel(winner.baseUrl)}"} 1`);
    expect(metrics).not.toContain(`svc_failovers_total{model="${id}"`);
  });

  it('off by default: one engine asked', async () => {
    const { engines, id } = await twoEngines(h, []);
    expect((await streamWithOpenAi(h, id)).text).toBe(ANSWER);
    expect(engines.requests).toHaveLength(1);
  });
});
