// WS /phone/twilio/:token and /phone/telnyx/:token on the wire: a scripted carrier
// (test/support/scripted-carrier.ts, written from Twilio's and Telnyx's references) calls the
// real gateway runtime, which answers with the local recognizer (pocketsphinx), flite and a
// scripted OpenAI-compatible LLM. The call's time is the caller's audio; the gateway's timers
// (the phone tokens' revocation watch) run on a manual clock.
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from 'vitest';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import { createPhoneToken } from '../../server/services/phone/create-phone-token.ts';
import { revokePhoneToken } from '../../server/services/phone/revoke-phone-token.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { A_WINDOW_START, manualClock } from '../../test/support/manual-clock.ts';
import {
  bytesPerMs,
  dial,
  lineAudio,
  type CarrierCommand,
  type CarrierName,
  type DialOptions,
  type ScriptedCall,
  type WireFormat,
} from '../../test/support/scripted-carrier.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { STT_PRICE, audioCost, refusedUpgrade, settleRecognizers, speech, startSttGateway, transcribe, wavFile, wer } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE, costOf } from '../../test/support/tts-routes.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { START_TIMEOUT_MS } from '../phone/phone-bridge.ts';
import { DEFAULT_LINK_LIMITS, TOO_MANY_INVALID_MESSAGES } from '../sessions/websocket-link.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

const PRICE_IN = 150_001n;
const PRICE_OUT = 600_003n;
const REPLY = ['The ', 'weather ', 'is ', 'sunny', '.'];
const REPLY_TEXT = REPLY.join('');
const QUESTION = 'what is the weather like today';
const SLOW_REPLY = Array.from({ length: 600 }, (_, i) => `Sentence number ${i} is here. `);
const clock = manualClock(A_WINDOW_START + 15_000);

let h: GatewayHarness;
let llm: ScriptedUpstream;
let slowLlm: ScriptedUpstream;
let longLlm: ScriptedUpstream;

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
  // A minute of speech, all of it at once.
  longLlm = await startScriptedUpstream({ kind: 'stream', chunks: SLOW_REPLY.slice(0, 40), usage: { prompt_tokens: 40, completion_tokens: 200 } });
  const prices = { inputPicoPerToken: PRICE_IN, outputPicoPerToken: PRICE_OUT };
  await upsertModel(prisma, checkProtocol, { id: 'rt-llm', modality: 'llm', prices, upstream: { url: llm.baseUrl, protocol: 'openai' } });
  await upsertModel(prisma, checkProtocol, { id: 'rt-slow', modality: 'llm', prices, upstream: { url: slowLlm.baseUrl, protocol: 'openai' } });
  await upsertModel(prisma, checkProtocol, { id: 'rt-long', modality: 'llm', prices, upstream: { url: longLlm.baseUrl, protocol: 'openai' } });
  await h.runtime.ctx.registry.refresh();
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([llm?.close(), slowLlm?.close(), longLlm?.close()]);
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

/** Where the call's phone token goes: the stream URL's path, or the start's custom parameters (svc_token). */
type TokenIn = 'path' | 'parameters';

/** A call on this token, hung up however the test ends (an open call holds its key's stream place and its billing). */
async function dialed(carrier: CarrierName, token: string, options: DialOptions = {}, tokenIn: TokenIn = 'path'): Promise<ScriptedCall> {
  const c =
    tokenIn === 'path'
      ? await dial(streamUrl(carrier, token), carrier, options)
      : await dial(`${h.url.replace(/^http/, 'ws')}/phone/${carrier}`, carrier, { ...options, parameters: { ...options.parameters, svc_token: token } });
  onTestFinished(() => c.ws.terminate());
  return c;
}
const markName = (c: CarrierCommand) => (c.kind === 'mark' ? c.name : '');
/** The answer's audio all sent: its last mark. */
const answerSent = (call: ScriptedCall) => call.commands.first((c) => markName(c).endsWith(':end'), { timeoutMs: 60_000 });
/** The caller stays on the line (silence) until everything queued has played. */
function listenToTheEnd(call: ScriptedCall): number {
  const ms = Math.ceil((call.receivedMs - call.playedMs) / 20) * 20 + 20;
  call.silence(ms);
  return ms;
}
const llmCost = (input: number, output: number): bigint => (BigInt(input) * PRICE_IN + BigInt(output) * PRICE_OUT + 999_999n) / 1_000_000n;

/** A sentence spoken by flite, as a stream of this format carries it (whole 20 ms frames). */
const spoken = new Map<string, Buffer>();
async function say(text: string, format: WireFormat): Promise<Buffer> {
  const key = `${text}|${format.encoding}|${format.sampleRate}`;
  if (!spoken.has(key)) spoken.set(key, lineAudio((await speech(text)).wav, format));
  return spoken.get(key)!;
}

async function billed(): Promise<void> {
  expect(await h.runtime.ctx.lifecycle.settled(10_000)).toBe(true);
  await h.settled();
}

/**
 * A whole call: the caller's question (flite) in the stream's format, transcribed by the
 * gateway for the LLM; the answer played back in full and transcribed to its words; the
 * carrier hangs up; each leg billed at its price, the caller's audio to the millisecond.
 */
async function answeredAndBilled(carrier: CarrierName, options: DialOptions = {}, tokenIn: TokenIn = 'path') {
  const line = await phoneLine();
  const asked = llm.received.length;
  const call = await dialed(carrier, line.token, options, tokenIn);
  const question = await say(QUESTION, call.format);
  let sentMs = 300 + question.length / bytesPerMs(call.format) + 1500;
  call.silence(300);
  call.send(question);
  call.silence(1500);
  const end = await answerSent(call);
  sentMs += listenToTheEnd(call);
  // Every mark echoed, the answer's last one at its very end: the caller heard all of it.
  expect(call.echoed.at(-1)).toBe(markName(end));
  expect(call.playedAtLastMark).toBe(call.receivedMs);
  expect(call.violations).toEqual([]);
  // The caller's words reached the LLM; what the caller heard is the answer, spoken: transcribed back at the line's rate.
  const prompt = JSON.parse(llm.received[asked]!.body.toString()) as { messages: { role: string; content: string }[] };
  // (The local recognizer, made for 16 kHz, hears telephone-band audio less well: half the words at 8 kHz.)
  const heard = prompt.messages.find((m) => m.role === 'user')!.content;
  expect(wer(QUESTION, heard), heard).toBeLessThanOrEqual(call.format.sampleRate >= 16_000 ? 0 : 0.5);
  const res = await transcribe(h, wavFile([call.playedSamples()], call.format.sampleRate), { model: 'local-stt' });
  expect(((await res.json()) as { text: string }).text).toMatch(/weather/);
  call.stop();
  expect(await call.closed).toMatchObject({ code: 1000 });
  await billed();
  // Each leg on the ledger at its price: every millisecond of the caller's audio, the tokens, the characters spoken.
  const rows = await usageRows(h.testDb.db.prisma, { orgId: line.orgId });
  expect(rows.every((r) => r.apiKeyId === line.keyId && r.route === 'realtime')).toBe(true);
  const stt = rows.filter((r) => r.modality === 'stt');
  expect(stt.reduce((n, r) => n + r.audioMillis, 0)).toBe(sentMs);
  expect(stt.reduce((n, r) => n + r.costMicros, 0n)).toBe(audioCost(sentMs, STT_PRICE));
  expect(rows.filter((r) => r.modality === 'llm').map((r) => [r.inputTokens, r.outputTokens, r.costMicros])).toEqual([[40, 6, llmCost(40, 6)]]);
  const tts = rows.filter((r) => r.modality === 'tts');
  expect(tts.reduce((n, r) => n + r.characters, 0)).toBe(REPLY_TEXT.length);
  expect(tts.reduce((n, r) => n + r.costMicros, 0n)).toBe(tts.reduce((n, r) => n + costOf(r.characters, FLITE_PRICE), 0n));
  return { call, line };
}

/**
 * The caller talks over a long answer once 600 ms of it have played: the carrier is told to
 * clear, nothing more of that answer comes, and the LLM's next prompt holds the part heard.
 * Returns the commands from the clear on.
 */
async function spokenOver(carrier: CarrierName, options: DialOptions = {}): Promise<{ call: ScriptedCall; afterClear: CarrierCommand[] }> {
  const line = await phoneLine('rt-slow');
  const call = await dialed(carrier, line.token, options);
  const asked = slowLlm.received.length;
  call.silence(300);
  call.send(await say(QUESTION, call.format));
  call.silence(1500);
  await call.commands.first(() => call.receivedMs >= 1_500, { timeoutMs: 60_000 });
  // 600 ms of the answer played (its marks echoed), then the caller speaks while it still plays.
  call.silence(600);
  expect(call.playedAtLastMark).toBe(600);
  const cut = call.echoed.at(-1)!.split(':')[0]!;
  call.send(await say('stop please', call.format), { play: false });
  call.silence(1500, { play: false });
  const clearAt = call.commands.events.indexOf(await call.commands.first((c) => c.kind === 'clear', { timeoutMs: 60_000 }));
  expect(call.violations).toEqual([]);
  // The turn spoken over the answer is answered: its prompt holds what the caller heard of the first answer.
  await vi.waitFor(() => expect(slowLlm.received.length).toBe(asked + 2), { timeout: 60_000, interval: 50 });
  const messages = (JSON.parse(slowLlm.received.at(-1)!.body.toString()) as { messages: { role: string; content: string }[] }).messages;
  const heard = messages.find((m) => m.role === 'assistant')!.content;
  const full = SLOW_REPLY.join('').trim();
  expect(heard.length).toBeGreaterThan(0);
  expect(heard.length).toBeLessThan(SLOW_REPLY[0]!.length * 3);
  expect(full.startsWith(heard)).toBe(true);
  const afterClear = call.commands.events.slice(clearAt);
  // No more of the cut answer after the clear.
  expect(afterClear.some((c) => markName(c).startsWith(`${cut}:`))).toBe(false);
  call.stop();
  await call.closed;
  return { call, afterClear };
}

describe('a Twilio call', () => {
  it('a spoken question is answered in 20 ms μ-law media frames with marks, and the call is billed per second and per token', async () => {
    const { call, line } = await answeredAndBilled('twilio', { parameters: { caller: '+15550199' } });
    const commands = call.commands.events;
    // 20 ms frames; only an answer's last one may be shorter (then its end mark follows).
    commands.forEach((c, i) => {
      if (c.kind === 'audio' && c.audio.length !== 160) expect(markName(commands[i + 1]!)).toMatch(/:end$/);
    });
    expect(commands.filter((c) => c.kind === 'audio').length).toBeGreaterThan(25);
    // A mark at least every 100 ms of audio, each after the media it follows.
    expect(commands.filter((c) => c.kind === 'mark').length).toBeGreaterThanOrEqual(Math.floor(call.receivedMs / 100));
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
    const { call, afterClear } = await spokenOver('twilio');
    expect(afterClear[0]!.message).toEqual({ event: 'clear', streamSid: call.streamId });
  }, 120_000);
});

describe('a Telnyx call', () => {
  it('the same exchange in its dialect: PCMU media and marks without a stream id', async () => {
    const { call } = await answeredAndBilled('telnyx');
    const first = call.commands.events.find((c) => c.kind === 'audio')!;
    expect(Object.keys(first.message!).sort()).toEqual(['event', 'media']);
    const mark = call.commands.events.find((c) => c.kind === 'mark')!;
    expect(Object.keys(mark.message).sort()).toEqual(['event', 'mark']);
  }, 120_000);
});

describe('a Plivo call', () => {
  it("L16 at 16 kHz: answered in playAudio of the stream's own format with checkpoints, billed to the millisecond", async () => {
    const { call } = await answeredAndBilled('plivo', { format: { encoding: 'pcm_s16le', sampleRate: 16000 } });
    const audio = call.commands.events.filter((c) => c.kind === 'audio');
    // 20 ms of 16-bit PCM at 16 kHz a message, the answer's last one shorter.
    expect(audio.filter((c) => c.audio.length === 640).length).toBeGreaterThan(audio.length - 2);
    expect(audio[0]!.message).toMatchObject({ event: 'playAudio', media: { contentType: 'audio/x-l16', sampleRate: 16000 } });
  }, 120_000);

  it('μ-law: talked over, the audio is cleared (clearAudio) and the answer cut where the played checkpoints say', async () => {
    const { call, afterClear } = await spokenOver('plivo', { format: { encoding: 'pcm_mulaw', sampleRate: 8000 } });
    expect(afterClear[0]!.message).toEqual({ event: 'clearAudio', streamId: call.streamId });
  }, 120_000);
});

describe('an Exotel call', () => {
  it('raw 16-bit PCM at 8 kHz: answered in chunks of 3.2 KB, each a multiple of 320 bytes, billed to the millisecond', async () => {
    const { call } = await answeredAndBilled('exotel');
    const commands = call.commands.events;
    // 3,200 bytes (200 ms) a chunk; an answer's last one shorter, padded to whole 20 ms (the wire counts any other size as a violation).
    commands.forEach((c, i) => {
      if (c.kind === 'audio' && c.audio.length !== 3200) expect(markName(commands[i + 1]!)).toMatch(/:end$/);
    });
    expect(Object.keys(commands.find((c) => c.kind === 'audio')!.message!).sort()).toEqual(['event', 'media', 'stream_sid']);
    expect(commands.find((c) => c.kind === 'mark')!.message).toMatchObject({ event: 'mark', stream_sid: call.streamId });
  }, 120_000);

  it('talked over: a clear with its stream_sid, and the answer cut where the echoed marks say', async () => {
    const { call, afterClear } = await spokenOver('exotel', { format: { encoding: 'pcm_s16le', sampleRate: 16000 } });
    expect(afterClear[0]!.message).toEqual({ event: 'clear', stream_sid: call.streamId });
  }, 120_000);
});

describe('a Vonage call', () => {
  it('binary L16 at 16 kHz after websocket:connected: answered in 640-byte frames with notifies, billed to the millisecond', async () => {
    const { call } = await answeredAndBilled('vonage');
    const audio = call.commands.events.filter((c) => c.kind === 'audio');
    // Binary messages, each exactly 20 ms (the wire counts any other size as a violation).
    expect(audio.every((c) => c.message === null && c.audio.length === 640)).toBe(true);
    expect(call.commands.events.find((c) => c.kind === 'mark')!.message).toMatchObject({
      action: 'notify',
      payload: { name: expect.stringMatching(/^item_/) },
    });
  }, 120_000);

  it('talked over: {"action":"clear"}, and the answer cut where the notifies say', async () => {
    const { afterClear } = await spokenOver('vonage', { format: { encoding: 'pcm_s16le', sampleRate: 8000 } });
    expect(afterClear[0]!.message).toEqual({ action: 'clear' });
  }, 120_000);

  it('a long answer held at 10 s ahead of what was played (Vonage buffers a bounded number of frames) goes on as the notifies come back', async () => {
    const line = await phoneLine('rt-long');
    const call = await dialed('vonage', line.token);
    call.silence(300);
    call.send(await say(QUESTION, call.format));
    call.silence(1500);
    await call.commands.first(() => call.receivedMs >= 10_000, { timeoutMs: 60_000 });
    // The caller listens 3 s at a time: as the notifies come back, more audio follows, never more than 10 s unplayed
    // and the sentence that crossed it (the audio of a sentence, about 2 s, comes at once).
    for (let i = 0; i < 4; i++) {
      const before = call.receivedMs;
      call.silence(3000);
      await call.commands.first(() => call.receivedMs >= before + 500, { timeoutMs: 60_000 });
      expect(call.receivedMs - call.playedMs).toBeLessThanOrEqual(13_000);
    }
    expect(call.violations).toEqual([]);
    call.stop();
    await call.closed;
  }, 120_000);
});

describe("the token in the start's custom parameters (svc_token)", () => {
  const noToken = (carrier: CarrierName, options: DialOptions = {}) => dial(`${h.url.replace(/^http/, 'ws')}/phone/${carrier}`, carrier, options);

  it('Twilio\'s <Parameter name="svc_token">: admitted at the start, answered and billed as with the token in the path; logged as /phone/twilio', async () => {
    const { line } = await answeredAndBilled('twilio', {}, 'parameters');
    const [row] = await vi.waitFor(
      async () => {
        await h.runtime.ctx.requestLog!.flush();
        const found = await h.testDb.db.prisma.requestLog.findMany({ where: { orgId: line.orgId } });
        expect(found).toHaveLength(1);
        return found;
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(row).toMatchObject({ route: '/phone/twilio', kind: 'session', apiKeyId: line.keyId, modelId: 'rt-llm', status: 101 });
    expect(JSON.stringify(row, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(line.token);
  }, 120_000);

  it.each([['telnyx'], ['plivo'], ['exotel'], ['vonage']] as const)(
    "%s's custom parameters carry it too (custom_parameters, extraHeaders, the applet URL's, the NCCO's headers): the call is answered",
    async (carrier) => {
      const line = await phoneLine();
      const call = await dialed(carrier, line.token, {}, 'parameters');
      call.silence(300);
      call.send(await say(QUESTION, call.format));
      call.silence(1500);
      await answerSent(call);
      expect(call.violations).toEqual([]);
      call.stop();
      await call.closed;
    },
    120_000,
  );

  it("refused after the upgrade with 1008 and why, nothing it sent handled: no token, a wrong or revoked one, no credit, no such profile, the key's cap", async () => {
    const asked = llm.received.length;
    /** A call whose start carries `token`, the caller's question right after it: how it was closed. */
    const refused = async (token: string | null, carrier: CarrierName = 'twilio') => {
      const c = await noToken(carrier, { parameters: token === null ? {} : { svc_token: token } });
      onTestFinished(() => c.ws.terminate());
      c.send(await say(QUESTION, c.format));
      return c.closed;
    };
    expect(await refused(null)).toEqual({ code: 1008, reason: 'invalid_api_key' });
    expect(await refused(`pt_svc_${'x'.repeat(43)}`, 'vonage')).toEqual({ code: 1008, reason: 'invalid_api_key' });
    const revoked = await phoneLine();
    await revokePhoneToken(h.testDb.db.prisma, { id: revoked.tokenId });
    expect(await refused(revoked.token, 'plivo')).toEqual({ code: 1008, reason: 'api_key_disabled' });
    const broke = await phoneLine('rt-llm', 0n);
    expect(await refused(broke.token, 'exotel')).toEqual({ code: 1008, reason: 'insufficient_quota' });
    const noProfile = await phoneLine('no-such-profile');
    expect(await refused(noProfile.token, 'telnyx')).toEqual({ code: 1008, reason: 'model_not_found' });
    // The key's two calls (SVC_MAX_STREAMS_PER_KEY): one admitted before its upgrade (the token in
    // its path), then two that bring the token in their start. Of those two, the one whose key
    // lookup ends last is refused: on PostgreSQL the lookups are queries in flight together, so
    // either may be; the other stays on the line.
    const busy = await phoneLine();
    await dialed('twilio', busy.token);
    const second = await dialed('twilio', busy.token, {}, 'parameters');
    const third = await dialed('twilio', busy.token, {}, 'parameters');
    const outcome = await Promise.race([second.closed.then((close) => ({ close, other: third })), third.closed.then((close) => ({ close, other: second }))]);
    expect(outcome.close).toEqual({ code: 1008, reason: 'rate_limit_exceeded' });
    expect(outcome.other.ws.readyState).toBe(outcome.other.ws.OPEN);
    // Nothing the refused calls sent was transcribed, answered or billed.
    await billed();
    for (const line of [revoked, broke, noProfile]) expect(await usageRows(h.testDb.db.prisma, { orgId: line.orgId })).toEqual([]);
    expect(llm.received.length).toBe(asked);
  }, 60_000);

  it('a carrier that sends no start within 5 s of the gateway clock is closed: 1008 start_timeout', async () => {
    const c = await noToken('twilio', { start: false });
    onTestFinished(() => c.ws.terminate());
    // (The bridge's timer is set once the gateway has the socket: moved past it until it has.)
    await vi.waitFor(
      () => {
        clock.advance(START_TIMEOUT_MS);
        expect(c.ws.readyState).not.toBe(c.ws.OPEN);
      },
      { timeout: 10_000, interval: 20 },
    );
    expect(await c.closed).toEqual({ code: 1008, reason: 'start_timeout' });
  }, 30_000);

  it('a revoked token ends the call it admitted from the parameters within a second (1008 api_key_disabled)', async () => {
    const line = await phoneLine();
    const call = await dialed('telnyx', line.token, {}, 'parameters');
    call.silence(300);
    call.send(await say(QUESTION, call.format));
    call.silence(1500);
    // Admitted and live: the answer plays.
    await call.commands.first((c) => c.kind === 'audio', { timeoutMs: 60_000 });
    await revokePhoneToken(h.testDb.db.prisma, { id: line.tokenId });
    clock.advance(1_000);
    expect(await call.closed).toEqual({ code: 1008, reason: 'api_key_disabled' });
  }, 120_000);

  it('a plain GET is 400 upgrade_required, with no key asked for', async () => {
    const plain = await fetch(`${h.url}/phone/twilio`);
    expect(plain.status).toBe(400);
    expect(await plain.json()).toMatchObject({ error: { code: 'upgrade_required' } });
  });
});

describe('ending a call', () => {
  it('a revoked phone token ends its call within a second of the gateway clock (1008 api_key_disabled)', async () => {
    const line = await phoneLine();
    const call = await dialed('twilio', line.token);
    const other = await dialed('twilio', (await phoneLine()).token);
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
    const call = await dialed('twilio', line.token);
    await revokeApiKey(h.testDb.db.prisma, { id: line.keyId });
    expect(await call.closed).toEqual({ code: 1008, reason: 'api_key_disabled' });
  }, 60_000);

  it('a carrier that sends what is not its protocol is closed after the allowance (1008), as the WebSocket route closes a client', async () => {
    const line = await phoneLine();
    const call = await dialed('twilio', line.token);
    for (let i = 0; i < 150; i++) call.raw(i % 2 ? 'not json' : JSON.stringify({ event: 'nonsense' }));
    // The carrier has read the close frame; the gateway reads nothing more and ends the socket after the grace, on its clock.
    await expect.poll(() => call.ws.readyState, { timeout: 10_000 }).toBe(call.ws.CLOSING);
    clock.advance(DEFAULT_LINK_LIMITS.closeGraceMs);
    expect(await call.closed).toEqual({ code: 1008, reason: TOO_MANY_INVALID_MESSAGES });
    // Nothing of it reached the carrier: a carrier has no use for error events.
    expect(call.commands.events).toEqual([]);
    expect(call.violations).toEqual([]);
  }, 60_000);
});

describe('before the upgrade', () => {
  const path = (carrier: CarrierName | 'sinch', token: string) => `/phone/${carrier}/${token}`;

  it('refuses a wrong, revoked or absent token (401), an unknown profile (404), no credit (402), each in the envelope', async () => {
    const line = await phoneLine();
    const wrong = await refusedUpgrade(h, {}, {}, path('twilio', `pt_svc_${'x'.repeat(43)}`));
    expect(wrong.status).toBe(401);
    expect(JSON.parse(wrong.body)).toMatchObject({ error: { code: 'invalid_api_key', type: 'invalid_request_error' } });
    for (const carrier of ['telnyx', 'plivo', 'exotel', 'vonage'] as const) expect((await refusedUpgrade(h, {}, {}, path(carrier, 'nope'))).status).toBe(401);
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
    expect((await fetch(`${h.url}${path('sinch', line.token)}`)).status).toBe(404);
  }, 60_000);

  it("a key's calls are capped as its sessions are: past the cap, 429 before the upgrade", async () => {
    const line = await phoneLine();
    const calls = [await dialed('twilio', line.token), await dialed('twilio', line.token)];
    const third = await refusedUpgrade(h, {}, {}, path('twilio', line.token));
    expect(third.status).toBe(429);
    expect(JSON.parse(third.body)).toMatchObject({ error: { code: 'rate_limit_exceeded' } });
    for (const c of calls) c.stop();
    await Promise.all(calls.map((c) => c.closed));
  }, 60_000);
});
