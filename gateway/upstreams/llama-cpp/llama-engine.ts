// llama.cpp in-process through node-llama-cpp's prebuilt CPU binaries. Evaluation runs on
// llama.cpp's own native threads, so the gateway's event loop only sees the callbacks.
// One loaded model per GGUF file, one context with a few sequences; requests wait for a free
// sequence rather than oversubscribing the (small) machine, and only so many may wait (past
// that: UpstreamError 'busy', 503 temporarily_unavailable with Retry-After).
import type { EngineConfig } from '../contract.ts';
import { Slots } from '../slots.ts';
import type { ChatWrapper, Llama, LlamaContext, LlamaContextSequence, LlamaModel } from 'node-llama-cpp';

// node-llama-cpp is large and slow to import: it is loaded on first use, so gateways that serve
// no local LLM never pay for it.
const engine = () => import('node-llama-cpp');

/** From the validated configuration (SVC_LLAMA_*), set by the protocol when the gateway creates it. */
let settings: EngineConfig['llama'] = { sequences: 4, threads: 1, contextSize: 4096, maxWaiting: 32 };

/** Takes effect for models loaded afterwards (the process configures it once, at start). */
export function configureLlama(next: EngineConfig['llama']): void {
  settings = next;
}

interface LoadedModel {
  model: LlamaModel;
  /** Resolved once per model: detecting it from the GGUF's template costs ~200 ms. */
  chatWrapper: ChatWrapper;
  context: LlamaContext;
  free: LlamaContextSequence[];
  /** One slot per sequence: holding one means `free` has a sequence to take. */
  slots: Slots;
}

export interface SequenceLease {
  model: LlamaModel;
  chatWrapper: ChatWrapper;
  sequence: LlamaContextSequence;
  release(): void;
}

let llamaPromise: Promise<Llama> | null = null;
const models = new Map<string, Promise<LoadedModel>>();

function llama(): Promise<Llama> {
  llamaPromise ??= engine().then(({ getLlama, LlamaLogLevel }) =>
    getLlama({ gpu: false, build: 'never', maxThreads: settings.threads, logLevel: LlamaLogLevel.error }),
  );
  return llamaPromise;
}

export function loadModel(path: string): Promise<LoadedModel> {
  let loaded = models.get(path);
  if (!loaded) {
    loaded = (async () => {
      const l = await llama();
      const model = await l.loadModel({ modelPath: path });
      const context = await model.createContext({ sequences: settings.sequences, contextSize: { max: settings.contextSize }, threads: settings.threads });
      const free = Array.from({ length: settings.sequences }, () => context.getSequence());
      const chatWrapper = (await engine()).resolveChatWrapper(model);
      return { model, chatWrapper, context, free, slots: new Slots(settings.sequences, settings.maxWaiting, 'local LLM requests') };
    })();
    // A failed load is not cached: the operator may put the file in place later.
    loaded.catch(() => models.delete(path));
    models.set(path, loaded);
  }
  return loaded;
}

/** Waits for a free sequence of the model (or the signal); refused at once when `maxWaiting` requests already wait. */
export async function acquireSequence(path: string, signal: AbortSignal): Promise<SequenceLease> {
  const m = await loadModel(path);
  const releaseSlot = await m.slots.acquire({ wait: true, signal });
  const sequence = m.free.pop()!;
  let released = false;
  return {
    model: m.model,
    chatWrapper: m.chatWrapper,
    sequence,
    release() {
      if (released) return;
      released = true;
      m.free.push(sequence);
      releaseSlot();
    },
  };
}

export async function unloadAll(): Promise<void> {
  const all = [...models.values()];
  models.clear();
  await Promise.allSettled(all.map(async (p) => (await p).model.dispose()));
}
