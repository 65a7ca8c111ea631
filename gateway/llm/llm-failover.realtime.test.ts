// A realtime answer survives its LLM engine (gateway/llm/chat-failover.ts through
// gateway/realtime/response-run.ts): two scripted chat engines behind the session's LLM, the
// first dies mid-answer; the client gets the whole text in one response, no error event, and the
// answer is billed once for every token it received.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { openRealtime } from '../../test/support/realtime-client.ts';
import { startFaultyEngines, type FaultyEngines } from '../../test/support/scripted-chat-faults.ts';
import { settleRecognizers, startSttGateway } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE } from '../../test/support/tts-routes.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const PIECES = ['Sunny ', 'and ', 'mild ', 'all ', 'day.'];
let h: GatewayHarness;
let engines: FaultyEngines;

beforeAll(async () => {
  h = await startSttGateway();
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await seedPlatformVoices(prisma);
  engines = await startFaultyEngines({ faults: [{ kind: 'close', after: 2 }], pieces: PIECES });
  for (const e of engines.engines) {
    await upsertModel(prisma, checkProtocol, {
      id: 'rt-failover-llm',
      modality: 'llm',
      prices: { inputPicoPerToken: 150_001n, outputPicoPerToken: 600_003n },
      upstream: { url: e.baseUrl, protocol: 'openai' },
    });
  }
  await h.runtime.ctx.registry.refresh();
}, 60_000);

afterAll(async () => {
  await engines?.close();
  await settleRecognizers();
  await h?.close();
});

describe('a realtime answer whose engine dies mid-stream', () => {
  it('is continued on the other engine: the whole text, no error, one LLM debit for what was received', async () => {
    const c = await openRealtime(h, h.key, { model: 'rt-failover-llm' });
    await c.next('session.created');
    c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather?' }] } });
    c.send({ type: 'response.create', response: { output_modalities: ['text'] } });
    const events = await c.until('response.done');
    const done = events.at(-1)!.response as { status: string; usage: { input_tokens: number; output_tokens: number } };
    expect(done.status).toBe('completed');
    expect(events.filter((e) => e.type === 'error')).toEqual([]);
    const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta as string);
    expect(text.join('')).toBe(PIECES.join(''));
    expect(events.find((e) => e.type === 'response.output_text.done')).toMatchObject({ text: PIECES.join('') });
    // The serving engine's prompt (the scripted 10, plus the two continued pieces) and every piece once.
    expect(done.usage).toMatchObject({ input_tokens: 12, output_tokens: PIECES.length });
    expect(engines.requests).toHaveLength(2);
    expect(engines.requests[1]!.body.messages!.at(-1)).toEqual({ role: 'assistant', content: 'Sunny and ' });
    await c.close();
    expect(await h.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
    await h.settled();
    const llmRows = (await usageRows(h.testDb.db.prisma, { orgId: h.orgId })).filter((r) => r.modality === 'llm');
    expect(llmRows.map((r) => [r.inputTokens, r.outputTokens])).toEqual([[12, PIECES.length]]);
  }, 30_000);
});
