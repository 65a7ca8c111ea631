// The gateway's side of a WebRTC call, answered from the client's SDP offer (no trickle: the
// answer carries every candidate, as OpenAI's /v1/realtime/calls answers). werift's peer
// connection with Opus only, no STUN or TURN servers of its own: host candidates, and for a
// gateway behind a 1:1 NAT (a cloud VM, a container) the address to announce instead of its own
// (SVC_WEBRTC_ANNOUNCED_ADDRESS); the UDP ports it may use (SVC_WEBRTC_PORT_RANGE) for a
// firewall. A client behind a NAT that needs a relay brings its own TURN server: the gateway
// answers the relay's checks like any other.
import type { RTCPeerConnection, RTCRtpTransceiver } from 'werift';
import { ServiceError } from '../../server/services/errors.ts';
import type { WebRtcLibs } from './webrtc-libs.ts';

export interface PeerSettings {
  /** Announced instead of the host's own addresses in the answer's candidates; undefined: the host's (loopback included). */
  announcedAddress: string | undefined;
  /** The UDP ports the calls' sockets bind to; undefined: any. */
  portRange: [number, number] | undefined;
}

/** An SDP offer's bound (a browser's is 3 to 8 KB). */
export const MAX_OFFER_BYTES = 64 * 1024;

export interface AnsweredPeer {
  pc: RTCPeerConnection;
  audio: RTCRtpTransceiver;
  answerSdp: string;
}

const badOffer = (why: string) => new ServiceError('invalid_request', `sdp: ${why}`, 'sdp');

/** 400 unless the offer has an audio m-line that offers Opus and a data channel (`m=application … webrtc-datachannel`). */
export function checkOffer(offerSdp: string): void {
  if (!/^v=0\r?\n/.test(offerSdp)) throw badOffer('the body must be an SDP offer (starting with "v=0").');
  if (!/^m=audio /m.test(offerSdp)) throw badOffer('the offer has no audio m-line: add an audio track or transceiver before createOffer().');
  if (!/^a=rtpmap:\d+ opus\/48000/im.test(offerSdp)) throw badOffer('the offer does not offer Opus (opus/48000/2), the only codec of the calls.');
  if (!/^m=application .*webrtc-datachannel/m.test(offerSdp))
    throw badOffer('the offer has no data channel: create the "oai-events" data channel before createOffer().');
}

/**
 * Answers a checked offer (checkOffer) with every local candidate gathered; 400 for an offer
 * werift cannot read. The caller closes `pc` when the call ends (or fails after this).
 */
export async function answerOffer(libs: WebRtcLibs, settings: PeerSettings, offerSdp: string): Promise<AnsweredPeer> {
  checkOffer(offerSdp);
  const { werift } = libs;
  const pc = new werift.RTCPeerConnection({
    codecs: { audio: [new werift.RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48_000, channels: 2 })], video: [] },
    iceServers: [],
    iceAdditionalHostAddresses: settings.announcedAddress ? undefined : ['127.0.0.1'],
    icePortRange: settings.portRange,
    // The session's events are JSON of at most ~1 MiB (an item retrieved); the WebSocket's message bound.
    maxMessageSize: 1024 * 1024,
  });
  try {
    try {
      await pc.setRemoteDescription({ type: 'offer', sdp: offerSdp });
    } catch (e) {
      throw badOffer(`the offer could not be read: ${e instanceof Error ? e.message : String(e)}`);
    }
    const audio = pc.getTransceivers().find((t) => t.kind === 'audio');
    if (!audio) throw badOffer('the offer has no audio m-line.');
    audio.setDirection('sendrecv');
    const answer = await pc.createAnswer();
    await pc.setLocalDescription(answer);
    if (pc.iceGatheringState !== 'complete')
      await new Promise<void>((resolve) => pc.iceGatheringStateChange.subscribe((state) => state === 'complete' && resolve()));
    const sdp = pc.localDescription!.sdp;
    return { pc, audio, answerSdp: settings.announcedAddress ? announce(sdp, settings.announcedAddress) : sdp };
  } catch (e) {
    void pc.close();
    throw e;
  }
}

/**
 * The answer's host candidates with the announced address instead of the host's own. Each
 * interface's socket has its own port; only the one the NAT forwards to answers, which the
 * client's checks find. Loopback candidates are left out.
 */
function announce(sdp: string, address: string): string {
  return sdp
    .split(/\r?\n/)
    .flatMap((line) => {
      const m = /^(a=candidate:\S+ \d (?:udp|tcp) \d+ )(\S+)( \d+ typ host.*)$/i.exec(line);
      if (!m) return [line];
      if (/^(127\.|::1$)/.test(m[2]!)) return [];
      return [`${m[1]}${address}${m[3]}`];
    })
    .join('\r\n');
}
