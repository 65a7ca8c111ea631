// Chat completions against any OpenAI-compatible server (vLLM, SGLang, llama.cpp server,
// Ollama, TGI...). The request body is sent as the bytes we were given.
import { Agent, request, type Dispatcher } from 'undici';
import type { UpstreamEntry } from '../../registry/model-registry.js';
import { upstreamApiKey } from '../types.js';

// One keep-alive pool per upstream origin, shared by all requests of the process.
const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 256, pipelining: 1 });

export async function postChatCompletion(
  upstream: UpstreamEntry,
  body: Buffer,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<Dispatcher.ResponseData> {
  const key = upstreamApiKey(upstream);
  return request(`${upstream.url}/chat/completions`, {
    method: 'POST',
    dispatcher,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(key ? { authorization: `Bearer ${key}` } : {}),
    },
    body,
    signal,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
}
