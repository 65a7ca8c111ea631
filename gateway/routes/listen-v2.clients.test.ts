// Deepgram Flux (WS /v2/listen) as Deepgram's own client sees it: @deepgram/sdk 5.13.0
// `listen.v2.connect`, unmodified but for its `baseUrl` (it sends `Authorization: Token <key>`).
// flite speech streamed as LiveKit streams it; the gateway's turn detector gives the turns:
// Connected, StartOfTurn, Updates, EagerEndOfTurn, EndOfTurn with the turn's transcript; CloseStream;
// Configure and its ConfigureSuccess / ConfigureFailure; the refusals before the upgrade with Deepgram's error fields; billed per millisecond of audio.
// Real gateway, real database, local pocketsphinx.
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { DeepgramClient } from '@deepgram/sdk';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { EventLog } from '../../test/support/socket-events.ts';
import {
  audioCost,
  concat,
  expectDebited,
  refusedUpgrade,
  s16le,
  settleRecognizers,
  silence,
  speech,
  startSttGateway,
  wer,
} from '../../test/support/stt-routes.ts';

const FOX = 'the quick brown fox jumps over the lazy dog';

let h: GatewayHarness;

beforeAll(async () => {
  h = await startSttGateway();
  await speech(FOX);
}, 120_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
});

type Message = { type: string; event?: string; transcript?: string; sequence_id?: number; [k: string]: unknown };

async function fluxSession(args: Record<string, string | number>) {
  const client = new DeepgramClient({ apiKey: h.key, baseUrl: h.url });
  const connection = await client.listen.v2.connect({ model: 'flux-general-en', ...args } as Parameters<DeepgramClient['listen']['v2']['connect']>[0]);
  const log = new EventLog<Message>((m) => `${m.type}${m.event ? `:${m.event}` : ''}`);
  const closed = new Promise<number>((resolve) =>
    connection.on('close', (event) => {
      log.end(`closed (${event.code})`);
      resolve(event.code);
    }),
  );
  connection.on('message', (m) => log.push(m as unknown as Message));
  connection.connect();
  await connection.waitForOpen();
  return { connection, log, closed };
}

/** 100 ms frames of 16 kHz linear16, twice as fast as real time (as listen.clients.test.ts sends them). */
async function sendAudio(connection: { sendMedia(data: ArrayBufferView): void; readyState: number }, bytes: Buffer) {
  for (let at = 0; at < bytes.length && connection.readyState === 1; at += 3200) {
    connection.sendMedia(bytes.subarray(at, at + 3200));
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('@deepgram/sdk listen.v2 (Flux)', () => {
  it('one turn: Connected, StartOfTurn, Updates, EagerEndOfTurn, EndOfTurn with the transcript; CloseStream closes; billed per millisecond', async () => {
    const s = await speech(FOX);
    const audio = concat(s.samples, silence(2));
    const flux = await fluxSession({ encoding: 'linear16', sample_rate: 16000, eot_threshold: 0.7, eager_eot_threshold: 0.4, eot_timeout_ms: 3000 });
    await sendAudio(flux.connection, s16le(audio));
    const end = await flux.log.first((m) => m.type === 'TurnInfo' && m.event === 'EndOfTurn');
    flux.connection.sendCloseStream({ type: 'CloseStream' });
    expect(await flux.closed).toBe(1000);

    const messages = flux.log.events;
    expect(messages[0]).toMatchObject({ type: 'Connected', sequence_id: 0, request_id: expect.any(String) });
    expect(messages.map((m) => m.sequence_id)).toEqual(messages.map((_, i) => i));
    const events = messages.filter((m) => m.type === 'TurnInfo').map((m) => m.event);
    expect(events[0]).toBe('StartOfTurn');
    expect(events).toContain('Update');
    expect(events).toContain('EagerEndOfTurn');
    expect(events.indexOf('EagerEndOfTurn')).toBeLessThan(events.indexOf('EndOfTurn'));
    // Flux's state machine (developers.deepgram.com/docs/flux/state): an EagerEndOfTurn carries a
    // transcript, a TurnResumed follows one, and EndOfTurn's transcript is that of the eager end before it.
    const turnInfos = messages.filter((m) => m.type === 'TurnInfo');
    for (const [i, m] of turnInfos.entries()) {
      if (m.event === 'EagerEndOfTurn') expect(m.transcript).not.toBe('');
      if (m.event === 'TurnResumed') expect(turnInfos.slice(0, i).findLast((x) => x.event !== 'Update')?.event).toBe('EagerEndOfTurn');
    }
    expect(turnInfos.findLast((m) => m.event === 'EagerEndOfTurn' || m.event === 'TurnResumed')).toMatchObject({
      event: 'EagerEndOfTurn',
      transcript: end.transcript,
    });
    expect(end).toMatchObject({ turn_index: 0, end_of_turn_confidence: 0.7 });
    expect(wer(FOX, end.transcript!), end.transcript).toBeLessThanOrEqual(0.25);
    const words = end.words as { word: string; confidence: number; start: number; end: number }[];
    expect(words.map((w) => w.word.toLowerCase()).join(' ')).toBe(end.transcript!.toLowerCase());
    expect((end.audio_window_end as number) > (end.audio_window_start as number)).toBe(true);

    const requestId = messages[0]!.request_id as string;
    const millis = Math.round((audio.length * 1000) / 16000);
    const billed = await expectDebited(h, requestId, audioCost(millis));
    expect(billed.audioMillis).toBe(millis);
    expect(billed.usage.every((u) => u.route === 'listen.v2.websocket' && u.modelId === 'local-stt')).toBe(true);
  });

  it('a bad message is an Error event and the session carries on; CloseStream mid-turn ends the turn, then closes', async () => {
    const s = await speech(FOX);
    const flux = await fluxSession({ encoding: 'linear16', sample_rate: 16000 });
    flux.connection.socket.send('{"type":"Nonsense"}');
    const error = await flux.log.first((m) => m.type === 'Error');
    expect(error).toMatchObject({ code: 'invalid_message', description: expect.stringMatching(/CloseStream/) });
    await sendAudio(flux.connection, s16le(s.samples));
    await flux.log.first((m) => m.type === 'TurnInfo' && m.event === 'StartOfTurn');
    flux.connection.sendCloseStream({ type: 'CloseStream' });
    expect(await flux.closed).toBe(1000);
    const last = flux.log.events.filter((m) => m.type === 'TurnInfo').at(-1)!;
    expect(last.event).toBe('EndOfTurn');
    expect(wer(FOX, last.transcript!), last.transcript).toBeLessThanOrEqual(0.35);
  });
});

describe('Configure (developers.deepgram.com/docs/flux/configure; the SDK\u2019s sendConfigure)', () => {
  it('ConfigureSuccess with the thresholds now in effect and the keyterms, once applied; the new thresholds turn the eager events on; a Configure refused whole is a ConfigureFailure and the session goes on', async () => {
    const s = await speech(FOX);
    const flux = await fluxSession({ encoding: 'linear16', sample_rate: 16000, keyterm: 'fox' });
    onTestFinished(async () => {
      if (flux.connection.readyState === 1) flux.connection.close();
      await flux.closed;
    });
    flux.connection.sendConfigure({ type: 'Configure', thresholds: { eot_threshold: 0.75, eager_eot_threshold: 0.4, eot_timeout_ms: 3000 } });
    const success = await flux.log.first((m) => m.type === 'ConfigureSuccess');
    expect(success).toEqual({
      type: 'ConfigureSuccess',
      thresholds: { eot_threshold: 0.75, eager_eot_threshold: 0.4, eot_timeout_ms: 3000 },
      keyterms: ['fox'],
      request_id: expect.any(String),
      sequence_id: 1,
    });

    // Refused whole: an eager threshold above the end one, a field that cannot change on an open stream.
    flux.connection.sendConfigure({ type: 'Configure', thresholds: { eager_eot_threshold: 0.9 } });
    flux.connection.sendConfigure({ type: 'Configure', keyterms: ['lazy dog'], thresholds: { eot_threshold: 0.5 } });
    await flux.log.count((m) => m.type === 'ConfigureFailure', 2);
    const failures = flux.log.events.filter((m) => m.type === 'ConfigureFailure');
    expect(failures[0]).toEqual({
      type: 'ConfigureFailure',
      description: expect.stringMatching(/eager_eot_threshold/),
      request_id: success.request_id,
      sequence_id: 2,
    });
    expect(failures[1]).toMatchObject({ description: expect.stringMatching(/^keyterms cannot be changed/), sequence_id: 3 });

    await sendAudio(flux.connection, s16le(concat(s.samples, silence(2))));
    const end = await flux.log.first((m) => m.type === 'TurnInfo' && m.event === 'EndOfTurn');
    // Started without eager_eot_threshold: the eager events are the Configure's; the end threshold too (not the refused 0.5).
    expect(flux.log.events.some((m) => m.type === 'TurnInfo' && m.event === 'EagerEndOfTurn')).toBe(true);
    expect(end.end_of_turn_confidence).toBe(0.75);
    expect(flux.log.events.map((m) => m.sequence_id)).toEqual(flux.log.events.map((_, i) => i));
    expect(flux.log.events.some((m) => m.type === 'Error')).toBe(false);
  });
});

describe('refused before the upgrade, with Deepgram\u2019s error fields', () => {
  it.each([
    ['eot_threshold outside 0.5–0.9', { model: 'flux-general-en', eot_threshold: '0.95' }, 'eot_threshold'],
    ['eager_eot_threshold above eot_threshold', { model: 'flux-general-en', eot_threshold: '0.6', eager_eot_threshold: '0.8' }, 'eager_eot_threshold'],
    ['eot_timeout_ms under 500', { model: 'flux-general-en', eot_timeout_ms: '100' }, 'eot_timeout_ms'],
    ['an encoding Flux does not take', { model: 'flux-general-en', encoding: 'opus' }, 'encoding'],
  ])('%s: 400', async (_label, query, param) => {
    const res = await refusedUpgrade(h, query, { authorization: `Token ${h.key}` }, '/v2/listen');
    expect(res.status).toBe(400);
    const body = JSON.parse(res.body) as { err_code: string; err_msg: string; error: { param: string } };
    expect(body.err_code).toBe('INVALID_REQUEST');
    expect(body.error.param).toBe(param);
  });
});
