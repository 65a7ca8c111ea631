// The realtime benchmark's WebRTC client (bench/realtime.ts): a call opened as a browser opens one
// (a client secret minted with the key, the offer POSTed to /v1/realtime/calls, werift as the
// peer), its data channel's events handed to the current turn with their receipt times (taken
// before parsing), the answer's audio decoded as each RTP packet arrives, and the question sent
// as one Opus frame per 20 ms frame the turn's pacer hands it; `webrtcTurn` is a turn of the
// benchmark over it.
import OpusScript from 'opusscript';
import { RtpHeader, RtpPacket, type RTCPeerConnection } from 'werift';
import { makeOffer, postOffer } from '../../test/support/webrtc-client.ts';
import { AudibleWatch } from '../../gateway/audio/first-audible.ts';
import { RATE, withAudio, type Event, type Question, type Turn } from './paced-turns.ts';

const FRAME_SAMPLES = 480;

export class WebRtcCall {
  /** The current turn's handler of events. */
  handler: ((e: Event, at: number) => void) | undefined;
  /** The current turn's handler of the answer's audio (pcm16, 24 kHz), a packet at a time, with its RTP timestamp. */
  onAudio: ((pcm: Buffer, at: number, rtpTimestamp: number) => void) | undefined;
  private readonly encoder = new OpusScript(RATE, 1, OpusScript.Application.VOIP);
  private sequence = 1;
  private timestamp = 0;

  private constructor(
    private readonly pc: RTCPeerConnection,
    private readonly sendRtp: (packet: RtpPacket) => Promise<void>,
  ) {}

  /** Opens a call with a secret minted by `key` for `session`; resolves with its first event (session.created). */
  static async open(origin: string, key: string, session: object): Promise<{ call: WebRtcCall; first: Event }> {
    const minted = await fetch(`${origin}/v1/realtime/client_secrets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ session }),
    });
    if (minted.status !== 200) throw new Error(`client_secrets answered ${minted.status}: ${await minted.text()}`);
    const { value } = (await minted.json()) as { value: string };
    const { pc, audio, channel, sdp } = await makeOffer();
    const res = await postOffer(origin, value, sdp);
    if (res.status !== 201) throw new Error(`/v1/realtime/calls answered ${res.status}: ${await res.text()}`);
    const call = new WebRtcCall(pc, (packet) => audio.sender.sendRtp(packet));
    const decoder = new OpusScript(RATE, 1);
    audio.onTrack.subscribe((track) =>
      track.onReceiveRtp.subscribe((rtp) => {
        const at = performance.now();
        call.onAudio?.(decoder.decode(rtp.payload), at, rtp.header.timestamp);
      }),
    );
    const first = new Promise<Event>((resolve) => {
      call.handler = (e) => {
        call.handler = undefined;
        resolve(e);
      };
    });
    channel.onMessage.subscribe((data) => {
      const at = performance.now();
      call.handler?.(JSON.parse(data.toString()) as Event, at);
    });
    call.send = (event) => channel.send(JSON.stringify(event));
    await pc.setRemoteDescription({ type: 'answer', sdp: await res.text() });
    return { call, first: await first };
  }

  send: (event: object) => void = () => {};

  /** The next event of `type` (an error event rejects). */
  next(type: string): Promise<Event> {
    return new Promise((resolve, reject) => {
      this.handler = (e) => {
        if (e.type === 'error') reject(new Error(`error event: ${JSON.stringify(e)}`));
        if (e.type !== type) return;
        this.handler = undefined;
        resolve(e);
      };
    });
  }

  /** One 20 ms frame of the question (pcm16, 24 kHz) as an Opus packet on the track. */
  frame(pcm: Buffer): void {
    const packet = new RtpPacket(new RtpHeader({ sequenceNumber: this.sequence, timestamp: this.timestamp }), this.encoder.encode(pcm, FRAME_SAMPLES));
    this.sequence = (this.sequence + 1) & 0xffff;
    this.timestamp = (this.timestamp + FRAME_SAMPLES * 2) >>> 0;
    void this.sendRtp(packet);
  }

  async close(): Promise<void> {
    await this.pc.close();
    this.encoder.delete();
  }
}

/**
 * The realtime turn over a WebRTC call: the question as Opus on the track, the events on the data
 * channel, the answer's audio from the track (first audio = its first RTP packet). The answer's
 * audio is every packet after the end of speech, as a browser plays what the track brings: the
 * gateway sends audio only while it answers and the turn before has played out. (Counted from
 * response.created instead, a turn with a prepared answer lost its first packets: the data
 * channel brings the held events after the track's first frame, bench/webrtc-stages.ts.) Ends at
 * output_audio_buffer.stopped, the answer played out (the next question would speak over it), and
 * svc.turn_latency (the session's `svc_turn_latency` on), whichever comes last.
 */
export function webrtcTurn(call: WebRtcCall, q: Question): Promise<Turn> {
  return withAudio<Turn>(
    (frame) => call.frame(frame),
    q,
    'webrtc',
    (audio, settle) => {
      let stoppedAt = NaN;
      let completedAt = NaN;
      let audioAt = NaN;
      let responseId: string | undefined;
      let timings: { llm_first_token_ms: number; first_audio_ms: number } | undefined;
      let gatewayAudible: number | undefined;
      let played = false;
      let cutOffs = 0;
      const audible = new AudibleWatch();
      call.onAudio = (pcm, at) => {
        if (!(at > audio.voicedSentAt)) return;
        if (Number.isNaN(audioAt)) audioAt = at;
        audible.sentBytes(pcm, 'pcm_s16le', RATE, at);
        if (audible.heardAt !== undefined) audio.stop();
      };
      call.handler = (e, at) => {
        if (e.type === 'error') return settle.reject(new Error(`webrtc error event: ${JSON.stringify(e.error)}`));
        if (e.type === 'input_audio_buffer.speech_stopped') {
          if (Number.isNaN(audio.voicedSentAt)) cutOffs++;
          else if (Number.isNaN(stoppedAt)) stoppedAt = at;
        }
        if (e.type === 'conversation.item.input_audio_transcription.completed' && !Number.isNaN(stoppedAt) && Number.isNaN(completedAt)) completedAt = at;
        const response = e.response as { id: string; status: string; svc_timings: { llm_first_token_ms: number; first_audio_ms: number } } | undefined;
        if (e.type === 'response.created' && !Number.isNaN(stoppedAt) && !responseId) responseId = response!.id;
        if (e.type === 'response.done' && response!.id === responseId) {
          if (response!.status !== 'completed') return settle.reject(new Error(`webrtc response ${response!.status}`));
          timings = response!.svc_timings;
        }
        if (e.type === 'svc.turn_latency' && e.response_id === responseId && responseId) gatewayAudible = e.first_audible_ms as number;
        if (e.type === 'output_audio_buffer.stopped' && e.response_id === responseId && responseId) played = true;
        if (!played || gatewayAudible === undefined) return;
        call.handler = undefined;
        call.onAudio = undefined;
        if (!timings || audible.heardAt === undefined) return settle.reject(new Error('webrtc: the answer played without an audible sample'));
        const { llm_first_token_ms: llm, first_audio_ms: firstAudio } = timings;
        settle.resolve({
          turnDetection: stoppedAt - audio.voicedSentAt,
          transcriptFinal: completedAt - stoppedAt,
          llmFirstToken: llm,
          ttsFirstAudio: firstAudio - llm,
          gatewayAdded: audioAt - completedAt - firstAudio,
          endToAudio: audioAt - stoppedAt,
          total: audioAt - audio.voicedSentAt,
          audible: audible.heardAt - audio.voicedSentAt,
          gatewayAudible,
          cutOffs,
        });
      };
    },
  );
}
