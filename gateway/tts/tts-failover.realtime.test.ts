// A realtime answer's speech survives its TTS engine (gateway/tts/tts-failover.ts through the span
// speaker of /v1/realtime: gateway/realtime/response-speaker.ts). The session's tts model is a
// scripted Cartesia engine first and a scripted ElevenLabs engine second (test/support/scripted-*.ts,
// the same voice mapped on each); Cartesia closes its connection half-way through the answer's
// second sentence. The client is openai's OpenAIRealtimeWS over TLS (as realtime.clients.test.ts):
// it gets no error event, the whole transcript, and each spoken span's audio exactly as long as
// its text (the scripted engines make MS_PER_CHAR of tone a character: a span with some of the
// failed attempt's audio, or missing some, would be longer or shorter); the engines' completed
// texts put together are the answer once; every character is billed once.
import OpenAI from 'openai';
import type { OpenAIRealtimeError } from 'openai/realtime/index';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { mapVoiceToEngine } from '../../server/services/voices/engine-voices.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedCartesia, type ScriptedCartesia } from '../../test/support/scripted-cartesia.ts';
import { startScriptedElevenLabs, type ScriptedElevenLabs } from '../../test/support/scripted-elevenlabs.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { EventLog } from '../../test/support/socket-events.ts';
import { settleRecognizers, startSttGateway } from '../../test/support/stt-routes.ts';
import { makeTestCertificate, type TestCertificate } from '../../test/support/tls.ts';
import { codePoints, costOf } from '../../test/support/tts-routes.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const CARTESIA_KEY = 'sk_car_rt_failover_5d21';
const ELEVEN_KEY = 'xi_rt_failover_90ab';
process.env.RT_FAILOVER_CARTESIA_KEY = CARTESIA_KEY;
process.env.RT_FAILOVER_ELEVEN_KEY = ELEVEN_KEY;

const TTS_PRICE = 1_000_000n;
const MS_PER_CHAR = 20;
/** The LLM's answer as it streams it: three sentences. */
const PIECES = ['The first sentence ', 'starts here. ', 'A second one ', 'follows it closely. ', 'And the third one ', 'ends the answer.'];
const ANSWER = PIECES.join('');
const SENTENCES = ['The first sentence starts here.', 'A second one follows it closely.', 'And the third one ends the answer.'];
const CARTESIA_VOICE = 'car-voice-rt-01';
const ELEVEN_VOICE = 'JBFqnCBsd6RMkjVDRZzb';

let cert: TestCertificate;
let h: GatewayHarness;
let llm: ScriptedUpstream;
let cartesia: ScriptedCartesia;
let eleven: ScriptedElevenLabs;

beforeAll(async () => {
  cert = await makeTestCertificate();
  [cartesia, eleven, llm] = await Promise.all([
    startScriptedCartesia({ apiKey: CARTESIA_KEY, msPerChar: MS_PER_CHAR }),
    startScriptedElevenLabs({ apiKey: ELEVEN_KEY, msPerCharacter: MS_PER_CHAR }),
    startScriptedUpstream({ kind: 'stream', chunks: PIECES, usage: { prompt_tokens: 20, completion_tokens: PIECES.length } }),
  ]);
  h = await startSttGateway({ env: { SVC_TLS_CERT: cert.certPath, SVC_TLS_KEY: cert.keyPath } });
  const prisma = h.testDb.db.prisma;
  await seedPlatformVoices(prisma);
  await upsertModel(prisma, checkProtocol, {
    id: 'rt-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: 1n, outputPicoPerToken: 1n },
    upstream: { url: llm.baseUrl, protocol: 'openai' },
  });
  const tts = { id: 'rt-duo', modality: 'tts' as const, prices: { picoPerChar: TTS_PRICE } };
  // Cartesia first (its weight makes it the first choice but once in a million), ElevenLabs second at another rate (its audio is resampled).
  await upsertModel(prisma, checkProtocol, {
    ...tts,
    upstream: { url: cartesia.url, protocol: 'cartesia', upstreamModel: 'sonic-3', apiKeyEnv: 'RT_FAILOVER_CARTESIA_KEY', weight: 1_000_000 },
  });
  await upsertModel(prisma, checkProtocol, {
    ...tts,
    upstream: {
      url: eleven.url,
      protocol: 'elevenlabs',
      upstreamModel: 'eleven_flash_v2_5',
      apiKeyEnv: 'RT_FAILOVER_ELEVEN_KEY',
      weight: 1,
      settings: { output_sample_rate: 16000 },
    },
  });
  await mapVoiceToEngine(prisma, { voiceId: 'flite-slt', modelId: 'rt-duo', upstreamId: CARTESIA_VOICE, upstreamUrl: cartesia.url });
  await mapVoiceToEngine(prisma, { voiceId: 'flite-slt', modelId: 'rt-duo', upstreamId: ELEVEN_VOICE, upstreamUrl: eleven.url });
  await h.runtime.ctx.registry.refresh();
}, 60_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
  await Promise.allSettled([llm?.close(), cartesia?.close(), eleven?.close(), cert?.remove()]);
  delete process.env.RT_FAILOVER_CARTESIA_KEY;
  delete process.env.RT_FAILOVER_ELEVEN_KEY;
});

type ServerEvent = { type: string; [k: string]: unknown };

/** Each spoken span as the client received it: a transcript delta starts one, the audio deltas after it are its audio (ms of pcm16 at 24 kHz). */
function spokenSpans(events: ServerEvent[]): { text: string; ms: number }[] {
  const spans: { text: string; ms: number }[] = [];
  for (const e of events) {
    if (e.type === 'response.output_audio_transcript.delta') spans.push({ text: e.delta as string, ms: 0 });
    if (e.type === 'response.output_audio.delta') spans.at(-1)!.ms += Buffer.from(e.delta as string, 'base64').length / 48;
  }
  return spans;
}

describe('a realtime answer whose TTS engine closes its connection mid-answer', () => {
  it('is spoken whole by the other engine: no error event, every span as long as its text, each character billed once', async () => {
    const org = await createOrg(h.testDb.db, { name: 'realtime tts failover', creditsMicros: 100_000_000n });
    const key = (await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k' })).key;
    // Cartesia drops the connection half-way through the second sentence it is asked for.
    let asked = 0;
    cartesia.ttsFault = () => (++asked === 2 ? 'close_mid' : null);

    const client = new OpenAI({ apiKey: key, baseURL: `${h.url}/v1` });
    const rt = new OpenAIRealtimeWS({ model: 'rt-llm', options: { ca: cert.ca } }, client);
    const log = new EventLog<ServerEvent>((e) => (e.type === 'error' ? `error(${JSON.stringify(e.error)})` : e.type));
    const errors: OpenAIRealtimeError[] = [];
    rt.on('event', (event: { type: string }) => log.push(event as ServerEvent));
    rt.on('error', (e) => errors.push(e));
    const closed = new Promise<number>((resolve) => rt.socket.once('close', (code: number) => resolve(code)));
    onTestFinished(() => rt.close());
    await log.through((e) => e.type === 'session.created');
    // Ours: the tts model in audio.output.model (docs/realtime.md), beside the voice.
    rt.send({ type: 'session.update', session: { type: 'realtime', audio: { output: { voice: 'flite-slt', model: 'rt-duo' } } } } as never);
    expect((await log.through((e) => e.type === 'session.updated')).at(-1)!.session).toMatchObject({ audio: { output: { voice: 'flite-slt' } } });
    rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Say three sentences.' }] } });
    rt.send({ type: 'response.create' });
    const answer = await log.through((e) => e.type === 'response.done');

    expect(answer.filter((e) => e.type === 'error')).toEqual([]);
    expect(answer.at(-1)!.response).toMatchObject({ status: 'completed', output_modalities: ['audio'] });
    const spans = spokenSpans(answer);
    expect(spans.map((s) => s.text).join('')).toBe(ANSWER);
    // Each span's audio is its own text's, once: nothing of the attempt that failed, nothing missing.
    for (const s of spans) expect(Math.abs(s.ms - codePoints(s.text.trim()) * MS_PER_CHAR), JSON.stringify(s)).toBeLessThanOrEqual(2);
    // Cartesia completed the first sentence and failed the second; ElevenLabs spoke the rest, each sentence once.
    expect(cartesia.spoken).toEqual([SENTENCES[0]]);
    expect(eleven.spoken).toEqual(SENTENCES.slice(1));
    expect(asked).toBe(2);

    rt.close();
    expect(await closed).toBe(1000);
    expect(errors).toEqual([]);
    // The answer's characters, billed once: one debit a spoken span, for the characters it spoke.
    expect(await h.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
    await h.settled();
    const prisma = h.testDb.db.prisma;
    await vi.waitFor(async () => expect((await prisma.org.findUniqueOrThrow({ where: { id: org.id } })).heldMicros).toBe(0n), { timeout: 10_000 });
    const tts = (await usageRows(prisma, { orgId: org.id })).filter((r) => r.modality === 'tts');
    expect(tts.reduce((n, r) => n + r.characters, 0)).toBe(codePoints(SENTENCES.join('')));
    expect(tts.map((r) => r.costMicros)).toEqual(tts.map((r) => costOf(r.characters, TTS_PRICE)));
    expect(tts.map((r) => r.modelId)).toEqual(tts.map(() => 'rt-duo'));
    const ledger = await prisma.ledgerEntry.findMany({ where: { orgId: org.id, kind: 'usage', modality: 'tts' } });
    expect(ledger.map((l) => -l.amountMicros).sort()).toEqual(tts.map((r) => r.costMicros).sort());
  }, 60_000);
});
