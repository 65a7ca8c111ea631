// Chat completions against any OpenAI-compatible server (vLLM, SGLang, llama.cpp server,
// Ollama, TGI...). The request body is sent as the bytes we were given.
import { Agent } from 'undici';
import { dispatchCall, dispatchTarget } from '../dispatch-call.js';
import type { ChatAdapter } from '../chat-types.js';
import { upstreamApiKey } from '../types.js';
import type { UpstreamEntry } from '../../registry/model-registry.js';

// One keep-alive pool per upstream origin, shared by all requests of the process.
export const httpDispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 256, pipelining: 1 });

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** Where an upstream's chat completions go, worked out once per registry entry (not per request). */
const chatTargets = new WeakMap<UpstreamEntry, { origin: string; path: string }>();
function chatTarget(upstream: UpstreamEntry): { origin: string; path: string } {
  let target = chatTargets.get(upstream);
  if (!target) chatTargets.set(upstream, (target = dispatchTarget(`${upstream.url}/chat/completions`)));
  return target;
}

// The engine's response is the ChatResponse itself (status, content type, body, text()).
export const openAiChat: ChatAdapter = (upstream, req) => {
  const key = upstreamApiKey(upstream);
  const { origin, path } = chatTarget(upstream);
  return dispatchCall(httpDispatcher, {
    origin,
    path,
    method: 'POST',
    headers: key ? { ...JSON_HEADERS, authorization: `Bearer ${key}` } : JSON_HEADERS,
    body: req.raw,
    signal: req.signal,
    timeoutMs: req.timeoutMs,
  });
};
