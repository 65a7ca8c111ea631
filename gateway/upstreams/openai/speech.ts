// Speech from OpenAI-compatible servers (Kokoro-FastAPI, speaches, LocalAI...): POST
// {url}/audio/speech with response_format "pcm" — OpenAI's raw 24 kHz 16-bit mono —
// streamed through as it arrives.
import { request } from 'undici';
import { s16leToS16 } from '../../audio/pcm.js';
import type { SpeechAdapter } from '../speech-types.js';
import { upstreamApiKey } from '../types.js';
import { upstreamErrorFromResponse } from '../upstream-errors.js';
import { httpDispatcher } from './chat.js';

const OPENAI_PCM_RATE = 24000;

async function* int16Chunks(body: AsyncIterable<Buffer>): AsyncGenerator<Int16Array> {
  let carry: Buffer | null = null;
  for await (const chunk of body) {
    const bytes: Buffer = carry ? Buffer.concat([carry, chunk]) : chunk;
    const even = bytes.length & ~1;
    carry = even < bytes.length ? bytes.subarray(even) : null;
    if (even === 0) continue;
    yield s16leToS16(bytes.subarray(0, even));
  }
}

export const openAiSpeechAdapter: SpeechAdapter = {
  formatPhoneme: null,
  async synthesize(upstream, req) {
    const key = upstreamApiKey(upstream);
    const res = await request(`${upstream.url}/audio/speech`, {
      method: 'POST',
      dispatcher: httpDispatcher,
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify({ model: upstream.upstreamModel, input: req.text, voice: req.voice.upstreamId, response_format: 'pcm', speed: req.speed, ...(req.language ? { language: req.language } : {}) }),
      signal: req.signal,
      headersTimeout: req.timeoutMs,
      bodyTimeout: req.timeoutMs,
    });
    if (res.statusCode >= 300) throw await upstreamErrorFromResponse({ statusCode: res.statusCode, text: () => res.body.text() });
    return { sampleRate: OPENAI_PCM_RATE, chunks: int16Chunks(res.body) };
  },
};
