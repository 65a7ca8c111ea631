// What a voice's preview says, and the stamp of what it was made from (docs/voices.md, "Previews").
import { createHash } from 'node:crypto';
import { isUsableProfile } from './usable-profile.ts';

/**
 * The sentence each preview speaks, by the voice's language (its primary subtag): fixed, never
 * built from anything a client sends — a voice's name in it would make previews free synthesis.
 */
const PREVIEW_TEXT: Record<string, string> = {
  en: 'Hello! Thank you for calling. How can I help you today?',
  fr: 'Bonjour, merci de votre appel. Comment puis-je vous aider ?',
  de: 'Hallo, danke für Ihren Anruf. Wie kann ich Ihnen helfen?',
  es: 'Hola, gracias por llamar. ¿En qué puedo ayudarle hoy?',
  it: 'Ciao, grazie per aver chiamato. Come posso aiutarla oggi?',
  pt: 'Olá, obrigado por ligar. Como posso ajudar hoje?',
  nl: 'Hallo, bedankt voor uw telefoontje. Waarmee kan ik u helpen?',
  pl: 'Dzień dobry, dziękuję za telefon. W czym mogę pomóc?',
  hi: 'नमस्ते, कॉल करने के लिए धन्यवाद। बताइए, मैं कैसे मदद करूँ?',
};

/** The preview's sentence in `language` (English for a language without one). */
export function previewTextFor(language: string): string {
  return PREVIEW_TEXT[language.toLowerCase().split('-')[0] ?? ''] ?? PREVIEW_TEXT.en!;
}

/** What of a ready profile its preview depends on. */
export interface PreviewSource {
  modelId: string;
  upstreamId: string;
  params: unknown;
  profileVersion: string;
  sourceVersion: string;
}

/**
 * The stamp of a preview made from `profile` in `language`: the first 16 hex digits of a SHA-256
 * of everything the clip depends on. A profile prepared again (another engine voice, settings or
 * version) or a new language gives another stamp, and the preview is made again.
 */
export function previewStamp(profile: PreviewSource, language: string): string {
  const made = [previewTextFor(language), language, profile.modelId, profile.upstreamId, profile.params ?? null, profile.profileVersion, profile.sourceVersion];
  return createHash('sha256').update(canonicalJson(made)).digest('hex').slice(0, 16);
}

/**
 * The blob of each ready preview of a voice, by model: a preview counts only while its profile is
 * usable and still what the preview was made from (until a worker makes it again).
 */
export function readyPreviewModels(voice: {
  language: string;
  profiles: Array<PreviewSource & { status: string; expiresAt: Date | null }>;
  previews: Array<{ modelId: string; stamp: string; status: string; blobId: string | null }>;
}): Map<string, string> {
  const ready = new Map<string, string>();
  for (const preview of voice.previews) {
    const profile = voice.profiles.find((p) => p.modelId === preview.modelId);
    if (preview.status !== 'ready' || !preview.blobId || !profile || !isUsableProfile(profile)) continue;
    if (previewStamp(profile, voice.language) === preview.stamp) ready.set(preview.modelId, preview.blobId);
  }
  return ready;
}

/** JSON with object keys sorted: PostgreSQL's jsonb gives them back in its own order, SQLite as written. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return `{${entries
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
