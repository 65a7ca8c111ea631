// An engine's WAV output, streamed (placeholder sizes), as PCM chunks: waits for the header,
// then yields mono s16 samples as they arrive, keeping an odd byte for the next chunk.
import { AudioFormatError } from '../../audio/audio-format-error.ts';
import { s16leToS16 } from '../../audio/pcm.ts';
import { readWavInfo } from '../../audio/wav.ts';
import { UpstreamError } from '../contract.ts';

const MAX_HEADER_BYTES = 64 * 1024;

export async function* pcmFromWavStream(stdout: AsyncIterable<Buffer>, done: Promise<void>): AsyncGenerator<Int16Array> {
  let pending: Buffer = Buffer.alloc(0);
  let inData = false;
  for await (const chunk of stdout) {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    if (!inData) {
      try {
        const info = readWavInfo(pending);
        if (info.format !== 'pcm_s16le' || info.channels !== 1)
          throw new UpstreamError('protocol', `The speech engine produced ${info.format} with ${info.channels} channels; expected 16-bit mono.`);
        pending = pending.subarray(info.dataOffset);
        inData = true;
      } catch (e) {
        if (e instanceof AudioFormatError && e.reason === 'truncated' && pending.length < MAX_HEADER_BYTES) continue;
        if (e instanceof UpstreamError) throw e;
        throw new UpstreamError('protocol', `The speech engine's output is not WAV: ${(e as Error).message}`);
      }
    }
    const even = pending.length & ~1;
    if (even > 0) {
      yield s16leToS16(pending.subarray(0, even));
      pending = pending.subarray(even);
    }
  }
  await done;
  if (!inData) throw new UpstreamError('protocol', 'The speech engine produced no audio.');
}
