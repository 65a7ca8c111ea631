// The events' data channel of a WebRTC call, bounded as a WebSocketLink is: a peer that stops
// reading loses droppable events past the drop mark and ends the call past the close mark; one
// that draws too many error events ends it; an oversize message is not read. Against a stand-in
// channel whose unread bytes the test sets (werift's RTCDataChannel keeps `bufferedAmount` so).
import { describe, expect, it } from 'vitest';
import type { RTCDataChannel } from 'werift';
import { manualClock } from '../../test/support/manual-clock.ts';
import { OUTGOING_BUFFER_FULL, TOO_MANY_INVALID_MESSAGES } from '../sessions/websocket-link.ts';
import { DataChannelLink, INCOMING_BUFFER_FULL, type DataChannelLimits } from './data-channel-link.ts';

const LIMITS: DataChannelLimits = {
  dropAboveBytes: 1000,
  closeAboveBytes: 2000,
  maxErrorEvents: 3,
  errorWindowMs: 10_000,
  readBytesPerTurn: 64 * 1024,
  maxIncomingBytes: 100,
  maxWaitingBytes: 4 * 1024 * 1024,
};

function standIn() {
  const messages: ((data: string | Buffer) => void)[] = [];
  const states: ((s: string) => void)[] = [];
  const channel = {
    readyState: 'open',
    bufferedAmount: 0,
    sent: [] as string[],
    send(text: string) {
      this.sent.push(text);
    },
    onMessage: { subscribe: (f: (data: string | Buffer) => void) => messages.push(f) },
    stateChanged: { subscribe: (f: (s: string) => void) => states.push(f) },
  };
  return { channel, receive: (data: string | Buffer) => messages.forEach((f) => f(data)), state: (s: string) => states.forEach((f) => f(s)) };
}

function link(limits: Partial<DataChannelLimits> = {}) {
  const clock = manualClock(0);
  const c = standIn();
  const got = { messages: [] as string[], tooLarge: [] as number[], ended: [] as [number, string][], order: [] as string[] };
  const l = new DataChannelLink(
    c.channel as unknown as RTCDataChannel,
    clock,
    {
      message: (data) => got.order.push(`message ${got.messages.push(data.toString()) - 1}`),
      tooLarge: (bytes) => got.order.push(`tooLarge ${got.tooLarge.push(bytes) - 1}`),
      ended: (code, reason) => got.ended.push([code, reason]),
    },
    { ...LIMITS, ...limits },
  );
  return { clock, c, l, got };
}

describe('DataChannelLink', () => {
  it('drops droppable events past the drop mark, and ends the call past the close mark', () => {
    const { c, l, got } = link();
    expect(l.send('a')).toBe(true);
    c.channel.bufferedAmount = 1500;
    expect(l.send('interim', { droppable: true })).toBe(false);
    expect(l.dropped).toBe(1);
    expect(l.send('final')).toBe(true);
    expect(l.send('x'.repeat(600))).toBe(false);
    expect(got.ended).toEqual([[1008, OUTGOING_BUFFER_FULL]]);
    expect(c.channel.sent).toEqual(['a', 'final']);
    // Nothing is sent or read after the end.
    expect(l.send('late')).toBe(false);
    c.receive('{"type":"response.create"}');
    expect(got.messages).toEqual([]);
  });

  it('ends the call past the error events a window allows, and a new window allows them again', () => {
    const { clock, l, got } = link();
    for (let i = 0; i < 3; i++) expect(l.allowErrorEvent()).toBe(true);
    clock.advance(10_000);
    for (let i = 0; i < 3; i++) expect(l.allowErrorEvent()).toBe(true);
    expect(got.ended).toEqual([]);
    expect(l.allowErrorEvent()).toBe(false);
    expect(got.ended).toEqual([[1008, TOO_MANY_INVALID_MESSAGES]]);
  });

  it('reads messages up to the incoming bound, and reports a larger one unread; the channel closing ends the call once', () => {
    const { c, got } = link();
    c.receive('{"type":"session.update"}');
    c.receive('y'.repeat(101));
    c.receive(Buffer.alloc(10));
    expect(got.messages).toEqual(['{"type":"session.update"}', '\0'.repeat(10)]);
    expect(got.tooLarge).toEqual([101]);
    c.state('closed');
    c.state('closed');
    expect(got.ended).toEqual([[1000, 'closed']]);
  });

  it('past readBytesPerTurn waits a turn of the event loop, what arrives meanwhile (the error event of an oversize message too) kept in order', async () => {
    const { c, l, got } = link({ readBytesPerTurn: 10 });
    c.receive('0123456789');
    c.receive('y'.repeat(101));
    c.receive('after');
    expect(got.order).toEqual(['message 0']);
    expect(l.turnsWaited).toBe(1);
    await new Promise((r) => setImmediate(r));
    expect(got.order).toEqual(['message 0', 'tooLarge 0', 'message 1']);
    expect(got.messages).toEqual(['0123456789', 'after']);
  });

  it('ends the call past maxWaitingBytes waiting, and hands on nothing after', async () => {
    const { c, got } = link({ readBytesPerTurn: 10, maxWaitingBytes: 20 });
    c.receive('0123456789');
    c.receive('a'.repeat(10));
    c.receive('b'.repeat(10));
    expect(got.ended).toEqual([]);
    c.receive('c');
    expect(got.ended).toEqual([[1008, INCOMING_BUFFER_FULL]]);
    await new Promise((r) => setImmediate(r));
    expect(got.messages).toEqual(['0123456789']);
  });
});
