// The gateway of bench/webrtc-stages.ts: bench/gateway-server.ts with probes wrapped around the
// stages a turn's audio goes through, each written as a JSON line to BENCH_STAGES_FILE with the
// time on the machine's monotonic clock (shared by every process, unlike performance.now()):
// the caller's audio arriving (each RTP packet, each append the session handles), the detector's
// end of turn, each event the session hands to its transport, the answer's first audible sample
// as the gateway counts it, and on a WebRTC call each chunk the playout queues and each frame it
// sends (with where its first audible sample lies), and when werift has sent the packet.
// Bench-only: the wrappers call the original methods and change nothing they do.
import { openSync, writeSync } from 'node:fs';
import { loadConfig } from '../../server/config/env.ts';
import { createGatewayRuntime } from '../../gateway/runtime.ts';
import { RealtimeSession } from '../../gateway/realtime/realtime-session.ts';
import { ResponseRun } from '../../gateway/realtime/response-run.ts';
import { AudioPlayout } from '../../gateway/webrtc/audio-playout.ts';
import { OpusReceiver, OpusSender } from '../../gateway/webrtc/opus-rtp.ts';
import { loadWebRtc } from '../../gateway/webrtc/webrtc-libs.ts';
import type { ServerEvent } from '../../gateway/realtime/server-events.ts';
import type { ClientMessage } from '../../gateway/realtime/wire.ts';
import type { RtpPacket } from 'werift';
import { firstAudibleSample } from '../../gateway/audio/first-audible.ts';
import { probeRtpOverUdp } from './udp-probe.ts';

const out = openSync(process.env.BENCH_STAGES_FILE!, 'w');
/** performance.now() on the monotonic clock (ms). */
const offset = Number(process.hrtime.bigint()) / 1e6 - performance.now();
const mono = (perfNow = performance.now()) => perfNow + offset;
const record = (stage: string, fields: Record<string, unknown>) => writeSync(out, JSON.stringify({ stage, t: mono(), ...fields }) + '\n');

/** The first sample of pcm16 at or above -50 dBFS, -1 if none. */
const crossing = (pcm: Buffer) => firstAudibleSample(new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length >> 1));

type Any = Record<string, any>;
const sessionIds = new WeakMap<object, number>();
const appends = new WeakMap<object, number>();
let sessions = 0;
const sid = (s: object) => {
  if (!sessionIds.has(s)) sessionIds.set(s, ++sessions);
  return sessionIds.get(s)!;
};

const session = RealtimeSession.prototype as unknown as Any;
const receive = session.receive;
session.receive = function (this: object, message: ClientMessage) {
  if ('event' in message && message.event.type === 'input_audio_buffer.append') {
    const n = appends.get(this) ?? 0;
    appends.set(this, n + 1);
    record('append', { sid: sid(this), n, bytes: message.size });
  }
  return receive.call(this, message);
};
const speechStopped = session.speechStopped;
session.speechStopped = function (this: object, agoMs: number, audioEndMs: number) {
  record('speech-stopped', { sid: sid(this), speechEnd: mono(performance.now() - agoMs), agoMs, audioEndMs });
  return speechStopped.call(this, agoMs, audioEndMs);
};
for (const name of ['send', 'sendPaced']) {
  const original = session[name];
  session[name] = function (this: object, event: ServerEvent, ...rest: unknown[]) {
    const e = event as Any;
    const fields: Record<string, unknown> = { sid: sid(this), type: e.type, response: e.response_id ?? e.response?.id };
    if (e.type === 'response.output_audio.delta') {
      const pcm = Buffer.from(e.delta as string, 'base64');
      Object.assign(fields, { bytes: pcm.length, crossing: crossing(pcm) });
    }
    if (e.type === 'svc.turn_latency') fields.firstAudibleMs = e.first_audible_ms;
    record('event', fields);
    return original.call(this, event, ...rest);
  };
}

// The gateway's clock for the answer's first audible sample (ResponseRun.findAudible).
const run = ResponseRun.prototype as unknown as Any;
const findAudible = run.findAudible;
run.findAudible = function (this: Any, audio: Buffer) {
  const before = this.timings.firstAudible;
  findAudible.call(this, audio);
  if (before === undefined && this.timings.firstAudible !== undefined)
    record('gateway-audible', { response: this.spec.id, heardAt: mono(this.startedAt + this.timings.firstAudible) });
};

const release = run.release;
run.release = function (this: Any) {
  const started = performance.now();
  const events = this.held?.length;
  release.call(this);
  record('release', { response: this.spec.id, t0: mono(started), events });
};

// The WebRTC call's playout and codec.
let playing: string | undefined;
const playout = AudioPlayout.prototype as unknown as Any;
const push = playout.push;
playout.push = function (this: Any, responseId: string, itemId: string, pcm: Buffer) {
  record('playout-push', { response: responseId, bytes: pcm.length, queuedBytes: this.queuedBytes, crossing: crossing(pcm), pacing: this.timer !== undefined });
  return push.call(this, responseId, itemId, pcm);
};
const sendFrame = playout.sendFrame;
playout.sendFrame = function (this: Any, gapFrames: number, marker: boolean) {
  playing = this.queue[0]?.responseId;
  return sendFrame.call(this, gapFrames, marker);
};
const opusSender = OpusSender.prototype as unknown as Any;
const frame = opusSender.frame;
opusSender.frame = function (this: Any, pcm: Buffer, gapFrames: number, marker: boolean) {
  const started = performance.now();
  frame.call(this, pcm, gapFrames, marker);
  const ts = (this.timestamp - 960) >>> 0;
  record('frame-out', { response: playing, ts, marker, crossing: crossing(pcm), encodeMs: performance.now() - started, t0: mono(started) });
};
const opusReceiver = OpusReceiver.prototype as unknown as Any;
const receiveRtp = opusReceiver.receive;
opusReceiver.receive = function (this: Any, rtp: RtpPacket) {
  record('rtp-in', { ts: rtp.header.timestamp, seq: rtp.header.sequenceNumber });
  return receiveRtp.call(this, rtp);
};
// werift's own send (SRTP, the socket): when the packet of each timestamp left.
const { werift } = await loadWebRtc();
const sender = werift.RTCRtpSender.prototype as unknown as Any;
const sendRtp = sender.sendRtp;
sender.sendRtp = async function (this: Any, rtp: RtpPacket) {
  const ts = rtp.header.timestamp;
  await sendRtp.call(this, rtp);
  record('rtp-sent', { ts });
};

probeRtpOverUdp((way, ts, seq) => record(`udp-${way}`, { ts, seq }));

const runtime = await createGatewayRuntime(loadConfig());
const url = await runtime.app.listen({ host: '127.0.0.1', port: 0 });
console.error(`listening ${url}`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => void runtime.close().finally(() => process.exit(0)));
}
