// Shared pieces of the tests that drive LiveKit Agents' plugins (gateway/routes/livekit-*.clients.test.ts):
// audio frames in and out, and the framework's habit of rethrowing a failed TTS request where
// nobody awaits it.
import { AudioFrame } from '@livekit/rtc-node';
import { expect, vi } from 'vitest';

/** The frames' samples, as floats. */
export function samplesOf(frames: AudioFrame[]): Float32Array {
  const out = new Float32Array(frames.reduce((n, f) => n + f.samplesPerChannel, 0));
  let at = 0;
  for (const f of frames) for (const v of f.data) out[at++] = v / 32768;
  return out;
}

/**
 * `samples` (16 kHz) as the 100 ms frames an agent pushes, each on its own buffer: the plugins
 * read `frame.data.buffer` whole (LiveKit's OpenAI STT sends it, its Deepgram STTs cut it anew).
 */
export function framesOf(samples: Float32Array, samplesPerFrame = 1600): AudioFrame[] {
  const frames: AudioFrame[] = [];
  for (let at = 0; at < samples.length; at += samplesPerFrame) {
    const part = samples.subarray(at, Math.min(samples.length, at + samplesPerFrame));
    const data = new Int16Array(part.length);
    for (let i = 0; i < part.length; i++) data[i] = Math.max(-32768, Math.min(32767, Math.round(part[i]! * 32767)));
    frames.push(new AudioFrame(data, 16000, 1, data.length));
  }
  return frames;
}

/**
 * Runs `run` with this process's unhandled rejections caught (and given back to the runner's own
 * listeners after), and waits until `count` have come. LiveKit's TTS ChunkedStream (agents 1.8.1,
 * tts.js) reports a failed request as the TTS's 'error' event and then rethrows it from a task that
 * nobody awaits; a LiveKit job process installs its own unhandledRejection listener that logs such
 * rejections (ipc/job_proc_lazy_main.js), and outside a job the test does the same for one call.
 */
export async function unhandledRejections<T>(count: number, run: () => Promise<T>): Promise<{ result: T; reasons: unknown[] }> {
  const runnerListeners = process.listeners('unhandledRejection');
  const reasons: unknown[] = [];
  process.removeAllListeners('unhandledRejection');
  process.on('unhandledRejection', (reason) => void reasons.push(reason));
  try {
    const result = await run();
    await vi.waitFor(() => expect(reasons).toHaveLength(count), { timeout: 5_000, interval: 10 });
    return { result, reasons };
  } finally {
    process.removeAllListeners('unhandledRejection');
    for (const listener of runnerListeners) process.on('unhandledRejection', listener);
  }
}
