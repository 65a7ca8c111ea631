// A chat request that asks for JSON (`stream: false`) of an engine that streams anyway
// (gateway/llm/join-chat-stream.ts): the stream is joined into one chat.completion, bounded like
// any whole answer. The engine: test/support/scripted-chat-faults.ts, streaming chat.completion.chunk
// events (platform.openai.com/docs/api-reference/chat-streaming) whatever it was asked.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startFaultyEngines, type FaultScript, type FaultyEngines } from '../../test/support/scripted-chat-faults.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import { CHAT_ANSWER_MAX_BYTES } from '../upstreams/engine-http.ts';

const PIECES = ['The ', 'quick ', 'brown ', 'fox ', 'jumps.'];
let h: GatewayHarness;
// A gateway whose engine deadline is short, so that a trickle reaches it soon.
let shortDeadline: GatewayHarness;
const engines: FaultyEngines[] = [];

beforeAll(async () => {
  h = await startGateway();
  shortDeadline = await startGateway({ env: { SVC_UPSTREAM_TIMEOUT_SECONDS: '2' } });
});
afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
  await h?.close();
  await shortDeadline?.close();
});

async function modelOn(id: string, script: Omit<FaultScript, 'faults' | 'pieces'>, on: GatewayHarness = h) {
  const engine = await startFaultyEngines({ faults: [], pieces: PIECES, alwaysStream: true, ...script }, [id]);
  engines.push(engine);
  await upsertModel(on.testDb.db.prisma, checkProtocol, {
    id,
    modality: 'llm',
    prices: { inputPicoPerToken: 150_000n, outputPicoPerToken: 600_000n },
    upstream: { url: engine.engines[0]!.baseUrl, protocol: 'openai' },
  });
  await on.runtime.ctx.registry.refresh();
  return engine;
}

describe('stream: false answered with a stream by the engine', () => {
  it('a finished stream becomes one chat.completion with the joined text (the openai client reads it)', async () => {
    await modelOn('streams-anyway', {});
    const client = new OpenAI({ baseURL: `${h.url}/v1`, apiKey: h.key, maxRetries: 0 });
    const { data, response } = await client.chat.completions
      .create({ model: 'streams-anyway', messages: [{ role: 'user', content: 'Say the sentence.' }] })
      .withResponse();
    expect(response.headers.get('content-type')).toContain('application/json');
    expect(data.object).toBe('chat.completion');
    expect(data.id).toBe('chatcmpl-streams-anyway');
    expect(data.choices).toHaveLength(1);
    expect(data.choices[0]!.message.content).toBe(PIECES.join(''));
    expect(data.choices[0]!.finish_reason).toBe('stop');
    expect(data.usage).toEqual({ prompt_tokens: 10, completion_tokens: PIECES.length, total_tokens: 10 + PIECES.length });
  });

  it('a stream that never ends is cut at the whole-answer cap: 502 with a clear message, and the engine request is ended', async () => {
    const engine = await modelOn('streams-forever', { endless: true });
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'streams-forever', messages: [{ role: 'user', content: 'Go on.' }] }),
    });
    expect(res.status).toBe(502);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('upstream_error');
    expect(body.error.message).toContain(`over ${CHAT_ANSWER_MAX_BYTES / (1024 * 1024)} MiB`);
    await engine.requests[0]!.closed;
    expect(engine.requests).toHaveLength(1);
  });

  it("a stream that trickles for ever ends at the whole answer's deadline: 504, the engine request ended, nothing billed", async () => {
    const engine = await modelOn('trickles-forever', { endless: true, pieceMs: 50 }, shortDeadline);
    const before = await shortDeadline.balanceMicros();
    const res = await fetch(`${shortDeadline.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${shortDeadline.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'trickles-forever', messages: [{ role: 'user', content: 'Go on, slowly.' }] }),
    });
    expect(res.status).toBe(504);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('upstream_timeout');
    await engine.requests[0]!.closed;
    expect(engine.requests).toHaveLength(1);
    expect(await shortDeadline.balanceMicros()).toBe(before);
  });
});
