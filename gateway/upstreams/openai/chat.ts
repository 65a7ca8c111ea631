// Chat completions against any OpenAI-compatible server (vLLM, SGLang, llama.cpp server,
// Ollama, TGI...). The request body is sent as the bytes we were given.
import { Agent } from 'undici';
import { dispatchCall, dispatchTarget } from '../dispatch-call.js';
import type { ChatAdapter } from '../chat-types.js';
import { upstreamApiKey } from '../types.js';

// One keep-alive pool per upstream origin, shared by all requests of the process.
export const httpDispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 256, pipelining: 1 });

export const openAiChat: ChatAdapter = async (upstream, req) => {
  const key = upstreamApiKey(upstream);
  const res = await dispatchCall(httpDispatcher, {
    ...dispatchTarget(`${upstream.url}/chat/completions`),
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(key ? { authorization: `Bearer ${key}` } : {}),
    },
    body: req.raw,
    signal: req.signal,
    timeoutMs: req.timeoutMs,
  });
  const contentType = res.headers['content-type'];
  return {
    statusCode: res.statusCode,
    contentType: Array.isArray(contentType) ? contentType.join(', ') : (contentType ?? ''),
    get body() {
      return res.body;
    },
    text: () => res.text(),
  };
};
