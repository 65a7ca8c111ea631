// The events' data channel of a WebRTC call takes turns of the event loop, as a WebSocket does:
// a peer flooding it has at most `readBytesPerTurn` of its messages (and the message that passes
// it) handed on per turn, every one in order; what waits for its turn is bounded. Over a real
// connection: a client's peer (test/support/webrtc-client.ts) and the gateway's answer to its
// offer (peer-connection.ts), both werift, on loopback.
import { describe, expect, it, onTestFinished } from 'vitest';
import type { RTCDataChannel } from 'werift';
import { makeOffer } from '../../test/support/webrtc-client.ts';
import { manualClock } from '../../test/support/manual-clock.ts';
import { DataChannelLink, DEFAULT_DATA_CHANNEL_LIMITS, INCOMING_BUFFER_FULL, type DataChannelLimits } from './data-channel-link.ts';
import { answerOffer } from './peer-connection.ts';
import { loadWebRtc } from './webrtc-libs.ts';

/** Turns of the event loop, counted in its check phase, until stopped. */
function turnCounter() {
  let turn = 0;
  let counting = true;
  const count = () => {
    turn++;
    if (counting) setImmediate(count);
  };
  setImmediate(count);
  return { now: () => turn, stop: () => (counting = false) };
}

/** A connected call's data channel: the client's end, and the gateway's bound through a link with `limits`. */
async function connected(limits: Partial<DataChannelLimits>, onMessage: (data: Buffer) => void) {
  const client = await makeOffer();
  onTestFinished(() => client.pc.close());
  const gateway = await answerOffer(await loadWebRtc(), { announcedAddress: undefined, portRange: undefined }, client.sdp);
  onTestFinished(() => gateway.pc.close());
  const channel = new Promise<RTCDataChannel>((resolve) => gateway.pc.onDataChannel.subscribe(resolve));
  const opened = new Promise<void>((resolve) => client.channel.stateChanged.subscribe((s) => s === 'open' && resolve()));
  await client.pc.setRemoteDescription({ type: 'answer', sdp: gateway.answerSdp });
  await opened;
  const ended: [number, string][] = [];
  const link = new DataChannelLink(
    await channel,
    manualClock(0),
    { message: onMessage, tooLarge: () => {}, ended: (code, reason) => ended.push([code, reason]) },
    { ...DEFAULT_DATA_CHANNEL_LIMITS, ...limits },
  );
  return { send: (text: string) => client.channel.send(text), link, ended };
}

/** 150 distinct messages of 1,000 bytes. */
const FLOOD = Array.from({ length: 150 }, (_, i) => `${String(i).padStart(4, '0')}${'x'.repeat(996)}`);

/**
 * Sends the flood 20 messages a turn of the event loop: up to 20 arrive in one of the gateway's
 * turns, and the loopback's UDP buffer is not overrun (a lost packet costs SCTP a second or more).
 */
async function flood(send: (text: string) => void): Promise<void> {
  for (let i = 0; i < FLOOD.length; i++) {
    send(FLOOD[i]!);
    if (i % 20 === 19) await new Promise((r) => setImmediate(r));
  }
}

describe('DataChannelLink over a connection', () => {
  it('hands on at most readBytesPerTurn (and the message that passes it) per turn of the event loop, every message in order', { timeout: 60_000 }, async () => {
    const received: { text: string; turn: number }[] = [];
    let turns = turnCounter();
    const { send, link, ended } = await connected({ readBytesPerTurn: 4 * 1024 }, (data) => received.push({ text: data.toString(), turn: turns.now() }));
    turns.stop();
    turns = turnCounter();
    await flood(send);
    await expect.poll(() => received.length, { timeout: 30_000 }).toBe(FLOOD.length);
    turns.stop();
    expect(received.map((r) => r.text)).toEqual(FLOOD);
    const bytesByTurn = new Map<number, number>();
    for (const { text, turn } of received) bytesByTurn.set(turn, (bytesByTurn.get(turn) ?? 0) + text.length);
    expect(Math.max(...bytesByTurn.values())).toBeLessThanOrEqual(4 * 1024 + 1000);
    expect(bytesByTurn.size).toBeGreaterThanOrEqual((FLOOD.length * 1000) / (4 * 1024 + 1000));
    expect(link.turnsWaited).toBeGreaterThan(0);
    expect(ended).toEqual([]);
  });

  it('ends the call with 1008 incoming_buffer_full past maxWaitingBytes waiting, having handed on what came before in order', { timeout: 60_000 }, async () => {
    const received: string[] = [];
    const { send, link, ended } = await connected({ readBytesPerTurn: 1000, maxWaitingBytes: 16 * 1024 }, (data) => received.push(data.toString()));
    // One message a turn is handed on, while up to 20 arrive.
    await flood(send);
    await expect.poll(() => ended, { timeout: 30_000 }).toEqual([[1008, INCOMING_BUFFER_FULL]]);
    expect(link.open).toBe(false);
    expect(received.length).toBeGreaterThan(0);
    expect(received.length).toBeLessThan(FLOOD.length);
    expect(received).toEqual(FLOOD.slice(0, received.length));
    // Nothing is handed on after the end.
    const handedOn = received.length;
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(received.length).toBe(handedOn);
  });
});
