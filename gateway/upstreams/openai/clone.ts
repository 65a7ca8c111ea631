// Cloning on an OpenAI-compatible speech server that has a voice-creation endpoint
// (OpenAI's custom voices, and servers that mirror it): POST {url}/audio/voices, multipart with
// `name`, `audio_sample` (WAV), and optional `transcript`, `language`; the answer's `id` (or
// `voice_id`) is the voice to send as `voice` to {url}/audio/speech. An `expires_at` (unix
// seconds or ISO) in the answer becomes the profile's expiry.
import { FormData } from 'undici';
import type { VoiceCloneAdapter } from '../clone-types.js';
import { postForm } from './post-form.js';
import { ServiceError } from '../../../server/services/errors.js';

function parseExpiry(value: unknown): Date | null {
  if (typeof value === 'number' && Number.isFinite(value)) return new Date(value * 1000);
  if (typeof value === 'string' && !Number.isNaN(Date.parse(value))) return new Date(value);
  return null;
}

export const openAiCloneAdapter: VoiceCloneAdapter = {
  async clone(upstream, req) {
    const form = new FormData();
    form.set('name', req.name);
    form.set('audio_sample', new Blob([new Uint8Array(req.clip.wav)], { type: 'audio/wav' }), 'clip.wav');
    form.set('model', upstream.upstreamModel);
    if (req.transcript) form.set('transcript', req.transcript);
    form.set('language', req.language);
    form.set('mode', req.mode);
    const res = await postForm(upstream, '/audio/voices', form, req);
    const body = (await res.body.json().catch(() => null)) as Record<string, unknown> | null;
    const id = body?.id ?? body?.voice_id;
    if (typeof id !== 'string' || id.length === 0 || id.length > 512) {
      throw new ServiceError('upstream_error', 'The speech engine answered the clone request without a voice id.');
    }
    // Engines that return speaker conditioning (latents) instead of keeping the voice give it
    // back here; the profile keeps it and the speech adapter sends it with each request.
    const latents = body?.speaker_latents ?? null;
    return {
      upstreamId: id,
      params: latents && typeof latents === 'object' ? { speaker_latents: latents } : null,
      expiresAt: parseExpiry(body?.expires_at),
      metadata: { engine: 'openai-compatible', upstream_voice_id: id },
    };
  },
};
