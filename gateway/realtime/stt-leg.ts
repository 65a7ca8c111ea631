// The user-audio leg of a /v1/realtime session: the same streaming-transcription session as
// /stt/websocket (gateway/stt/stt-session.ts: engine, turn detection, per-second metering and
// its limits), driven in process. Its "socket" is a pipe: the realtime session writes the audio
// it decoded from `input_audio_buffer.append` and the commands its events ask for, and reads the
// session's events back as plain objects (the leg's dialect below), never as wire JSON.
import { EventEmitter } from 'node:events';
import type { WebSocket } from 'ws';
import type { SttDialect } from '../stt/dialect.ts';
import type { TurnEvent, TurnSettings } from '../stt/turn-detector.ts';

/** What the leg reports to the realtime session. */
export type LegEvent =
  | { type: 'transcript'; text: string; isFinal: boolean }
  | { type: 'turn'; turn: TurnEvent['type']; atSeconds: number; transcript?: string }
  | { type: 'flushed' }
  | { type: 'error'; code: string; message: string }
  | { type: 'closed'; reason: string; audioSeconds: number };

/** What the realtime session asks of the leg (besides audio). */
export type LegCommand = { type: 'finalize' } | { type: 'close' } | { type: 'configure'; turns: Partial<TurnSettings> };

export const legDialect: SttDialect = {
  started: () => [],
  transcript: (t) => [{ type: 'transcript', text: t.text, isFinal: t.isFinal }],
  turn: (e) => [{ type: 'turn', turn: e.type, atSeconds: e.atSeconds, ...(e.transcript !== undefined ? { transcript: e.transcript } : {}) }],
  flushed: () => [{ type: 'flushed' }],
  error: (e) => [{ type: 'error', code: e.code, message: e.message }],
  closed: (e) => [{ type: 'closed', reason: e.reason, audioSeconds: e.audioSeconds }],
  // Only the realtime session writes commands, as LegCommand JSON.
  command: (text) => JSON.parse(text) as LegCommand,
};

/**
 * The in-process end of a transcription session: what stt-session.ts uses of a `ws` WebSocket.
 * `send` hands the session's events to `onEvent`; `close` ends the session (its 'close' handler
 * bills the audio and frees the engine), as a client's disconnect would.
 */
export class LegPipe extends EventEmitter {
  readonly OPEN = 1;
  readyState = 1;

  constructor(private readonly onEvent: (event: LegEvent) => void) {
    super();
  }

  /** The session as it sees its socket (the members it uses, which this class has). */
  asSocket(): WebSocket {
    return this as unknown as WebSocket;
  }

  send(data: string): void {
    this.onEvent(JSON.parse(data) as LegEvent);
  }

  ping(): void {}

  close(): void {
    if (this.readyState !== this.OPEN) return;
    this.readyState = 3;
    // After the current step, as a socket's close event comes: the session's own close() first sends its last events.
    queueMicrotask(() => this.emit('close'));
  }

  audio(bytes: Buffer): void {
    if (this.readyState === this.OPEN) this.emit('message', bytes, true);
  }

  command(command: LegCommand): void {
    if (this.readyState === this.OPEN) this.emit('message', Buffer.from(JSON.stringify(command)), false);
  }
}
