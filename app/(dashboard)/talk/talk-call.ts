// One WebRTC call of the Talk page, as OpenAI's WebRTC guide has a browser make it
// (docs/realtime.md, "WebRTC"): the microphone's track and an `oai-events` data channel in an
// offer, POSTed with the client secret to the gateway's /v1/realtime/calls, the SDP answer set,
// the answer's audio on the remote track. The transcript is folded from the channel's events.

export interface TalkLine {
  /** The conversation item's id. */
  id: string;
  role: 'user' | 'assistant';
  text: string;
  /** The user's transcript is final / the answer is complete. */
  done: boolean;
  /** The answer was cut by the user talking over it (the item truncated or the response cancelled). */
  interrupted: boolean;
  /** The gateway's latencies of the answer (response.done's svc_timings), ms. */
  latency: { llmFirstTokenMs: number | null; firstAudioMs: number | null } | null;
}

export interface TalkCallHandlers {
  onLines(lines: TalkLine[]): void;
  onSpeaking(speaking: boolean): void;
  onError(message: string): void;
  /** The connection failed or the gateway ended the call. */
  onEnded(reason: string): void;
}

// Bounds what one long call keeps in the page.
const MAX_LINES = 200;

type Event = {
  type?: string;
  item_id?: string;
  delta?: string;
  transcript?: string;
  item?: { id?: string; role?: string };
  response?: ResponseDone;
  error?: { message?: string };
};
type ResponseDone = { status?: string; output?: { id?: string }[]; svc_timings?: { llm_first_token_ms?: number | null; first_audio_ms?: number | null } };

/** Folds the session's events into the transcript lines, in the order their items appeared. */
export class Transcript {
  private readonly lines = new Map<string, TalkLine>();

  get snapshot(): TalkLine[] {
    return [...this.lines.values()];
  }

  private line(id: string, role: TalkLine['role']): TalkLine {
    let line = this.lines.get(id);
    if (!line) {
      line = { id, role, text: '', done: false, interrupted: false, latency: null };
      this.lines.set(id, line);
      if (this.lines.size > MAX_LINES) this.lines.delete(this.lines.keys().next().value!);
    }
    return line;
  }

  /** Applies one event; true when the lines changed. */
  apply(event: Event): boolean {
    const id = event.item_id;
    switch (event.type) {
      case 'conversation.item.added': {
        const role = event.item?.role;
        if (!event.item?.id || (role !== 'user' && role !== 'assistant')) return false;
        this.line(event.item.id, role);
        return true;
      }
      case 'conversation.item.input_audio_transcription.delta':
        if (!id) return false;
        this.line(id, 'user').text += event.delta ?? '';
        return true;
      case 'conversation.item.input_audio_transcription.completed': {
        if (!id) return false;
        const line = this.line(id, 'user');
        line.text = event.transcript ?? line.text;
        line.done = true;
        return true;
      }
      case 'response.output_audio_transcript.delta':
      case 'response.output_text.delta':
        if (!id) return false;
        this.line(id, 'assistant').text += event.delta ?? '';
        return true;
      case 'conversation.item.truncated':
        if (!id || !this.lines.has(id)) return false;
        this.lines.get(id)!.interrupted = true;
        return true;
      case 'response.done': {
        const r = event.response;
        let changed = false;
        for (const item of r?.output ?? []) {
          const line = item.id ? this.lines.get(item.id) : undefined;
          if (!line || line.role !== 'assistant') continue;
          line.done = true;
          if (r?.status === 'cancelled') line.interrupted = true;
          const t = r?.svc_timings;
          if (t) line.latency = { llmFirstTokenMs: t.llm_first_token_ms ?? null, firstAudioMs: t.first_audio_ms ?? null };
          changed = true;
        }
        return changed;
      }
      default:
        return false;
    }
  }
}

export class TalkCall {
  private readonly pc = new RTCPeerConnection();
  private readonly transcript = new Transcript();
  private callUrl: string | null = null;
  private ended = false;

  private constructor(
    private readonly microphone: MediaStream,
    private readonly secret: string,
    private readonly handlers: TalkCallHandlers,
  ) {}

  /** Opens the call: the offer with the microphone and the event channel, the gateway's answer. */
  static async start(options: {
    microphone: MediaStream;
    secret: string;
    callsUrl: string;
    audio: HTMLAudioElement;
    handlers: TalkCallHandlers;
  }): Promise<TalkCall> {
    const call = new TalkCall(options.microphone, options.secret, options.handlers);
    try {
      await call.connect(options.callsUrl, options.audio);
    } catch (e) {
      call.close();
      throw e;
    }
    return call;
  }

  private async connect(callsUrl: string, audio: HTMLAudioElement): Promise<void> {
    const { pc, handlers } = this;
    pc.ontrack = (e) => {
      audio.srcObject = e.streams[0] ?? new MediaStream([e.track]);
      void audio.play().catch(() => handlers.onError('The browser did not let the answer play: click the page and try again.'));
    };
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === 'failed') this.end('The connection to the gateway failed.');
    };
    for (const track of this.microphone.getAudioTracks()) pc.addTrack(track, this.microphone);
    const channel = pc.createDataChannel('oai-events');
    channel.onmessage = (m) => this.onEvent(m.data);
    channel.onclose = () => this.end('The gateway ended the call.');
    await pc.setLocalDescription(await pc.createOffer());
    const answer = await fetch(callsUrl, {
      method: 'POST',
      body: pc.localDescription!.sdp,
      headers: { authorization: `Bearer ${this.secret}`, 'content-type': 'application/sdp' },
    });
    const text = await answer.text();
    if (answer.status !== 201) throw new Error(errorOf(text) ?? `The gateway answered ${answer.status}.`);
    const location = answer.headers.get('location');
    if (location) this.callUrl = new URL(location, callsUrl).toString();
    await pc.setRemoteDescription({ type: 'answer', sdp: text });
  }

  private onEvent(data: unknown): void {
    if (typeof data !== 'string') return;
    let event: Event;
    try {
      event = JSON.parse(data) as Event;
    } catch {
      return;
    }
    if (event.type === 'input_audio_buffer.speech_started') this.handlers.onSpeaking(true);
    if (event.type === 'input_audio_buffer.speech_stopped') this.handlers.onSpeaking(false);
    if (event.type === 'error') this.handlers.onError(event.error?.message ?? 'The session reported an error.');
    if (this.transcript.apply(event)) this.handlers.onLines(this.transcript.snapshot);
  }

  private end(reason: string): void {
    if (this.ended) return;
    this.close();
    this.handlers.onEnded(reason);
  }

  /** Hangs up (the gateway ends the call and its metering) and releases the microphone. */
  hangUp(): void {
    if (this.ended) return;
    if (this.callUrl) {
      void fetch(`${this.callUrl}/hangup`, { method: 'POST', headers: { authorization: `Bearer ${this.secret}` } }).catch(() => undefined);
    }
    this.close();
  }

  private close(): void {
    this.ended = true;
    this.pc.close();
    for (const track of this.microphone.getTracks()) track.stop();
  }
}

function errorOf(body: string): string | null {
  try {
    const message = (JSON.parse(body) as { error?: { message?: unknown } }).error?.message;
    return typeof message === 'string' ? message : null;
  } catch {
    return null;
  }
}
