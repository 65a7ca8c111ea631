// Entry of a recognizer worker thread when the gateway runs from its TypeScript sources (tsx,
// vitest; the bundled gateway has the worker bundled too, see recognizer.ts). It registers tsx
// in this thread itself (workers are started with no execArgv) and loads the TypeScript worker,
// which reads its settings from this thread's workerData (node:worker_threads) itself.
import { register } from 'tsx/esm/api';

register();
await import('./worker.ts');
