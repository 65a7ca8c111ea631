// The phone bridge over a real realtime session, without the route: a scripted Twilio carrier
// (test/support/scripted-carrier.ts) on a local WebSocket server whose connection is bridged
// to a RealtimeSession of the real gateway runtime (the local recognizer, flite, scripted LLMs),
// with the session's own events tapped on their way to the bridge: the cut of an interrupted
// answer is checked against what the carrier's echoed marks said the caller heard.
import { WebSocketServer } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { seedPlatformVoices } from '../../server/services/voices/seed-platform-voices.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { dial, lineAudio, type ScriptedCall } from '../../test/support/scripted-carrier.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../../test/support/scripted-openai-upstream.ts';
import { EventLog } from '../../test/support/socket-events.ts';
import { settleRecognizers, speech, startSttGateway } from '../../test/support/stt-routes.ts';
import { FLITE_PRICE } from '../../test/support/tts-routes.ts';
import type { CreditHold, RequestAuth } from '../core/gateway-core.ts';
import { RealtimeSession } from '../realtime/realtime-session.ts';
import type { ServerEvent } from '../realtime/server-events.ts';
import type { Outbox } from '../sessions/outbox.ts';
import { WebSocketLink } from '../sessions/websocket-link.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import { twilio } from './carrier-dialects.ts';
import { PhoneBridge, type CallAdmission } from './phone-bridge.ts';

let h: GatewayHarness;
let llm: ScriptedUpstream;
let slowLlm: ScriptedUpstream;
let server: WebSocketServer;
let url: string;
let question: Buffer;
let interruption: Buffer;
/** The next call's model and admission, ready before it dials: the connection is bridged at once (what the carrier sends first must not be missed). */
let next: { model: string; auth: RequestAuth; hold: CreditHold } | null = null;
/** Each call's session and what it sends (tapped), as the calls connect. */
const opened = new EventLog<{ events: EventLog<ServerEvent>; session: RealtimeSession }>(() => 'session');

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
  llm = await startScriptedUpstream({ kind: 'stream', chunks: ['The ', 'weather ', 'is ', 'sunny', '.'], usage: { prompt_tokens: 40, completion_tokens: 6 } });
  slowLlm = await startScriptedUpstream({ kind: 'stream', chunks: Array.from({ length: 600 }, (_, i) => `Sentence number ${i} is here. `), delayMs: 100 });
  const prices = { inputPicoPerToken: 1n, outputPicoPerToken: 1n };
  await upsertModel(prisma, checkProtocol, { id: 'rt-llm', modality: 'llm', prices, upstream: { url: llm.baseUrl, protocol: 'openai' } });
  await upsertModel(prisma, checkProtocol, { id: 'rt-slow', modality: 'llm', prices, upstream: { url: slowLlm.baseUrl, protocol: 'openai' } });
  await h.runtime.ctx.registry.refresh();
  const mulaw = { encoding: 'pcm_mulaw', sampleRate: 8000 } as const;
  question = lineAudio((await speech('what is the weather like today')).wav, mulaw);
  interruption = lineAudio((await speech('stop please')).wav, mulaw);

  const { ctx } = h.runtime;
  server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  url = `ws://127.0.0.1:${(server.address() as { port: number }).port}/`;
  server.on('connection', (socket) => {
    const { model, auth, hold } = next!;
    const link = new WebSocketLink(socket, ctx.clock, { message: (d, b) => bridge.message(d, b), closed: () => bridge.closed() });
    const events = new EventLog<ServerEvent>();
    const open: CallAdmission['open'] = (outbox, playout) => {
      const tapped: Outbox<ServerEvent> = {
        send: (e, o) => {
          events.push(e);
          outbox.send(e, o);
        },
        drained: () => outbox.drained(),
        close: (code, reason) => outbox.close(code, reason),
        get open() {
          return outbox.open;
        },
      };
      const session = new RealtimeSession(tapped, {
        ctx,
        auth,
        requestId: 'req_bridge',
        log: h.runtime.app.log,
        kind: 'realtime',
        profile: { id: model, llm: model },
        profiles: new Map(),
        sttModel: null,
        hold,
        revoked: new AbortController().signal,
        playout,
      });
      void session.start();
      opened.push({ events, session });
      return session;
    };
    const bridge = new PhoneBridge(link, twilio, { admit: () => Promise.resolve({ open }), clock: ctx.clock, log: h.runtime.app.log });
  });
}, 60_000);

afterAll(async () => {
  server?.close();
  await Promise.allSettled([llm?.close(), slowLlm?.close()]);
  await settleRecognizers();
  await h?.close();
});

async function call(model: string): Promise<{ call: ScriptedCall; events: EventLog<ServerEvent>; session: RealtimeSession }> {
  const auth = await h.runtime.ctx.core.admit(h.key, true);
  next = { model, auth, hold: await h.runtime.ctx.core.reserve(auth, 0n) };
  const from = opened.events.length;
  const c = await dial(url, 'twilio');
  const { events, session } = await opened.first(() => true, { from });
  await events.first((e) => e.type === 'session.updated');
  return { call: c, events, session };
}

const item = async (events: EventLog<ServerEvent>, session: RealtimeSession, id: string) => {
  session.receive({ event: { type: 'conversation.item.retrieve', item_id: id }, size: 0 });
  const got = await events.first((e) => e.type === 'conversation.item.retrieved' && (e.item as { id: string }).id === id);
  return (got as { item: { status: string; content: { transcript: string }[] } }).item;
};

describe('barge-in over a phone call', () => {
  it('an answer still being made is cut exactly where the echoed marks say the caller stopped hearing it, not where the gateway would guess', async () => {
    const { call: c, events, session } = await call('rt-slow');
    expect((await events.first((e) => e.type === 'session.updated')) as { session: object }).toMatchObject({
      session: { audio: { input: { format: { type: 'audio/pcmu' }, turn_detection: { type: 'server_vad' } }, output: { format: { type: 'audio/pcmu' } } } },
    });
    c.silence(300);
    c.send(question);
    c.silence(1500);
    await c.commands.first(() => c.receivedMs >= 1_500, { timeoutMs: 60_000 });
    c.silence(700);
    const heard = c.playedAtLastMark;
    expect(heard).toBe(700);
    c.send(interruption, { play: false });
    c.silence(1000, { play: false });
    await c.commands.first((m) => m.kind === 'clear', { timeoutMs: 60_000 });
    const truncated = (await events.first((e) => e.type === 'conversation.item.truncated', { timeoutMs: 60_000 })) as { item_id: string; audio_end_ms: number };
    expect(truncated.audio_end_ms).toBe(heard);
    const cut = await item(events, session, truncated.item_id);
    expect(cut.status).toBe('incomplete');
    expect('Sentence number 0 is here.'.startsWith(cut.content[0]!.transcript)).toBe(true);
    expect(c.violations).toEqual([]);
    c.stop();
    await c.closed;
  }, 120_000);

  it('an answer made in full but still playing at the carrier is cut where the caller stopped hearing it', async () => {
    const { call: c, events, session } = await call('rt-llm');
    c.silence(300);
    c.send(question);
    c.silence(1500);
    await c.commands.first((m) => m.kind === 'mark' && m.name.endsWith(':end'), { timeoutMs: 60_000 });
    await events.first((e) => e.type === 'response.done');
    expect(c.receivedMs).toBeGreaterThan(800);
    c.silence(400);
    const heard = c.playedAtLastMark;
    expect(heard).toBe(400);
    c.send(interruption, { play: false });
    c.silence(1000, { play: false });
    await c.commands.first((m) => m.kind === 'clear', { timeoutMs: 60_000 });
    const truncated = (await events.first((e) => e.type === 'conversation.item.truncated', { timeoutMs: 60_000 })) as { item_id: string; audio_end_ms: number };
    expect(truncated.audio_end_ms).toBe(heard);
    const cut = await item(events, session, truncated.item_id);
    expect(cut.status).toBe('incomplete');
    expect('The weather is sunny.'.startsWith(cut.content[0]!.transcript)).toBe(true);
    expect(cut.content[0]!.transcript.length).toBeLessThan('The weather is sunny.'.length);
    c.stop();
    await c.closed;
  }, 120_000);

  it('an answer heard to its end is not cut when the caller speaks next', async () => {
    const { call: c, events } = await call('rt-llm');
    c.silence(300);
    c.send(question);
    c.silence(1500);
    await c.commands.first((m) => m.kind === 'mark' && m.name.endsWith(':end'), { timeoutMs: 60_000 });
    await events.first((e) => e.type === 'response.done');
    c.silence(Math.ceil((c.receivedMs - c.playedMs) / 20) * 20 + 20);
    expect(c.playedAtLastMark).toBe(c.receivedMs);
    const completed = (e: ServerEvent) => e.type === 'conversation.item.input_audio_transcription.completed';
    const firstTurn = events.events.findIndex(completed);
    c.send(interruption);
    c.silence(1000);
    // The caller's next turn heard: its start found no answer playing.
    await events.first(completed, { from: firstTurn + 1, timeoutMs: 60_000 });
    expect(events.events.some((e) => e.type === 'conversation.item.truncated')).toBe(false);
    expect(c.commands.events.some((m) => m.kind === 'clear')).toBe(false);
    c.stop();
    await c.closed;
  }, 120_000);
});
