import type { JsonObject } from '../json-body.js';
import type { UpstreamEntry } from '../registry/model-registry.js';

/**
 * An engine's answer to a chat completion, shaped like an HTTP response from an
 * OpenAI-compatible server: local engines produce the same bytes (JSON or SSE), so the route
 * relays and meters every engine the same way.
 */
export interface ChatResponse {
  statusCode: number;
  contentType: string;
  body: AsyncIterable<Uint8Array>;
  text(): Promise<string>;
}

export interface ChatRequest {
  /** The client's bytes, forwarded unchanged where the engine speaks HTTP. */
  raw: Buffer;
  body: JsonObject;
  signal: AbortSignal;
  timeoutMs: number;
}

export type ChatAdapter = (upstream: UpstreamEntry, request: ChatRequest) => Promise<ChatResponse>;
