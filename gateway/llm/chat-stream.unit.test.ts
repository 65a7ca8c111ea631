// Unit tests of the one chat stream parser: bytes in any chunking, events with their own bytes
// and typed deltas out. The callers over real HTTP are tested in gateway/routes/chat-completions.test.ts,
// responses.test.ts and realtime.test.ts.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ChatStreamParser, chatStreamEvents, type ChatStreamEvent } from './chat-stream.ts';

const data = (chunk: object) => `data: ${JSON.stringify(chunk)}\n\n`;
const choice = (delta: object, finish: string | null = null, index = 0) => ({ index, delta, finish_reason: finish });
const chunk = (...choices: object[]) => data({ id: 'c', object: 'chat.completion.chunk', choices });

/** A stream as an OpenAI-compatible engine sends it: role, text, a tool call in pieces, finish, usage, [DONE]. */
const STREAM = [
  chunk(choice({ role: 'assistant', content: '' })),
  chunk(choice({ content: 'Hel' })),
  chunk(choice({ content: 'lo' })),
  chunk(choice({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'weather', arguments: '' } }] })),
  chunk(choice({ tool_calls: [{ index: 0, function: { arguments: '{"city":"Oslo"}' } }] })),
  chunk(choice({}, 'tool_calls')),
  data({ id: 'c', choices: [], usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 } }),
  'data: [DONE]\n\n',
];

function parseAll(pieces: Uint8Array[]): ChatStreamEvent[] {
  const parser = new ChatStreamParser();
  return [...pieces.flatMap((p) => parser.push(p)), ...parser.end()];
}

describe('ChatStreamParser', () => {
  it('types what each event carries and keeps its bytes', () => {
    const events = parseAll([Buffer.from(STREAM.join(''))]);
    expect(events.map((e) => e.raw)).toEqual(STREAM);
    expect(events.map((e) => e.deltas)).toEqual([
      [],
      [{ type: 'text', text: 'Hel' }],
      [{ type: 'text', text: 'lo' }],
      [{ type: 'tool_call', index: 0, id: 'call_1', name: 'weather', arguments: '' }],
      [{ type: 'tool_call', index: 0, id: undefined, name: undefined, arguments: '{"city":"Oslo"}' }],
      [{ type: 'finish', reason: 'tool_calls' }],
      [{ type: 'usage', usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 } }],
      [],
    ]);
    // A role alone and a finish reason alone deliver nothing; a tool call's first piece (its name) does.
    expect(events.map((e) => e.output)).toEqual([false, true, true, true, true, false, false, false]);
    expect(events.map((e) => e.usageOnly)).toEqual([false, false, false, false, false, false, true, false]);
  });

  it('for any chunking of the bytes, the same events', () => {
    const bytes = Buffer.from(STREAM.join('').replace('Hel', 'Hé€l'));
    const whole = parseAll([bytes]);
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 12 }), (cuts) => {
        const at = [0, ...cuts.sort((a, b) => a - b), bytes.length];
        const pieces = at.slice(1).map((end, i) => bytes.subarray(at[i], end));
        expect(parseAll(pieces)).toEqual(whole);
      }),
      { numRuns: 300 },
    );
  });

  it('refusals, several tool calls in one chunk, a usage chunk that also has choices', () => {
    const [refusal, calls, withUsage] = parseAll([
      Buffer.from(
        chunk(choice({ refusal: 'No.' })) +
          chunk(
            choice({
              tool_calls: [
                { index: 0, function: { arguments: '{}' } },
                { index: 1, id: 'b', function: { name: 'time', arguments: '{}' } },
              ],
            }),
          ) +
          data({ choices: [choice({ content: 'x' }, 'stop')], usage: { prompt_tokens: 1, completion_tokens: 1 } }),
      ),
    ]);
    expect(refusal!.deltas).toEqual([{ type: 'refusal', text: 'No.' }]);
    expect(calls!.deltas.map((d) => d.type === 'tool_call' && [d.index, d.id, d.name, d.arguments])).toEqual([
      [0, undefined, undefined, '{}'],
      [1, 'b', 'time', '{}'],
    ]);
    expect(withUsage!.deltas.map((d) => d.type)).toEqual(['text', 'finish', 'usage']);
    expect(withUsage!.usageOnly).toBe(false);
  });

  it('output in any choice counts (a client asking for n > 1); deltas are read from the first', () => {
    const [event] = parseAll([Buffer.from(chunk(choice({ role: 'assistant' }), choice({ content: 'b' }, null, 1)))]);
    expect(event!.output).toBe(true);
    expect(event!.deltas).toEqual([]);
  });

  it('output the parser does not type still counts (reasoning), empty values do not', () => {
    const events = parseAll([
      Buffer.from(chunk(choice({ reasoning_content: 'thinking' })) + chunk(choice({ content: null, tool_calls: [] })) + chunk(choice({ content: '' }))),
    ]);
    expect(events.map((e) => [e.output, e.deltas.length])).toEqual([
      [true, 0],
      [false, 0],
      [false, 0],
    ]);
  });

  it("an engine's error object", () => {
    const [event] = parseAll([Buffer.from(data({ error: { message: 'upstream gone', type: 'api_error', code: 'upstream_error', param: null } }))]);
    expect(event!.deltas).toEqual([{ type: 'error', code: 'upstream_error', message: 'upstream gone' }]);
    const [untyped] = parseAll([Buffer.from(data({ error: { code: 42 } }))]);
    expect(untyped!.deltas).toEqual([{ type: 'error', code: undefined, message: undefined }]);
  });

  it('comments, events without data and data that is not a chunk carry nothing and are kept as sent', () => {
    const sent = [': keep-alive\n\n', 'event: ping\n\n', 'data: not json\n\n', 'data: [1,2]\n\n', 'data: null\n\n'];
    const events = parseAll([Buffer.from(sent.join(''))]);
    expect(events.map((e) => e.raw)).toEqual(sent);
    expect(events.every((e) => e.deltas.length === 0 && !e.output && !e.usageOnly)).toBe(true);
  });

  it('CRLF line endings, and data split over several lines', () => {
    const text = `data: {"choices":[{"index":0,\r\ndata: "delta":{"content":"a"}}]}\r\n\r\n`;
    const [event] = parseAll([Buffer.from(text)]);
    expect(event!.raw).toBe(text);
    expect(event!.deltas).toEqual([{ type: 'text', text: 'a' }]);
  });

  it('a last event without its blank line is read at the end; trailing blank space is not an event', () => {
    const parser = new ChatStreamParser();
    expect(parser.push(Buffer.from(chunk(choice({ content: 'a' })) + 'data: {"choices":[],"usage":{"prompt_tokens":3}}'))).toHaveLength(1);
    const [last] = parser.end();
    expect(last!.deltas).toEqual([{ type: 'usage', usage: { prompt_tokens: 3 } }]);
    const quiet = new ChatStreamParser();
    quiet.push(Buffer.from(chunk(choice({ content: 'a' })) + '\n'));
    expect(quiet.end()).toEqual([]);
  });
});

describe('chatStreamEvents', () => {
  async function* body(pieces: string[], failure?: Error): AsyncGenerator<Uint8Array> {
    for (const p of pieces) yield Buffer.from(p);
    if (failure) throw failure;
  }

  it('yields the events of a body as they complete', async () => {
    const text = STREAM.join('');
    const seen: string[] = [];
    for await (const event of chatStreamEvents(body([text.slice(0, 50), text.slice(50, 51), text.slice(51)]))) seen.push(event.raw);
    expect(seen).toEqual(STREAM);
  });

  it("a body that fails mid-stream: the events before it, then the body's own error", async () => {
    const failure = new Error('socket hang up');
    const seen: string[] = [];
    const reading = (async () => {
      for await (const event of chatStreamEvents(body([STREAM[1]!, STREAM[2]!.slice(0, 10)], failure))) seen.push(event.raw);
    })();
    await expect(reading).rejects.toBe(failure);
    expect(seen).toEqual([STREAM[1]]);
  });
});
