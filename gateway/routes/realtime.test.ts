// WS /v1/realtime on the wire (a bare `ws` client; the real clients are in
// realtime.clients.test.ts): the real gateway runtime, the local recognizer (pocketsphinx), flite
// for the answers' speech, and a scripted OpenAI-compatible LLM.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../server/services/keys/create-api-key.js';
import { upsertModel } from '../../server/services/models/upsert-model.js';
import { createOrg } from '../../server/services/orgs/create-org.js';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.js';
import type { GatewayHarness } from '../../test/support/gateway-harness.js';
import { appendAudio, openRealtime, responseAudio, spokenPcm24, type RealtimeEvent } from '../../test/support/realtime-client.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.js';
import { STT_PRICE, audioCost, settleRecognizers, startSttGateway, transcribe, wavFile } from '../../test/support/stt-routes.js';
import { FLITE_PRICE, costOf } from '../../test/support/tts-routes.js';
import { usageRows } from '../../test/support/usage-rows.js';
import { checkProtocol } from '../upstreams/protocols/index.js';

const PRICE_IN = 150_001n;
const PRICE_OUT = 600_003n;
const REPLY = ['The ', 'weather ', 'is ', 'sunny', '.'];
const REPLY_TEXT = REPLY.join('');

let h: GatewayHarness;
let llm: ScriptedUpstream;

beforeAll(async () => {
  h = await startSttGateway();
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, { id: 'local-flite', modality: 'tts', prices: { picoPerChar: FLITE_PRICE }, upstream: { url: 'local:flite', protocol: 'flite' } });
  await seedPlatformVoices(prisma);
  llm = await startScriptedUpstream({ kind: 'stream', chunks: REPLY, usage: { prompt_tokens: 40, completion_tokens: 6 } });
  await upsertModel(prisma, checkProtocol, { id: 'rt-llm', modality: 'llm', prices: { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT }, upstream: { url: llm.baseUrl, protocol: 'openai' } });
  await h.runtime.ctx.registry.refresh();
}, 60_000);

afterAll(async () => {
  await llm?.close();
  await settleRecognizers();
  await h?.close();
});

async function orgWithKey(credit = 10_000_000n) {
  const org = await createOrg(h.testDb.db, { name: 'realtime', creditsMicros: credit });
  const key = (await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k' })).key;
  return { orgId: org.id, key };
}

const types = (events: RealtimeEvent[]) => events.map((e) => e.type);

describe('a conversation session', () => {
  it('hears a spoken question, answers it in speech, and bills each leg', async () => {
    const { key } = await orgWithKey();
    const c = await openRealtime(h, key, { model: 'rt-llm' });
    const created = await c.next('session.created');
    expect(created.session).toMatchObject({ type: 'realtime', models: { stt: 'local-stt', llm: 'rt-llm', tts: 'local-flite' } });
    appendAudio(c, await spokenPcm24('what is the weather like today'));
    const heard = await c.until('conversation.item.input_audio_transcription.completed');
    expect(types(heard)).toEqual(expect.arrayContaining(['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped', 'input_audio_buffer.committed']));
    const completed = heard.at(-1)!;
    expect(completed.transcript).toMatch(/weather/);
    const answer = await c.until('response.done');
    const done = answer.at(-1)!.response as { status: string; usage: { input_tokens: number; output_tokens: number; svc: { tts_characters: number } } };
    expect(done.status).toBe('completed');
    expect(done.usage).toMatchObject({ input_tokens: 40, output_tokens: 6 });
    const audio = responseAudio(answer);
    expect(audio.length).toBeGreaterThan(24_000); // more than half a second of speech
    const samples = new Float32Array(audio.length / 2);
    for (let i = 0; i < samples.length; i++) samples[i] = audio.readInt16LE(i * 2) / 32768;
    const res = await transcribe(h, wavFile([samples], 24_000), { model: 'local-stt' });
    expect(((await res.json()) as { text: string }).text).toMatch(/weather/);
    const transcript = answer.filter((e) => e.type === 'response.output_audio_transcript.delta').map((e) => e.delta).join('');
    expect(transcript).toBe(REPLY_TEXT);
    await c.close();
  }, 60_000);
});
