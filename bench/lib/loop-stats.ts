// A bare relay's GET /stats (bench/bare-ws-relay.ts, bench/bare-tts-relay.ts): its event-loop
// delay {loopP99Ms, loopMaxMs} since the last call, which resets it (bench/lib/scale.ts reads it).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();

/** Answers GET /stats and returns true; false for any other request. */
export function loopStats(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.url !== '/stats') return false;
  const stats = { loopP99Ms: loop.percentile(99) / 1e6, loopMaxMs: loop.max / 1e6 };
  loop.reset();
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stats));
  return true;
}
