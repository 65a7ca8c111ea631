// The OpenAI flavours of the Realtime API (ga, beta, speaches) as the contract's transcription
// stream. Server events (developers.openai.com/api/reference/resources/realtime/server-events):
//   input_audio_buffer.speech_started {audio_start_ms, item_id}   → speech_started
//   input_audio_buffer.speech_stopped {audio_end_ms, item_id}     → end_of_turn, after the item's final
//   input_audio_buffer.committed {item_id}                        → the item exists (server VAD or our commit)
//   conversation.item.input_audio_transcription.delta {item_id, delta}      → interim (deltas accumulated)
//   input_audio_buffer.partial_transcription {item_id, transcript}         → interim (speaches: the whole text so far)
//   conversation.item.input_audio_transcription.completed {item_id, transcript} → final
//   conversation.item.input_audio_transcription.failed {item_id, error}    → the stream fails ('status')
//   error {error:{message, code}}: `input_audio_buffer_commit_empty` (speaches: no code, "Error
//   committing input audio buffer: …") answers a commit of an empty (< 100 ms) buffer: the
//   finalize is then done; any other error fails the stream ('status').
// Items complete in any order (transcription runs per item): finals are reported in commit order.
import type { TranscriptionStream } from '../../contract.ts';
import { errorEventFailure, eventError, spreadWords, type EngineLink, type ServerEvent } from './link.ts';

interface Item {
  id: string;
  /** The transcript so far (deltas), or the completed one. */
  text: string;
  committed: boolean;
  completed: boolean;
  /** The item's audio in the session's timeline: the engine's VAD span, or what a commit covered. */
  startMs: number | null;
  endMs: number | null;
  /** Server VAD ended this turn: end_of_turn follows the item's final. */
  turnEnded: boolean;
  shownInterim: boolean;
}

/** One finalize(): its commit is on its way, or it waits for an item (null: for nothing more). */
type PendingFinalize = { state: 'commit-sent'; endMs: number } | { state: 'after-item'; itemId: string | null };

const EMPTY_COMMIT = /^error committing input audio buffer/i;

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

export function openaiStream(link: EngineLink, apiKey: string | undefined): TranscriptionStream & { onEvent(event: ServerEvent): void } {
  const { events } = link;
  /** Items not reported final yet, in the order the engine made them. */
  let items: Item[] = [];
  const reported = new Set<string>();
  const finalizes: PendingFinalize[] = [];
  /** Where the engine's input buffer began: the start of a manually committed item. */
  let bufferStartMs = 0;
  let lastInterim = '';

  const itemFor = (id: string): Item | null => {
    if (reported.has(id)) return null;
    let item = items.find((i) => i.id === id);
    if (!item) items.push((item = { id, text: '', committed: false, completed: false, startMs: null, endMs: null, turnEnded: false, shownInterim: false }));
    return item;
  };
  const spanOf = (item: Item) => [item.startMs ?? bufferStartMs, item.endMs ?? Math.max(link.sentMs, item.startMs ?? 0)] as const;

  const reportInterim = () => {
    const heard = items.filter((i) => i.text.trim());
    const text = heard.map((i) => i.text.trim()).join(' ');
    if (!text || text === lastInterim) return;
    lastInterim = text;
    for (const item of heard) item.shownInterim = true;
    events.push({ type: 'transcript', isFinal: false, text, words: heard.flatMap((i) => spreadWords(i.text, ...spanOf(i))) });
  };

  /** Finals of the completed items at the head, each with its end of turn; then the finalizes they settle. */
  const reportFinals = () => {
    while (items[0]?.completed) {
      const item = items.shift()!;
      reported.add(item.id);
      const text = item.text.trim();
      // An empty final still replaces an interim shown for it.
      if (text || item.shownInterim) events.push({ type: 'transcript', isFinal: true, text, words: spreadWords(text, ...spanOf(item)) });
      lastInterim = '';
      if (item.turnEnded) events.push({ type: 'end_of_turn', atSeconds: spanOf(item)[1] / 1000 });
    }
    while (finalizes[0]?.state === 'after-item' && (finalizes[0].itemId === null || reported.has(finalizes[0].itemId))) {
      finalizes.shift();
      events.push({ type: 'finalized' });
    }
    link.expectAnswer(finalizes.length > 0);
    reportInterim();
  };

  const lastCommittedId = () => items.filter((i) => i.committed).at(-1)?.id ?? null;

  const onCommitted = (item: Item) => {
    item.committed = true;
    // Items the engine started but committed under another id (a commit during speech) are gone.
    const at = items.indexOf(item);
    items = items.filter((i, k) => i.committed || k > at);
    if (!item.turnEnded) {
      // Not a server-VAD turn: the oldest commit we sent made it, and covered the buffer up to it.
      const index = finalizes.findIndex((f) => f.state === 'commit-sent');
      item.startMs ??= bufferStartMs;
      if (index >= 0) {
        item.endMs = (finalizes[index] as { endMs: number }).endMs;
        finalizes[index] = { state: 'after-item', itemId: item.id };
      } else item.endMs ??= link.sentMs;
    }
    bufferStartMs = item.endMs ?? link.sentMs;
  };

  const onError = (event: ServerEvent) => {
    const { code, message } = eventError(event);
    const index = finalizes.findIndex((f) => f.state === 'commit-sent');
    if (index >= 0 && (code === 'input_audio_buffer_commit_empty' || EMPTY_COMMIT.test(message))) {
      // Nothing was left to commit: the finalize is done once the items already committed are.
      finalizes[index] = { state: 'after-item', itemId: lastCommittedId() };
      return reportFinals();
    }
    link.fail(errorEventFailure(event, apiKey, 'the audio'));
  };

  const onEvent = (event: ServerEvent) => {
    const id = str(event.item_id);
    switch (event.type) {
      case 'input_audio_buffer.speech_started': {
        const item = id && itemFor(id);
        const at = num(event.audio_start_ms) ?? link.sentMs;
        if (item) item.startMs = at;
        events.push({ type: 'speech_started', atSeconds: at / 1000 });
        return;
      }
      case 'input_audio_buffer.speech_stopped': {
        const item = id && itemFor(id);
        if (!item) return;
        item.endMs = num(event.audio_end_ms) ?? link.sentMs;
        item.turnEnded = true;
        return;
      }
      case 'input_audio_buffer.committed': {
        const item = id && itemFor(id);
        if (item) onCommitted(item);
        return reportFinals();
      }
      case 'conversation.item.input_audio_transcription.delta': {
        const item = id && itemFor(id);
        if (item) item.text += str(event.delta) ?? '';
        return reportInterim();
      }
      case 'input_audio_buffer.partial_transcription': {
        const item = id && itemFor(id);
        if (item) item.text = str(event.transcript) ?? item.text;
        return reportInterim();
      }
      case 'conversation.item.input_audio_transcription.completed': {
        const item = id && itemFor(id);
        if (!item) return;
        item.text = str(event.transcript) ?? item.text;
        item.completed = true;
        return reportFinals();
      }
      case 'conversation.item.input_audio_transcription.failed':
        return link.fail(errorEventFailure(event, apiKey, 'to transcribe the audio'));
      case 'error':
        return onError(event);
      default:
        return; // session, conversation.item.* and rate-limit events say nothing about the transcript
    }
  };

  return {
    onEvent,
    write: (samples) => link.append(samples),
    get pendingSamples() {
      return link.pendingSamples;
    },
    finalize() {
      if (link.isClosed) return;
      link.flush();
      finalizes.push({ state: 'commit-sent', endMs: link.sentMs });
      link.send({ type: 'input_audio_buffer.commit' });
      link.expectAnswer(true);
    },
    close: () => link.close(),
    events,
  };
}
