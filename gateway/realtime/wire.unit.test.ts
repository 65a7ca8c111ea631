import { describe, expect, it } from 'vitest';
import type { ServerEvent } from './server-events.ts';
import { encodeServerEvent, readClientMessage } from './wire.ts';

const read = (value: unknown) => readClientMessage(Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)), false);

describe('reading client events', () => {
  it('gives the typed event, and its size on the wire', () => {
    const text = JSON.stringify({ type: 'input_audio_buffer.append', event_id: 'e1', audio: 'AAAA' });
    expect(readClientMessage(Buffer.from(text), false)).toEqual({
      event: { type: 'input_audio_buffer.append', event_id: 'e1', audio: 'AAAA' },
      size: text.length,
    });
  });

  it('refuses what is not a JSON event as invalid_message, an unknown type with param "type"', () => {
    expect(readClientMessage(Buffer.from([1, 2]), true)).toMatchObject({ unreadable: { code: 'invalid_message' }, eventId: null });
    expect(read('not json')).toMatchObject({ unreadable: { code: 'invalid_message' } });
    expect(read({ event_id: 'e2' })).toMatchObject({ unreadable: { code: 'invalid_message' } });
    expect(read({ type: 'no.such.event', event_id: 'e3' })).toMatchObject({
      unreadable: { code: 'invalid_request', param: 'type', message: 'Unknown event type "no.such.event".' },
      eventId: 'e3',
    });
  });

  it.each([
    [{ type: 'input_audio_buffer.append', audio: 'not base64!' }, 'audio', 'audio: must be base64-encoded audio.'],
    [{ type: 'session.update', session: [] }, 'session', 'session: must be an object.'],
    [{ type: 'conversation.item.create', item: { role: 'bot', content: [] } }, 'item.role', 'item.role: must be user, assistant or system.'],
    [
      { type: 'conversation.item.create', item: { role: 'user', content: [{ type: 'input_text' }] } },
      'item.content[0].text',
      'item.content[0].text: must be a string.',
    ],
    [
      { type: 'conversation.item.create', item: { type: 'function_call', call_id: 'c', name: 'n'.repeat(65) } },
      'item.name',
      'item.name: must be a string of 1 to 64 characters.',
    ],
    [{ type: 'conversation.item.truncate', item_id: 'i', audio_end_ms: -1 }, 'audio_end_ms', 'audio_end_ms: must be a number of milliseconds, 0 or more.'],
    [{ type: 'response.create', response: { input: [{ type: 'item_reference' }] } }, 'response.input[0].id', 'response.input[0].id: must be a string.'],
    [{ type: 'conversation.item.delete' }, 'item_id', 'item_id: must be a string.'],
  ])('names the first bad field by its path in the event: %j', (event, param, message) => {
    expect(read(event)).toMatchObject({ unreadable: { code: 'invalid_request', param, message } });
  });

  it('reads an item without a type as a message, and beta content types', () => {
    expect(read({ type: 'conversation.item.create', item: { role: 'user', content: [{ type: 'text', text: 'Hi' }] } })).toMatchObject({
      event: { item: { type: 'message', role: 'user', content: [{ type: 'text', text: 'Hi' }] } },
    });
  });
});

describe('writing server events', () => {
  const delta: ServerEvent = { type: 'response.output_audio.delta', response_id: 'r', item_id: 'i', output_index: 0, content_index: 0, delta: 'AA' };

  it('adds an event id; GA names for GA clients', () => {
    const wire = encodeServerEvent(delta, false) as { type: string; event_id: string };
    expect(wire).toMatchObject({ ...delta, type: 'response.output_audio.delta' });
    expect(wire.event_id).toMatch(/^event_[0-9a-f]{16}$/);
  });

  it('the beta names for clients on the beta protocol, transcription_session.created for a transcription session', () => {
    expect(encodeServerEvent(delta, true)).toMatchObject({ type: 'response.audio.delta' });
    expect(
      encodeServerEvent(
        {
          type: 'conversation.item.added',
          previous_item_id: null,
          item: { id: 'i', object: 'realtime.item', type: 'function_call_output', status: 'completed', call_id: 'c', output: '' },
        },
        true,
      ),
    ).toMatchObject({ type: 'conversation.item.created' });
    expect(encodeServerEvent({ type: 'session.created', session: { type: 'transcription' } }, true)).toMatchObject({ type: 'transcription_session.created' });
    expect(encodeServerEvent({ type: 'session.created', session: { type: 'realtime' } }, true)).toMatchObject({ type: 'session.created' });
  });
});
