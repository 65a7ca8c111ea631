// `elevenlabs`: the ElevenLabs API (`url` = https://api.elevenlabs.io, key in `xi-api-key` on every
// request). Speech (streamed raw PCM), batch transcription (Scribe), instant voice cloning and the
// account's voice catalogue. ElevenLabs' realtime speech-to-text (a WebSocket) is left out: the
// gateway does not stream transcription through this protocol, and it has no chat.
//
// Reference (read 2026-11-27), and the official SDK's sources (github.com/elevenlabs/elevenlabs-js,
// src/api/resources/{textToSpeech,speechToText,voices/resources/ivc}):
//   https://elevenlabs.io/docs/api-reference/text-to-speech/stream
//   https://elevenlabs.io/docs/api-reference/speech-to-text/convert
//   https://elevenlabs.io/docs/api-reference/voices/ivc/create
//   https://elevenlabs.io/docs/api-reference/voices/search   (GET /v2/voices, which "Get voices" links to)
//   https://elevenlabs.io/docs/api-reference/models/list
//   https://elevenlabs.io/docs/models
//   https://elevenlabs.io/docs/eleven-api/guides/how-to/speech-to-text/batch/keyterm-prompting
// Choices the reference decided:
// - `optimize_streaming_latency` is marked deprecated in the API definition: not offered.
// - Speed goes in `voice_settings.speed`, which ElevenLabs accepts from 0.7 to 1.2 (the gateway
//   asks 0.6-1.5): clamped, since anything outside is refused.
// - `language_code` is refused by models without language enforcement: sent only to those with it.
// - Inline phonemes are SSML `<phoneme alphabet="ipa" ph="…">word</phoneme>`, on English models
//   only, and need the word; dictionaries give the phoneme alone, so none are sent.
// - Keyterms exist from Scribe v2 on (at most 1,000 of 50 characters): not sent to scribe_v1.
import { z } from 'zod';
import { encodeWav, wavBlob } from '../../audio/wav.ts';
import {
  UpstreamError,
  type CallOptions,
  type CloneCapability,
  type EngineVoice,
  defineProtocol,
  type SpeechCapability,
  type TranscriptionCapability,
  type UpstreamTarget,
  type VoiceCatalogueCapability,
  type Word,
} from '../contract.ts';
import { checkHttpHealth, engineBody, engineDelete, engineJson, engineRequest } from '../engine-http.ts';
import { assertAudioAnswer, boundedSpeech, s16Chunks } from '../pcm-streams.ts';

const settings = z
  .object({
    /** The rate of the raw PCM asked for (`output_format=pcm_<rate>`); 44100 needs a Pro plan. */
    output_sample_rate: z.union([z.literal(16000), z.literal(22050), z.literal(24000), z.literal(44100)]).default(24000),
    stability: z.number().min(0).max(1).optional(),
    similarity_boost: z.number().min(0).max(1).optional(),
  })
  .strict();
type Settings = z.infer<typeof settings>;

const MIN_SPEED = 0.7;
const MAX_SPEED = 1.2;
/** Models that take `language_code` (the others answer it with an error). */
const LANGUAGE_ENFORCING_MODEL = /^eleven_(flash_v2_5|turbo_v2_5|v3)/;
const MAX_KEYTERMS = 1000;
const MAX_KEYTERM_CHARS = 50;
const VOICES_PAGE_SIZE = 100;
/** Enough for any account's own voices; a workspace with more is cut here rather than paged for minutes. */
const MAX_CATALOGUE_VOICES = 1000;
/** A page of voices with their samples, labels and fine-tuning records runs larger than other JSON answers. */
const VOICE_PAGE_MAX_BYTES = 4 * 1024 * 1024;

const keyHeader = (target: UpstreamTarget): Record<string, string> => (target.apiKey ? { 'xi-api-key': target.apiKey } : {});
/** ISO 639-1 from a BCP-47 tag ('pt-BR' -> 'pt'), as ElevenLabs takes it. */
const primaryLanguage = (tag: string) => tag.split(/[-_]/)[0]!.toLowerCase();

const speech: SpeechCapability<Settings> = {
  formatPhoneme: null,
  async synthesize(target, req) {
    const { output_sample_rate: rate, stability, similarity_boost } = target.settings;
    const speed = Math.min(MAX_SPEED, Math.max(MIN_SPEED, req.speed));
    const voiceSettings = {
      ...(stability !== undefined ? { stability } : {}),
      ...(similarity_boost !== undefined ? { similarity_boost } : {}),
      ...(speed !== 1 ? { speed } : {}),
    };
    const body = {
      text: req.text,
      model_id: target.upstreamModel,
      // Omitted when empty, so the voice keeps the settings stored with it.
      ...(Object.keys(voiceSettings).length ? { voice_settings: voiceSettings } : {}),
      ...(req.language && LANGUAGE_ENFORCING_MODEL.test(target.upstreamModel) ? { language_code: primaryLanguage(req.language) } : {}),
    };
    const path = `/v1/text-to-speech/${encodeURIComponent(req.voice.upstreamId)}/stream?output_format=pcm_${rate}`;
    const res = await engineRequest(target.url, target.apiKey, { method: 'POST', path, headers: keyHeader(target), json: body }, req);
    await assertAudioAnswer(res);
    return boundedSpeech({ sampleRate: rate, chunks: s16Chunks(engineBody(res, req)) }, req.text);
  },
};

interface ScribeWord {
  text?: unknown;
  start?: unknown;
  end?: unknown;
  type?: unknown;
}

const transcription: TranscriptionCapability<Settings> = {
  async transcribe(target, req) {
    const form = new FormData();
    form.set('model_id', target.upstreamModel);
    form.set('file', wavBlob(encodeWav(req.samples, req.sampleRate, 'pcm_s16le')), 'audio.wav');
    form.set('timestamps_granularity', 'word');
    // Event tags like "(laughter)" would land in the transcript text.
    form.set('tag_audio_events', 'false');
    if (req.language) form.set('language_code', primaryLanguage(req.language));
    if (!target.upstreamModel.startsWith('scribe_v1')) {
      for (const term of req.keyterms.filter((t) => t.length <= MAX_KEYTERM_CHARS).slice(0, MAX_KEYTERMS)) form.append('keyterms', term);
    }
    const res = await engineRequest(target.url, target.apiKey, { method: 'POST', path: '/v1/speech-to-text', headers: keyHeader(target), body: form }, req);
    const body = await engineJson<{ text?: unknown; words?: unknown } | null>(res, req, 'the transcription');
    if (body === null || typeof body !== 'object' || (typeof body.text !== 'string' && !Array.isArray(body.words))) {
      throw new UpstreamError('protocol', 'ElevenLabs answered the transcription without a transcript (no text or words).');
    }
    // `words` interleaves words with 'spacing' and 'audio_event' entries.
    const words: Word[] = (Array.isArray(body.words) ? (body.words as ScribeWord[]) : [])
      .filter((w) => w?.type === 'word' && typeof w.text === 'string' && typeof w.start === 'number' && typeof w.end === 'number')
      .map((w) => ({ word: (w.text as string).trim(), start: w.start as number, end: w.end as number }));
    return { text: typeof body.text === 'string' ? body.text.trim() : words.map((w) => w.word).join(' '), words };
  },
};

// Instant voice cloning keeps the voice at ElevenLabs: the profile holds its id. IVC has no
// counterpart to the request's `mode` (likeness is tuned per request by the upstream's settings).
const clone: CloneCapability<Settings> = {
  async clone(target, req) {
    const form = new FormData();
    form.set('name', req.name);
    form.append('files', wavBlob(req.clip.wav), 'clip.wav');
    form.set('labels', JSON.stringify({ language: req.language }));
    const res = await engineRequest(target.url, target.apiKey, { method: 'POST', path: '/v1/voices/add', headers: keyHeader(target), body: form }, req);
    const body = await engineJson<{ voice_id?: unknown; requires_verification?: unknown } | null>(res, req, 'the clone request');
    const id = body?.voice_id;
    if (typeof id !== 'string' || id.length === 0 || id.length > 512) {
      throw new UpstreamError('protocol', 'ElevenLabs answered the clone request without a voice id.');
    }
    const requiresVerification = body?.requires_verification === true;
    return {
      upstreamId: id,
      params: null,
      expiresAt: null,
      metadata: { engine: 'elevenlabs', upstream_voice_id: id, requires_verification: requiresVerification },
    };
  },
  // DELETE /v1/voices/{voice_id}: https://elevenlabs.io/docs/api-reference/voices/delete
  deleteVoice: (target, upstreamId, call) => engineDelete(target.url, target.apiKey, `/v1/voices/${encodeURIComponent(upstreamId)}`, keyHeader(target), call),
};

interface ElevenLabsVoice {
  voice_id?: unknown;
  name?: unknown;
  description?: unknown;
  labels?: Record<string, unknown> | null;
  verified_languages?: { language?: unknown }[] | null;
}

const text = (value: unknown): string | undefined => (typeof value === 'string' && value.trim() ? value.trim() : undefined);

function genderOf(label: unknown): EngineVoice['gender'] {
  const value = typeof label === 'string' ? label.toLowerCase() : '';
  return value === 'male' || value === 'female' || value === 'neutral' ? value : null;
}

function engineVoice(voice: ElevenLabsVoice): EngineVoice | null {
  const id = text(voice.voice_id);
  if (!id) return null;
  const labels = voice.labels ?? {};
  const described = [labels.accent, labels.descriptive ?? labels.description, labels.age, labels.use_case].map(text).filter(Boolean).join(', ');
  return {
    id,
    name: text(voice.name) ?? id,
    language: text(labels.language) ?? text(voice.verified_languages?.[0]?.language) ?? 'en',
    gender: genderOf(labels.gender),
    description: text(voice.description) ?? described,
  };
}

// GET /v2/voices pages with `next_page_token` while `has_more` (GET /v1/voices, unpaged, is the
// older form).
const voiceCatalogue: VoiceCatalogueCapability<Settings> = {
  async listVoices(target, call: CallOptions) {
    const voices: EngineVoice[] = [];
    let pageToken: string | null = null;
    do {
      const query = new URLSearchParams({ page_size: String(VOICES_PAGE_SIZE), ...(pageToken ? { next_page_token: pageToken } : {}) });
      const res = await engineRequest(target.url, target.apiKey, { method: 'GET', path: `/v2/voices?${query}`, headers: keyHeader(target) }, call);
      const page = await engineJson<{ voices?: unknown; has_more?: unknown; next_page_token?: unknown } | null>(
        res,
        call,
        'the voice list',
        VOICE_PAGE_MAX_BYTES,
      );
      if (!page || !Array.isArray(page.voices)) throw new UpstreamError('protocol', 'ElevenLabs answered the voice list without voices.');
      for (const voice of page.voices as ElevenLabsVoice[]) {
        const mapped = voice && typeof voice === 'object' ? engineVoice(voice) : null;
        if (mapped && voices.length < MAX_CATALOGUE_VOICES) voices.push(mapped);
      }
      pageToken = page.has_more === true && typeof page.next_page_token === 'string' && page.next_page_token ? page.next_page_token : null;
    } while (pageToken && voices.length < MAX_CATALOGUE_VOICES);
    return voices;
  },
};

export const elevenlabs = defineProtocol({
  name: 'elevenlabs',
  summary: "ElevenLabs API: streamed speech (raw PCM), Scribe transcription, instant voice cloning, the account's voices",
  settings,
  capabilities: ['speech', 'transcription', 'clone', 'voice_catalogue'],
  create: () => ({
    // Healthy when the key is accepted on GET /v1/models (cheap, nothing billed).
    health: (target, signal) => checkHttpHealth(target.url, '/v1/models', keyHeader(target), signal, target.apiKey),
    speech,
    transcription,
    clone,
    voiceCatalogue,
  }),
});
