// Faults a scripted engine's transcription socket shows on demand, for the failover tests: after
// it has sent `after` messages, instead of the next one it closes the socket with 1011 (`close`),
// drops the connection without a close frame (`reset`), goes silent while keeping the socket
// open and taking audio (`stall`), or sends a message that is not JSON, then goes silent
// (`malformed`). How each vendor's clients see these: a close code, a dropped TCP connection, no
// answer, or a frame the protocol does not allow (Deepgram's and Cartesia's messages are JSON:
// https://developers.deepgram.com/reference/speech-to-text/listen-streaming,
// https://docs.cartesia.ai/api-reference/stt/websocket).
import type { WebSocket } from 'ws';

export type SocketFaultKind = 'close' | 'reset' | 'stall' | 'malformed';
export interface SocketFault {
  kind: SocketFaultKind;
  after: number;
}

/** A send for `ws` that shows `fault` (if any) in place of message number `fault.after` (from 0); false when the message was not sent. */
export function faultySender(ws: WebSocket, fault: SocketFault | undefined): (text: string) => boolean {
  let sent = 0;
  let failed = false;
  return (text) => {
    if (failed || ws.readyState !== ws.OPEN) return false;
    if (!fault || sent < fault.after) {
      sent += 1;
      ws.send(text);
      return true;
    }
    failed = true;
    if (fault.kind === 'close') ws.close(1011, 'scripted failure');
    else if (fault.kind === 'reset') ws.terminate();
    else if (fault.kind === 'malformed') ws.send('{"type": "Results", truncated');
    return false;
  };
}
