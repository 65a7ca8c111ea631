// A WebRTC client of POST /v1/realtime/calls, as a browser makes one (OpenAI's WebRTC guide,
// developers.openai.com/api/docs/guides/realtime-webrtc): werift as the peer, an audio
// transceiver (sendrecv, Opus) and the `oai-events` data channel created before the offer, the
// offer POSTed as application/sdp with a client secret or a key, the answer applied. It sends
// speech as 20 ms Opus frames on the track and keeps what arrives: the events of the data channel
// (parsed JSON, waited on as a WebSocket's) and the answer's audio decoded back to pcm16 at 24 kHz.
import OpusScript from 'opusscript';
import { RTCPeerConnection, RTCRtpCodecParameters, RtpHeader, RtpPacket, type RTCDataChannel, type RTCRtpTransceiver } from 'werift';
import { EventLog } from './socket-events.ts';

export type CallEvent = { type: string; [k: string]: unknown };
const RATE = 24_000;
const FRAME_SAMPLES = 480;
const FRAME_BYTES = FRAME_SAMPLES * 2;
/** Frames sent before the client lets the event loop (and the gateway, in the same process) read them: loopback UDP buffers are not unbounded. */
const FRAMES_PER_TURN = 5;

export interface OfferOptions {
  /** multipart `session` settings instead of a bare application/sdp body. */
  session?: object;
  query?: Record<string, string>;
}

/** A peer connection with what the calls need, and its offer with every candidate. */
export async function makeOffer(): Promise<{ pc: RTCPeerConnection; audio: RTCRtpTransceiver; channel: RTCDataChannel; sdp: string }> {
  const pc = new RTCPeerConnection({
    codecs: { audio: [new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48_000, channels: 2 })] },
    iceServers: [],
    iceAdditionalHostAddresses: ['127.0.0.1'],
  });
  const audio = pc.addTransceiver('audio', { direction: 'sendrecv' });
  const channel = pc.createDataChannel('oai-events');
  await pc.setLocalDescription(await pc.createOffer());
  if (pc.iceGatheringState !== 'complete') await new Promise<void>((r) => pc.iceGatheringStateChange.subscribe((s) => s === 'complete' && r()));
  return { pc, audio, channel, sdp: pc.localDescription!.sdp };
}

/** POSTs an offer: the raw answer (status, headers, body) whatever it is. */
export async function postOffer(baseUrl: string, bearer: string | undefined, sdp: string, options: OfferOptions = {}): Promise<Response> {
  const url = `${baseUrl}/v1/realtime/calls${options.query ? `?${new URLSearchParams(options.query).toString()}` : ''}`;
  const headers: Record<string, string> = bearer ? { authorization: `Bearer ${bearer}` } : {};
  if (!options.session) return fetch(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/sdp' }, body: sdp });
  const form = new FormData();
  form.set('sdp', sdp);
  form.set('session', JSON.stringify(options.session));
  return fetch(url, { method: 'POST', headers, body: form });
}

export interface WebRtcCall {
  id: string;
  pc: RTCPeerConnection;
  events: EventLog<CallEvent>;
  /** Every event after those taken by earlier calls, up to and including the next of `type`. */
  until(type: string, timeoutMs?: number): Promise<CallEvent[]>;
  next(type: string, timeoutMs?: number): Promise<CallEvent>;
  send(event: object): void;
  /** pcm16 at 24 kHz as 20 ms Opus frames on the track (the last one padded), as fast as the loopback takes them. Resolves with the frames sent. */
  speak(pcm: Buffer): Promise<number>;
  /** The answer's audio as it arrived on the track, decoded (pcm16, 24 kHz), and how many packets brought it. */
  received(): { pcm: Buffer; packets: number };
  /** Resolves once the connection (or the data channel) has closed. */
  closed: Promise<string>;
  close(): Promise<void>;
}

/** Opens a call: the offer posted with `bearer`, the answer applied, the data channel open. Throws with the status and body when refused. */
export async function openCall(baseUrl: string, bearer: string, options: OfferOptions = {}): Promise<WebRtcCall> {
  const { pc, audio, channel, sdp } = await makeOffer();
  const res = await postOffer(baseUrl, bearer, sdp, options);
  const body = await res.text();
  if (res.status !== 201) {
    await pc.close();
    throw new Error(`POST /v1/realtime/calls answered ${res.status}: ${body}`);
  }
  const id = res.headers.get('location')!.split('/').at(-1)!;
  const events = new EventLog<CallEvent>();
  channel.onMessage.subscribe((data) => events.push(JSON.parse(data.toString()) as CallEvent));
  const received: Buffer[] = [];
  let packets = 0;
  const decoder = new OpusScript(RATE, 1);
  audio.onTrack.subscribe((track) =>
    track.onReceiveRtp.subscribe((rtp) => {
      packets++;
      received.push(decoder.decode(rtp.payload));
    }),
  );
  let closedWith: (why: string) => void;
  const closed = new Promise<string>((resolve) => (closedWith = resolve));
  channel.stateChanged.subscribe((s) => {
    if (s === 'closed') {
      events.end('the data channel closed');
      closedWith('channel closed');
    }
  });
  pc.connectionStateChange.subscribe((s) => {
    if (s === 'closed' || s === 'failed') {
      events.end(`the connection ${s}`);
      closedWith(`connection ${s}`);
    }
  });
  const opened = new Promise<void>((resolve) => channel.stateChanged.subscribe((s) => s === 'open' && resolve()));
  await pc.setRemoteDescription({ type: 'answer', sdp: body });
  if (channel.readyState !== 'open') await opened;
  const encoder = new OpusScript(RATE, 1, OpusScript.Application.VOIP);
  let sequence = 1;
  let timestamp = 0;
  return {
    id,
    pc,
    events,
    until: (type, timeoutMs) => events.through((e) => e.type === type, timeoutMs),
    next: async (type, timeoutMs) => (await events.through((e) => e.type === type, timeoutMs)).at(-1)!,
    send: (event) => channel.send(JSON.stringify(event)),
    async speak(pcm) {
      let frames = 0;
      for (let at = 0; at < pcm.length; at += FRAME_BYTES) {
        const frame = Buffer.alloc(FRAME_BYTES);
        pcm.copy(frame, 0, at, Math.min(pcm.length, at + FRAME_BYTES));
        const packet = new RtpPacket(new RtpHeader({ sequenceNumber: sequence, timestamp, marker: frames === 0 }), encoder.encode(frame, FRAME_SAMPLES));
        sequence = (sequence + 1) & 0xffff;
        timestamp += FRAME_SAMPLES * 2;
        await audio.sender.sendRtp(packet);
        if (++frames % FRAMES_PER_TURN === 0) await new Promise((r) => setImmediate(r));
      }
      return frames;
    },
    received: () => ({ pcm: Buffer.concat(received), packets }),
    closed,
    async close() {
      await pc.close();
      decoder.delete();
      encoder.delete();
    },
  };
}
