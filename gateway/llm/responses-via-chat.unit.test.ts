// Unit tests of the Responses <-> chat completions translation and of the item store that
// resolves item_reference. The route over real HTTP is tested in gateway/routes/responses.test.ts.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../server/services/errors.ts';
import { ChatStreamParser } from './chat-stream.ts';
import { ResponseItemStore } from './response-item-store.ts';
import { ResponsesStreamTranslator } from './responses-stream.ts';
import { chatRequestFor, responseFromChat, responseMeta, responsesUsage, type JsonObject } from './responses-via-chat.ts';

const none = () => undefined;

/** The ServiceError thrown by `f`, or a failure. */
function refusal(f: () => unknown): ServiceError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(ServiceError);
    return e as ServiceError;
  }
  throw new Error('expected a refusal');
}

/** Parses `event: x\ndata: {...}\n\n` blocks; checks that each event's line names its data's type. */
function events(text: string): JsonObject[] {
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((block) => {
      const [eventLine, dataLine] = block.split('\n');
      const data = JSON.parse(dataLine!.replace(/^data: /, '')) as JsonObject;
      expect(eventLine).toBe(`event: ${String(data.type)}`);
      return data;
    });
}

describe('chatRequestFor: the request', () => {
  it('string input with instructions and sampling settings; a stream asks for the usage chunk', () => {
    const chat = chatRequestFor(
      {
        model: 'm',
        instructions: 'Be brief.',
        input: 'Hi there',
        max_output_tokens: 50,
        temperature: 0.3,
        top_p: 0.9,
        stream: true,
        store: true,
        metadata: { a: '1' },
        user: 'u1',
      },
      none,
    );
    expect(chat).toEqual({
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi there' },
      ],
      max_tokens: 50,
      temperature: 0.3,
      top_p: 0.9,
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  it('what the Vercel AI SDK sends: system, user parts, assistant text, tool calls and their outputs', () => {
    const chat = chatRequestFor(
      {
        model: 'm',
        input: [
          { role: 'system', content: 'You are terse.' },
          { role: 'developer', content: 'Use metric units.' },
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'What is the weather ' },
              { type: 'input_text', text: 'in Oslo?' },
            ],
          },
          { role: 'assistant', content: [{ type: 'output_text', text: 'Checking.' }], id: 'msg_1' },
          { type: 'function_call', call_id: 'call_1', name: 'weather', arguments: '{"city":"Oslo"}' },
          { type: 'function_call', call_id: 'call_2', name: 'time', arguments: '{}' },
          { type: 'function_call_output', call_id: 'call_1', output: '{"c":4}' },
          { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: '12:00' }] },
          { type: 'reasoning', id: 'rs_1', summary: [] },
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'Thanks' },
              { type: 'input_image', image_url: 'data:image/png;base64,AAAA', detail: 'low' },
            ],
          },
        ],
      },
      none,
    );
    expect(chat.messages).toEqual([
      { role: 'system', content: 'You are terse.' },
      { role: 'system', content: 'Use metric units.' },
      { role: 'user', content: 'What is the weather in Oslo?' },
      {
        role: 'assistant',
        content: 'Checking.',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } },
          { id: 'call_2', type: 'function', function: { name: 'time', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '{"c":4}' },
      { role: 'tool', tool_call_id: 'call_2', content: '12:00' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Thanks' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA', detail: 'low' } },
        ],
      },
    ]);
  });

  it('item_reference is resolved through the lookup; an unknown one is refused, naming the item', () => {
    const stored: Record<string, JsonObject> = {
      msg_a: {
        type: 'message',
        id: 'msg_a',
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: 'Earlier answer.', annotations: [] }],
      },
    };
    const chat = chatRequestFor(
      {
        input: [
          { role: 'user', content: 'Q1' },
          { type: 'item_reference', id: 'msg_a' },
          { role: 'user', content: 'Q2' },
        ],
      },
      (id) => stored[id],
    );
    expect(chat.messages).toEqual([
      { role: 'user', content: 'Q1' },
      { role: 'assistant', content: 'Earlier answer.' },
      { role: 'user', content: 'Q2' },
    ]);
    const err = refusal(() =>
      chatRequestFor(
        {
          input: [
            { role: 'user', content: 'Q' },
            { type: 'item_reference', id: 'msg_gone' },
          ],
        },
        none,
      ),
    );
    expect(err.code).toBe('invalid_request');
    expect(err.param).toBe('input[1]');
    expect(err.message).toContain('msg_gone');
    expect(err.message).toContain('store = false');
  });

  it('function tools, tool_choice and a JSON schema output', () => {
    const parameters = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
    const chat = chatRequestFor(
      {
        input: 'Weather?',
        tools: [{ type: 'function', name: 'weather', description: 'Current weather', parameters, strict: true }],
        tool_choice: { type: 'function', name: 'weather' },
        parallel_tool_calls: false,
        text: { format: { type: 'json_schema', name: 'answer', schema: { type: 'object' }, strict: true } },
      },
      none,
    );
    expect(chat).toMatchObject({
      tools: [{ type: 'function', function: { name: 'weather', description: 'Current weather', parameters, strict: true } }],
      tool_choice: { type: 'function', function: { name: 'weather' } },
      parallel_tool_calls: false,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object' }, strict: true } },
    });
    const allowed = chatRequestFor(
      {
        input: 'x',
        tools: [
          { type: 'function', name: 'a' },
          { type: 'function', name: 'b' },
        ],
        tool_choice: { type: 'allowed_tools', mode: 'required', tools: [{ type: 'function', name: 'b' }] },
      },
      none,
    );
    expect(allowed.tools).toEqual([{ type: 'function', function: { name: 'b' } }]);
    expect(allowed.tool_choice).toBe('required');
    expect(chatRequestFor({ input: 'x', text: { format: { type: 'json_object' } } }, none).response_format).toEqual({ type: 'json_object' });
  });

  it.each([
    [{ input: 'x', previous_response_id: 'resp_1' }, 'previous_response_id'],
    [{ input: 'x', conversation: 'conv_1' }, 'conversation'],
    [{ input: 'x', top_logprobs: 5 }, 'top_logprobs'],
    [{ input: 'x', background: true }, 'background'],
    [{ input: 'x', tools: [{ type: 'web_search' }] }, 'tools[0]'],
    [{ input: 'x', tool_choice: 'sometimes', tools: [{ type: 'function', name: 'f' }] }, 'tool_choice'],
    [{ input: 'x', text: { format: { type: 'yaml' } } }, 'text.format.type'],
    [{ input: 42 }, 'input'],
    [{}, 'input'],
    [{ input: [] }, 'input'],
    [{ input: [{ type: 'web_search_call', id: 'ws_1' }] }, 'input[0].type'],
    [{ input: [{ role: 'robot', content: 'x' }] }, 'input[0].role'],
    [{ input: [{ role: 'user', content: [{ type: 'input_audio', data: 'x' }] }] }, 'input[0].content[0].type'],
    [{ input: [{ type: 'function_call', call_id: 'c', name: 'f' }] }, 'input[0]'],
  ] as [JsonObject, string][])('%j is refused with param %s', (body, param) => {
    const err = refusal(() => chatRequestFor(body, none));
    expect(err.code).toBe('invalid_request');
    expect(err.param).toBe(param);
  });
});

describe('responseFromChat: a whole answer', () => {
  const meta = () => responseMeta({ model: 'chat-1', input: 'hi', instructions: 'Be nice.', max_output_tokens: 20, tools: [] }, 'chat-1');

  it('text: one completed assistant message, the usage, the request echoed', () => {
    const usage = responsesUsage(12, 7, { prompt_tokens: 12, completion_tokens: 7, prompt_tokens_details: { cached_tokens: 3 } });
    const r = responseFromChat(meta(), { choices: [{ message: { role: 'assistant', content: 'Hello there.' }, finish_reason: 'stop' }] }, usage);
    expect(r).toMatchObject({
      object: 'response',
      status: 'completed',
      error: null,
      incomplete_details: null,
      instructions: 'Be nice.',
      max_output_tokens: 20,
      model: 'chat-1',
      usage: {
        input_tokens: 12,
        input_tokens_details: { cached_tokens: 3 },
        output_tokens: 7,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 19,
      },
    });
    expect(r.id).toMatch(/^resp_/);
    expect(r.output).toEqual([
      {
        type: 'message',
        id: expect.stringMatching(/^msg_/),
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'Hello there.', annotations: [], logprobs: [] }],
      },
    ]);
  });

  it('tool calls become function_call items; a length stop is incomplete (max_output_tokens)', () => {
    const tools = responseFromChat(
      meta(),
      {
        choices: [
          {
            message: { content: null, tool_calls: [{ id: 'call_9', function: { name: 'weather', arguments: '{"city":"Bern"}' } }] },
            finish_reason: 'tool_calls',
          },
        ],
      },
      responsesUsage(5, 4),
    );
    expect(tools.status).toBe('completed');
    expect(tools.output).toEqual([
      { type: 'function_call', id: expect.stringMatching(/^fc_/), call_id: 'call_9', name: 'weather', arguments: '{"city":"Bern"}', status: 'completed' },
    ]);
    const cut = responseFromChat(meta(), { choices: [{ message: { content: 'Once upon' }, finish_reason: 'length' }] }, responsesUsage(5, 20));
    expect(cut).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
    expect(() => responseFromChat(meta(), { choices: [] }, responsesUsage(1, 1))).toThrow(ServiceError);
  });
});

describe('ResponsesStreamTranslator: a streamed answer', () => {
  /** The deltas of one chat chunk as the engine sends it, read by the one chat stream parser. */
  const wire = (chunk: JsonObject) => new ChatStreamParser().push(Buffer.from(`data: ${JSON.stringify(chunk)}\n\n`))[0]!.deltas;
  const chunk = (delta: JsonObject, finish: string | null = null) => wire({ choices: [{ index: 0, delta, finish_reason: finish }] });

  it('text: the events of OpenAI reference, in order, numbered from 0; usage in response.completed', () => {
    const t = new ResponsesStreamTranslator(responseMeta({ model: 'm', input: 'hi' }, 'm'));
    let text = t.start().join('');
    for (const c of [
      chunk({ role: 'assistant', content: '' }),
      chunk({ content: 'Hel' }),
      chunk({ content: 'lo.' }),
      chunk({}, 'stop'),
      wire({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 2 } }),
    ])
      text += t.push(c).join('');
    expect(t.chatUsage).toEqual({ prompt_tokens: 9, completion_tokens: 2 });
    text += t.finishEvents(responsesUsage(9, 2)).join('');
    const all = events(text);
    expect(all.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(all.map((e) => e.sequence_number)).toEqual(all.map((_, i) => i));
    const itemId = (all[2]!.item as JsonObject).id;
    expect(all.filter((e) => e.type === 'response.output_text.delta').map((e) => [e.item_id, e.delta])).toEqual([
      [itemId, 'Hel'],
      [itemId, 'lo.'],
    ]);
    expect(all[6]).toMatchObject({ text: 'Hello.', item_id: itemId });
    const done = all.at(-1)!.response as JsonObject;
    expect(done).toMatchObject({ status: 'completed', usage: { input_tokens: 9, output_tokens: 2, total_tokens: 11 } });
    expect(done.output).toEqual([
      {
        type: 'message',
        id: itemId,
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'Hello.', annotations: [], logprobs: [] }],
      },
    ]);
    expect((all[0]!.response as JsonObject).status).toBe('in_progress');
  });

  it('streamed tool calls: one function_call item per index, arguments as deltas, done at the end', () => {
    const t = new ResponsesStreamTranslator(responseMeta({ model: 'm', input: 'hi' }, 'm'));
    let text = t.start().join('');
    text += t.push(chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'weather', arguments: '' } }] })).join('');
    text += t.push(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] })).join('');
    text += t.push(chunk({ tool_calls: [{ index: 1, id: 'call_b', function: { name: 'time', arguments: '{}' } }] })).join('');
    text += t.push(chunk({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] })).join('');
    text += t.push(chunk({}, 'tool_calls')).join('');
    text += t.finishEvents(responsesUsage(3, 3)).join('');
    const all = events(text);
    const done = all.filter((e) => e.type === 'response.output_item.done').map((e) => e.item as JsonObject);
    expect(done).toEqual([
      { type: 'function_call', id: expect.stringMatching(/^fc_/), call_id: 'call_a', name: 'weather', arguments: '{"city":"Oslo"}', status: 'completed' },
      { type: 'function_call', id: expect.stringMatching(/^fc_/), call_id: 'call_b', name: 'time', arguments: '{}', status: 'completed' },
    ]);
    expect(all.filter((e) => e.type === 'response.function_call_arguments.done').map((e) => e.arguments)).toEqual(['{"city":"Oslo"}', '{}']);
    expect((all.at(-1)!.response as JsonObject).status).toBe('completed');
  });

  it('a length stop ends with response.incomplete; an empty answer is one empty message; errors are OpenAI error events', () => {
    const t = new ResponsesStreamTranslator(responseMeta({ model: 'm', input: 'hi' }, 'm'));
    const all = events([...t.start(), ...t.push(chunk({ content: 'Once' })), ...t.push(chunk({}, 'length')), ...t.finishEvents(responsesUsage(1, 1))].join(''));
    expect(all.at(-1)).toMatchObject({ type: 'response.incomplete', response: { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } } });

    const empty = new ResponsesStreamTranslator(responseMeta({ model: 'm', input: 'hi' }, 'm'));
    const e2 = events([...empty.start(), ...empty.push(chunk({}, 'stop')), ...empty.finishEvents(responsesUsage(1, 0))].join(''));
    expect((e2.at(-1)!.response as JsonObject).output).toEqual([
      {
        type: 'message',
        id: expect.any(String),
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: '', annotations: [], logprobs: [] }],
      },
    ]);

    const broken = new ResponsesStreamTranslator(responseMeta({ model: 'm', input: 'hi' }, 'm'));
    const e3 = events([...broken.start(), ...broken.push(chunk({ content: 'par' })), broken.errorEvent('upstream_error', 'gone')].join(''));
    expect(e3.at(-1)).toEqual({ type: 'error', code: 'upstream_error', message: 'gone', param: null, sequence_number: e3.length - 1 });
  });

  it('for any chunking, the deltas add up to the final text and sequence numbers have no gaps', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ maxLength: 8 }), { maxLength: 20 }), (pieces) => {
        const t = new ResponsesStreamTranslator(responseMeta({ input: 'x' }, 'm'));
        const parts = [...t.start()];
        for (const p of pieces) parts.push(...t.push(chunk({ content: p })));
        parts.push(...t.push(chunk({}, 'stop')), ...t.finishEvents(responsesUsage(1, 1)));
        const all = events(parts.join(''));
        const deltas = all.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta as string);
        expect(deltas.join('')).toBe(pieces.join(''));
        expect(all.map((e) => e.sequence_number)).toEqual(all.map((_, i) => i));
        const final = ((all.at(-1)!.response as JsonObject).output as JsonObject[])[0]!;
        expect((final.content as JsonObject[])[0]!.text).toBe(pieces.join(''));
      }),
      { numRuns: 200 },
    );
  });
});

describe('ResponseItemStore', () => {
  const item = (id: string, text = 'x') => ({ type: 'message', id, content: [{ type: 'output_text', text }] });

  it('keeps items per org, gives copies, forgets them after the TTL', () => {
    let now = 0;
    const store = new ResponseItemStore({ maxBytesPerOrg: 10_000, maxBytes: 10_000, ttlMs: 1000 }, () => now);
    store.put('org_a', [item('msg_1'), { type: 'message' }]);
    expect(store.size).toBe(1);
    const got = store.get('org_a', 'msg_1')!;
    expect(got).toEqual(item('msg_1'));
    got.id = 'changed';
    expect(store.get('org_a', 'msg_1')!.id).toBe('msg_1');
    expect(store.get('org_b', 'msg_1')).toBeUndefined();
    now = 1000;
    expect(store.get('org_a', 'msg_1')).toBeUndefined();
    expect(store.size).toBe(0);
    expect(store.storedBytes).toBe(0);
  });

  it('keeps an org within its quota: its own oldest go first; an item larger than the quota is not kept', () => {
    const store = new ResponseItemStore({ maxBytesPerOrg: 500, maxBytes: 10_000, ttlMs: 60_000 }, () => 0);
    for (let i = 0; i < 50; i++) store.put('org', [item(`msg_${i}`, 'y'.repeat(40))]);
    expect(store.storedBytes).toBeLessThanOrEqual(500);
    expect(store.get('org', 'msg_49')).toBeDefined();
    expect(store.get('org', 'msg_0')).toBeUndefined();
    store.put('org', [item('huge', 'z'.repeat(1000))]);
    expect(store.get('org', 'huge')).toBeUndefined();
    expect(store.storedBytes).toBeLessThanOrEqual(500);
  });

  it("never evicts one org's items for another's: a busy org makes room from its own", () => {
    const store = new ResponseItemStore({ maxBytesPerOrg: 500, maxBytes: 10_000, ttlMs: 60_000 }, () => 0);
    store.put('org_quiet', [item('quiet_1', 'q'.repeat(40))]);
    for (let i = 0; i < 1000; i++) store.put('org_busy', [item(`busy_${i}`, 'b'.repeat(40))]);
    expect(store.get('org_quiet', 'quiet_1')).toEqual(item('quiet_1', 'q'.repeat(40)));
    expect(store.get('org_busy', 'busy_999')).toBeDefined();
    expect(store.get('org_busy', 'busy_0')).toBeUndefined();
    // Nor can an org read or size another's item by its id.
    expect(store.get('org_busy', 'quiet_1')).toBeUndefined();
    expect(store.bytesOf('org_busy', 'quiet_1')).toBeUndefined();
    expect(store.bytesOf('org_quiet', 'quiet_1')).toBe(JSON.stringify(item('quiet_1', 'q'.repeat(40))).length);
  });

  it('past the total, expired items go first, then new items are not kept rather than evicting another org', () => {
    let now = 0;
    const store = new ResponseItemStore({ maxBytesPerOrg: 1000, maxBytes: 1000, ttlMs: 1000 }, () => now);
    const big = (id: string) => item(id, 'x'.repeat(900));
    store.put('org_a', [big('a_1')]);
    store.put('org_b', [big('b_1')]);
    expect(store.get('org_a', 'a_1')).toBeDefined();
    expect(store.get('org_b', 'b_1')).toBeUndefined();
    now = 1000;
    store.put('org_b', [big('b_2')]);
    expect(store.get('org_b', 'b_2')).toBeDefined();
    expect(store.size).toBe(1);
    expect(store.storedBytes).toBe(JSON.stringify(big('b_2')).length);
  });
});
