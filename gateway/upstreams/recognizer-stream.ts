// A recognizer the gateway drives frame by frame (push audio -> the current partial; finalize ->
// the utterance's final) as the contract's event stream: writes and finalizes run in order on the
// recognizer, interim transcripts are reported when they change.
import { AsyncQueue } from './async-queue.ts';
import type { Transcript, TranscriptionEvent, TranscriptionStream } from './contract.ts';
import { asUpstreamError } from './engine-http.ts';

export interface PushRecognizer {
  push(samples: Int16Array): Promise<Transcript>;
  finalize(): Promise<Transcript>;
  close(): void;
}

export function recognizerStream(recognizer: PushRecognizer): TranscriptionStream {
  const events = new AsyncQueue<TranscriptionEvent>();
  let chain: Promise<void> = Promise.resolve();
  let pending = 0;
  let lastInterim = '';
  let closed = false;
  const fail = (e: unknown) => {
    if (closed) return;
    close();
    events.end(asUpstreamError(e, false));
  };
  const step = (work: () => Promise<void>) => {
    chain = chain.then(() => (closed ? undefined : work())).catch(fail);
  };
  const close = () => {
    if (closed) return;
    closed = true;
    recognizer.close();
    events.end();
  };
  return {
    write(samples) {
      pending += samples.length;
      step(async () => {
        const partial = await recognizer.push(samples);
        pending -= samples.length;
        if (partial.text && partial.text !== lastInterim) {
          lastInterim = partial.text;
          events.push({ type: 'transcript', isFinal: false, text: partial.text, words: partial.words });
        }
      });
    },
    get pendingSamples() {
      return pending;
    },
    finalize() {
      step(async () => {
        const final = await recognizer.finalize();
        lastInterim = '';
        if (final.text) events.push({ type: 'transcript', isFinal: true, text: final.text, words: final.words });
        events.push({ type: 'finalized' });
      });
    },
    close,
    events,
  };
}
