// Protocol name -> adapter, per modality. The registry's `protocol` column picks one: `openai`
// is any OpenAI-compatible server (chat for llm models, /audio/speech for tts models,
// /audio/transcriptions for stt models).
import type { HealthCheck } from '../registry/health-checker.js';
import type { ChatAdapter } from './chat-types.js';
import { createLlamaCppChat, createLlamaCppHealthCheck } from './llama-cpp/chat.js';
import { openAiChat } from './openai/chat.js';
import { checkOpenAiHealth } from './openai/health.js';
import { openAiSpeechAdapter } from './openai/speech.js';
import { espeakAdapter } from './local-tts/espeak.js';
import { fliteAdapter } from './local-tts/flite.js';
import { checkLocalEngine } from './local-tts/health.js';
import type { SpeechAdapter } from './speech-types.js';
import type { VoiceCloneAdapter } from './clone-types.js';
import { localCloneAdapter } from './local-tts/clone.js';
import { openAiCloneAdapter } from './openai/clone.js';
import type { TranscriptionAdapter } from './transcription-types.js';
import { openAiTranscriptionAdapter } from './openai/transcription.js';
import { checkPocketsphinx, pocketsphinxAdapter } from './local-stt/pocketsphinx.js';

export interface UpstreamAdapters {
  healthCheck(protocol: string): HealthCheck | undefined;
  chat(protocol: string): ChatAdapter | undefined;
  speech(protocol: string): SpeechAdapter | undefined;
  transcription(protocol: string): TranscriptionAdapter | undefined;
  /** Engines that can make a voice from a clip; a TTS model is clone-capable through these. */
  clone(protocol: string): VoiceCloneAdapter | undefined;
}

export function createUpstreamAdapters(options: { dataDir: string }): UpstreamAdapters {
  const health: Record<string, HealthCheck> = {
    openai: checkOpenAiHealth,
    'llama-cpp': createLlamaCppHealthCheck(options.dataDir),
    flite: checkLocalEngine('flite', ['-lv']),
    'espeak-ng': checkLocalEngine('espeak-ng', ['--version']),
    pocketsphinx: checkPocketsphinx,
  };
  const chat: Record<string, ChatAdapter> = {
    openai: openAiChat,
    'llama-cpp': createLlamaCppChat(options.dataDir),
  };
  const speech: Record<string, SpeechAdapter> = {
    flite: fliteAdapter,
    'espeak-ng': espeakAdapter,
    openai: openAiSpeechAdapter,
  };
  const transcription: Record<string, TranscriptionAdapter> = {
    openai: openAiTranscriptionAdapter,
    pocketsphinx: pocketsphinxAdapter,
  };
  const clone: Record<string, VoiceCloneAdapter> = {
    flite: localCloneAdapter('flite'),
    'espeak-ng': localCloneAdapter('espeak-ng'),
    openai: openAiCloneAdapter,
  };
  return {
    clone: (protocol) => clone[protocol],
    healthCheck: (protocol) => health[protocol],
    transcription: (protocol) => transcription[protocol],
    chat: (protocol) => chat[protocol],
    speech: (protocol) => speech[protocol],
  };
}
