// The audio of a streaming-transcription session that no final transcript covers yet, kept at
// the session's rate in its own sample type (s16, or float for f32 sessions) so that a failover
// (engine-stream.ts) can replay it to the next engine. Positions are sample indices from the
// session's first sample. Bounded: past `maxSamples` the oldest audio is dropped, and a replay
// starts that much later (the words in it are lost: an engine that gave no final for that long
// was failing anyway).
//
// The samples are copied into blocks that are reused once a final has covered them: a live
// session keeps no object per frame (each frame's arrays die young), and allocates nothing in
// the steady state.
import { floatToS16, toFloat32, type PcmSamples } from '../audio/pcm.ts';

/** Samples per block (128 ms at 16 kHz). */
const BLOCK_SAMPLES = 2048;
/** Emptied blocks kept for reuse (more are left to the collector). */
const SPARE_BLOCKS = 4;

export class PendingAudio {
  /** The blocks holding [first, next); blocks[0] starts at position `base`. */
  private blocks: PcmSamples[] = [];
  private spare: PcmSamples[] = [];
  private base = 0;
  /** The position of the first sample kept. */
  private first = 0;
  /** The position after the last sample written. */
  private next = 0;
  /** The session's sample type, from its first audio. */
  private float: boolean | null = null;

  constructor(private readonly maxSamples: number) {}

  get start(): number {
    return this.first;
  }

  get end(): number {
    return this.next;
  }

  append(samples: PcmSamples): void {
    if (samples.length === 0) return;
    this.float ??= samples instanceof Float32Array;
    // One type per session (its encoding's): anything else is converted to it.
    const typed = this.float ? toFloat32(samples) : samples instanceof Int16Array ? samples : floatToS16(samples);
    for (let from = 0; from < typed.length;) {
      const at = this.next - this.base;
      if (at === this.blocks.length * BLOCK_SAMPLES)
        this.blocks.push(this.spare.pop() ?? (this.float ? new Float32Array(BLOCK_SAMPLES) : new Int16Array(BLOCK_SAMPLES)));
      const offset = at % BLOCK_SAMPLES;
      const n = Math.min(BLOCK_SAMPLES - offset, typed.length - from);
      // A frame usually fits in the block: no view made for it.
      const part = n === typed.length ? typed : typed.subarray(from, from + n);
      this.blocks.at(-1)!.set(part as Int16Array & Float32Array, offset);
      from += n;
      this.next += n;
    }
    if (this.next - this.first > this.maxSamples) this.dropBefore(this.next - this.maxSamples);
  }

  /** A final covers the audio before `position`: it is never replayed. */
  dropBefore(position: number): void {
    this.first = Math.max(this.first, Math.min(position, this.next));
    while (this.blocks.length > 0 && this.first - this.base >= BLOCK_SAMPLES) {
      const emptied = this.blocks.shift()!;
      if (this.spare.length < SPARE_BLOCKS) this.spare.push(emptied);
      this.base += BLOCK_SAMPLES;
    }
  }

  /** The samples kept between `from` and `to` (clamped to what is kept), in order: views of the blocks, valid until the next append. */
  *between(from: number, to: number): Generator<PcmSamples> {
    let at = Math.max(from, this.first);
    const end = Math.min(to, this.next);
    while (at < end) {
      const block = this.blocks[Math.floor((at - this.base) / BLOCK_SAMPLES)]!;
      const offset = (at - this.base) % BLOCK_SAMPLES;
      const n = Math.min(BLOCK_SAMPLES - offset, end - at);
      yield block.subarray(offset, offset + n);
      at += n;
    }
  }
}
