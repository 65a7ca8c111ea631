import { UpstreamError } from './upstreams/contract.ts';

/** The longest event an engine may send: a longer one is a broken or hostile engine, not a delta. */
export const SSE_EVENT_MAX_CHARS = 1024 * 1024;

/**
 * Splits a byte stream of server-sent events into complete events (the text between blank
 * lines), keeping each event's original bytes so it can be relayed unchanged. An event longer
 * than `maxEventChars` (complete or not) fails the stream with an UpstreamError (`protocol`).
 */
export class SseSplitter {
  private buffer = '';
  private readonly decoder = new TextDecoder();

  constructor(private readonly maxEventChars = SSE_EVENT_MAX_CHARS) {}

  push(chunk: Uint8Array): string[] {
    // What was searched before holds no terminator, except one the new text completes.
    let from = Math.max(0, this.buffer.length - 3);
    this.buffer += this.decoder.decode(chunk, { stream: true });
    const events: string[] = [];
    let start = 0;
    for (;;) {
      const lf = this.buffer.indexOf('\n\n', from);
      const crlf = this.buffer.indexOf('\r\n\r\n', from);
      if (lf < 0 && crlf < 0) break;
      const useCrlf = crlf >= 0 && (lf < 0 || crlf < lf);
      const end = useCrlf ? crlf + 4 : lf + 2;
      if (end - start > this.maxEventChars) throw this.tooLong();
      events.push(this.buffer.slice(start, end));
      start = from = end;
    }
    this.buffer = this.buffer.slice(start);
    if (this.buffer.length > this.maxEventChars) throw this.tooLong();
    return events;
  }

  /** Whatever is left when the stream ends (an unterminated last event). */
  rest(): string {
    const r = this.buffer + this.decoder.decode();
    this.buffer = '';
    return r;
  }

  private tooLong(): UpstreamError {
    this.buffer = '';
    return new UpstreamError('protocol', `The engine sent a stream event longer than ${this.maxEventChars} characters.`);
  }
}

/** The joined `data:` lines of one event, or null if it has none. */
export function sseData(event: string): string | null {
  let data: string | null = null;
  for (const line of event.split(/\r?\n/)) {
    if (line.startsWith('data:')) {
      const value = line.slice(line[5] === ' ' ? 6 : 5);
      data = data === null ? value : `${data}\n${value}`;
    }
  }
  return data;
}

/**
 * The `data` of each event of a stream of server-sent-event text (what the LLM pipeline yields
 * for POST /v1/responses), in order: how a socket carries the same stream, one message per event.
 */
export async function* sseDataOf(chunks: AsyncIterable<string>): AsyncGenerator<string> {
  const splitter = new SseSplitter();
  for await (const chunk of chunks) {
    for (const event of splitter.push(Buffer.from(chunk))) {
      const data = sseData(event);
      if (data !== null) yield data;
    }
  }
  const last = sseData(splitter.rest());
  if (last !== null) yield last;
}
