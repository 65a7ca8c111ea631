// Reading server-sent events in tests, as a client would.

/** The `data:` payloads of a whole event-stream body, one per event. */
export function sseData(text: string): string[] {
  return text
    .split(/\r?\n\r?\n/)
    .filter((e) => e.trim() !== '')
    .map((e) =>
      e
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(l[5] === ' ' ? 6 : 5))
        .join('\n'),
    );
}

/** Reads an SSE response event by event, as a client would. */
export function sseReader(res: Response) {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  return {
    async next(): Promise<string | null> {
      for (;;) {
        const end = buffer.indexOf('\n\n');
        if (end >= 0) {
          const event = buffer.slice(0, end + 2);
          buffer = buffer.slice(end + 2);
          return sseData(event)[0] ?? '';
        }
        const { done, value } = await reader.read();
        if (done) return null;
        buffer += decoder.decode(value, { stream: true });
      }
    },
    /** Every remaining event, until the stream ends. */
    async rest(): Promise<string[]> {
      const out: string[] = [];
      for (let e = await this.next(); e !== null; e = await this.next()) out.push(e);
      return out;
    },
    cancel: () => reader.cancel(),
  };
}
