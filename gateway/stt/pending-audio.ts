// The audio of a streaming-transcription session that no final transcript covers yet, kept at
// the session's rate as it came (s16 or float: the samples are kept, not copied) so that a
// failover (engine-stream.ts) can replay it to the next engine.
// Positions are sample indices from the session's first sample. Bounded: past `maxSamples` the
// oldest audio is dropped, and a replay starts that much later (the words in it are lost: an
// engine that gave no final for that long was failing anyway).
import type { PcmSamples } from '../audio/pcm.ts';

export class PendingAudio {
  private chunks: PcmSamples[] = [];
  /** The position of the first sample kept. */
  private first = 0;
  /** The position after the last sample written. */
  private next = 0;

  constructor(private readonly maxSamples: number) {}

  get start(): number {
    return this.first;
  }

  get end(): number {
    return this.next;
  }

  append(samples: PcmSamples): void {
    if (samples.length === 0) return;
    this.chunks.push(samples);
    this.next += samples.length;
    if (this.next - this.first > this.maxSamples) this.dropBefore(this.next - this.maxSamples);
  }

  /** A final covers the audio before `position`: it is never replayed. */
  dropBefore(position: number): void {
    let drop = Math.min(position, this.next) - this.first;
    while (drop > 0 && this.chunks.length > 0) {
      const head = this.chunks[0]!;
      if (head.length <= drop) {
        this.chunks.shift();
        this.first += head.length;
        drop -= head.length;
      } else {
        this.chunks[0] = head.subarray(drop);
        this.first += drop;
        drop = 0;
      }
    }
  }

  /** The samples kept between `from` and `to` (clamped to what is kept), in order. */
  *between(from: number, to: number): Generator<PcmSamples> {
    let at = this.first;
    for (const chunk of this.chunks) {
      const chunkEnd = at + chunk.length;
      const a = Math.max(from, at);
      const b = Math.min(to, chunkEnd);
      if (a < b) yield chunk.subarray(a - at, b - at);
      at = chunkEnd;
      if (at >= to) return;
    }
  }
}
