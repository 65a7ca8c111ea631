// Opus on RTP at the session's rate: frames encoded and decoded at 24 kHz (480 samples each), the
// RTP clock at 48 kHz, a late packet dropped, a gap in the timestamps filled with silence.
import { describe, expect, it } from 'vitest';
import type { RtpPacket } from 'werift';
import { FRAME_BYTES, FRAME_SAMPLES, OpusReceiver, OpusSender } from './opus-rtp.ts';
import { loadWebRtc } from './webrtc-libs.ts';

const libs = await loadWebRtc();

/** A 440 Hz tone, `frames` frames of it. */
function tone(frames: number): Buffer {
  const b = Buffer.alloc(frames * FRAME_BYTES);
  for (let i = 0; i < frames * FRAME_SAMPLES; i++) b.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 24_000)), i * 2);
  return b;
}

function packetsOf(pcm: Buffer): RtpPacket[] {
  const packets: RtpPacket[] = [];
  const sender = new OpusSender(libs, (p) => packets.push(p));
  for (let at = 0; at < pcm.length; at += FRAME_BYTES) sender.frame(pcm.subarray(at, at + FRAME_BYTES), 0, at === 0);
  sender.close();
  return packets;
}

describe('Opus on RTP', () => {
  it('numbers the packets in order, the timestamp 960 a frame (48 kHz), the first marked', () => {
    const packets = packetsOf(tone(3));
    const [a, b, c] = packets.map((p) => p.header);
    expect(b!.sequenceNumber).toBe((a!.sequenceNumber + 1) & 0xffff);
    expect(c!.timestamp).toBe((a!.timestamp + 1920) >>> 0);
    expect(packets.map((p) => p.header.marker)).toEqual([true, false, false]);
  });

  it('decodes each frame to 480 samples of the tone', () => {
    const receiver = new OpusReceiver(libs);
    const out = Buffer.concat(packetsOf(tone(10)).map((p) => receiver.receive(p)));
    expect(out.length).toBe(10 * FRAME_BYTES);
    let energy = 0;
    for (let i = FRAME_BYTES; i < out.length; i += 2) energy += Math.abs(out.readInt16LE(i));
    expect(energy / ((out.length - FRAME_BYTES) / 2)).toBeGreaterThan(3000);
    receiver.close();
  });

  it('drops a packet that comes after a later one, and fills a gap with silence (at most a second)', () => {
    const receiver = new OpusReceiver(libs);
    const packets = packetsOf(tone(4));
    expect(receiver.receive(packets[0]!).length).toBe(FRAME_BYTES);
    // Packet 1 lost (for now): packet 2 comes with a frame of silence before it.
    const afterGap = receiver.receive(packets[2]!);
    expect(afterGap.length).toBe(2 * FRAME_BYTES);
    expect(afterGap.subarray(0, FRAME_BYTES).equals(Buffer.alloc(FRAME_BYTES))).toBe(true);
    // Packet 1 arrives late: too late.
    expect(receiver.receive(packets[1]!).length).toBe(0);
    // Ten seconds of silence (a sender in DTX): one second of it.
    packets[3]!.header.timestamp = (packets[3]!.header.timestamp + 10 * 48_000) >>> 0;
    expect(receiver.receive(packets[3]!).length).toBe(24_000 * 2 + FRAME_BYTES);
    receiver.close();
  });
});
