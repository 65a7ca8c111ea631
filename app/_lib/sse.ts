// Server-sent events read from a fetch body in the page (the chat playground's stream): each
// event's data, whatever chunks the network cut it into, until `data: [DONE]` or the end.

/** The `data` of each event (several data lines joined with a newline); comments and other fields skipped. */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
        if (line === '') {
          if (data.length > 0) {
            const event = data.join('\n');
            data = [];
            if (event === '[DONE]') return;
            yield event;
          }
        } else if (line.startsWith('data:')) {
          data.push(line.slice(line[5] === ' ' ? 6 : 5));
        }
      }
    }
    // An answer that ends without a blank line after its last event.
    if (buffer.startsWith('data:')) data.push(buffer.slice(buffer[5] === ' ' ? 6 : 5));
    if (data.length > 0 && data.join('\n') !== '[DONE]') yield data.join('\n');
  } finally {
    reader.releaseLock();
    void body.cancel().catch(() => undefined);
  }
}
