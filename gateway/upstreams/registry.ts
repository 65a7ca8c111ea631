// Protocol name -> adapter. The registry's `protocol` column picks one of these.
import type { HealthCheck } from '../registry/health-checker.js';
import type { ChatAdapter } from './chat-types.js';
import { createLlamaCppChat, createLlamaCppHealthCheck } from './llama-cpp/chat.js';
import { openAiChat } from './openai/chat.js';
import { checkOpenAiHealth } from './openai/health.js';

export interface UpstreamAdapters {
  healthCheck(protocol: string): HealthCheck | undefined;
  chat(protocol: string): ChatAdapter | undefined;
}

export function createUpstreamAdapters(options: { dataDir: string }): UpstreamAdapters {
  const health: Record<string, HealthCheck> = {
    openai: checkOpenAiHealth,
    'llama-cpp': createLlamaCppHealthCheck(options.dataDir),
  };
  const chat: Record<string, ChatAdapter> = {
    openai: openAiChat,
    'llama-cpp': createLlamaCppChat(options.dataDir),
  };
  return {
    healthCheck: (protocol) => health[protocol],
    chat: (protocol) => chat[protocol],
  };
}
