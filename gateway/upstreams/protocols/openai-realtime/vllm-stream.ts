// vLLM's realtime transcription (docs.vllm.ai, vllm/entrypoints/speech_to_text/realtime/
// connection.py) as the contract's stream. It has no VAD and no items: `input_audio_buffer.commit`
// starts a generation that consumes the appended audio as it arrives (`transcription.delta
// {delta}`), `input_audio_buffer.commit {final:true}` ends its input, and `transcription.done
// {text, usage}` closes it -- after which vLLM empties its audio queue. So:
// - a generation is started at the first audio of each utterance (an idle session runs none);
// - finalize() sends the final commit; audio written before `done` arrives is held here and sent
//   after it (sent earlier, vLLM would drop it), with a new generation;
// - `done` → the final transcript, then `finalized`. A `done` nobody asked for (the generation hit
//   the model's token limit) is a final too; the next audio starts a new generation.
// Errors are `{type:'error', error:"…", code}`: every one fails the stream ('status').
import type { TranscriptionStream } from '../../contract.ts';
import { errorEventFailure, spreadWords, type EngineLink, type ServerEvent } from './link.ts';

export function vllmStream(link: EngineLink, apiKey: string | undefined): TranscriptionStream & { onEvent(event: ServerEvent): void } {
  const { events } = link;
  let generating = false;
  let utteranceStartMs = 0;
  let text = '';
  let shownInterim = false;
  /** The final commit awaiting its `done`, with the audio it ended at. */
  let ending: { endMs: number } | null = null;
  /** Writes and finalizes that came while a generation was ending, replayed after its `done`. */
  let held: (Int16Array | 'finalize')[] = [];
  let heldSamples = 0;

  const span = () => [utteranceStartMs, ending?.endMs ?? link.sentMs] as const;

  const write = (samples: Int16Array) => {
    if (link.isClosed) return;
    if (ending) {
      held.push(samples.slice());
      heldSamples += samples.length;
      return;
    }
    if (!generating) {
      link.send({ type: 'input_audio_buffer.commit' });
      generating = true;
      utteranceStartMs = link.sentMs;
    }
    link.append(samples);
  };

  const finalize = () => {
    if (link.isClosed) return;
    if (ending) return void held.push('finalize');
    // Nothing written since the last `done`: nothing to transcribe.
    if (!generating) return events.push({ type: 'finalized' });
    link.flush();
    ending = { endMs: link.sentMs };
    link.send({ type: 'input_audio_buffer.commit', final: true });
    link.expectAnswer(true);
  };

  const onDone = (event: ServerEvent) => {
    const final = (typeof event.text === 'string' ? event.text : text).trim();
    if (final || shownInterim) events.push({ type: 'transcript', isFinal: true, text: final, words: spreadWords(final, ...span()) });
    generating = false;
    text = '';
    shownInterim = false;
    if (!ending) return;
    ending = null;
    link.expectAnswer(false);
    events.push({ type: 'finalized' });
    const replay = held;
    held = [];
    heldSamples = 0;
    for (const op of replay) {
      if (op === 'finalize') finalize();
      else write(op);
    }
  };

  const onEvent = (event: ServerEvent) => {
    switch (event.type) {
      case 'transcription.delta': {
        text += typeof event.delta === 'string' ? event.delta : '';
        const interim = text.trim();
        if (!interim) return;
        shownInterim = true;
        events.push({ type: 'transcript', isFinal: false, text: interim, words: spreadWords(interim, ...span()) });
        return;
      }
      case 'transcription.done':
        return onDone(event);
      case 'error':
        return link.fail(errorEventFailure(event, apiKey, 'the audio'));
      default:
        return;
    }
  };

  return {
    onEvent,
    write,
    get pendingSamples() {
      return link.pendingSamples + heldSamples;
    },
    finalize,
    close: () => link.close(),
    events,
  };
}
