// An OpenAI-compatible chat completion served by the in-process llama.cpp engine: it answers
// with the same JSON or SSE bytes an OpenAI-compatible server would, so the route relays and
// meters it like any other upstream.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import type { ChatHistoryItem } from 'node-llama-cpp';
import { AsyncQueue } from '../async-queue.ts';
import { UpstreamError, answerTooLarge, type ChatCapability, type ChatResponse, type HealthResult, type UpstreamTarget } from '../contract.ts';
import { acquireSequence, loadModel } from './llama-engine.ts';

const encoder = new TextEncoder();

/** The GGUF file of an upstream: its upstream model name as a path (relative to the data dir). */
export function ggufPath(upstream: UpstreamTarget, dataDir: string): string {
  const name = upstream.upstreamModel.endsWith('.gguf') ? upstream.upstreamModel : `models/${upstream.upstreamModel}.gguf`;
  return isAbsolute(name) ? name : join(dataDir, name);
}

type JsonObject = Record<string, unknown>;

/** The engine refusing a request it cannot honour: the caller's error (400), as an HTTP engine would answer. */
function invalid(message: string, param: string): UpstreamError {
  return new UpstreamError('status', message, { status: 400, engineMessage: message, param });
}

function textOf(content: unknown, index: number): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (Array.isArray(content)) {
    return content
      .map((part: { type?: unknown; text?: unknown }) => {
        if (part?.type === 'text' && typeof part.text === 'string') return part.text;
        throw invalid(`messages[${index}].content: the local engine accepts only text parts.`, `messages[${index}].content`);
      })
      .join('');
  }
  throw invalid(`messages[${index}].content must be a string or an array of text parts.`, `messages[${index}].content`);
}

interface LocalRequest {
  history: ChatHistoryItem[];
  maxTokens: number | undefined;
  temperature: number;
  topP: number | undefined;
  seed: number | undefined;
  stop: string[];
  stream: boolean;
  includeUsage: boolean;
}

/** Validates what this engine can honour; the rest of OpenAI's parameters are rejected clearly. */
export function parseLocalRequest(body: JsonObject): LocalRequest {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) throw invalid('messages must be a non-empty array.', 'messages');
  const history: ChatHistoryItem[] = messages.map((m: { role?: unknown; content?: unknown }, i) => {
    const text = textOf(m?.content, i);
    switch (m?.role) {
      case 'system':
      case 'developer':
        return { type: 'system', text };
      case 'user':
      case 'tool':
        return { type: 'user', text };
      case 'assistant':
        return { type: 'model', response: [text] };
      default:
        throw invalid(`messages[${i}].role must be system, developer, user, assistant or tool.`, `messages[${i}].role`);
    }
  });
  history.push({ type: 'model', response: [] });
  const num = (name: string, min: number, max: number): number | undefined => {
    const v = body[name];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) throw invalid(`${name} must be a number between ${min} and ${max}.`, name);
    return v;
  };
  const maxTokens = num('max_completion_tokens', 1, 1_000_000) ?? num('max_tokens', 1, 1_000_000);
  if (maxTokens !== undefined && !Number.isInteger(maxTokens)) throw invalid('max_tokens must be an integer.', 'max_tokens');
  const n = num('n', 1, 128);
  if (n !== undefined && n !== 1) throw invalid('The local engine generates one choice per request (n must be 1).', 'n');
  if (Array.isArray(body.tools) && body.tools.length > 0)
    throw invalid('The local engine does not support tools; use a model served by an engine that does.', 'tools');
  const stop = body.stop === undefined || body.stop === null ? [] : Array.isArray(body.stop) ? body.stop : [body.stop];
  if (stop.length > 4 || !stop.every((s): s is string => typeof s === 'string' && s.length > 0))
    throw invalid('stop must be a string or up to 4 non-empty strings.', 'stop');
  const seed = num('seed', -(2 ** 53), 2 ** 53);
  return {
    history,
    maxTokens,
    temperature: num('temperature', 0, 2) ?? 1,
    topP: num('top_p', 0, 1),
    seed: seed === undefined ? undefined : Math.abs(Math.trunc(seed)),
    stop,
    stream: body.stream === true,
    includeUsage: (body.stream_options as JsonObject | undefined)?.include_usage === true,
  };
}

export function createLlamaCppChat(dataDir: string): ChatCapability {
  return async (upstream, req): Promise<ChatResponse> => {
    const local = parseLocalRequest(req.body);
    const path = ggufPath(upstream, dataDir);
    const signal = AbortSignal.any([req.signal, AbortSignal.timeout(req.timeoutMs)]);
    const lease = await acquireSequence(path, signal);
    const id = `chatcmpl-${randomBytes(12).toString('hex')}`;
    const created = Math.floor(Date.now() / 1000);
    const model = String(req.body.model);
    const queue = new AsyncQueue<Uint8Array>();
    const sse = (obj: unknown) => queue.push(encoder.encode(`data: ${JSON.stringify(obj)}\n\n`));
    const chunk = (delta: JsonObject, finish: string | null) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });

    const run = async () => {
      try {
        // A clean sequence per request: the prompt is evaluated (and billed) in full.
        await lease.sequence.clearHistory();
        const meterBefore = lease.sequence.tokenMeter.getState();
        const { LlamaChat } = await import('node-llama-cpp');
        const chat = new LlamaChat({ contextSequence: lease.sequence, chatWrapper: lease.chatWrapper, autoDisposeSequence: false });
        if (local.stream) sse(chunk({ role: 'assistant', content: '' }, null));
        const result = await chat.generateResponse(local.history, {
          maxTokens: local.maxTokens,
          temperature: local.temperature,
          topP: local.topP,
          seed: local.seed,
          customStopTriggers: local.stop.length ? local.stop : undefined,
          signal,
          stopOnAbortSignal: true,
          onTextChunk: local.stream ? (text) => sse(chunk({ content: text }, null)) : undefined,
        });
        chat.dispose();
        const used = lease.sequence.tokenMeter.diff(meterBefore);
        const usage = {
          prompt_tokens: used.usedInputTokens,
          completion_tokens: used.usedOutputTokens,
          total_tokens: used.usedInputTokens + used.usedOutputTokens,
        };
        const finish = result.metadata.stopReason === 'maxTokens' ? 'length' : 'stop';
        if (signal.aborted) {
          // Timed out or the client left: report what was generated, then end.
          if (local.stream && local.includeUsage) sse({ id, object: 'chat.completion.chunk', created, model, choices: [], usage });
          queue.end(req.signal.aborted ? undefined : Object.assign(new Error('local engine deadline exceeded'), { name: 'TimeoutError' }));
          return;
        }
        if (local.stream) {
          sse(chunk({}, finish));
          if (local.includeUsage) sse({ id, object: 'chat.completion.chunk', created, model, choices: [], usage });
          queue.push(encoder.encode('data: [DONE]\n\n'));
        } else {
          queue.push(
            encoder.encode(
              JSON.stringify({
                id,
                object: 'chat.completion',
                created,
                model,
                choices: [{ index: 0, message: { role: 'assistant', content: result.response }, logprobs: null, finish_reason: finish }],
                usage,
              }),
            ),
          );
        }
        queue.end();
      } catch (e) {
        queue.end(e);
      } finally {
        lease.release();
      }
    };
    void run();
    return {
      statusCode: 200,
      contentType: local.stream ? 'text/event-stream' : 'application/json',
      body: queue,
      async text(maxBytes = Infinity) {
        const parts: Uint8Array[] = [];
        let bytes = 0;
        for await (const p of queue) {
          bytes += p.length;
          if (bytes > maxBytes) throw answerTooLarge(maxBytes);
          parts.push(p);
        }
        return Buffer.concat(parts).toString('utf8');
      },
    };
  };
}

export function createLlamaCppHealthCheck(dataDir: string) {
  return async (upstream: UpstreamTarget): Promise<HealthResult> => {
    const started = performance.now();
    const path = ggufPath(upstream, dataDir);
    if (!existsSync(path)) {
      return {
        ok: false,
        latencyMs: 0,
        error: `no GGUF model file at ${path}; put one there, or point the model at one with \`svc model upsert --id ${upstream.modelId} --modality llm --upstream local:llama-cpp --protocol llama-cpp --upstream-model /path/to/model.gguf\``,
      };
    }
    try {
      await loadModel(path);
      return { ok: true, latencyMs: Math.round(performance.now() - started) };
    } catch (e) {
      return { ok: false, latencyMs: Math.round(performance.now() - started), error: `could not load ${path}: ${(e as Error).message}` };
    }
  };
}
