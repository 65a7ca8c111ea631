// Chat completions against any OpenAI-compatible server (vLLM, SGLang, llama.cpp server,
// Ollama, TGI...). The request body is sent as the bytes we were given.
import { Agent, request } from 'undici';
import type { ChatAdapter } from '../chat-types.js';
import { upstreamApiKey } from '../types.js';

// One keep-alive pool per upstream origin, shared by all requests of the process.
export const httpDispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 256, pipelining: 1 });

export const openAiChat: ChatAdapter = async (upstream, req) => {
  const key = upstreamApiKey(upstream);
  const res = await request(`${upstream.url}/chat/completions`, {
    method: 'POST',
    dispatcher: httpDispatcher,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(key ? { authorization: `Bearer ${key}` } : {}),
    },
    body: req.raw,
    signal: req.signal,
    headersTimeout: req.timeoutMs,
    bodyTimeout: req.timeoutMs,
  });
  return {
    statusCode: res.statusCode,
    contentType: String(res.headers['content-type'] ?? ''),
    body: res.body,
    text: () => res.body.text(),
  };
};
