// The local LLM's wait for a free sequence is bounded (SVC_LLAMA_MAX_WAITING): past it a request
// is refused at once with 503 temporarily_unavailable and Retry-After, rather than queued without
// end. One sequence and one waiting place; the test holds them itself (the gateway runs in this
// process, so its engine is this module's), then asks the gateway.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../../../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../../../test/support/gateway-harness.ts';
import { writeTinyGguf, type TinyGguf } from '../../../test/support/tiny-gguf.ts';
import { checkProtocol } from '../protocols/index.ts';
import { acquireSequence, type SequenceLease } from './llama-engine.ts';

describe('the local LLM wait queue', () => {
  let h: GatewayHarness;
  let tiny: TinyGguf;

  beforeAll(async () => {
    h = await startGateway({ env: { SVC_LLAMA_THREADS: '1', SVC_LLAMA_SEQUENCES: '1', SVC_LLAMA_MAX_WAITING: '1' } });
    mkdirSync(join(h.testDb.dataDir, 'models'), { recursive: true });
    tiny = await writeTinyGguf(join(h.testDb.dataDir, 'models', 'local-llm.gguf'));
    await upsertModel(h.testDb.db.prisma, checkProtocol, {
      id: 'local-llm',
      modality: 'llm',
      prices: { inputPicoPerToken: 1n, outputPicoPerToken: 1n },
      upstream: { url: 'local:llama-cpp', protocol: 'llama-cpp' },
    });
    await h.runtime.ctx.registry.refresh();
  }, 120_000);

  afterAll(async () => {
    await h?.close();
  });

  const chat = () =>
    fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: h.headers,
      body: JSON.stringify({ model: 'local-llm', messages: [{ role: 'user', content: 'Say something.' }] }),
    });

  it('refuses a request past the waiting bound with 503 and Retry-After, and serves again once a sequence is free', async () => {
    const noAbort = new AbortController().signal;
    const running = await acquireSequence(tiny.path, noAbort);
    let waiting: SequenceLease | null = null;
    const waited = acquireSequence(tiny.path, noAbort).then((lease) => (waiting = lease));

    const refused = await chat();
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toEqual({
      error: {
        message: 'This server is running as many local LLM requests as it can (1); retry shortly.',
        type: 'api_error',
        code: 'temporarily_unavailable',
        param: null,
      },
    });

    // The one waiting gets the sequence when it is freed, in order.
    expect(waiting).toBeNull();
    running.release();
    (await waited).release();

    const served = await chat();
    expect(served.status).toBe(200);
    expect(((await served.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe(tiny.reply);
  });
});
