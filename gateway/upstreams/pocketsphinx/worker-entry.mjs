// Entry of a recognizer worker thread. Plain JavaScript so that it starts under any parent: the
// gateway under `node --import tsx` or `tsx`, vitest, or plain node. It registers tsx in this
// thread itself (workers are started with no execArgv) and loads the TypeScript worker.
import { register } from 'tsx/esm/api';

register();
await import('./worker.ts');
