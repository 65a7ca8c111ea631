// The WebRTC calls this process holds, by id: POST /v1/realtime/calls adds one, a hang-up or the
// call's end removes it, GET /v1/realtime?call_id= and POST …/hangup find it (only for the org
// that made it: another org's call is as absent as one that never was). A call lives in the
// process that answered it; with several gateways, route a call's control socket and hang-up to
// that one (docs/realtime.md "WebRTC"). Bounded by SVC_WEBRTC_MAX_CALLS: each call holds UDP
// sockets and encodes audio on the event loop.
import { ServiceError } from '../../server/services/errors.ts';
import type { RealtimeCall } from './realtime-call.ts';

export class RealtimeCalls {
  private readonly calls = new Map<string, RealtimeCall>();
  /** Calls being set up (admitted, their offer being answered): counted against the cap too. */
  private opening = 0;

  constructor(private readonly maxCalls: number) {}

  get size(): number {
    return this.calls.size;
  }

  /** A place for one more call (503 past the process's cap); the caller gives it back with `release` or fills it with `add`. */
  reserve(): { add(call: RealtimeCall): void; release(): void } {
    if (this.calls.size + this.opening >= this.maxCalls)
      throw new ServiceError('temporarily_unavailable', 'This server has as many WebRTC calls as it takes; retry shortly.', null, { retryAfterSeconds: 1 });
    this.opening++;
    let open = true;
    const release = () => {
      if (open) this.opening--;
      open = false;
    };
    return {
      add: (call) => {
        release();
        if (!call.isEnded) this.calls.set(call.id, call);
      },
      release,
    };
  }

  remove(call: RealtimeCall): void {
    if (this.calls.get(call.id) === call) this.calls.delete(call.id);
  }

  /** The org's call of that id (404 not_found otherwise). */
  find(id: string, orgId: string): RealtimeCall {
    const call = this.calls.get(id);
    if (!call || call.orgId !== orgId)
      throw new ServiceError('not_found', `No call ${JSON.stringify(id)} on this server (a call lives on the gateway that answered its offer).`, 'call_id');
    return call;
  }

  /** Ends every call (the gateway closing). */
  endAll(code: number, reason: string): Promise<void> {
    const calls = [...this.calls.values()];
    for (const call of calls) call.end(code, reason);
    return Promise.all(calls.map((c) => c.closed)).then(() => {});
  }
}
