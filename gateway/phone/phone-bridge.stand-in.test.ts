// The phone bridge between a scripted carrier and a stand-in session that records what it is
// given and sends answer audio the way RealtimeSession.sendPaced does (drained(), then send): what
// the bridge holds back, and when it lets it go, is exactly what is measured. The carrier's
// socket is real (test/support/scripted-carrier.ts); the admission is the test's to settle.
import { pino } from 'pino';
import { WebSocketServer } from 'ws';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { systemClock } from '../../server/clock.ts';
import { until } from '../../test/support/poll.ts';
import { dial } from '../../test/support/scripted-carrier.ts';
import type { RealtimeSession } from '../realtime/realtime-session.ts';
import type { ServerEvent } from '../realtime/server-events.ts';
import type { ClientMessage } from '../realtime/wire.ts';
import type { Outbox } from '../sessions/outbox.ts';
import { WebSocketLink } from '../sessions/websocket-link.ts';
import { CARRIER_DIALECTS } from './carrier-dialects.ts';
import { PhoneBridge, type CallAdmission } from './phone-bridge.ts';

let server: WebSocketServer;
let url: string;

/** A call's stand-in session, once its admission lets it start. */
interface StandIn {
  outbox: Outbox<ServerEvent>;
  received: ClientMessage[];
}
/** The next call's admission (the test settles it), its session, and the messages its bridge was given, as calls connect. */
const calls: { admission: Promise<void>; started: (s: StandIn) => void; seen: { messages: number } }[] = [];

beforeAll(async () => {
  server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  url = `ws://127.0.0.1:${(server.address() as { port: number }).port}/`;
  server.on('connection', (socket, req) => {
    const dialect = CARRIER_DIALECTS.find((d) => req.url === `/${d.name}`)!;
    const { admission, started, seen } = calls.shift()!;
    const link = new WebSocketLink(socket, systemClock, {
      message: (d, b) => {
        seen.messages++;
        bridge.message(d, b);
      },
      closed: () => bridge.closed(),
    });
    const open: CallAdmission['open'] = (outbox) => {
      const standIn: StandIn = { outbox, received: [] };
      started(standIn);
      return { receive: (m: ClientMessage) => standIn.received.push(m), transportClosed: () => {} } as unknown as RealtimeSession;
    };
    const bridge = new PhoneBridge(link, dialect, { admit: () => admission.then(() => ({ open })), clock: systemClock, log: pino({ level: 'silent' }) });
  });
});

afterAll(() => {
  server?.close();
});

/** The next call: its admission settles when `admitted` does; `session` resolves with its stand-in once started. */
function nextCall(admitted: Promise<void> = Promise.resolve()): { session: Promise<StandIn>; seen: { messages: number } } {
  const seen = { messages: 0 };
  const session = new Promise<StandIn>((started) => calls.push({ admission: admitted, started, seen }));
  return { session, seen };
}

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
    const { session } = nextCall();
    const call = await dial(`${url}vonage`, 'vonage');
    onTestFinished(() => call.ws.terminate());
    const { outbox } = await session;
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

describe('a call being admitted', () => {
  it('what the carrier sends meanwhile waits, at most 250 messages, and is handled in order once the session starts', async () => {
    let admit!: () => void;
    const { session, seen } = nextCall(new Promise<void>((resolve) => (admit = resolve)));
    const call = await dial(`${url}twilio`, 'twilio');
    onTestFinished(() => call.ws.terminate());
    // 300 frames of 20 ms (6 s), numbered by their bytes, while the admission runs; all of them with the bridge before it ends.
    call.send(Buffer.concat(Array.from({ length: 300 }, (_, i) => Buffer.alloc(160, i % 256))), { play: false });
    await until('the frames with the bridge', () => seen.messages === 2 + 300, { intervalMs: 10 });
    admit();
    const { received } = await session;
    // The session's configuration first, then the first 250 frames, in order; the rest were dropped (as errors, counted).
    expect('event' in received[0]! && received[0].event.type).toBe('session.update');
    const appended = received
      .slice(1)
      .map((m) => ('event' in m && m.event.type === 'input_audio_buffer.append' ? Buffer.from(m.event.audio, 'base64')[0] : null));
    expect(appended).toEqual(Array.from({ length: 250 }, (_, i) => i));
    expect(call.commands.events).toEqual([]);
  });
});
