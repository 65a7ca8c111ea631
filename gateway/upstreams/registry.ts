// Protocol name -> adapter. The registry's `protocol` column picks one of these.
import type { HealthCheck } from '../registry/health-checker.js';
import type { ChatAdapter } from './chat-types.js';
import { openAiChat } from './openai/chat.js';
import { checkOpenAiHealth } from './openai/health.js';

const HEALTH_CHECKS: Record<string, HealthCheck> = {
  openai: checkOpenAiHealth,
};

export const SUPPORTED_PROTOCOLS = Object.keys(HEALTH_CHECKS);

export function healthCheckFor(protocol: string): HealthCheck | undefined {
  return HEALTH_CHECKS[protocol];
}

const CHAT_ADAPTERS: Record<string, ChatAdapter> = {
  openai: openAiChat,
};

export function chatAdapterFor(protocol: string): ChatAdapter | undefined {
  return CHAT_ADAPTERS[protocol];
}
