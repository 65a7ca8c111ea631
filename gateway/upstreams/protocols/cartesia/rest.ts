// Cartesia's HTTP endpoints: speech (/tts/bytes, streamed raw PCM), batch transcription (/stt),
// cloning (/voices/clone) and the voice catalogue (GET /voices, cursor-paged). References in
// ./index.ts.
import { encodeWav, wavBlob } from '../../../audio/wav.ts';
import {
  UpstreamError,
  type CloneCapability,
  type EngineVoice,
  type SpeechCapability,
  type TranscriptionCapability,
  type VoiceCatalogueCapability,
} from '../../contract.ts';
import { engineBody, engineDelete, engineJson, engineRequest } from '../../engine-http.ts';
import { assertAudioAnswer, boundedSpeech, s16Chunks } from '../../pcm-streams.ts';
import { cartesiaPhonemes } from './phonemes.ts';
import { cartesiaHeaders, parseWords, primaryLanguage, type CartesiaSettings } from './wire.ts';

/** `generation_config.speed` takes 0.6-1.5, the contract's own range. */
const MIN_SPEED = 0.6;
const MAX_SPEED = 1.5;
/** The largest page GET /voices serves. */
const VOICES_PAGE_SIZE = 100;
/** Enough for an account's own voices and Cartesia's library; more is cut rather than paged for minutes. */
const MAX_CATALOGUE_VOICES = 1000;
/** The last version whose clones take `mode` (later ones only clone for similarity). */
const LAST_VERSION_WITH_CLONE_MODE = '2024-11-13';

export const speech: SpeechCapability<CartesiaSettings> = {
  formatPhoneme: cartesiaPhonemes,
  async synthesize(target, req) {
    const rate = target.settings.tts_sample_rate;
    const speed = Math.min(MAX_SPEED, Math.max(MIN_SPEED, req.speed));
    const body = {
      model_id: target.upstreamModel,
      transcript: req.text,
      voice: { mode: 'id', id: req.voice.upstreamId },
      output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: rate },
      ...(req.language ? { language: primaryLanguage(req.language) } : {}),
      // Sonic 3 and later read it; earlier models ignore it. Left out at the natural rate.
      ...(speed !== 1 ? { generation_config: { speed } } : {}),
    };
    const res = await engineRequest(target.url, target.apiKey, { method: 'POST', path: '/tts/bytes', headers: cartesiaHeaders(target), json: body }, req);
    await assertAudioAnswer(res);
    return boundedSpeech({ sampleRate: rate, chunks: s16Chunks(engineBody(res, req)) }, req.text);
  },
};

export const transcription: TranscriptionCapability<CartesiaSettings> = {
  async transcribe(target, req) {
    const form = new FormData();
    form.set('file', wavBlob(encodeWav(req.samples, req.sampleRate, 'pcm_s16le')), 'audio.wav');
    form.set('model', target.upstreamModel);
    if (req.language) form.set('language', primaryLanguage(req.language));
    form.append('timestamp_granularities[]', 'word');
    const res = await engineRequest(target.url, target.apiKey, { method: 'POST', path: '/stt', headers: cartesiaHeaders(target), body: form }, req);
    const body = await engineJson<{ text?: unknown; words?: unknown } | null>(res, req, 'the transcription');
    if (body === null || typeof body !== 'object' || (typeof body.text !== 'string' && !Array.isArray(body.words))) {
      throw new UpstreamError('protocol', 'Cartesia answered the transcription without a transcript (no text or words).');
    }
    const words = parseWords(body.words);
    return { text: typeof body.text === 'string' ? body.text.trim() : words.map((w) => w.word).join(' '), words };
  },
};

// Current API versions clone for similarity only ("instant cloning uses high-similarity mode");
// the stability trade-off exists only for upstreams pinned to 2024-11-13 or earlier.
export const clone: CloneCapability<CartesiaSettings> = {
  async clone(target, req) {
    const form = new FormData();
    form.set('clip', wavBlob(req.clip.wav), 'clip.wav');
    form.set('name', req.name);
    form.set('language', primaryLanguage(req.language));
    if (target.settings.version <= LAST_VERSION_WITH_CLONE_MODE) form.set('mode', req.mode);
    const res = await engineRequest(target.url, target.apiKey, { method: 'POST', path: '/voices/clone', headers: cartesiaHeaders(target), body: form }, req);
    const body = await engineJson<{ id?: unknown } | null>(res, req, 'the clone request');
    const id = body?.id;
    if (typeof id !== 'string' || id.length === 0 || id.length > 512) {
      throw new UpstreamError('protocol', 'Cartesia answered the clone request without a voice id.');
    }
    return { upstreamId: id, params: null, expiresAt: null, metadata: { engine: 'cartesia', upstream_voice_id: id } };
  },
  // DELETE /voices/{id}: https://docs.cartesia.ai/api-reference/voices/delete
  deleteVoice: (target, upstreamId, call) =>
    engineDelete(target.url, target.apiKey, `/voices/${encodeURIComponent(upstreamId)}`, cartesiaHeaders(target), call),
};

interface CartesiaVoice {
  id?: unknown;
  name?: unknown;
  description?: unknown;
  language?: unknown;
  gender?: unknown;
}

const GENDERS: Record<string, EngineVoice['gender']> = { masculine: 'male', feminine: 'female', gender_neutral: 'neutral' };
const text = (value: unknown): string | undefined => (typeof value === 'string' && value.trim() ? value.trim() : undefined);

function engineVoice(voice: CartesiaVoice): EngineVoice | null {
  const id = text(voice.id);
  if (!id) return null;
  return {
    id,
    name: text(voice.name) ?? id,
    language: text(voice.language) ?? 'en',
    gender: (typeof voice.gender === 'string' && GENDERS[voice.gender]) || null,
    description: text(voice.description) ?? '',
  };
}

// Pages are `{data, has_more, next_page}`, the next one asked with `starting_after=<last id>`;
// versions before cursors answered a plain array of every voice.
export const voiceCatalogue: VoiceCatalogueCapability<CartesiaSettings> = {
  async listVoices(target, call) {
    const voices: EngineVoice[] = [];
    let after: string | null = null;
    while (voices.length < MAX_CATALOGUE_VOICES) {
      const query = new URLSearchParams({ limit: String(VOICES_PAGE_SIZE) });
      if (after) query.set('starting_after', after);
      const res = await engineRequest(target.url, target.apiKey, { method: 'GET', path: `/voices?${query}`, headers: cartesiaHeaders(target) }, call);
      const body = await engineJson<{ data?: unknown; has_more?: unknown } | unknown[] | null>(res, call, 'the voice list');
      const page = Array.isArray(body) ? body : body?.data;
      if (!Array.isArray(page)) throw new UpstreamError('protocol', 'Cartesia answered the voice list without a list of voices.');
      for (const item of page as CartesiaVoice[]) {
        const voice = item && typeof item === 'object' ? engineVoice(item) : null;
        if (voice) voices.push(voice);
      }
      const last = text((page.at(-1) as CartesiaVoice | undefined)?.id);
      const more = Array.isArray(body) ? false : typeof body?.has_more === 'boolean' ? body.has_more : page.length === VOICES_PAGE_SIZE;
      if (!more || !last) break;
      after = last;
    }
    return voices.slice(0, MAX_CATALOGUE_VOICES);
  },
};
