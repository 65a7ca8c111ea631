// What a phone carrier plays to the caller, and what the caller has heard of it. The answers'
// audio, in the line's format (line-audio.ts), goes out in frames of the carrier's size (20 ms;
// Exotel takes at least 100); a mark follows every MARK_EVERY_MS of it and the end of each
// answer. A carrier echoes a mark once the audio before it has been played, so the last mark
// echoed says how much of an answer the caller heard. On barge-in the gateway sends `clear`: the
// carrier drops what it has queued and echoes the marks still pending at once (Twilio's and
// Telnyx's references) or never (Plivo's), which say nothing of what was heard either way, so
// they are forgotten when the clear goes.

/** How the line's audio is cut into messages. */
export interface LineFraming {
  /** Bytes of line audio per ms: 8 for μ-law at 8 kHz, 16/32/48 for 16-bit PCM at 8/16/24 kHz. */
  bytesPerMs: number;
  /** Audio per media message, in ms. */
  frameMs: number;
  /** An answer's last, shorter frame padded with this byte to whole 20 ms (carriers that play only whole 20 ms); null: sent as it is. */
  padByte: number | null;
}

/** Twilio's and Telnyx's: 20 ms of μ-law at 8 kHz (160 bytes) a message, the last one of an answer as it is. */
export const MULAW_FRAMING: LineFraming = { bytesPerMs: 8, frameMs: 20, padByte: null };

/** How finely what was heard is known: a mark after this much audio. */
export const MARK_EVERY_MS = 100;
/** The unit a padded tail is made whole to. */
const PAD_MS = 20;
/** Marks awaiting their echo (MARK_EVERY_MS apart: minutes of queued audio); past it, only answers' ends are marked. */
const MAX_PENDING_MARKS = 3_000;
/** Answers whose heard length is kept (the last few: a barge-in cuts the latest). */
const MAX_ITEMS_KEPT = 16;

/** What to send the carrier, in order. */
export type PlayOut = { kind: 'media'; audio: Buffer } | { kind: 'mark'; name: string };

interface Outgoing {
  itemId: string;
  /** Audio sent of this answer, in ms. */
  sentMs: number;
  /** ms sent since the last mark. */
  sinceMarkMs: number;
  /** Less than a frame, waiting for more. */
  rest: Buffer;
}

export class Playback {
  private outgoing: Outgoing | null = null;
  /** Marks sent and not echoed yet: the answer, its audio sent by then, and all audio sent by then (ms). */
  private readonly pending = new Map<string, { itemId: string; endMs: number; totalMs: number }>();
  private readonly heard = new Map<string, number>();
  private sequence = 0;
  private readonly frameBytes: number;
  /** Audio sent of every answer, and how much of it the echoed marks say was played (or a clear dropped), in ms. */
  private sentMs = 0;
  private settledMs = 0;

  constructor(private readonly framing: LineFraming = MULAW_FRAMING) {
    this.frameBytes = framing.frameMs * framing.bytesPerMs;
  }

  /** An answer's audio: whole frames now (the rest with the next audio, or at its end), and the marks due. */
  audio(itemId: string, bytes: Buffer): PlayOut[] {
    const out: PlayOut[] = [];
    let o = this.outgoing;
    // Another answer's audio: the last one's tail goes first.
    if (o && o.itemId !== itemId) out.push(...this.end(o.itemId));
    o = this.outgoing ??= { itemId, sentMs: 0, sinceMarkMs: 0, rest: Buffer.alloc(0) };
    if (!this.heard.has(itemId)) this.keepHeard(itemId, 0);
    const all = o.rest.length ? Buffer.concat([o.rest, bytes]) : bytes;
    let at = 0;
    for (; at + this.frameBytes <= all.length; at += this.frameBytes) {
      out.push({ kind: 'media', audio: all.subarray(at, at + this.frameBytes) });
      this.count(o, this.framing.frameMs);
      if (o.sinceMarkMs >= MARK_EVERY_MS && this.pending.size < MAX_PENDING_MARKS) out.push(this.mark(o, `${o.itemId}:${++this.sequence}`));
    }
    o.rest = Buffer.from(all.subarray(at));
    return out;
  }

  /** The answer's audio is over: its last partial frame, and the mark that says it was heard to its end. */
  end(itemId: string): PlayOut[] {
    const o = this.outgoing;
    if (!o || o.itemId !== itemId) return [];
    this.outgoing = null;
    const out: PlayOut[] = [];
    if (o.rest.length) {
      const { padByte, bytesPerMs } = this.framing;
      const whole = Math.ceil(o.rest.length / (PAD_MS * bytesPerMs)) * PAD_MS * bytesPerMs;
      // The padding is silence the caller hears, but no part of the answer: only the answer's own audio is counted.
      out.push({ kind: 'media', audio: padByte === null ? o.rest : Buffer.concat([o.rest, Buffer.alloc(whole - o.rest.length, padByte)]) });
      this.count(o, o.rest.length / bytesPerMs);
    }
    out.push(this.mark(o, `${itemId}:end`));
    return out;
  }

  /** The carrier echoed a mark: the audio before it was played. Names it did not get from us are ignored. */
  played(name: string): void {
    const mark = this.pending.get(name);
    if (!mark) return;
    // Played in order: this mark and every one sent before it.
    for (const [n, m] of this.pending) {
      this.pending.delete(n);
      if (this.heard.has(m.itemId)) this.heard.set(m.itemId, Math.max(this.heard.get(m.itemId)!, m.endMs));
      this.settledMs = Math.max(this.settledMs, m.totalMs);
      if (n === name) break;
    }
  }

  /** Audio sent that no echoed mark (or clear) has accounted for yet, in ms: what the carrier may still hold. */
  get unplayedMs(): number {
    return this.sentMs - this.settledMs;
  }

  /** Whether audio was sent that the caller has not heard yet (a clear would cut it). */
  get unplayed(): boolean {
    return this.pending.size > 0 || this.outgoing !== null;
  }

  /** The answer the caller is hearing now (sent, not yet all heard), if any. */
  playing(): string | null {
    for (const mark of this.pending.values()) return mark.itemId;
    return this.outgoing?.itemId ?? null;
  }

  /** The carrier is told to clear: what was pending will not be played, and its echoed marks mean nothing. */
  clear(): void {
    this.pending.clear();
    this.outgoing = null;
    this.settledMs = this.sentMs;
  }

  /** Milliseconds of an answer's audio the caller has heard (as the echoed marks say). */
  heardMs(itemId: string): number {
    return this.heard.get(itemId) ?? 0;
  }

  private count(o: Outgoing, ms: number): void {
    o.sentMs += ms;
    o.sinceMarkMs += ms;
    this.sentMs += ms;
  }

  private mark(o: Outgoing, name: string): PlayOut {
    o.sinceMarkMs = 0;
    this.pending.set(name, { itemId: o.itemId, endMs: o.sentMs, totalMs: this.sentMs });
    return { kind: 'mark', name };
  }

  private keepHeard(itemId: string, ms: number): void {
    this.heard.set(itemId, ms);
    if (this.heard.size > MAX_ITEMS_KEPT) this.heard.delete(this.heard.keys().next().value!);
  }
}
