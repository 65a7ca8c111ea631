// An engine's audio bytes as PCM chunks: raw 16-bit little-endian, or a streamed WAV (placeholder
// sizes) whose header is read first. Odd bytes are carried to the next chunk.
import { AudioFormatError } from '../audio/audio-format-error.ts';
import { s16leToS16, type PcmSamples } from '../audio/pcm.ts';
import { readWavInfo } from '../audio/wav.ts';
import { UpstreamError, type SpeechStream } from './contract.ts';
import type { DispatchResponse } from './dispatch-call.ts';

const MAX_HEADER_BYTES = 64 * 1024;

/** Raw 16-bit little-endian mono PCM, as Int16Array chunks. */
export async function* s16Chunks(body: AsyncIterable<Buffer>): AsyncGenerator<Int16Array> {
  let carry: Buffer | null = null;
  for await (const chunk of body) {
    const bytes: Buffer = carry ? Buffer.concat([carry, chunk]) : chunk;
    const even = bytes.length & ~1;
    carry = even < bytes.length ? bytes.subarray(even) : null;
    if (even === 0) continue;
    yield s16leToS16(bytes.subarray(0, even));
  }
}

/** A streamed 16-bit mono WAV: the sample rate once the header is in, then its samples. */
export async function wavStream(body: AsyncIterable<Buffer>): Promise<{ sampleRate: number; chunks: AsyncGenerator<Int16Array> }> {
  const iterator = body[Symbol.asyncIterator]();
  let pending: Buffer = Buffer.alloc(0);
  for (;;) {
    const next = await iterator.next();
    if (next.done)
      throw new UpstreamError('protocol', pending.length ? "The speech engine's output ended inside its WAV header." : 'The speech engine produced no audio.');
    pending = pending.length ? Buffer.concat([pending, next.value]) : next.value;
    try {
      const info = readWavInfo(pending);
      if (info.format !== 'pcm_s16le' || info.channels !== 1)
        throw new UpstreamError('protocol', `The speech engine produced ${info.format} with ${info.channels} channels; expected 16-bit mono.`);
      const rest = pending.subarray(info.dataOffset);
      async function* afterHeader(): AsyncGenerator<Buffer> {
        if (rest.length) yield rest;
        for (let n = await iterator.next(); !n.done; n = await iterator.next()) yield n.value;
      }
      return { sampleRate: info.sampleRate, chunks: s16Chunks(afterHeader()) };
    } catch (e) {
      if (e instanceof AudioFormatError && e.reason === 'truncated' && pending.length < MAX_HEADER_BYTES) continue;
      if (e instanceof UpstreamError) throw e;
      throw new UpstreamError('protocol', `The speech engine's output is not WAV: ${(e as Error).message}`);
    }
  }
}

/** A 2xx speech answer whose body is a document (JSON, text, HTML), not audio: the engine broke its protocol. */
export async function assertAudioAnswer(res: Pick<DispatchResponse, 'contentType' | 'body'>): Promise<void> {
  if (!/^(application\/(json|problem\+json)|text\/)/i.test(res.contentType.trim())) return;
  // Leaving the body unread aborts the request (the connection is not reused).
  for await (const _ of res.body) break;
  throw new UpstreamError('protocol', `The speech engine answered ${res.contentType.split(';')[0]} instead of audio.`);
}

/** Whether bytes start a RIFF/WAVE file (an engine that ignored the raw format it was asked for). */
export const isWavStart = (bytes: Uint8Array) => bytes.length >= 4 && bytes[0] === 0x52 && bytes[1] === 0x49 && bytes[2] === 0x46 && bytes[3] === 0x46;

/** The most audio a speech engine may send for a text: a second a character, at least 30 s. */
export const maxSpeechSeconds = (text: string) => Math.max(30, [...text].length);

/**
 * An engine's speech for `text`, bounded by its characters (maxSpeechSeconds): past that the
 * engine is not stopping, and the stream fails (`protocol`) after the audio up to the bound, with
 * the rest unread.
 */
export function boundedSpeech(stream: SpeechStream, text: string): SpeechStream {
  const seconds = maxSpeechSeconds(text);
  const maxSamples = seconds * stream.sampleRate;
  async function* bounded(): AsyncGenerator<PcmSamples> {
    let samples = 0;
    for await (const chunk of stream.chunks) {
      samples += chunk.length;
      if (samples > maxSamples) {
        // The audio up to the bound is kept (however the engine's bytes were read), then leaving
        // the loop ends the engine's body, which aborts its request.
        const within = chunk.length - (samples - maxSamples);
        if (within > 0) yield chunk.subarray(0, within);
        throw new UpstreamError('protocol', `The speech engine sent more than ${seconds} s of audio for ${[...text].length} characters.`);
      }
      yield chunk;
    }
  }
  return { sampleRate: stream.sampleRate, chunks: bounded() };
}
