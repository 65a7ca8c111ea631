// WS /phone/twilio/:token and /phone/telnyx/:token on the wire: a scripted carrier
// (test/support/scripted-carrier.ts, written from Twilio's and Telnyx's references) calls the
// real gateway runtime, which answers with the local recognizer (pocketsphinx), flite and a
// scripted OpenAI-compatible LLM. The call's time is the caller's audio; the gateway's timers
// (the phone tokens' revocation watch) run on a manual clock.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { createPhoneToken } from '../../server/services/phone/create-phone-token.ts';
import { revokePhoneToken } from '../../server/services/phone/revoke-phone-token.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { A_WINDOW_START, manualClock } from '../../test/support/manual-clock.ts';
import { dial, mulawSamples, wavToMulaw8k, type CarrierCommand, type CarrierName, type ScriptedCall } from '../../test/support/scripted-carrier.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { STT_PRICE, audioCost, refusedUpgrade, settleRecognizers, speech, startSttGateway, transcribe, wavFile } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE, costOf } from '../../test/support/tts-routes.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { DEFAULT_LINK_LIMITS, TOO_MANY_INVALID_MESSAGES } from '../sessions/websocket-link.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const PRICE_IN = 150_001n;
const PRICE_OUT = 600_003n;
const REPLY = ['The ', 'weather ', 'is ', 'sunny', '.'];
const REPLY_TEXT = REPLY.join('');
const SLOW_REPLY = Array.from({ length: 600 }, (_, i) => `Sentence number ${i} is here. `);
const clock = manualClock(A_WINDOW_START + 15_000);

let h: GatewayHarness;
let llm: ScriptedUpstream;
let slowLlm: ScriptedUpstream;
let question: Buffer;

beforeAll(async () => {
  h = await startSttGateway({ clock, env: { SVC_MAX_STREAMS_PER_KEY: '2' } });
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await seedPlatformVoices(prisma);
  llm = await startScriptedUpstream({ kind: 'stream', chunks: REPLY, usage: { prompt_tokens: 40, completion_tokens: 6 } });
  slowLlm = await startScriptedUpstream({ kind: 'stream', chunks: SLOW_REPLY, delayMs: 100, usage: { prompt_tokens: 40, completion_tokens: 200 } });
  const prices = { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT };
  await upsertModel(prisma, checkProtocol, { id: 'rt-llm', modality: 'llm', prices, upstream: { url: llm.baseUrl, protocol: 'openai' } });
  await upsertModel(prisma, checkProtocol, { id: 'rt-slow', modality: 'llm', prices, upstream: { url: slowLlm.baseUrl, protocol: 'openai' } });
  await h.runtime.ctx.registry.refresh();
  // The caller's question: flite's WAV file as telephone audio, whole 20 ms frames.
  const ulaw = wavToMulaw8k((await speech('what is the weather like today')).wav);
  question = Buffer.concat([ulaw, Buffer.alloc((160 - (ulaw.length % 160)) % 160, 0xff)]);
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([llm?.close(), slowLlm?.close()]);
  await settleRecognizers();
  await h?.close();
});

async function phoneLine(profile = 'rt-llm', credit = 10_000_000n) {
  const org = await createOrg(h.testDb.db, { name: 'phone', creditsMicros: credit });
  const key = await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'calls' });
  const token = await createPhoneToken(h.testDb.db.prisma, { orgId: org.id, apiKeyId: key.id, profile, name: '+15550100' });
  return { orgId: org.id, keyId: key.id, tokenId: token.id, token: token.token };
}

const streamUrl = (carrier: string, token: string) => `${h.url.replace(/^http/, 'ws')}/phone/${carrier}/${token}`;
const markName = (c: CarrierCommand) => (c.event === 'mark' ? (c.mark as { name: string }).name : '');
/** The answer's audio all sent: its last mark. */
const answerSent = (call: ScriptedCall) => call.commands.first((c) => markName(c).endsWith(':end'), { timeoutMs: 60_000 });
/** The caller stays on the line (silence) until everything queued has played. */
function listenToTheEnd(call: ScriptedCall): number {
  const ms = Math.ceil((call.receivedMs - call.playedMs) / 20) * 20 + 20;
  call.silence(ms);
  return ms;
}
const llmCost = (input: number, output: number): bigint => (BigInt(input) * PRICE_IN + BigInt(output) * PRICE_OUT + 999_999n) / 1_000_000n;

async function billed(): Promise<void> {
  expect(await h.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
  await h.settled();
}

describe('a Twilio call', () => {
  it('a spoken question is answered in 20 ms μ-law media frames with marks, and the call is billed per second and per token', async () => {
    const line = await phoneLine();
    const call = await dial(streamUrl('twilio', line.token), 'twilio', { customParameters: { caller: '+15550199' } });
    let sentMs = 300 + question.length / 8 + 1500;
    call.silence(300);
    call.send(question);
    call.silence(1500);
    const end = await answerSent(call);
    sentMs += listenToTheEnd(call);
    // Every mark echoed, the answer's last one at its very end: the caller heard all of it.
    expect(call.echoed.at(-1)).toBe(markName(end));
    expect(call.playedAtLastMark).toBe(call.receivedMs);
    expect(call.violations).toEqual([]);
    const commands = call.commands.events;
    const media = commands.filter((c) => c.event === 'media').map((c) => Buffer.from((c.media as { payload: string }).payload, 'base64'));
    // 20 ms frames; only an answer's last one may be shorter (then its end mark follows).
    commands.forEach((c, i) => {
      if (c.event === 'media' && Buffer.from((c.media as { payload: string }).payload, 'base64').length !== 160)
        expect(markName(commands[i + 1]!)).toMatch(/:end$/);
    });
    expect(media.length).toBeGreaterThan(25);
    // A mark at least every 100 ms of audio, each after the media it follows.
    expect(commands.filter((c) => c.event === 'mark').length).toBeGreaterThanOrEqual(Math.floor(call.receivedMs / 100));
    // What the caller heard is the answer, spoken: transcribed back at 8 kHz.
    const res = await transcribe(h, wavFile([mulawSamples(call.played)], 8000), { model: 'local-stt' });
    expect(((await res.json()) as { text: string }).text).toMatch(/weather/);
    call.stop();
    expect(await call.closed).toMatchObject({ code: 1000 });
    await billed();
    // Each leg on the ledger at its price: every second of the caller's audio, the tokens, the characters spoken.
    const rows = await usageRows(h.testDb.db.prisma, { orgId: line.orgId });
    expect(rows.every((r) => r.apiKeyId === line.keyId && r.route === 'realtime')).toBe(true);
    const stt = rows.filter((r) => r.modality === 'stt');
    expect(stt.reduce((n, r) => n + r.audioMillis, 0)).toBe(sentMs);
    expect(stt.reduce((n, r) => n + r.costMicros, 0n)).toBe(audioCost(sentMs, STT_PRICE));
    expect(rows.filter((r) => r.modality === 'llm').map((r) => [r.inputTokens, r.outputTokens, r.costMicros])).toEqual([[40, 6, llmCost(40, 6)]]);
    const tts = rows.filter((r) => r.modality === 'tts');
    expect(tts.reduce((n, r) => n + r.characters, 0)).toBe(REPLY_TEXT.length);
    expect(tts.reduce((n, r) => n + r.costMicros, 0n)).toBe(tts.reduce((n, r) => n + costOf(r.characters, FLITE_PRICE), 0n));
    // The call's row in the request log: the route's pattern (never the token), the key, the profile.
    const [row] = await vi.waitFor(
      async () => {
        await h.runtime.ctx.requestLog!.flush();
        const found = await h.testDb.db.prisma.requestLog.findMany({ where: { orgId: line.orgId } });
        expect(found).toHaveLength(1);
        return found;
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(row).toMatchObject({ route: '/phone/twilio/:token', kind: 'session', apiKeyId: line.keyId, modelId: 'rt-llm', status: 101 });
    expect(JSON.stringify(row, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(line.token);
  }, 120_000);

  it('the caller talking over the answer: a clear, nothing more of that answer, and the next prompt holds the part heard', async () => {
    const line = await phoneLine('rt-slow');
    const call = await dial(streamUrl('twilio', line.token), 'twilio');
    const asked = slowLlm.received.length;
    call.silence(300);
    call.send(question);
    call.silence(1500);
    await call.commands.first(() => call.receivedMs >= 1_500, { timeoutMs: 60_000 });
    // 600 ms of the answer played (its marks echoed), then the caller speaks while it still plays.
    call.silence(600);
    expect(call.playedAtLastMark).toBe(600);
    const cut = call.echoed.at(-1)!.split(':')[0]!;
    const interruption = wavToMulaw8k((await speech('stop please')).wav);
    call.send(interruption, { play: false });
    call.silence(1500, { play: false });
    const clearAt = call.commands.events.indexOf(await call.commands.first((c) => c.event === 'clear', { timeoutMs: 60_000 }));
    // The marks the clear dropped were echoed (as Twilio does), and no more of the cut answer came.
    expect(call.violations).toEqual([]);
    // The turn spoken over the answer is answered: its prompt holds what the caller heard of the first answer.
    await vi.waitFor(() => expect(slowLlm.received.length).toBe(asked + 2), { timeout: 60_000, interval: 50 });
    const messages = (JSON.parse(slowLlm.received.at(-1)!.body.toString()) as { messages: { role: string; content: string }[] }).messages;
    const heard = messages.find((m) => m.role === 'assistant')!.content;
    const full = SLOW_REPLY.join('').trim();
    expect(heard.length).toBeGreaterThan(0);
    expect(heard.length).toBeLessThan(SLOW_REPLY[0]!.length * 3);
    expect(full.startsWith(heard)).toBe(true);
    expect(call.commands.events.slice(clearAt).some((c) => markName(c).startsWith(`${cut}:`))).toBe(false);
    call.stop();
    await call.closed;
  }, 120_000);
});

describe('a Telnyx call', () => {
  it('the same exchange in its dialect: PCMU media and marks without a stream id', async () => {
    const line = await phoneLine();
    const call = await dial(streamUrl('telnyx', line.token), 'telnyx');
    call.silence(300);
    call.send(question);
    call.silence(1500);
    await answerSent(call);
    listenToTheEnd(call);
    expect(call.playedAtLastMark).toBe(call.receivedMs);
    expect(call.violations).toEqual([]);
    const first = call.commands.events.find((c) => c.event === 'media')!;
    expect(Object.keys(first).sort()).toEqual(['event', 'media']);
    expect(Object.keys(call.commands.events.find((c) => c.event === 'mark')!).sort()).toEqual(['event', 'mark']);
    const res = await transcribe(h, wavFile([mulawSamples(call.played)], 8000), { model: 'local-stt' });
    expect(((await res.json()) as { text: string }).text).toMatch(/weather/);
    call.stop();
    expect(await call.closed).toMatchObject({ code: 1000 });
  }, 120_000);
});

describe('ending a call', () => {
  it('a revoked phone token ends its call within a second of the gateway clock (1008 api_key_disabled)', async () => {
    const line = await phoneLine();
    const call = await dial(streamUrl('twilio', line.token), 'twilio');
    const other = await dial(streamUrl('twilio', (await phoneLine()).token), 'twilio');
    await revokePhoneToken(h.testDb.db.prisma, { id: line.tokenId });
    clock.advance(1_000);
    expect(await call.closed).toEqual({ code: 1008, reason: 'api_key_disabled' });
    // A call on another token goes on.
    expect(other.ws.readyState).toBe(other.ws.OPEN);
    other.stop();
    expect((await other.closed).code).toBe(1000);
  }, 60_000);

  it('a revoked key ends the calls of its tokens (1008 api_key_disabled)', async () => {
    const line = await phoneLine();
    const call = await dial(streamUrl('twilio', line.token), 'twilio');
    await revokeApiKey(h.testDb.db.prisma, { id: line.keyId });
    expect(await call.closed).toEqual({ code: 1008, reason: 'api_key_disabled' });
  }, 60_000);

  it('a carrier that sends what is not its protocol is closed after the allowance (1008), as the WebSocket route closes a client', async () => {
    const line = await phoneLine();
    const call = await dial(streamUrl('twilio', line.token), 'twilio');
    for (let i = 0; i < 150; i++) call.raw(i % 2 ? 'not json' : JSON.stringify({ event: 'nonsense' }));
    // The carrier has read the close frame; the gateway reads nothing more and ends the socket after the grace, on its clock.
    await expect.poll(() => call.ws.readyState, { timeout: 10_000 }).toBe(call.ws.CLOSING);
    clock.advance(DEFAULT_LINK_LIMITS.closeGraceMs);
    expect(await call.closed).toEqual({ code: 1008, reason: TOO_MANY_INVALID_MESSAGES });
    // Nothing of it reached the carrier: a carrier has no use for error events.
    expect(call.commands.events).toEqual([]);
  }, 60_000);
});

describe('before the upgrade', () => {
  const path = (carrier: CarrierName | 'plivo', token: string) => `/phone/${carrier}/${token}`;

  it('refuses a wrong, revoked or absent token (401), an unknown profile (404), no credit (402), each in the envelope', async () => {
    const line = await phoneLine();
    const wrong = await refusedUpgrade(h, {}, {}, path('twilio', `pt_svc_${'x'.repeat(43)}`));
    expect(wrong.status).toBe(401);
    expect(JSON.parse(wrong.body)).toMatchObject({ error: { code: 'invalid_api_key', type: 'invalid_request_error' } });
    expect((await refusedUpgrade(h, {}, {}, path('telnyx', 'nope'))).status).toBe(401);
    const revoked = await phoneLine();
    await revokePhoneToken(h.testDb.db.prisma, { id: revoked.tokenId });
    const gone = await refusedUpgrade(h, {}, {}, path('twilio', revoked.token));
    expect(gone.status).toBe(401);
    expect(JSON.parse(gone.body)).toMatchObject({ error: { code: 'api_key_disabled' } });
    const noProfile = await phoneLine('no-such-profile');
    const unknown = await refusedUpgrade(h, {}, {}, path('twilio', noProfile.token));
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body)).toMatchObject({ error: { code: 'model_not_found' } });
    const broke = await phoneLine('rt-llm', 0n);
    const zero = await refusedUpgrade(h, {}, {}, path('twilio', broke.token));
    expect(zero.status).toBe(402);
    expect(JSON.parse(zero.body)).toMatchObject({ error: { code: 'insufficient_quota' } });
    // A plain request with a good token: not a WebSocket.
    const plain = await fetch(`${h.url}${path('twilio', line.token)}`);
    expect(plain.status).toBe(400);
    expect(await plain.json()).toMatchObject({ error: { code: 'upgrade_required' } });
    expect((await fetch(`${h.url}${path('plivo', line.token)}`)).status).toBe(404);
  }, 60_000);

  it("a key's calls are capped as its sessions are: past the cap, 429 before the upgrade", async () => {
    const line = await phoneLine();
    const calls = [await dial(streamUrl('twilio', line.token), 'twilio'), await dial(streamUrl('twilio', line.token), 'twilio')];
    const third = await refusedUpgrade(h, {}, {}, path('twilio', line.token));
    expect(third.status).toBe(429);
    expect(JSON.parse(third.body)).toMatchObject({ error: { code: 'rate_limit_exceeded' } });
    for (const c of calls) c.stop();
    await Promise.all(calls.map((c) => c.closed));
  }, 60_000);
});
