// The embedded default's chat engine for real: llama.cpp (node-llama-cpp's prebuilt CPU
// binaries) with a tiny GGUF whose reply is known exactly, through the whole gateway.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../../../server/services/models/upsert-model.ts';
import { llmCostMicros } from '../../../server/services/credits/pricing.ts';
import { formatUsd } from '../../../server/money.ts';
import { startGateway, type GatewayHarness } from '../../../test/support/gateway-harness.ts';
import { writeTinyGguf, type TinyGguf } from '../../../test/support/tiny-gguf.ts';
import { usageRows } from '../../../test/support/usage-rows.ts';
import { checkProtocol } from '../protocols/index.ts';

const PRICES = { inputPicoPerToken: 50_000n, outputPicoPerToken: 100_000_000n };

describe('local llama.cpp engine through the gateway', () => {
  let h: GatewayHarness;
  let tiny: TinyGguf;
  let client: OpenAI;

  beforeAll(async () => {
    h = await startGateway({ env: { SVC_LLAMA_THREADS: '1' } });
    mkdirSync(join(h.testDb.dataDir, 'models'), { recursive: true });
    tiny = await writeTinyGguf(join(h.testDb.dataDir, 'models', 'local-llm.gguf'));
    await upsertModel(h.testDb.db.prisma, checkProtocol, {
      id: 'local-llm',
      modality: 'llm',
      prices: PRICES,
      upstream: { url: 'local:llama-cpp', protocol: 'llama-cpp' },
    });
    await upsertModel(h.testDb.db.prisma, checkProtocol, {
      id: 'missing-llm',
      modality: 'llm',
      upstream: { url: 'local:llama-cpp', protocol: 'llama-cpp', upstreamModel: 'models/nope.gguf' },
    });
    await h.runtime.ctx.registry.refresh();
    await h.runtime.ctx.health.checkAll();
    client = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: h.key, maxRetries: 0 });
  }, 120_000);

  afterAll(async () => {
    await h?.close();
  });

  const chat = (body: Record<string, unknown>) =>
    fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: h.headers,
      body: JSON.stringify({ model: 'local-llm', messages: [{ role: 'user', content: 'Say something.' }], ...body }),
    });

  it('answers exactly the model reply, with usage and the exact cost', async () => {
    const before = await h.balanceMicros();
    const res = await chat({ temperature: 0.8 });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      choices: { message: { content: string }; finish_reason: string }[];
      usage: { prompt_tokens: number; completion_tokens: number };
    };
    expect(body.choices[0]!.message.content).toBe(tiny.reply);
    expect(body.choices[0]!.finish_reason).toBe('stop');
    // The reply's tokens plus the end-of-turn token.
    expect(body.usage.completion_tokens).toBeGreaterThanOrEqual(tiny.replyTokens);
    expect(body.usage.completion_tokens).toBeLessThanOrEqual(tiny.replyTokens + 1);
    expect(body.usage.prompt_tokens).toBeGreaterThan(10);
    const cost = llmCostMicros(PRICES, body.usage.prompt_tokens, body.usage.completion_tokens);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(formatUsd(cost));
    expect(await h.balanceMicros()).toBe(before - cost);
    expect(res.headers.get('x-svc-credits-remaining-usd')).toBe(formatUsd(before - cost));
  });

  it('streams the same text chunk by chunk, hiding the usage chunk unless asked', async () => {
    const res = await chat({ stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-svc-request-cost-usd')).toBeNull();
    const text = await res.text();
    const events = text
      .split('\n\n')
      .filter(Boolean)
      .map((e) => e.replace(/^data: /, ''));
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as { choices: { delta: { content?: string } }[]; usage?: unknown });
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(tiny.reply);
    expect(chunks.filter((c) => c.choices.length > 1 || c.usage)).toHaveLength(0);
    expect(chunks.filter((c) => c.choices[0]?.delta.content).length).toBeGreaterThanOrEqual(tiny.replyTokens - 1);
  });

  it('meters a stream without include_usage exactly like one with it', async () => {
    const rows = async () => usageRows(h.testDb.db.prisma, { orgId: h.orgId });
    // Every debit made so far (a stream's is written after its answer) in the database first: the earlier tests' too.
    const settled = async () => {
      expect(await h.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
      await h.settled();
    };
    await settled();
    const n = (await rows()).length;
    const first = await chat({ stream: true });
    const firstId = first.headers.get('x-request-id');
    await first.text();
    const res = await chat({ stream: true, stream_options: { include_usage: true } });
    const secondId = res.headers.get('x-request-id');
    const events = (await res.text())
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => JSON.parse(e.slice(6)) as { usage?: { prompt_tokens: number; completion_tokens: number }; choices: unknown[] });
    const usage = events.at(-1)!.usage!;
    expect(events.at(-1)!.choices).toEqual([]);
    // On SQLite a debit is committed just after its answer (docs/api-conventions.md, "Credits"): wait for both.
    await settled();
    expect((await rows()).length).toBe(n + 2);
    const after = await rows();
    const withoutUsage = after.find((r) => r.requestId === firstId);
    const withUsage = after.find((r) => r.requestId === secondId);
    expect(withUsage!.inputTokens).toBe(usage.prompt_tokens);
    expect(withUsage!.outputTokens).toBe(usage.completion_tokens);
    expect(withoutUsage!.outputTokens).toBe(usage.completion_tokens);
    expect(withoutUsage!.costMicros).toBe(withUsage!.costMicros);
  });

  it('honours max_tokens and stop', async () => {
    const short = (await (await chat({ max_tokens: 3 })).json()) as {
      choices: { message: { content: string }; finish_reason: string }[];
      usage: { completion_tokens: number };
    };
    expect(short.choices[0]!.message.content).toBe(tiny.replyPieces.slice(0, 3).join(''));
    expect(short.choices[0]!.finish_reason).toBe('length');
    expect(short.usage.completion_tokens).toBe(3);
    const stopped = (await (await chat({ stop: [' tiny'] })).json()) as { choices: { message: { content: string } }[] };
    expect(stopped.choices[0]!.message.content).toBe(tiny.reply.slice(0, tiny.reply.indexOf(' tiny')));
  });

  it('works with the official openai client, streaming and not', async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toContain('local-llm');
    expect(models.data.map((m) => m.id)).not.toContain('missing-llm');
    const completion = await client.chat.completions.create({
      model: 'local-llm',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ],
    });
    expect(completion.choices[0]!.message.content).toBe(tiny.reply);
    const stream = await client.chat.completions.create({
      model: 'local-llm',
      messages: [{ role: 'user', content: 'Hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const part of stream) {
      text += part.choices[0]?.delta.content ?? '';
      usage = part.usage ?? usage;
    }
    expect(text).toBe(tiny.reply);
    expect(usage?.completion_tokens).toBeGreaterThanOrEqual(tiny.replyTokens);
  });

  it('rejects what the local engine cannot do, in the envelope', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ n: 2 }, 'n'],
      [{ tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] }, 'tools'],
      [{ messages: [] }, 'messages'],
      [{ messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role'],
      [{ temperature: 7 }, 'temperature'],
      [{ max_tokens: 0 }, 'max_tokens'],
    ];
    for (const [body, param] of cases) {
      const res = await chat(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      const err = (await res.json()) as { error: { code: string; param: string; type: string } };
      expect(err.error).toMatchObject({ code: 'invalid_request', param, type: 'invalid_request_error' });
    }
  });

  it('is offline, saying how to configure it, when the GGUF file is missing', async () => {
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: h.headers,
      body: JSON.stringify({ model: 'missing-llm', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.status).toBe(503);
    const err = (await res.json()) as { error: { code: string; message: string } };
    expect(err.error.code).toBe('model_offline');
    expect(err.error.message).toContain('nope.gguf');
    expect(err.error.message).toContain('svc model upsert');
  });

  it('serves concurrent requests, each with the full reply', async () => {
    const replies = await Promise.all(
      Array.from({ length: 8 }, () => chat({}).then((r) => r.json() as Promise<{ choices: { message: { content: string } }[] }>)),
    );
    for (const r of replies) expect(r.choices[0]!.message.content).toBe(tiny.reply);
  });
});
