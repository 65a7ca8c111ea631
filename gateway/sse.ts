/**
 * Splits a byte stream of server-sent events into complete events (the text between blank
 * lines), keeping each event's original bytes so it can be relayed unchanged.
 */
export class SseSplitter {
  private buffer = '';
  private readonly decoder = new TextDecoder();

  push(chunk: Uint8Array): string[] {
    this.buffer += this.decoder.decode(chunk, { stream: true });
    const events: string[] = [];
    let start = 0;
    for (;;) {
      const lf = this.buffer.indexOf('\n\n', start);
      const crlf = this.buffer.indexOf('\r\n\r\n', start);
      if (lf < 0 && crlf < 0) break;
      const useCrlf = crlf >= 0 && (lf < 0 || crlf < lf);
      const end = useCrlf ? crlf + 4 : lf + 2;
      events.push(this.buffer.slice(start, end));
      start = end;
    }
    this.buffer = this.buffer.slice(start);
    return events;
  }

  /** Whatever is left when the stream ends (an unterminated last event). */
  rest(): string {
    const r = this.buffer + this.decoder.decode();
    this.buffer = '';
    return r;
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
