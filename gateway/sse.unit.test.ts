import { describe, expect, it } from 'vitest';
import { SseSplitter, sseData } from './sse.ts';

const enc = new TextEncoder();

/** Feeds `chunks` through one splitter and returns every event plus what is left at the end. */
function split(chunks: Uint8Array[]): { events: string[]; rest: string } {
  const s = new SseSplitter();
  const events: string[] = [];
  for (const c of chunks) events.push(...s.push(c));
  return { events, rest: s.rest() };
}

// Three events, LF-terminated, including multi-byte UTF-8 (2, 3 and 4 bytes) so that byte
// boundaries fall inside characters.
const LF_EVENTS = [
  'data: {"choices":[{"delta":{"content":"héllo"}}]}\n\n',
  'event: message\nid: 2\ndata: {"choices":[{"delta":{"content":"€ and 🎙️"}}]}\n\n',
  'data: [DONE]\n\n',
];
const CRLF_EVENTS = ['data: {"a":"ü"}\r\n\r\n', ': keep-alive comment\r\ndata: line one\r\ndata: line two\r\n\r\n', 'data: [DONE]\r\n\r\n'];

describe('SseSplitter', () => {
  it.each([
    ['LF', LF_EVENTS],
    ['CRLF', CRLF_EVENTS],
    ['LF and CRLF events mixed', [LF_EVENTS[0]!, CRLF_EVENTS[0]!, LF_EVENTS[1]!, CRLF_EVENTS[1]!, 'data: [DONE]\n\n']],
  ])('returns the events unchanged when the whole %s stream arrives at once', (_name, expected) => {
    const { events, rest } = split([enc.encode(expected.join(''))]);
    expect(events).toEqual(expected);
    expect(rest).toBe('');
  });

  it.each([
    ['LF', LF_EVENTS],
    ['CRLF', CRLF_EVENTS],
  ])('returns the same %s events when the stream is cut in two at every byte boundary', (_name, expected) => {
    const bytes = enc.encode(expected.join(''));
    for (let cut = 0; cut <= bytes.length; cut++) {
      const { events, rest } = split([bytes.subarray(0, cut), bytes.subarray(cut)]);
      expect(events, `cut at byte ${cut}`).toEqual(expected);
      expect(rest, `cut at byte ${cut}`).toBe('');
    }
  });

  it.each([
    ['LF', LF_EVENTS],
    ['CRLF', CRLF_EVENTS],
  ])('returns the same %s events when the stream arrives one byte at a time', (_name, expected) => {
    const bytes = enc.encode(expected.join(''));
    const chunks = Array.from(bytes, (_b, i) => bytes.subarray(i, i + 1));
    const { events, rest } = split(chunks);
    expect(events).toEqual(expected);
    expect(rest).toBe('');
  });

  it('emits each event as soon as its terminating blank line is complete, not before', () => {
    const s = new SseSplitter();
    expect(s.push(enc.encode('data: a\n'))).toEqual([]);
    expect(s.push(enc.encode('\n'))).toEqual(['data: a\n\n']);
    expect(s.push(enc.encode('data: b\r\n\r'))).toEqual([]);
    expect(s.push(enc.encode('\n'))).toEqual(['data: b\r\n\r\n']);
    expect(s.rest()).toBe('');
  });

  it('keeps an unterminated last event for rest(), including a split multi-byte character', () => {
    const bytes = enc.encode('data: done\n\ndata: partial é');
    const s = new SseSplitter();
    // Cut inside the two-byte "é".
    expect(s.push(bytes.subarray(0, bytes.length - 1))).toEqual(['data: done\n\n']);
    expect(s.push(bytes.subarray(bytes.length - 1))).toEqual([]);
    expect(s.rest()).toBe('data: partial é');
    expect(s.rest()).toBe('');
  });

  it('returns several events from one chunk in order', () => {
    const chunk = Array.from({ length: 50 }, (_v, i) => `data: ${i}\n\n`).join('');
    const { events } = split([enc.encode(chunk)]);
    expect(events.map((e) => sseData(e))).toEqual(Array.from({ length: 50 }, (_v, i) => String(i)));
  });
});

describe('sseData', () => {
  it.each([
    ['data: hello\n\n', 'hello'],
    ['data:hello\n\n', 'hello'], // the space after the colon is optional
    ['data:  two spaces\n\n', ' two spaces'], // only one leading space is removed
    ['data: line one\ndata: line two\n\n', 'line one\nline two'],
    ['data: line one\r\ndata: line two\r\n\r\n', 'line one\nline two'],
    ['data: a\ndata:\ndata: c\n\n', 'a\n\nc'],
    ['data:\n\n', ''],
    ['event: ping\nid: 7\ndata: {"x":1}\nretry: 100\n\n', '{"x":1}'],
    [': comment\ndata: [DONE]\n\n', '[DONE]'],
    ['data: {"a":"b: c"}\n\n', '{"a":"b: c"}'],
    ['data: unterminated', 'unterminated'],
  ])('%j -> %j', (event, data) => {
    expect(sseData(event)).toBe(data);
  });

  it.each([['event: ping\n\n'], [': just a comment\n\n'], ['id: 3\n\n'], ['database: not a data field\n\n'], ['']])('%j has no data -> null', (event) => {
    expect(sseData(event)).toBeNull();
  });
});
