// Cartesia's manual-finalize STT socket (`/stt/websocket`): binary PCM in, `finalize` ends an
// utterance (answered by its final transcript, then `flush_done`), `close` ends the session.
// Each transcript's `text` is what was heard since the last final (a delta, not the whole
// session), so interims and finals map onto the contract's events as they come. Word times are
// read as seconds from the session's start, as LiveKit's Cartesia plugin reads them.
// Cartesia closes a socket that gets no audio for 20 s; the gateway closes idle sessions earlier,
// so no keep-alive is sent, and an unasked close is reported as a broken stream.
// References in ./index.ts.
import { s16leView } from '../../../audio/pcm.ts';
import { AsyncQueue } from '../../async-queue.ts';
import { UpstreamError, type CallOptions, type StreamingTranscriptionCapability, type TranscriptionEvent, type TranscriptionStream } from '../../contract.ts';
import { engineFailure, statusError } from '../../engine-http.ts';
import { closeError, connectEngine, WebSocket } from '../../engine-ws.ts';
import { readInTurns } from '../../loop-turns.ts';
import { CARTESIA_RATES, cartesiaHeaders, parseWords, primaryLanguage, type CartesiaSettings } from './wire.ts';

/** What Cartesia's STT recommends when the input's rate is not one it takes. */
const DEFAULT_RATE = 16000;
/** `keyterm`: at most 100 terms, 1,200 characters in all. */
const MAX_KEYTERMS = 100;
const MAX_KEYTERM_CHARS = 1200;
/** How long a closing socket may take to finish its close handshake before it is cut. */
const CLOSE_GRACE_MS = 1000;

function keytermsWithinLimits(keyterms: string[]): string[] {
  const kept: string[] = [];
  let chars = 0;
  for (const term of keyterms) {
    if (kept.length === MAX_KEYTERMS || chars + term.length > MAX_KEYTERM_CHARS) break;
    kept.push(term);
    chars += term.length;
  }
  return kept;
}

interface CartesiaMessage {
  type?: unknown;
  is_final?: unknown;
  text?: unknown;
  words?: unknown;
  status_code?: unknown;
  code?: unknown;
}

/** Closes a socket at once: the close frame, then the connection cut should the engine not answer it. */
function shut(socket: WebSocket): void {
  if (socket.readyState === WebSocket.OPEN) {
    socket.close(1000);
    const cut = setTimeout(() => socket.terminate(), CLOSE_GRACE_MS);
    cut.unref();
    socket.once('close', () => clearTimeout(cut));
  } else if (socket.readyState !== WebSocket.CLOSED) socket.terminate();
}

function cartesiaStream(socket: WebSocket, apiKey: string | undefined, call: CallOptions): TranscriptionStream {
  const events = new AsyncQueue<TranscriptionEvent>();
  let over = false;
  let finalizesPending = 0;
  let finalizeTimer: NodeJS.Timeout | null = null;
  // An interim was reported since the last final: its final must follow, even if empty.
  let interimShown = false;

  const end = (error?: unknown) => {
    if (over) return;
    over = true;
    if (finalizeTimer) clearTimeout(finalizeTimer);
    call.signal.removeEventListener('abort', onAbort);
    events.end(error);
    shut(socket);
  };
  const onAbort = () => end(engineFailure(call.signal.reason, call, true));

  // A finalize is answered once everything before it is transcribed: the engine may take a
  // while, but not stay silent longer than the call's deadline.
  const watchFinalize = () => {
    if (finalizeTimer) clearTimeout(finalizeTimer);
    finalizeTimer =
      finalizesPending > 0
        ? setTimeout(() => end(new UpstreamError('timeout', `Cartesia did not answer a finalize within ${call.timeoutMs / 1000} s.`)), call.timeoutMs)
        : null;
  };

  const onTranscript = (message: CartesiaMessage) => {
    const words = parseWords(message.words);
    const text = typeof message.text === 'string' ? message.text.trim() : words.map((w) => w.word).join(' ');
    if (message.is_final === true) {
      if (text || words.length > 0 || interimShown) events.push({ type: 'transcript', isFinal: true, text, words });
      interimShown = false;
    } else if (text || words.length > 0) {
      events.push({ type: 'transcript', isFinal: false, text, words });
      interimShown = true;
    }
  };

  const reading = readInTurns(socket, (data, isBinary) => {
    if (over || isBinary) return;
    let message: CartesiaMessage;
    try {
      message = JSON.parse(data.toString()) as CartesiaMessage;
    } catch {
      end(new UpstreamError('protocol', 'Cartesia sent a message that is not JSON.'));
      return;
    }
    if (finalizesPending > 0) watchFinalize();
    switch (message.type) {
      case 'transcript':
        onTranscript(message);
        break;
      case 'flush_done':
        if (finalizesPending > 0) {
          finalizesPending -= 1;
          events.push({ type: 'finalized' });
          watchFinalize();
        }
        break;
      case 'error': {
        // `status_code` since 2026-03-01, `code` before.
        const status = typeof message.status_code === 'number' ? message.status_code : typeof message.code === 'number' ? message.code : 502;
        end(statusError(status, data.toString(), apiKey));
        break;
      }
      // `done` answers `close`, which is only sent as the stream ends.
    }
  });
  socket.on('close', (code, reason) =>
    reading.after(() =>
      end(closeError(code, reason, apiKey) ?? new UpstreamError('broken', 'Cartesia ended the stream unasked (it closes streams that get no audio for 20 s).')),
    ),
  );
  socket.on('error', (e) => reading.after(() => end(new UpstreamError('broken', `The connection to Cartesia failed: ${e.message}`, { cause: e }))));
  call.signal.addEventListener('abort', onAbort, { once: true });
  if (call.signal.aborted) onAbort();

  return {
    write(samples) {
      if (!over && samples.length > 0) socket.send(s16leView(samples)); // ws copies it as it masks it
    },
    get pendingSamples() {
      return over ? 0 : Math.floor(socket.bufferedAmount / 2);
    },
    finalize() {
      if (over) return;
      finalizesPending += 1;
      socket.send('finalize');
      if (finalizesPending === 1) watchFinalize();
    },
    close() {
      // `close` (older versions: `done`) asks for a clean end; nothing after it is awaited.
      if (!over && socket.readyState === WebSocket.OPEN) socket.send('close');
      end();
    },
    events,
  };
}

export const streamingTranscription: StreamingTranscriptionCapability<CartesiaSettings> = {
  engineRate: (inputRate) => ((CARTESIA_RATES as readonly number[]).includes(inputRate) ? inputRate : DEFAULT_RATE),
  // This is the manual-finalize socket: the gateway's turn detector calls finalize().
  findsTurns: () => false,
  async open(target, options) {
    const query = new URLSearchParams({ model: target.upstreamModel, encoding: 'pcm_s16le', sample_rate: String(options.sampleRate) });
    if (options.language) query.set('language', primaryLanguage(options.language));
    for (const term of keytermsWithinLimits(options.keyterms)) query.append('keyterm', term);
    const url = `${target.url.replace(/^http/, 'ws')}/stt/websocket?${query}`;
    const socket = await connectEngine(url, { headers: cartesiaHeaders(target), apiKey: target.apiKey, maxPayload: 1024 * 1024 }, options);
    return cartesiaStream(socket, target.apiKey, options);
  },
};
