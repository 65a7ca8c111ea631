// A broken or hostile engine cannot run the gateway out of memory: every answer read whole is
// read up to a bound and then abandoned (the engine's connection closed), an error answer is read
// only for its message, a speech answer is bounded by its characters and a chat stream's event by
// its length. Against the scripted OpenAI-compatible server answering without end ('flood': far
// more than any bound, as fast as the gateway reads), through the protocol and through the
// gateway's routes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedUpstream, type FloodRecord, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { sseData } from '../../test/support/sse-client.ts';
import { UpstreamError, type TargetOf } from './contract.ts';
import { openai, wavOf } from './protocols/openai.ts';
import { checkProtocol } from './protocols/index.ts';

const MiB = 1024 * 1024;
/** Far more than any bound and than the socket buffers between the peer and the gateway hold. */
const FLOOD_BYTES = 256 * MiB;
/** What a flood the gateway abandoned can have written: its bound plus what the sockets held. */
const ABANDONED_BELOW = 64 * MiB;

let peer: ScriptedUpstream;
let h: GatewayHarness;
const runtime = openai.create({} as never);
let target: TargetOf<typeof openai>;

beforeAll(async () => {
  peer = await startScriptedUpstream();
  target = { id: 'u1', modelId: 'm', url: peer.baseUrl, protocol: 'openai', upstreamModel: 'whisper-1', apiKey: undefined, settings: {} };
  h = await startGateway({ creditsMicros: 100_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600' } });
  const prisma = h.testDb.db.prisma;
  const upstream = { url: peer.baseUrl, protocol: 'openai' };
  await upsertModel(prisma, checkProtocol, { id: 'flood-llm', modality: 'llm', prices: { inputPicoPerToken: 1n, outputPicoPerToken: 1n }, upstream });
  await upsertModel(prisma, checkProtocol, { id: 'flood-stt', modality: 'stt', prices: { picoPerSecond: 1n }, upstream });
  await h.runtime.ctx.registry.refresh();
}, 60_000);

afterAll(async () => {
  await h?.close();
  await peer?.close();
});

const call = () => ({ signal: new AbortController().signal, timeoutMs: 30_000 });

/** The last flood answered, once its connection is closed: abandoned by the gateway well before its end. */
async function expectAbandoned(): Promise<FloodRecord> {
  const record = peer.floods.at(-1)!;
  const { written, closedEarly } = await record.done;
  expect(closedEarly).toBe(true);
  expect(written).toBeLessThan(ABANDONED_BELOW);
  return record;
}

const second = () => new Float32Array(16000);

describe('an engine answer read whole', () => {
  it('past 1 MiB of JSON is abandoned and fails as the engine breaking the protocol', async () => {
    peer.behaviour = { kind: 'flood', status: 200, contentType: 'application/json', head: '{"text":"', filler: 'a'.repeat(64 * 1024), maxBytes: FLOOD_BYTES };
    const failure = await runtime.transcription
      .transcribe(target, { ...call(), samples: second(), sampleRate: 16000, language: undefined, keyterms: [] })
      .catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(UpstreamError);
    expect(failure).toMatchObject({ kind: 'protocol', message: "The engine's answer was too large (over 1 MiB); the gateway stopped reading it." });
    await expectAbandoned();
  });

  it('an error answer is read for its message only: the status and the start of the body, the rest abandoned', async () => {
    peer.behaviour = { kind: 'flood', status: 500, contentType: 'text/plain', head: 'overloaded ', filler: 'x'.repeat(64 * 1024), maxBytes: FLOOD_BYTES };
    const failure = await runtime.transcription
      .transcribe(target, { ...call(), samples: second(), sampleRate: 16000, language: undefined, keyterms: [] })
      .catch((e: unknown) => e);
    expect(failure).toMatchObject({ kind: 'status', details: { status: 500 } });
    expect((failure as UpstreamError).details.engineMessage).toBe(`overloaded ${'x'.repeat(489)}`);
    await expectAbandoned();
  });

  it('speech past a second a character (at least 30 s) fails after exactly the audio up to that bound, the rest unread', async () => {
    peer.behaviour = { kind: 'flood', status: 200, contentType: 'audio/pcm', filler: '\u0000'.repeat(64 * 1024), maxBytes: FLOOD_BYTES };
    const stream = await runtime.speech.synthesize(target, {
      ...call(),
      text: 'Hello there.',
      voice: { upstreamId: 'alloy', params: null },
      language: undefined,
      speed: 1,
    });
    let samples = 0;
    const failure = await (async () => {
      for await (const chunk of stream.chunks) samples += chunk.length;
    })().catch((e: unknown) => e);
    expect(failure).toMatchObject({ kind: 'protocol', message: 'The speech engine sent more than 30 s of audio for 12 characters.' });
    expect(samples).toBe(30 * 24000);
    await expectAbandoned();
  });
});

describe('through the gateway', () => {
  const post = (path: string, body: unknown) => fetch(`${h.url}${path}`, { method: 'POST', headers: h.headers, body: JSON.stringify(body) });

  it('a chat completion past 8 MiB is 502 upstream_error saying the answer was too large', async () => {
    peer.behaviour = {
      kind: 'flood',
      status: 200,
      contentType: 'application/json',
      head: '{"choices":[{"message":{"content":"',
      filler: 'a'.repeat(64 * 1024),
      maxBytes: FLOOD_BYTES,
    };
    const res = await post('/v1/chat/completions', { model: 'flood-llm', messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual({
      error: {
        message: "The model upstream failed: The engine's answer was too large (over 8 MiB); the gateway stopped reading it.",
        type: 'api_error',
        code: 'upstream_error',
        param: null,
      },
    });
    await expectAbandoned();
  });

  it('an engine error with an endless body is 502 with its status, the body abandoned', async () => {
    peer.behaviour = { kind: 'flood', status: 503, contentType: 'text/plain', head: 'busy ', filler: 'z'.repeat(64 * 1024), maxBytes: FLOOD_BYTES };
    const res = await post('/v1/chat/completions', { model: 'flood-llm', messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(502);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('upstream_error');
    expect(error.message).toMatch(/^The model upstream returned 503: busy z{100}/);
    await expectAbandoned();
  });

  it('a chat stream event longer than 1 MiB ends the stream with an error event saying so', async () => {
    peer.behaviour = {
      kind: 'flood',
      status: 200,
      contentType: 'text/event-stream',
      head: 'data: {"choices":[{"index":0,"delta":{"content":"',
      filler: 'a'.repeat(64 * 1024),
      maxBytes: FLOOD_BYTES,
    };
    const res = await post('/v1/chat/completions', { model: 'flood-llm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(200);
    const events = sseData(await res.text());
    expect(events.at(-1)).toBe('[DONE]');
    expect(JSON.parse(events.at(-2)!)).toEqual({
      error: {
        message: 'The model upstream failed: The engine sent a stream event longer than 1048576 characters.',
        type: 'api_error',
        code: 'upstream_error',
        param: null,
      },
    });
    await expectAbandoned();
  });

  it('a transcription answer past 1 MiB is 502 upstream_error saying the answer was too large', async () => {
    peer.behaviour = { kind: 'flood', status: 200, contentType: 'application/json', head: '{"text":"', filler: 'a'.repeat(64 * 1024), maxBytes: FLOOD_BYTES };
    const form = new FormData();
    form.set('model', 'flood-stt');
    form.set('file', new Blob([new Uint8Array(wavOf(second(), 16000))], { type: 'audio/wav' }), 'a.wav');
    const res = await fetch(`${h.url}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${h.key}` }, body: form });
    expect(res.status).toBe(502);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error).toMatchObject({
      code: 'upstream_error',
      message: "The model upstream failed: The engine's answer was too large (over 1 MiB); the gateway stopped reading it.",
    });
    await expectAbandoned();
  });
});
