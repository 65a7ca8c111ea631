// Deepgram's live-transcription protocol (WS /v1/listen, Nova-style; reference:
// developers.deepgram.com/reference/speech-to-text/listen-streaming, docs/endpointing,
// docs/interim-results, docs/finalize, docs/close-stream, docs/speech-started, docs/utterance-end,
// and the message types of @deepgram/sdk 5.x `listen.v1`): the session's events as Deepgram's.
//   Results      {channel_index, duration, start, is_final, speech_final, from_finalize,
//                 channel:{alternatives:[{transcript, confidence, words:[{word, start, end,
//                 confidence, punctuated_word}]}]}, metadata:{request_id, model_info, model_uuid}}
//   SpeechStarted {channel, timestamp}       (vad_events=true; the gateway's turn start)
//   UtteranceEnd  {channel, last_word_end}   (utterance_end_ms set; the gateway's turn end, after its final)
//   Metadata      {request_id, duration, channels, created, ...}   (last, before the close)
//   Error         {code, description}        (before an error close; Deepgram's Flux shape)
// Client text messages: {"type":"KeepAlive"}, {"type":"Finalize"}, {"type":"CloseStream"}.
//
// A final caused by the end of a turn is `speech_final` (Deepgram's endpointing) unless the
// client turned endpointing off; a final answering Finalize is `from_finalize`. `start` and
// `duration` cover the audio received since the previous final. The engines give no confidence:
// it is 1 for every word and transcript.
import type { ErrorCode } from '../../../server/services/errors.ts';
import type { Word } from '../../upstreams/contract.ts';
import { commandWord, invalidMessage, type SttDialect } from '../dialect.ts';

export interface DeepgramListenOptions {
  /** interim_results: send non-final Results too (Deepgram's default: false). */
  interimResults: boolean;
  /** Endpointing is on: the final that ends a turn is speech_final. */
  speechFinal: boolean;
  /** utterance_end_ms was given: UtteranceEnd at each end of a turn that had words. */
  utteranceEnd: boolean;
  /** vad_events: SpeechStarted at each turn start. */
  vadEvents: boolean;
  /** punctuate or smart_format: the engine's punctuation and capitals are kept (else plain lower-case words). */
  punctuate: boolean;
}

const round3 = (seconds: number) => Math.round(seconds * 1000) / 1000;
/** Mono: Deepgram's [channel, of channels]. */
const CHANNEL = [0, 1];

/** A word as Deepgram's `word`: lower case, without punctuation (its `punctuated_word` keeps them). */
const plainWord = (w: string) => w.toLowerCase().replace(/[^\p{L}\p{N}'-]+/gu, '');

/** A transcript as Deepgram gives it: the engine's text with `punctuate` (or smart_format), else plain lower-case words. */
export const deepgramTranscript = (text: string, punctuate: boolean) => (punctuate ? text : text.split(/\s+/).map(plainWord).filter(Boolean).join(' '));

/** Words as Deepgram's (the engines give no confidence: 1). */
export function deepgramWords(words: Word[], punctuate: boolean) {
  return words.map((w) => ({ word: plainWord(w.word), start: w.start, end: w.end, confidence: 1, ...(punctuate ? { punctuated_word: w.word } : {}) }));
}

export function deepgramDialect(o: DeepgramListenOptions): SttDialect {
  let requestId = '';
  let model = '';
  let created = '';
  let audioAtLastFinal = 0;
  let lastWordEnd = 0;
  /** Words were heard since the last UtteranceEnd. */
  let heardWords = false;
  /** The pending Finalize got its final (else flushed() answers with an empty one). */
  let finalizeAnswered = false;

  const results = (t: { text: string; words: Word[]; isFinal: boolean; speechFinal: boolean; fromFinalize: boolean; audioSeconds: number }) => {
    const start = audioAtLastFinal;
    const words = deepgramWords(t.words, o.punctuate);
    const transcript = deepgramTranscript(t.text, o.punctuate);
    return {
      type: 'Results',
      channel_index: CHANNEL,
      duration: round3(Math.max(0, t.audioSeconds - start)),
      start: round3(start),
      is_final: t.isFinal,
      speech_final: t.speechFinal,
      from_finalize: t.fromFinalize,
      channel: { alternatives: [{ transcript, confidence: transcript ? 1 : 0, words }] },
      metadata: { request_id: requestId, model_info: { name: model, version: '', arch: '' }, model_uuid: model },
    };
  };

  return {
    started(info) {
      requestId = info.requestId;
      model = info.model;
      created = info.startedAt.toISOString();
      // Deepgram's v1 listen says nothing until there is something to say.
      return [];
    },
    transcript(t) {
      if (t.text) heardWords = true;
      for (const w of t.words) lastWordEnd = Math.max(lastWordEnd, w.end);
      if (!t.isFinal && !o.interimResults) return [];
      const fromFinalize = t.isFinal && t.cause === 'finalize';
      if (fromFinalize) finalizeAnswered = true;
      const event = results({ ...t, speechFinal: t.isFinal && t.cause === 'turn' && o.speechFinal, fromFinalize });
      if (t.isFinal) audioAtLastFinal = t.audioSeconds;
      return [event];
    },
    turn: (e) => (e.turn === 'turn.start' && o.vadEvents ? [{ type: 'SpeechStarted', channel: CHANNEL, timestamp: round3(e.atSeconds) }] : []),
    // Deepgram's order: the turn's speech_final Results, then UtteranceEnd (sent at the final, not at the detector's decision).
    turnFinal(e) {
      if (!o.utteranceEnd || !heardWords) return [];
      heardWords = false;
      return [{ type: 'UtteranceEnd', channel: CHANNEL, last_word_end: round3(lastWordEnd || e.atSeconds) }];
    },
    flushed() {
      // Every Finalize gets a from_finalize final, empty when nothing was left to transcribe
      // (Deepgram may send none then; a client waiting for one is better answered).
      const answered = finalizeAnswered;
      finalizeAnswered = false;
      return answered ? [] : [results({ text: '', words: [], isFinal: true, speechFinal: false, fromFinalize: true, audioSeconds: audioAtLastFinal })];
    },
    error: (e) => [{ type: 'Error', code: e.code, description: e.message }],
    closed: (e) => [
      {
        type: 'Metadata',
        transaction_key: 'deprecated',
        request_id: requestId,
        sha256: '',
        created,
        duration: e.audioSeconds,
        channels: 1,
        models: [model],
        model_info: { [model]: { name: model, version: '', arch: '' } },
      },
    ],
    command(text) {
      const c = commandWord(text);
      if (c?.json) {
        if (c.word === 'keepalive') return { type: 'keepalive' };
        if (c.word === 'finalize') return { type: 'finalize' };
        if (c.word === 'closestream') return { type: 'close' };
      }
      return invalidMessage('Text messages are {"type":"KeepAlive"}, {"type":"Finalize"} or {"type":"CloseStream"}; audio goes in binary frames.');
    },
  };
}

/** Deepgram's names for the error codes its clients know (docs/errors); the others are ours, upper-cased. */
const DEEPGRAM_ERROR_CODES: Partial<Record<ErrorCode, string>> = {
  invalid_api_key: 'INVALID_AUTH',
  api_key_disabled: 'INVALID_AUTH',
  api_key_expired: 'INVALID_AUTH',
  insufficient_quota: 'ASR_PAYMENT_REQUIRED',
  key_budget_exceeded: 'ASR_PAYMENT_REQUIRED',
  rate_limit_exceeded: 'TOO_MANY_REQUESTS',
};

/** Deepgram's fields of an HTTP error answer (`{err_code, err_msg, request_id}`), for one of ours. */
export function deepgramErrorFields(e: { code: string; message: string }, requestId: string): { err_code: string; err_msg: string; request_id: string } {
  return { err_code: DEEPGRAM_ERROR_CODES[e.code as ErrorCode] ?? e.code.toUpperCase(), err_msg: e.message, request_id: requestId };
}
