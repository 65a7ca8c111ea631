// RTP packets at the UDP socket, for bench/webrtc-stages.ts: when werift wrote each one to its
// socket and when each one reached the process's JavaScript (the socket's 'message' event), by
// RTP timestamp (the RTP header travels in the clear under SRTP, RFC 3711). RTCP (payload types
// 200-207 in the second byte), STUN and DTLS (first byte below 128) are not recorded.
import dgram from 'node:dgram';

const isRtp = (b: unknown): b is Buffer => Buffer.isBuffer(b) && b.length >= 12 && (b[0]! & 0xc0) === 0x80 && !(b[1]! >= 200 && b[1]! <= 207);

/** Calls `seen` with 'out' or 'in', the RTP timestamp and sequence number of each RTP packet the process sends or receives over UDP. */
export function probeRtpOverUdp(seen: (way: 'out' | 'in', ts: number, seq: number) => void): void {
  const socket = dgram.Socket.prototype as unknown as { send: (...a: unknown[]) => void; emit: (event: string | symbol, ...a: unknown[]) => boolean };
  const send = socket.send;
  socket.send = function (this: unknown, ...args: unknown[]) {
    if (isRtp(args[0])) seen('out', args[0].readUInt32BE(4), args[0].readUInt16BE(2));
    return send.apply(this, args);
  };
  const emit = socket.emit;
  socket.emit = function (this: unknown, event: string | symbol, ...args: unknown[]) {
    if (event === 'message' && isRtp(args[0])) seen('in', args[0].readUInt32BE(4), args[0].readUInt16BE(2));
    return emit.call(this, event, ...args);
  };
}
