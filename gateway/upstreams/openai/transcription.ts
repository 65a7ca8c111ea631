// Batch transcription on OpenAI-compatible servers (speaches, whisper.cpp server, vLLM,
// LocalAI): the audio is sent as 16-bit WAV with response_format verbose_json and word
// timestamps. Streaming to such upstreams is not offered (batch-only, see README).
import { FormData } from 'undici';
import { floatToS16, s16leBytes } from '../../audio/pcm.js';
import { wavHeader } from '../../audio/wav.js';
import { ServiceError } from '../../../server/services/errors.js';
import type { TranscriptionAdapter, Word } from '../transcription-types.js';
import { postForm } from './post-form.js';

interface VerboseJson {
  text?: unknown;
  words?: { word?: unknown; start?: unknown; end?: unknown }[];
}

export const openAiTranscriptionAdapter: TranscriptionAdapter = {
  async transcribe(upstream, req) {
    const pcm = s16leBytes(floatToS16(req.samples));
    const wav = Buffer.concat([wavHeader({ sampleRate: req.sampleRate, channels: 1, encoding: 'pcm_s16le', dataByteLength: pcm.length }), pcm]);
    const form = new FormData();
    form.set('file', new Blob([wav], { type: 'audio/wav' }), 'audio.wav');
    form.set('model', upstream.upstreamModel);
    form.set('response_format', 'verbose_json');
    form.append('timestamp_granularities[]', 'word');
    if (req.language) form.set('language', req.language);
    if (req.keyterms.length) form.set('prompt', req.keyterms.join(', '));
    const res = await postForm(upstream, '/audio/transcriptions', form, req);
    let body: VerboseJson;
    try {
      body = (await res.body.json()) as VerboseJson;
    } catch {
      throw new ServiceError('upstream_error', 'The transcription upstream returned a response that is not JSON.');
    }
    // JSON of another shape is an engine fault too, not an empty transcript to bill for.
    if (body === null || typeof body !== 'object' || (typeof body.text !== 'string' && !Array.isArray(body.words))) {
      throw new ServiceError('upstream_error', 'The transcription upstream returned JSON without a transcript (no text or words).');
    }
    const words: Word[] = (body.words ?? [])
      .filter((w) => typeof w.word === 'string' && typeof w.start === 'number' && typeof w.end === 'number')
      .map((w) => ({ word: String(w.word).trim(), start: Number(w.start), end: Number(w.end) }));
    return { text: typeof body.text === 'string' ? body.text.trim() : words.map((w) => w.word).join(' '), words };
  },
};
