// The chat playground's reader of server-sent events: events whole whatever the chunking,
// [DONE] ends it, comments and other fields are skipped.
import { describe, expect, it } from 'vitest';
import { sseData } from './sse.ts';

function bodyOf(chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(encoder.encode(c));
      controller.close();
    },
  });
}

async function all(chunks: string[]): Promise<string[]> {
  const out: string[] = [];
  for await (const data of sseData(bodyOf(chunks))) out.push(data);
  return out;
}

describe('sseData', () => {
  const text = ': keep-alive\n\ndata: {"a":1}\n\nevent: x\ndata: {"b":\ndata: 2}\n\ndata: [DONE]\n\ndata: after\n\n';

  it('yields each event once, whole, and stops at [DONE]', async () => {
    expect(await all([text])).toEqual(['{"a":1}', '{"b":\n2}']);
  });

  it('gives the same events however the bytes are cut, CRLF included', async () => {
    for (let size = 1; size < text.length; size += 3) {
      const chunks: string[] = [];
      for (let i = 0; i < text.length; i += size) chunks.push(text.slice(i, i + size));
      expect(await all(chunks)).toEqual(['{"a":1}', '{"b":\n2}']);
    }
    expect(await all(['data: one\r\n\r\ndata:two\r\n', '\r\n'])).toEqual(['one', 'two']);
  });

  it('keeps a last event that lacks its blank line', async () => {
    expect(await all(['data: {"x":1}\n\ndata: {"y":2}'])).toEqual(['{"x":1}', '{"y":2}']);
  });
});
