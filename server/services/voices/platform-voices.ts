// The platform voices: the local engines' own voices, visible to every org, read-only, each
// with a ready profile for its engine's model. Ids are stable so docs and clients can use them.

export interface PlatformVoice {
  id: string;
  name: string;
  description: string;
  language: string;
  gender: 'female' | 'male';
  tags: string[];
  featured: boolean;
  modelId: string;
  /** The engine's own voice name. */
  engineVoice: string;
}

const flite = (
  id: string,
  name: string,
  engineVoice: string,
  gender: PlatformVoice['gender'],
  description: string,
  tags: string[],
  featured = false,
): PlatformVoice => ({
  id: `flite-${id}`,
  name,
  description,
  language: 'en',
  gender,
  tags: ['flite', ...tags],
  featured,
  modelId: 'local-flite',
  engineVoice,
});

const espeak = (
  id: string,
  name: string,
  language: string,
  engineVoice: string,
  gender: PlatformVoice['gender'],
  description: string,
  featured = false,
): PlatformVoice => ({
  id: `espeak-${id}`,
  name,
  description,
  language,
  gender,
  tags: ['espeak-ng', 'multilingual', gender === 'female' ? 'bright' : 'deep'],
  featured,
  modelId: 'local-espeak',
  engineVoice,
});

export const PLATFORM_VOICES: readonly PlatformVoice[] = [
  flite(
    'slt',
    'Sally',
    'slt',
    'female',
    'American English female voice; clear and calm. The most intelligible local voice.',
    ['american', 'clear', 'calm', 'support'],
    true,
  ),
  flite('rms', 'Rob', 'rms', 'male', 'American English male voice; steady and neutral.', ['american', 'neutral', 'narration'], true),
  flite('awb', 'Alan', 'awb', 'male', 'Scottish English male voice; warm.', ['scottish', 'warm']),
  flite('kal', 'Kal', 'kal16', 'male', 'American English male diphone voice; robotic, very fast.', ['american', 'robotic', 'fast']),
  espeak('en-us-m', 'Ethan', 'en-US', 'en-us', 'male', 'American English (eSpeak NG formant synthesis).', true),
  espeak('en-us-f', 'Emma', 'en-US', 'en-us+f3', 'female', 'American English (eSpeak NG formant synthesis).'),
  espeak('en-gb-m', 'George', 'en-GB', 'en-gb', 'male', 'British English (eSpeak NG).'),
  espeak('fr-f', 'Camille', 'fr', 'fr+f2', 'female', 'French (eSpeak NG).', true),
  espeak('fr-m', 'Louis', 'fr', 'fr', 'male', 'French (eSpeak NG).'),
  espeak('de-f', 'Hanna', 'de', 'de+f3', 'female', 'German (eSpeak NG).'),
  espeak('de-m', 'Lukas', 'de', 'de', 'male', 'German (eSpeak NG).'),
  espeak('es-f', 'Lucia', 'es', 'es+f3', 'female', 'Spanish (eSpeak NG).', true),
  espeak('es-m', 'Mateo', 'es', 'es', 'male', 'Spanish (eSpeak NG).'),
  espeak('it-m', 'Marco', 'it', 'it', 'male', 'Italian (eSpeak NG).'),
  espeak('pt-br-f', 'Beatriz', 'pt-BR', 'pt-br+f2', 'female', 'Brazilian Portuguese (eSpeak NG).'),
  espeak('nl-m', 'Daan', 'nl', 'nl', 'male', 'Dutch (eSpeak NG).'),
  espeak('pl-m', 'Jakub', 'pl', 'pl', 'male', 'Polish (eSpeak NG).'),
  espeak('hi-f', 'Ananya', 'hi', 'hi+f3', 'female', 'Hindi (eSpeak NG).'),
];
