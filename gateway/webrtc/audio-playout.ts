// The answer's audio on a WebRTC track, paced: 20 ms frames sent at the rate the caller plays
// them, so the gateway knows what was heard (OpenAI's WebRTC calls hold the output audio on the
// server and truncate at what was played; the client gets no audio events). A response's audio
// queues behind the one before it; `stop()` (barge-in, output_audio_buffer.clear) drops what
// waits at once and says how much of the item playing was heard. `drained()` holds the session's
// next audio while more than `highWaterMs` waits, so memory is bounded by the time, not the
// text; past `maxQueuedMs` (a single chunk that long) the call is ended.
//
// Paced by the process's timers, not the gateway's injected clock: the caller's audio device
// plays in real time, and tests wait on the frames' arrival rather than move a clock.
import type { HeardAudio, OutputPlayout } from '../realtime/output-playout.ts';
import { FRAME_BYTES, FRAME_MS } from './opus-rtp.ts';

export interface PlayoutLimits {
  /** Queued audio above which the session's next audio waits (drained()). */
  highWaterMs: number;
  /** Queued audio past which the call ends (overflow()). */
  maxQueuedMs: number;
}

export const DEFAULT_PLAYOUT_LIMITS: PlayoutLimits = { highWaterMs: 1000, maxQueuedMs: 60_000 };

export interface PlayoutHandlers {
  /** One 20 ms frame to send now; `gapFrames` frames of time passed since the last one was due, `marker` starts a talkspurt. */
  frame(pcm: Buffer, gapFrames: number, marker: boolean): void;
  /** The first frame of a response went out (output_audio_buffer.started). */
  started(responseId: string): void;
  /** A finished response's last frame went out (output_audio_buffer.stopped). */
  stopped(responseId: string): void;
  /** More than maxQueuedMs waits. */
  overflow(): void;
}

interface Segment {
  responseId: string;
  itemId: string;
  pcm: Buffer;
}

const MS_PER_BYTE = FRAME_MS / FRAME_BYTES;
/** Responses whose audio was stopped, remembered so that their late chunks are dropped. */
const MAX_STOPPED_REMEMBERED = 16;

export class AudioPlayout implements OutputPlayout {
  /** Opus on the track is made from and decoded to pcm16 at 24 kHz. */
  readonly audioFormat = 'pcm16';
  private queue: Segment[] = [];
  private queuedBytes = 0;
  /** The item of the last frame sent, while its response may still have audio to play. */
  private current: { responseId: string; itemId: string } | null = null;
  /** Bytes of each item in flight that went out. */
  private readonly played = new Map<string, number>();
  /** Responses whose first frame went out, and those whose audio is all queued (response.done seen). */
  private readonly started = new Set<string>();
  private readonly finished = new Set<string>();
  private readonly stoppedResponses: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** performance.now() of the first frame of the run of frames being paced, and frames sent since. */
  private epoch = 0;
  private sent = 0;
  private lastFrameAt = Number.NEGATIVE_INFINITY;
  private waiters: (() => void)[] = [];
  private closed = false;

  constructor(
    private readonly handlers: PlayoutHandlers,
    readonly limits: PlayoutLimits = DEFAULT_PLAYOUT_LIMITS,
  ) {}

  /** Milliseconds of audio waiting to be sent. */
  get queuedMs(): number {
    return this.queuedBytes * MS_PER_BYTE;
  }

  /** A chunk of a response's audio (pcm16, 24 kHz). */
  push(responseId: string, itemId: string, pcm: Buffer): void {
    if (this.closed || pcm.length === 0 || this.stoppedResponses.includes(responseId)) return;
    const last = this.queue.at(-1);
    if (last && last.itemId === itemId) last.pcm = Buffer.concat([last.pcm, pcm]);
    else this.queue.push({ responseId, itemId, pcm });
    this.queuedBytes += pcm.length;
    if (this.queuedMs > this.limits.maxQueuedMs) return this.handlers.overflow();
    this.kick();
  }

  /** The response has no more audio: its last partial frame is padded and sent, then output_audio_buffer.stopped. */
  responseDone(responseId: string): void {
    if (this.closed || this.stoppedResponses.includes(responseId)) return;
    this.finished.add(responseId);
    this.settle(responseId);
    this.kick();
  }

  /** Resolves once at most highWaterMs waits (at once below it, or once the playout is stopped or closed). */
  drained(): Promise<void> {
    if (this.closed || this.queuedMs <= this.limits.highWaterMs) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  stop(): HeardAudio | null {
    const head = this.queue[0];
    const playing = this.current ?? (head ? { responseId: head.responseId, itemId: head.itemId } : null);
    const heard = playing ? { ...playing, playedMs: (this.played.get(playing.itemId) ?? 0) * MS_PER_BYTE } : null;
    for (const id of new Set([...this.started, ...this.queue.map((s) => s.responseId)])) this.stoppedResponses.push(id);
    this.stoppedResponses.splice(0, Math.max(0, this.stoppedResponses.length - MAX_STOPPED_REMEMBERED));
    this.queue = [];
    this.queuedBytes = 0;
    this.current = null;
    this.played.clear();
    this.started.clear();
    this.finished.clear();
    this.halt();
    this.wake();
    return heard;
  }

  close(): void {
    this.closed = true;
    this.queue = [];
    this.queuedBytes = 0;
    this.halt();
    this.wake();
  }

  /** Starts pacing when a frame can be sent and none is being paced. */
  private kick(): void {
    if (this.timer === undefined && !this.closed && this.frameReady()) this.tick(true);
  }

  private frameReady(): boolean {
    const head = this.queue[0];
    if (!head) return false;
    // A partial frame goes once its response has no more audio to complete it.
    return head.pcm.length >= FRAME_BYTES || this.finished.has(head.responseId) || this.queue.length > 1;
  }

  private tick(first: boolean): void {
    this.timer = undefined;
    if (this.closed || !this.frameReady()) return; // an underrun: the next push starts a new run
    const now = performance.now();
    const gapFrames = first && Number.isFinite(this.lastFrameAt) ? Math.max(0, Math.round((now - this.lastFrameAt) / FRAME_MS) - 1) : 0;
    if (first) {
      this.epoch = now;
      this.sent = 0;
    }
    this.sendFrame(gapFrames, first);
    this.lastFrameAt = now;
    this.sent++;
    // A late timer does not delay the frames after it; one far behind (a stalled event loop) starts a new run instead of a burst.
    if (now - (this.epoch + this.sent * FRAME_MS) > 5 * FRAME_MS) {
      this.epoch = now;
      this.sent = 1;
    }
    if (this.frameReady()) this.timer = setTimeout(() => this.tick(false), Math.max(0, this.epoch + this.sent * FRAME_MS - performance.now()));
  }

  /** One frame of the head segment's item (an item's last partial frame is padded with silence: the next item starts on a frame of its own). */
  private sendFrame(gapFrames: number, marker: boolean): void {
    const head = this.queue[0]!;
    const take = Math.min(FRAME_BYTES, head.pcm.length);
    const frame = Buffer.alloc(FRAME_BYTES);
    head.pcm.copy(frame, 0, 0, take);
    head.pcm = head.pcm.subarray(take);
    this.queuedBytes -= take;
    if (head.pcm.length === 0) this.queue.shift();
    this.current = { responseId: head.responseId, itemId: head.itemId };
    this.played.set(head.itemId, (this.played.get(head.itemId) ?? 0) + take);
    if (!this.started.has(head.responseId)) {
      this.started.add(head.responseId);
      this.handlers.started(head.responseId);
    }
    this.handlers.frame(frame, gapFrames, marker);
    this.settle(head.responseId);
    if (this.queuedMs <= this.limits.highWaterMs) this.wake();
  }

  /** A finished response whose audio has all gone out: output_audio_buffer.stopped (if any of it played), and it is forgotten. */
  private settle(responseId: string): void {
    if (!this.finished.has(responseId) || this.queue.some((s) => s.responseId === responseId)) return;
    this.finished.delete(responseId);
    if (this.current?.responseId === responseId) this.current = null;
    for (const [itemId] of this.played) if (!this.queue.some((s) => s.itemId === itemId) && this.current?.itemId !== itemId) this.played.delete(itemId);
    if (this.started.delete(responseId)) this.handlers.stopped(responseId);
  }

  private halt(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
