// Abuse resistance and money safety (issue 17), through the real gateway on the test database
// (SQLite, and PostgreSQL on the second pass): cost reserved before any engine work and settled
// by the debit; caps on what one key, one org and the process may run at once; engine state
// allocated only when used; revocation reaching work that is already running.
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiKey } from '../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../server/services/keys/revoke-api-key.ts';
import { createOrg } from '../server/services/orgs/create-org.ts';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { openDecoders } from './upstreams/pocketsphinx/recognizer.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../test/support/scripted-openai-upstream.ts';
import type { GatewayHarness } from '../test/support/gateway-harness.ts';
import { A_WINDOW_START, manualClock } from '../test/support/manual-clock.ts';
import { openSession, refusedUpgrade, s16le, speech, startSttGateway, transcribe, wavFile, type SttClient } from '../test/support/stt-routes.ts';
import { FLITE_PRICE, costOf, expectError, post, sseReader, ttsBody } from '../test/support/tts-routes.ts';
import { seedPlatformVoices } from '../server/services/voices/seed-platform-voices.ts';
import { newId } from '../server/db/ids.ts';
import { checkProtocol } from './upstreams/protocols/index.ts';

vi.setConfig({ testTimeout: 60_000 });

let h: GatewayHarness;
let upstream: ScriptedUpstream;

beforeAll(async () => {
  upstream = await startScriptedUpstream({ kind: 'ok', usage: { prompt_tokens: 3, completion_tokens: 4 } });
  h = await startSttGateway({
    env: {
      SVC_MAX_STREAMS_PER_KEY: '3',
      SVC_TRIAL_MAX_STREAMS_PER_KEY: '1',
      SVC_MAX_STREAMS_PER_ORG: '4',
      SVC_MAX_STREAMS: '6',
      SVC_STT_MAX_DECODERS: '2',
      SVC_STT_MAX_DECODERS_PER_ORG: '1',
      SVC_LLM_RESERVE_MAX_TOKENS: '50',
    },
  });
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'local-flite',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:flite', protocol: 'flite' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'local-espeak',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'local:espeak-ng', protocol: 'espeak-ng' },
  });
  // An engine that cannot be reached: its failure must give the reservation back.
  await upsertModel(prisma, checkProtocol, {
    id: 'dead-tts',
    modality: 'tts',
    prices: { picoPerChar: FLITE_PRICE },
    upstream: { url: 'http://127.0.0.1:9/v1', protocol: 'openai' },
  });
  // 1 micro-USD per token, in and out.
  await upsertModel(prisma, checkProtocol, {
    id: 'priced-llm',
    modality: 'llm',
    prices: { inputPicoPerToken: 1_000_000n, outputPicoPerToken: 1_000_000n },
    upstream: { url: upstream.baseUrl, protocol: 'openai' },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'capped-llm',
    modality: 'llm',
    maxOutputTokens: 10,
    prices: { inputPicoPerToken: 1_000_000n, outputPicoPerToken: 1_000_000n },
    upstream: { url: upstream.baseUrl, protocol: 'openai' },
  });
  await seedPlatformVoices(prisma);
  await prisma.voiceProfile.create({ data: { id: newId('vpr'), voiceId: 'flite-slt', modelId: 'dead-tts', upstreamId: 'alloy' } });
  await h.runtime.ctx.registry.refresh();
  await h.runtime.ctx.health.checkAll();
});

afterAll(async () => {
  await h?.close();
  await upstream?.close();
});

/** A fresh org with `micros` of credit and a key on it. */
async function account(micros: bigint, options: { trial?: boolean } = {}) {
  const org = await createOrg(h.testDb.db, { name: 'abuse', creditsMicros: micros });
  const key = await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'k', rateLimitRpm: 100_000, isTrial: options.trial });
  return { orgId: org.id, keyId: key.id, key: key.key, headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' } };
}

const orgRow = (orgId: string) => h.testDb.db.prisma.org.findUniqueOrThrow({ where: { id: orgId } });

/** Reservations are given back when responses close: wait for the org to hold nothing. */
async function expectNothingHeld(orgId: string) {
  await expect.poll(async () => (await orgRow(orgId)).heldMicros, { timeout: 10_000 }).toBe(0n);
}

const sentence = (n: number) => 'The quick brown fox jumps over the lazy dog. '.repeat(Math.ceil(n / 45)).slice(0, n);

describe('cost reserved at admission', () => {
  it('an org with $0.01 and 40 concurrent syntheses that cost $0.002 each: exactly five are served, the rest get 402, the balance never goes below zero', async () => {
    const a = await account(10_000n);
    const text = sentence(1000);
    const cost = costOf(1000, FLITE_PRICE);
    expect(cost).toBe(2_000n);
    const results = await Promise.all(
      Array.from({ length: 40 }, () =>
        post(h, '/tts/bytes', ttsBody({ transcript: text }), { headers: a.headers }).then(async (res) => ({ status: res.status, body: await res.text() })),
      ),
    );
    const served = results.filter((r) => r.status === 200).length;
    const refused = results.filter((r) => r.status === 402);
    expect(served + refused.length).toBe(40);
    expect(served).toBe(5);
    for (const r of refused) expect(JSON.parse(r.body).error).toMatchObject({ code: 'insufficient_quota', type: 'insufficient_quota' });
    // (On SQLite the last debits are committed just after their answers: wait for them.)
    await expectNothingHeld(a.orgId);
    await expect.poll(async () => (await orgRow(a.orgId)).balanceMicros).toBe(0n);
  });

  it('a synthesis whose engine fails, and one whose client leaves, give their reservation back and cost nothing', async () => {
    const a = await account(100_000n);
    const failed = await post(h, '/tts/bytes', ttsBody({ model_id: 'dead-tts', voice: 'flite-slt' }), { headers: a.headers });
    expect(failed.status).toBeGreaterThanOrEqual(500);
    const aborted = new AbortController();
    const leaving = post(h, '/tts/bytes', ttsBody({ transcript: sentence(3000) }), { headers: a.headers, signal: aborted.signal }).catch((e: Error) => e);
    await expect.poll(async () => (await orgRow(a.orgId)).heldMicros, { timeout: 10_000 }).toBeGreaterThan(0n);
    aborted.abort();
    expect(await leaving).toBeInstanceOf(Error);
    await expectNothingHeld(a.orgId);
    expect((await orgRow(a.orgId)).balanceMicros).toBe(100_000n);
  });

  it('batch transcription reserves the decoded duration before the engine runs', async () => {
    const s = await speech('Please call Stella.');
    const file = wavFile([s.samples], 16000);
    const seconds = s.samples.length / 16000;
    // 100 micro-USD per second: an org short of the clip's cost is refused before any work.
    const poor = await account(BigInt(Math.floor(seconds * 100)) - 10n);
    const refused = await transcribe(h, file, { model: 'local-stt' }, { key: poor.key });
    await expectError(refused, { status: 402, code: 'insufficient_quota', param: null, type: 'insufficient_quota' });
    expect((await orgRow(poor.orgId)).balanceMicros).toBe(BigInt(Math.floor(seconds * 100)) - 10n);
    const rich = await account(1_000_000n);
    const ok = await transcribe(h, file, { model: 'local-stt' }, { key: rich.key });
    expect(ok.status).toBe(200);
    await expectNothingHeld(rich.orgId);
  });

  it('chat reserves the prompt estimate and max_tokens (or the model or gateway ceiling without it), before the engine is called', async () => {
    const a = await account(60n);
    const chat = (body: Record<string, unknown>) =>
      fetch(`${h.url}/v1/chat/completions`, {
        method: 'POST',
        headers: a.headers,
        body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], ...body }),
      });
    const before = upstream.received.length;
    // max_tokens 1000 at 1 micro-USD a token: more than the 60 micro-USD there are.
    await expectError(await chat({ model: 'priced-llm', max_tokens: 1000 }), {
      status: 402,
      code: 'insufficient_quota',
      param: null,
      type: 'insufficient_quota',
    });
    // No max_tokens: the gateway's ceiling (SVC_LLM_RESERVE_MAX_TOKENS=50) plus the prompt is over 60 too.
    await expectError(await chat({ model: 'priced-llm' }), { status: 402, code: 'insufficient_quota', param: null, type: 'insufficient_quota' });
    expect(upstream.received.length).toBe(before);
    // The model's own ceiling (max_output_tokens 10) fits; so does an explicit small max_tokens.
    expect((await chat({ model: 'capped-llm' })).status).toBe(200);
    expect((await chat({ model: 'priced-llm', max_tokens: 5 })).status).toBe(200);
    await expectNothingHeld(a.orgId);
    // Each answer cost its reported 3 + 4 tokens: the reservations were settled, not charged.
    // (On SQLite a debit is committed just after its answer: wait for both.)
    await expect.poll(async () => (await orgRow(a.orgId)).balanceMicros).toBe(60n - 14n);
  });
});

describe('admission caps', () => {
  const query = (key: string) => ({ model: 'local-stt', api_key: key });

  it('streaming sessions per key: past the cap 429 with Retry-After before the upgrade; a closed session frees its place', async () => {
    const a = await account(1_000_000n);
    const open: SttClient[] = [];
    for (let i = 0; i < 3; i++) open.push(await openSession(h, query(a.key)));
    const refused = await refusedUpgrade(h, query(a.key));
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('1');
    expect(JSON.parse(refused.body).error).toMatchObject({ code: 'rate_limit_exceeded', type: 'rate_limit_error' });
    open[0]!.command({ type: 'close' });
    await open[0]!.closed;
    await expect.poll(() => h.runtime.ctx.admission.openStreams).toBe(2);
    open.push(await openSession(h, query(a.key)));
    for (const c of open.slice(1)) c.ws.close();
    await Promise.all(open.map((c) => c.closed));
    await expect.poll(() => h.runtime.ctx.admission.openStreams).toBe(0);
    await expectNothingHeld(a.orgId);
  });

  it('a trial key gets one session; an org gets four over all its keys; the process six (503)', async () => {
    const trial = await account(1_000_000n, { trial: true });
    const first = await openSession(h, query(trial.key));
    expect((await refusedUpgrade(h, query(trial.key))).status).toBe(429);

    const a = await account(1_000_000n);
    const second = await createApiKey(h.testDb.db.prisma, { orgId: a.orgId, name: 'k2', rateLimitRpm: 100_000 });
    const orgSessions = [
      await openSession(h, query(a.key)),
      await openSession(h, query(a.key)),
      await openSession(h, query(second.key)),
      await openSession(h, query(second.key)),
    ];
    const orgRefused = await refusedUpgrade(h, query(second.key));
    expect(orgRefused.status).toBe(429);
    expect(JSON.parse(orgRefused.body).error.message).toMatch(/organization/);

    // 1 trial + 4 of the org = 5 open: one more fits, then the process is full.
    const b = await account(1_000_000n);
    const sixth = await openSession(h, query(b.key));
    const full = await refusedUpgrade(h, query(b.key));
    expect(full.status).toBe(503);
    expect(JSON.parse(full.body).error).toMatchObject({ code: 'temporarily_unavailable', type: 'api_error' });
    for (const c of [first, ...orgSessions, sixth]) c.ws.close();
    await Promise.all([first, ...orgSessions, sixth].map((c) => c.closed));
    await expect.poll(() => h.runtime.ctx.admission.openStreams).toBe(0);
  });

  it('idle sessions hold no recognizer: decoders open at the first audio, and past the decoder pool a session is told to retry (1013)', async () => {
    const a = await account(1_000_000n);
    const b = await account(1_000_000n);
    const c = await account(1_000_000n);
    const idle = [await openSession(h, query(a.key)), await openSession(h, query(b.key)), await openSession(h, query(c.key))];
    for (const s of idle) s.command({ type: 'keepalive' });
    for (const s of idle) await s.until((e) => e.type === 'session.started');
    expect(openDecoders()).toBe(0);
    const audio = s16le((await speech('Please call Stella.')).samples);
    await idle[0]!.stream(audio.subarray(0, 32000), { frameBytes: 3200, intervalMs: 0 });
    await idle[1]!.stream(audio.subarray(0, 32000), { frameBytes: 3200, intervalMs: 0 });
    idle[0]!.command({ type: 'finalize' });
    idle[1]!.command({ type: 'finalize' });
    await idle[0]!.until((e) => e.type === 'flush_done');
    await idle[1]!.until((e) => e.type === 'flush_done');
    expect(openDecoders()).toBe(2);
    // The pool (SVC_STT_MAX_DECODERS=2) is full: the third session's first audio is refused.
    await idle[2]!.stream(audio.subarray(0, 3200), { frameBytes: 3200, intervalMs: 0 });
    const { code, reason } = await idle[2]!.closed;
    expect(code).toBe(1013);
    expect(reason).toBe('capacity');
    expect(idle[2]!.ofType('error')[0]).toMatchObject({ code: 'temporarily_unavailable' });
    idle[0]!.ws.close();
    idle[1]!.ws.close();
    await Promise.all(idle.map((s) => s.closed));
    await expect.poll(openDecoders).toBe(0);
  });

  it("one org holds at most its share of the recognizers (here 1 of 2): its next session's first audio is told to retry", async () => {
    const a = await account(1_000_000n);
    const first = await openSession(h, query(a.key));
    const second = await openSession(h, query(a.key));
    const audio = s16le((await speech('Please call Stella.')).samples);
    await first.stream(audio.subarray(0, 16000), { frameBytes: 3200, intervalMs: 0 });
    first.command({ type: 'finalize' });
    await first.until((e) => e.type === 'flush_done');
    await second.stream(audio.subarray(0, 3200), { frameBytes: 3200, intervalMs: 0 });
    const { code, reason } = await second.closed;
    expect(code).toBe(1013);
    expect(reason).toBe('capacity');
    expect(String(second.ofType('error')[0]!.message)).toMatch(/organization already holds 1 speech recognizers/);
    expect(openDecoders()).toBe(1);
    // Another org still gets the free one.
    const b = await account(1_000_000n);
    const other = await openSession(h, query(b.key));
    await other.stream(audio.subarray(0, 16000), { frameBytes: 3200, intervalMs: 0 });
    other.command({ type: 'finalize' });
    await other.until((e) => e.type === 'flush_done');
    expect(openDecoders()).toBe(2);
    first.ws.close();
    other.ws.close();
    await Promise.all([first.closed, other.closed]);
    await expect.poll(openDecoders).toBe(0);
  });

  it('requests in flight per key: past the cap 429 until one finishes (a trial key: one at a time)', async () => {
    const hanging = await startScriptedUpstream({ kind: 'hang' });
    const g = await startSttGateway({ env: { SVC_MAX_REQUESTS_PER_KEY: '2', SVC_TRIAL_MAX_REQUESTS_PER_KEY: '1' } });
    try {
      await upsertModel(g.testDb.db.prisma, checkProtocol, { id: 'hanging-llm', modality: 'llm', upstream: { url: hanging.baseUrl, protocol: 'openai' } });
      await g.runtime.ctx.registry.refresh();
      await g.runtime.ctx.health.checkAll();
      const keyOn = async (trial: boolean) => {
        const k = await createApiKey(g.testDb.db.prisma, { orgId: g.orgId, name: 'k', rateLimitRpm: 100_000, isTrial: trial });
        return { headers: { authorization: `Bearer ${k.key}`, 'content-type': 'application/json' } };
      };
      const a = await keyOn(false);
      const chat = (headers: Record<string, string>, signal?: AbortSignal) =>
        fetch(`${g.url}/v1/chat/completions`, {
          method: 'POST',
          headers,
          signal,
          body: JSON.stringify({ model: 'hanging-llm', messages: [{ role: 'user', content: 'Hi' }] }),
        });
      const stop = new AbortController();
      const running = [chat(a.headers, stop.signal).catch(() => null), chat(a.headers, stop.signal).catch(() => null)];
      await expect.poll(() => hanging.received.length).toBe(2);
      const third = await chat(a.headers);
      await expectError(third, { status: 429, code: 'rate_limit_exceeded', param: null, type: 'rate_limit_error' });
      expect(third.headers.get('retry-after')).toBe('1');
      stop.abort();
      await Promise.all(running);
      const trial = await keyOn(true);
      const trialStop = new AbortController();
      const trialRunning = chat(trial.headers, trialStop.signal).catch(() => null);
      await expect.poll(() => hanging.received.length).toBe(3);
      expect((await chat(trial.headers)).status).toBe(429);
      trialStop.abort();
      await trialRunning;
    } finally {
      await g.close();
      await hanging.close();
    }
  });

  it('a session that sends only keepalives is closed once it has been without audio for the silence limit', async () => {
    // Far apart, so that it is clear which limit closed a session; the sessions' timers run on this clock.
    const clock = manualClock(A_WINDOW_START + 15_000);
    const g = await startSttGateway({ clock, env: { SVC_STT_IDLE_SECONDS: '1', SVC_STT_MAX_SILENCE_SECONDS: '4' } });
    /** Sends a message every 0.2 s of the gateway's clock until the session closes (each handled before the clock moves: the pong of a ping after it comes later). */
    const repeatUntilClosed = async (c: SttClient, send: () => void) => {
      let closed = false;
      void c.closed.then(() => (closed = true));
      while (!closed) {
        send();
        c.ws.ping();
        await Promise.race([once(c.ws, 'pong'), c.closed]);
        clock.advance(200);
      }
      return c.closed;
    };
    try {
      const c = await openSession(g, { model: 'local-stt', api_key: g.key });
      const { code, reason } = await repeatUntilClosed(c, () => c.command({ type: 'keepalive' }));
      expect(code).toBe(1000);
      expect(reason).toBe('idle_timeout');
      expect(c.ofType('error')[0]).toMatchObject({ code: 'idle_timeout' });
      expect(String(c.ofType('error')[0]!.message)).toMatch(/No audio for 4 s/);
      // Text that is not a command does not keep a session open either.
      const d = await openSession(g, { model: 'local-stt', api_key: g.key });
      const closed = await repeatUntilClosed(d, () => d.command('not json'));
      expect(closed.reason).toBe('idle_timeout');
      expect(String(d.ofType('error').at(-1)!.message)).toMatch(/No audio or keepalive for 1 s/);
      // Nor do empty binary frames: only frames that carry audio are audio.
      const e = await openSession(g, { model: 'local-stt', api_key: g.key });
      const emptyClosed = await repeatUntilClosed(e, () => e.ws.send(Buffer.alloc(0)));
      expect(emptyClosed.reason).toBe('idle_timeout');
    } finally {
      await g.close();
    }
  });
});

describe('revocation reaches running work', () => {
  it('an open STT session, a streaming synthesis and a streaming chat each end with api_key_disabled', async () => {
    const streaming = await startScriptedUpstream({ kind: 'stream', chunks: Array.from({ length: 200 }, (_, i) => `w${i} `), delayMs: 100 });
    try {
      await upsertModel(h.testDb.db.prisma, checkProtocol, { id: 'slow-llm', modality: 'llm', upstream: { url: streaming.baseUrl, protocol: 'openai' } });
      await h.runtime.ctx.registry.refresh();
      await h.runtime.ctx.health.checkAll();
      const a = await account(1_000_000n);
      const session = await openSession(h, query(a.key));
      await session.until((e) => e.type === 'session.started');

      const chat = await fetch(`${h.url}/v1/chat/completions`, {
        method: 'POST',
        headers: a.headers,
        body: JSON.stringify({ model: 'slow-llm', stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
      });
      expect(chat.status).toBe(200);
      const chatEvents = sseReader(chat);
      await chatEvents.next();

      // eSpeak streams as it synthesises: a long text is still running when the key goes.
      const tts = await post(
        h,
        '/tts/sse',
        ttsBody({
          model_id: 'local-espeak',
          voice: 'espeak-en-us-f',
          transcript: sentence(5_000),
          output_format: { container: 'raw', sample_rate: 22050, encoding: 'pcm_s16le' },
        }),
        { headers: a.headers },
      );
      expect(tts.status).toBe(200);
      const ttsEvents = sseReader(tts);
      await ttsEvents.next();

      await revokeApiKey(h.testDb.db.prisma, { id: a.keyId });

      const { code, reason } = await session.closed;
      expect(code).toBe(1008);
      expect(reason).toBe('api_key_disabled');
      expect(session.ofType('error')[0]).toMatchObject({ code: 'api_key_disabled' });

      const chatTail = await chatEvents.rest();
      expect(chatTail.some((e) => e.includes('"api_key_disabled"'))).toBe(true);
      expect(chatTail.at(-1)).toBe('[DONE]');

      const ttsTail = await ttsEvents.rest();
      const last = JSON.parse(ttsTail.at(-1)!) as Record<string, unknown>;
      expect(last).toMatchObject({ type: 'error', error_code: 'api_key_disabled', status_code: 401 });
      await expectNothingHeld(a.orgId);
    } finally {
      await streaming.close();
    }
  });
});

const query = (key: string) => ({ model: 'local-stt', api_key: key });
