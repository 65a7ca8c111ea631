import { describe, expect, it } from 'vitest';
import { exotel, plivo, telnyx, twilio, vonage } from './carrier-dialects.ts';
import { MULAW_8K } from './line-audio.ts';

// Messages as the carriers' references show them (see carrier-dialects.ts for the pages).
const TWILIO_START = {
  event: 'start',
  sequenceNumber: '1',
  start: {
    accountSid: 'AC123',
    streamSid: 'MZ18ad3ab5a668481ce02b83e7395059f0',
    callSid: 'CA123',
    tracks: ['inbound'],
    customParameters: { FirstName: 'Jane' },
    mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
  },
  streamSid: 'MZ18ad3ab5a668481ce02b83e7395059f0',
};
const TELNYX_START = {
  event: 'start',
  sequence_number: '1',
  stream_id: '32DE0DEA-53CB-4B21-89A4-9E1819C043BC',
  start: {
    user_id: '3E6F995F-85F7-4705-9741-53B116D28237',
    call_control_id: 'v2:T02llQxIyaRkhfRKxgAP8nY511EhFLizdvdUKJiSw8d6A9BborherQ',
    custom_parameters: { customer_id: 'customer_123' },
    media_format: { encoding: 'PCMU', sample_rate: 8000, channels: 1 },
  },
};

describe('twilio', () => {
  it('reads each event of a stream', () => {
    expect(twilio.read({ event: 'connected', protocol: 'Call', version: '1.0.0' })).toEqual({ kind: 'connected' });
    expect(twilio.read(TWILIO_START)).toEqual({
      kind: 'start',
      streamId: TWILIO_START.streamSid,
      callId: 'CA123',
      format: MULAW_8K,
      formatName: 'audio/x-mulaw 8000 Hz',
      parameters: { FirstName: 'Jane' },
    });
    expect(
      twilio.read({ event: 'media', sequenceNumber: '3', media: { track: 'inbound', chunk: '1', timestamp: '5', payload: 'f39/fw==' }, streamSid: 'MZ1' }),
    ).toEqual({
      kind: 'media',
      audio: Buffer.from([0x7f, 0x7f, 0x7f, 0x7f]),
      inbound: true,
    });
    expect(twilio.read({ event: 'mark', sequenceNumber: '4', streamSid: 'MZ1', mark: { name: 'item_1:3' } })).toEqual({ kind: 'mark', name: 'item_1:3' });
    expect(twilio.read({ event: 'dtmf', streamSid: 'MZ1', sequenceNumber: '5', dtmf: { track: 'inbound_track', digit: '1' } })).toEqual({
      kind: 'dtmf',
      digit: '1',
    });
    expect(twilio.read({ event: 'stop', sequenceNumber: '6', stop: { accountSid: 'AC1', callSid: 'CA1' }, streamSid: 'MZ1' })).toEqual({ kind: 'stop' });
    const other = { ...TWILIO_START, start: { ...TWILIO_START.start, mediaFormat: { encoding: 'audio/l16', sampleRate: 16000, channels: 1 } } };
    expect(twilio.read(other)).toMatchObject({ kind: 'start', format: null, formatName: 'audio/l16 16000 Hz' });
  });

  it('writes media, marks and clear with the stream id', () => {
    expect(twilio.media('MZ1', Buffer.from([0, 0]), MULAW_8K)).toEqual({ event: 'media', streamSid: 'MZ1', media: { payload: 'AAA=' } });
    expect(twilio.mark('MZ1', 'm')).toEqual({ event: 'mark', streamSid: 'MZ1', mark: { name: 'm' } });
    expect(twilio.clear('MZ1')).toEqual({ event: 'clear', streamSid: 'MZ1' });
  });

  it('refuses what is not its protocol, naming the field', () => {
    expect(() => twilio.read({ event: 'nonsense' })).toThrow(expect.objectContaining({ code: 'invalid_request', param: 'event' }));
    expect(() => twilio.read({})).toThrow(expect.objectContaining({ param: 'event' }));
    expect(() => twilio.read({ event: 'media', media: { payload: 'not base64!' } })).toThrow(expect.objectContaining({ param: 'media.payload' }));
    expect(() => twilio.read({ event: 'media', media: { payload: 'A'.repeat(70_000) } })).toThrow(expect.objectContaining({ param: 'media.payload' }));
    expect(() => twilio.read({ event: 'start', start: { streamSid: 'MZ1' } })).toThrow(expect.objectContaining({ param: 'start.mediaFormat' }));
    expect(() => twilio.read({ event: 'mark' })).toThrow(expect.objectContaining({ param: 'mark' }));
  });
});

describe('telnyx', () => {
  it('reads its stream, leaves out the outbound track, and reports its errors', () => {
    expect(telnyx.read({ event: 'connected', version: '1.0.0' })).toEqual({ kind: 'connected' });
    expect(telnyx.read(TELNYX_START)).toEqual({
      kind: 'start',
      streamId: TELNYX_START.stream_id,
      callId: TELNYX_START.start.call_control_id,
      format: MULAW_8K,
      formatName: 'PCMU 8000 Hz',
      parameters: { customer_id: 'customer_123' },
    });
    const media = (track: string) => ({
      event: 'media',
      sequence_number: '4',
      media: { track, chunk: '2', timestamp: '5', payload: 'f39/fw==' },
      stream_id: 's',
    });
    expect(telnyx.read(media('inbound'))).toMatchObject({ kind: 'media', inbound: true });
    expect(telnyx.read(media('outbound'))).toMatchObject({ kind: 'media', inbound: false });
    expect(telnyx.read({ event: 'error', payload: { code: 100002, title: 'Unknown error' }, stream_id: 's' })).toEqual({
      kind: 'carrier_error',
      detail: '100002 Unknown error',
    });
    expect(telnyx.read({ ...TELNYX_START, start: { ...TELNYX_START.start, media_format: { encoding: 'PCMA', sample_rate: 8000 } } })).toMatchObject({
      format: null,
    });
  });

  it('writes its commands without a stream id', () => {
    expect(telnyx.media('s', Buffer.from([0, 0]), MULAW_8K)).toEqual({ event: 'media', media: { payload: 'AAA=' } });
    expect(telnyx.mark('s', 'm')).toEqual({ event: 'mark', mark: { name: 'm' } });
    expect(telnyx.clear('s')).toEqual({ event: 'clear' });
  });
});

// https://www.plivo.com/docs/voice/audio-streaming/audio-streaming (Stream Event Protocol).
const PLIVO_START = {
  event: 'start',
  sequenceNumber: 1,
  start: {
    callId: '12345678-1234-1234-1234-123456789abc',
    streamId: '87654321-4321-4321-4321-cba987654321',
    accountId: 'MAXXXXXXXXXXXXXXXXXX',
    tracks: ['inbound'],
    mediaFormat: { encoding: 'audio/x-l16', sampleRate: 16000 },
  },
  extra_headers: 'userId=12345;sessionId=abc-xyz',
};

describe('plivo', () => {
  it('reads its stream: L16 or μ-law, extraHeaders as parameters, checkpoints played and audio cleared', () => {
    expect(plivo.read(PLIVO_START)).toEqual({
      kind: 'start',
      streamId: PLIVO_START.start.streamId,
      callId: PLIVO_START.start.callId,
      format: { encoding: 'pcm_s16le', sampleRate: 16000 },
      formatName: 'audio/x-l16 16000 Hz',
      parameters: { userId: '12345', sessionId: 'abc-xyz' },
    });
    const withFormat = (encoding: string, sampleRate: number | string) => ({
      ...PLIVO_START,
      start: { ...PLIVO_START.start, mediaFormat: { encoding, sampleRate } },
    });
    expect(plivo.read(withFormat('audio/x-mulaw', 8000))).toMatchObject({ format: MULAW_8K });
    expect(plivo.read(withFormat('audio/x-l16', '8000'))).toMatchObject({ format: { encoding: 'pcm_s16le', sampleRate: 8000 } });
    expect(plivo.read(withFormat('audio/x-mulaw', 16000))).toMatchObject({ format: null });
    // The XML attribute's own separator, and a JSON object.
    expect(plivo.read({ ...PLIVO_START, extra_headers: 'a=1,svc_token=pt_svc_x=y' })).toMatchObject({ parameters: { a: '1', svc_token: 'pt_svc_x=y' } });
    expect(plivo.read({ ...PLIVO_START, extra_headers: '{"svc_token":"t","n":3}' })).toMatchObject({ parameters: { svc_token: 't' } });
    expect(plivo.read({ ...PLIVO_START, extra_headers: undefined })).toMatchObject({ parameters: {} });
    const media = { event: 'media', sequenceNumber: 42, streamId: 's', media: { track: 'inbound', timestamp: '1705312200000', chunk: 41, payload: 'AAEC' } };
    expect(plivo.read(media)).toEqual({ kind: 'media', audio: Buffer.from([0, 1, 2]), inbound: true });
    expect(plivo.read({ event: 'playedStream', sequenceNumber: 7, streamId: 's', name: 'item_1:end' })).toEqual({ kind: 'mark', name: 'item_1:end' });
    expect(plivo.read({ event: 'clearedAudio', sequenceNumber: 8, streamId: 's' })).toEqual({ kind: 'cleared' });
    expect(plivo.read({ event: 'dtmf', sequenceNumber: 9, streamId: 's', dtmf: { track: 'inbound', digit: '5', timestamp: '1' } })).toEqual({
      kind: 'dtmf',
      digit: '5',
    });
    expect(() => plivo.read({ event: 'mark', mark: { name: 'x' } })).toThrow(
      expect.objectContaining({ param: 'event', message: expect.stringContaining('playedStream') }),
    );
  });

  it("plays audio in the stream's own format, checkpoints and clears with the stream id", () => {
    expect(plivo.media('s', Buffer.from([0, 0]), MULAW_8K)).toEqual({
      event: 'playAudio',
      media: { contentType: 'audio/x-mulaw', sampleRate: 8000, payload: 'AAA=' },
    });
    expect(plivo.media('s', Buffer.from([0, 0]), { encoding: 'pcm_s16le', sampleRate: 16000 })).toEqual({
      event: 'playAudio',
      media: { contentType: 'audio/x-l16', sampleRate: 16000, payload: 'AAA=' },
    });
    expect(plivo.mark('s', 'm')).toEqual({ event: 'checkpoint', streamId: 's', name: 'm' });
    expect(plivo.clear('s')).toEqual({ event: 'clearAudio', streamId: 's' });
  });
});

// https://developer.exotel.com/docs/agentstream/websocket-protocol
const EXOTEL_START = {
  event: 'start',
  sequence_number: '1',
  stream_sid: 'MZxxxxxxxxxxxxxxxxxxxxxxxx',
  start: {
    stream_sid: 'MZxxxxxxxxxxxxxxxxxxxxxxxx',
    call_sid: 'CAxxxxxxxxxxxxxxxxxxxxxxxx',
    account_sid: 'ACxxxxxxxxxxxxxxxxxxxxxxxx',
    from: '+919876543210',
    to: '+918047491899',
    custom_parameters: { key1: 'value1' },
    media_format: { encoding: 'audio/x-raw', sample_rate: '8000', bit_rate: '16' },
  },
};

describe('exotel', () => {
  it("reads its stream: snake_case fields, raw 16-bit PCM at the applet's rate, rates as strings", () => {
    expect(exotel.read({ event: 'connected' })).toEqual({ kind: 'connected' });
    expect(exotel.read(EXOTEL_START)).toEqual({
      kind: 'start',
      streamId: EXOTEL_START.stream_sid,
      callId: EXOTEL_START.start.call_sid,
      format: { encoding: 'pcm_s16le', sampleRate: 8000 },
      formatName: 'audio/x-raw 8000 Hz',
      parameters: { key1: 'value1' },
    });
    const withFormat = (media_format: object) => ({ ...EXOTEL_START, start: { ...EXOTEL_START.start, media_format } });
    expect(exotel.read(withFormat({ encoding: 'audio/x-raw', sample_rate: '16000', bit_rate: '16' }))).toMatchObject({
      format: { encoding: 'pcm_s16le', sampleRate: 16000 },
    });
    expect(exotel.read(withFormat({ encoding: 'audio/x-mulaw', sample_rate: 8000 }))).toMatchObject({ format: MULAW_8K });
    expect(exotel.read(withFormat({ encoding: 'audio/x-raw', sample_rate: '8000', bit_rate: '8' }))).toMatchObject({ format: null });
    expect(exotel.read(withFormat({ encoding: 'audio/x-raw', sample_rate: '11025' }))).toMatchObject({ format: null });
    const media = { event: 'media', sequence_number: '3', stream_sid: 'MZ1', media: { chunk: '2', timestamp: '200', payload: 'AAEC' } };
    expect(exotel.read(media)).toEqual({ kind: 'media', audio: Buffer.from([0, 1, 2]), inbound: true });
    expect(exotel.read({ event: 'dtmf', sequence_number: '7', stream_sid: 'MZ1', dtmf: { digit: '5', duration: '100' } })).toEqual({
      kind: 'dtmf',
      digit: '5',
    });
    expect(exotel.read({ event: 'mark', sequence_number: '15', stream_sid: 'MZ1', mark: { name: 'item_1:2' } })).toEqual({ kind: 'mark', name: 'item_1:2' });
    expect(
      exotel.read({ event: 'stop', sequence_number: '16', stream_sid: 'MZ1', stop: { call_sid: 'CA1', account_sid: 'AC1', reason: 'callended' } }),
    ).toEqual({
      kind: 'stop',
    });
    expect(() => exotel.read({ event: 'media', media: { payload: '***' } })).toThrow(expect.objectContaining({ param: 'media.payload' }));
  });

  it('writes media, marks and clears with stream_sid, in frames of 200 ms padded to whole 20 ms', () => {
    expect(exotel.media('MZ1', Buffer.from([0, 0]), { encoding: 'pcm_s16le', sampleRate: 8000 })).toEqual({
      event: 'media',
      stream_sid: 'MZ1',
      media: { payload: 'AAA=' },
    });
    expect(exotel.mark('MZ1', 'm')).toEqual({ event: 'mark', stream_sid: 'MZ1', mark: { name: 'm' } });
    expect(exotel.clear('MZ1')).toEqual({ event: 'clear', stream_sid: 'MZ1' });
    expect([exotel.frameMs, exotel.padded]).toEqual([200, true]);
  });
});

// https://developer.vonage.com/en/voice/voice-api/concepts/websockets
describe('vonage', () => {
  it('reads websocket:connected as the start (its format, the NCCO headers as parameters), binary audio, DTMF, notifies and clears', () => {
    expect(vonage.read({ event: 'websocket:connected', 'content-type': 'audio/l16;rate=16000', language: 'en-GB', callerID: '447700900123', age: 40 })).toEqual(
      {
        kind: 'start',
        streamId: '',
        callId: null,
        format: { encoding: 'pcm_s16le', sampleRate: 16000 },
        formatName: 'audio/l16;rate=16000',
        parameters: { language: 'en-GB', callerID: '447700900123' },
      },
    );
    expect(vonage.read({ event: 'websocket:connected', 'content-type': 'audio/l16;rate=8000' })).toMatchObject({ format: { sampleRate: 8000 } });
    expect(vonage.read({ event: 'websocket:connected', 'content-type': 'audio/pcmu' })).toMatchObject({ format: null, formatName: 'audio/pcmu' });
    expect(vonage.readBinary!(Buffer.alloc(640))).toEqual({ kind: 'media', audio: Buffer.alloc(640), inbound: true });
    expect(() => vonage.readBinary!(Buffer.alloc(70_000))).toThrow(expect.objectContaining({ param: 'audio' }));
    expect(vonage.read({ event: 'websocket:dtmf', digit: '5', duration: 260 })).toEqual({ kind: 'dtmf', digit: '5' });
    expect(vonage.read({ event: 'websocket:notify', payload: { name: 'item_1:3' } })).toEqual({ kind: 'mark', name: 'item_1:3' });
    // A notify that is none of ours, an event Vonage did not list: nothing to act on, nothing to refuse.
    expect(vonage.read({ event: 'websocket:notify', payload: { reply_id: 'x' } })).toEqual({ kind: 'other' });
    expect(vonage.read({ event: 'websocket:media:unknown' })).toEqual({ kind: 'other' });
    expect(vonage.read({ event: 'websocket:cleared' })).toEqual({ kind: 'cleared' });
    expect(() => vonage.read({ action: 'clear' })).toThrow(expect.objectContaining({ param: 'event' }));
    expect(() => vonage.read({ event: 'websocket:connected' })).toThrow(expect.objectContaining({ param: 'content-type' }));
  });

  it('writes the audio as binary messages, marks as notify, a clear as the clear action', () => {
    const frame = Buffer.alloc(640, 1);
    expect(vonage.media('', frame, { encoding: 'pcm_s16le', sampleRate: 16000 })).toBe(frame);
    expect(vonage.mark('', 'item_1:end')).toEqual({ action: 'notify', payload: { name: 'item_1:end' } });
    expect(vonage.clear('')).toEqual({ action: 'clear' });
    expect([vonage.frameMs, vonage.padded, vonage.maxAheadMs]).toEqual([20, true, 10_000]);
  });
});
