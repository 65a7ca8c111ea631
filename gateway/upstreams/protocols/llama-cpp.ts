// `llama-cpp`: chat completions from a GGUF model run in this process (node-llama-cpp); the
// upstream model is the GGUF file (relative to the data directory, or absolute).
import { z } from 'zod';
import { defineProtocol } from '../contract.ts';
import { createLlamaCppChat, createLlamaCppHealthCheck } from '../llama-cpp/chat.ts';
import { configureLlama } from '../llama-cpp/llama-engine.ts';

export const llamaCpp = defineProtocol({
  name: 'llama-cpp',
  summary: 'a GGUF model run by the gateway with llama.cpp (upstream URL local:llama-cpp, --upstream-model the .gguf file)',
  settings: z.object({}).strict(),
  capabilities: ['chat'],
  create: (engines) => {
    configureLlama(engines.llama);
    return { health: createLlamaCppHealthCheck(engines.dataDir), chat: createLlamaCppChat(engines.dataDir) };
  },
});
