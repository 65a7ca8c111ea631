import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonWithBase64 } from './audio-json.ts';

describe('jsonWithBase64', () => {
  it('property: parses to the message with the audio as base64 in its field, for any message and any bytes (views too)', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.uint8Array({ maxLength: 300 }), fc.nat(8), (message, bytes, skip) => {
        const field = 'data';
        const view = bytes.subarray(Math.min(skip, bytes.length));
        const text = jsonWithBase64(message, field, view);
        expect(JSON.parse(text)).toEqual({ ...JSON.parse(JSON.stringify(message)), [field]: Buffer.from(view).toString('base64') });
      }),
    );
  });

  it('an empty message holds the audio alone', () => {
    expect(jsonWithBase64({}, 'delta', Buffer.from('hi'))).toBe('{"delta":"aGk="}');
  });
});
