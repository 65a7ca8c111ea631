// A carrier that buffers a bounded amount of audio (Vonage): the bridge holds the session's next
// audio while more than the dialect's maxAheadMs is unplayed at the carrier, and lets it go as
// the carrier's notifies say the caller heard more. The session here is a stand-in that sends
// answer audio the way RealtimeSession.sendPaced does (drained(), then send), so how far ahead
// the bridge lets it run is exactly what is measured; the carrier is the scripted Vonage.
import { pino } from 'pino';
import { WebSocketServer } from 'ws';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { systemClock } from '../../server/clock.ts';
import { dial } from '../../test/support/scripted-carrier.ts';
import type { RealtimeSession } from '../realtime/realtime-session.ts';
import type { ServerEvent } from '../realtime/server-events.ts';
import type { Outbox } from '../sessions/outbox.ts';
import { WebSocketLink } from '../sessions/websocket-link.ts';
import { vonage } from './carrier-dialects.ts';
import { PhoneBridge } from './phone-bridge.ts';

let server: WebSocketServer;
let url: string;
/** The outbox each call's stand-in session was opened on, as calls start. */
const outboxes: Outbox<ServerEvent>[] = [];
const opened: (() => void)[] = [];

beforeAll(async () => {
  server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  url = `ws://127.0.0.1:${(server.address() as { port: number }).port}/`;
  server.on('connection', (socket) => {
    const link = new WebSocketLink(socket, systemClock, { message: (d, b) => bridge.message(d, b), closed: () => bridge.closed() });
    const session = { receive: () => {}, transportClosed: () => {} } as unknown as RealtimeSession;
    const open = (outbox: Outbox<ServerEvent>) => {
      outboxes.push(outbox);
      opened.shift()?.();
      return session;
    };
    const bridge = new PhoneBridge(link, vonage, { admit: () => Promise.resolve({ open }), clock: systemClock, log: pino({ level: 'silent' }) });
  });
});

afterAll(() => {
  server?.close();
});

/** One second of an answer's audio as the session makes it for a 16 kHz line: pcm16 at 24 kHz. */
const second = (n: number): ServerEvent =>
  ({
    type: 'response.output_audio.delta',
    event_id: `event_${n}`,
    response_id: 'resp_1',
    item_id: 'item_1',
    output_index: 0,
    content_index: 0,
    delta: Buffer.alloc(48_000).toString('base64'),
  }) as ServerEvent;

describe("a carrier's bounded buffer (Vonage)", () => {
  it("holds the answer's audio once 10 s are unplayed at the carrier, and lets it go as the notifies come back", async () => {
    const started = new Promise<void>((resolve) => opened.push(resolve));
    const call = await dial(url, 'vonage');
    onTestFinished(() => call.ws.terminate());
    await started;
    const outbox = outboxes.at(-1)!;
    // Ten seconds go out at once, each after drained() (as the session sends audio), and an eleventh.
    for (let n = 0; n < 11; n++) {
      await outbox.drained();
      outbox.send(second(n));
    }
    // (All but the last part of a 20 ms frame and what the resampler holds: they go with the answer's end.)
    await call.commands.first(() => call.receivedMs >= 10_900);
    let heardWhenReleased: number | null = null;
    const next = outbox.drained().then(() => (heardWhenReleased = call.playedMs));
    // Every pending callback has run: a drained() that does not wait for the carrier has resolved by now.
    await new Promise((resolve) => setImmediate(resolve));
    expect(heardWhenReleased).toBeNull();
    // The caller hears 2 s: the notifies say so, 9 s are left unplayed, and the next audio may go.
    call.silence(2000);
    await next;
    expect(heardWhenReleased).toBe(2000);
    expect(call.violations).toEqual([]);
  });
});
