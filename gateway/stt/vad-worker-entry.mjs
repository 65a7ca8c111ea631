// Entry of the VAD worker thread when the gateway runs from its TypeScript sources (tsx, vitest;
// the bundled gateway has the worker bundled too, see silero-vad.ts): it registers tsx in this
// thread itself (workers are started with no execArgv) and loads the TypeScript worker.
import { register } from 'tsx/esm/api';

register();
await import('./vad-worker.ts');
