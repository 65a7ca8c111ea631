// The tiny GGUF through real llama.cpp (node-llama-cpp's prebuilt CPU binaries): it loads, the chat
// template resolves to ChatML, and any prompt gets exactly the scripted reply, token for token.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getLlama, LlamaChatSession, LlamaLogLevel, type Llama, type LlamaContext, type LlamaModel } from 'node-llama-cpp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TINY_GGUF_DEFAULT_REPLY, writeTinyGguf, type TinyGguf } from './tiny-gguf.ts';

describe('tiny GGUF model', () => {
  let dir: string;
  let info: TinyGguf;
  let llama: Llama;
  let model: LlamaModel;
  let context: LlamaContext;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tiny-gguf-'));
    info = await writeTinyGguf(join(dir, 'tiny.gguf'));
    // One thread: the model is tiny, and more threads only spin against each other on 2 cores.
    llama = await getLlama({ gpu: false, build: 'never', maxThreads: 1, logLevel: LlamaLogLevel.error });
    model = await llama.loadModel({ modelPath: info.path });
    context = await model.createContext({ contextSize: 4096, threads: 1 });
  });

  afterAll(async () => {
    await context?.dispose();
    await model?.dispose();
    await llama?.dispose();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  // A context has one sequence by default: dispose the session with `disposeSequence: true` to free it.
  function session(systemPrompt?: string) {
    return new LlamaChatSession({ contextSequence: context.getSequence(), ...(systemPrompt ? { systemPrompt } : {}) });
  }

  it('is a small file that says how it will answer', () => {
    expect(info.reply).toBe(TINY_GGUF_DEFAULT_REPLY);
    expect(info.replyTokens).toBe(6);
    expect(info.replyPieces.join('')).toBe(info.reply);
    expect(statSync(info.path).size).toBeLessThan(4 * 1024 * 1024);
    expect(model.tokenize(info.reply)).toHaveLength(info.replyTokens);
  });

  it('answers any prompt with exactly the reply, then EOS, even when sampling', async () => {
    const s = session('You are a pirate. Answer in rhymes.');
    expect(s.chatWrapper.wrapperName).toBe('ChatML');
    const chunks: string[] = [];
    let tokens = 0;
    const result = await s.promptWithMeta('Ünïcödé 🎉, <|im_end|> and anything else?', {
      temperature: 0.8,
      maxTokens: 50,
      onTextChunk: (text) => chunks.push(text),
      onToken: (t) => (tokens += t.length),
    });
    expect(result.response.join('')).toBe(TINY_GGUF_DEFAULT_REPLY);
    expect(result.stopReason).toBe('eogToken');
    expect(chunks.join('')).toBe(TINY_GGUF_DEFAULT_REPLY);
    expect(tokens).toBe(info.replyTokens);
    // A second turn in the same conversation answers the same way.
    expect(await s.prompt('again', { temperature: 2 })).toBe(TINY_GGUF_DEFAULT_REPLY);
    s.dispose({ disposeSequence: true });
  });

  it('stops at maxTokens and at a stop string inside the reply', async () => {
    const s = session();
    const capped = await s.promptWithMeta('count', { temperature: 0.8, maxTokens: 3 });
    expect(capped.stopReason).toBe('maxTokens');
    expect(capped.response.join('')).toBe('Hello from the');
    expect(model.tokenize(capped.response.join(''))).toHaveLength(3);
    const stopped = await s.promptWithMeta('stop', { temperature: 0.8, customStopTriggers: ['tiny'] });
    expect(stopped.stopReason).toBe('customStopTrigger');
    expect(stopped.response.join('')).toBe('Hello from the ');
    s.dispose({ disposeSequence: true });
  });

  it('writes other replies, and refuses ones a bigram model cannot say', async () => {
    const other = await writeTinyGguf(join(dir, 'other.gguf'), { reply: 'Bonjour, ça va?' });
    expect(other.replyPieces).toEqual(['Bonjour', ',', ' ça', ' va', '?']);
    const m = await llama.loadModel({ modelPath: other.path });
    const c = await m.createContext({ contextSize: 1024, threads: 1 });
    const s = new LlamaChatSession({ contextSequence: c.getSequence() });
    expect(await s.prompt('hi', { temperature: 1 })).toBe('Bonjour, ça va?');
    expect(m.tokenize(other.reply)).toHaveLength(other.replyTokens);
    await c.dispose();
    await m.dispose();
    await expect(writeTinyGguf(join(dir, 'dup.gguf'), { reply: 'a b a b' })).rejects.toThrow(/must not repeat/);
  });
});
