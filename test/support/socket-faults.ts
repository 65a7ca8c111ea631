// Faults a scripted engine's transcription socket shows on demand, for the failover tests: once
// it has sent `afterFinals` final transcripts (`"is_final": true`, as both Deepgram's Results and
// Cartesia's transcripts carry it), instead of its next message (`onFinal`: its next final) it
// closes the socket with 1011 (`close`), drops the connection without a close frame (`reset`),
// goes silent while keeping the socket open and taking audio (`stall`), or sends a frame that is
// not JSON, then goes silent (`malformed`). `hold` is a slow engine rather than a failing one: that
// message and those after it are held back until the test calls the fault's `release()` (then all
// flow), so a test decides when the answer comes; `release(n)` sends the first n held back and goes
// on holding the rest (and what comes after), for an engine that answers one request and not yet
// the next. Deepgram's and Cartesia's messages are JSON:
// https://developers.deepgram.com/reference/speech-to-text/listen-streaming,
// https://docs.cartesia.ai/api-reference/stt/websocket.
import type { WebSocket } from 'ws';

export type SocketFaultKind = 'close' | 'reset' | 'stall' | 'malformed' | 'hold';
export interface SocketFault {
  kind: SocketFaultKind;
  afterFinals: number;
  onFinal?: boolean;
  /** Called when the fault shows. */
  shown?: () => void;
  /** `hold`: sends what is held back (if the socket is still open), or only its first `count` messages; set by the socket's sender. */
  release?: (count?: number) => void;
}

const isFinal = (text: string) => (JSON.parse(text) as { is_final?: unknown }).is_final === true;

/** A send for `ws` that shows `fault` (if any) in place of the message it names; false when the message was not sent. */
export function faultySender(ws: WebSocket, fault: SocketFault | undefined): (text: string) => boolean {
  let finals = 0;
  let failed = false;
  let held: string[] | null = null;
  let released = false;
  if (fault?.kind === 'hold') {
    fault.release = (count?: number) => {
      const out = count === undefined ? (held?.splice(0) ?? []) : (held?.splice(0, count) ?? []);
      if (count === undefined) {
        released = true;
        held = null;
      }
      for (const text of out) if (ws.readyState === ws.OPEN) ws.send(text);
    };
  }
  return (text) => {
    if (failed || ws.readyState !== ws.OPEN) return false;
    const final = isFinal(text);
    if (held) {
      held.push(text);
      return true;
    }
    if (!fault || released || finals < fault.afterFinals || (fault.onFinal && !final)) {
      if (final) finals += 1;
      ws.send(text);
      return true;
    }
    if (fault.kind === 'hold') {
      held = [text];
      fault.shown?.();
      return true;
    }
    failed = true;
    fault.shown?.();
    if (fault.kind === 'close') ws.close(1011, 'scripted failure');
    else if (fault.kind === 'reset') ws.terminate();
    else if (fault.kind === 'malformed') ws.send('{"type": "Results", truncated');
    return false;
  };
}
