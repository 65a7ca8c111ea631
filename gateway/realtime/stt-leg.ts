// The user-audio leg of a /v1/realtime session: the same streaming-transcription session as
// /stt/websocket (gateway/stt/stt-session.ts: engine, turn detection, per-second metering and
// its limits), driven in process. The realtime session hands it the audio it decoded from
// `input_audio_buffer.append` and the commands its events ask for, and reads its typed events
// (gateway/stt/stt-events.ts) as they are, through an in-process Outbox.
import type { GatewayContext } from '../context.ts';
import { startPlannedSession, type PlannedSession } from '../stt/open-session.ts';
import type { Outbox } from '../sessions/outbox.ts';
import type { SttEvent } from '../stt/stt-events.ts';
import type { SttSession } from '../stt/stt-session.ts';

/** What the leg reports to the realtime session: every event but `started`. */
export type LegEvent = Exclude<SttEvent, { type: 'started' }>;

/**
 * Starts the leg; `onEvent` gets its events from after this returns. The leg ends by itself
 * (its `closed` event is the last) or when the realtime session calls its close() (its audio is
 * billed then, as when a client leaves).
 */
export function startSttLeg(ctx: GatewayContext, s: PlannedSession, onEvent: (event: LegEvent) => void): SttSession {
  let open = true;
  const outbox: Outbox<SttEvent> = {
    // `started` is the only event sent while the session is being built.
    send(event) {
      if (open && event.type !== 'started') onEvent(event);
    },
    drained: () => Promise.resolve(),
    close: () => {
      open = false;
    },
    get open() {
      return open;
    },
  };
  // The realtime session writes the conversation's turns (turn-log.ts), with the answers' legs.
  return startPlannedSession(ctx, outbox, { ...s, logTurns: false });
}
