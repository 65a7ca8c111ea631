// The pure parts of TTS failover (tts-failover.ts): how a text is cut into the spans spoken one
// engine call each, and which engine voice id an upstream gets.
import { describe, expect, it } from 'vitest';
import { FIRST_SPAN_MAX_CHARS, failoverSpans, voiceOnUpstream } from './tts-failover.ts';

describe('failoverSpans', () => {
  it.each([
    'One sentence only',
    'First. Second! Third? ',
    'Dr. Smith arrived at 3.5 p.m. and left.   ',
    'A line\nanother line\n\n',
    '你好。世界！',
    `${'word '.repeat(40)}end.`,
    '...',
  ])('put back together, the spans are the text: %j', (text) => {
    expect(failoverSpans(text).join('')).toBe(text);
  });

  it('cuts at sentence ends, keeping the space after each with it', () => {
    expect(failoverSpans('First one. Second one! Third?')).toEqual(['First one. ', 'Second one! ', 'Third?']);
  });

  it('trailing punctuation or whitespace alone joins the last span (nothing unspeakable is sent alone)', () => {
    expect(failoverSpans('Hello there. ...  ')).toEqual(['Hello there. ...  ']);
  });

  it(`cuts a long first span at a word before ${FIRST_SPAN_MAX_CHARS} code points, so the first audio comes early`, () => {
    const text = `${'many words here '.repeat(10)}done.`;
    const spans = failoverSpans(text);
    expect(spans.length).toBe(2);
    expect([...spans[0]!].length).toBeLessThanOrEqual(FIRST_SPAN_MAX_CHARS);
    expect(spans[0]!.endsWith(' ')).toBe(true);
    expect(spans.join('')).toBe(text);
  });
});

describe('voiceOnUpstream', () => {
  const a = { url: 'https://a.example' };
  const b = { url: 'https://b.example' };

  it('without per-upstream ids: the profile id on every upstream', () => {
    const profile = { upstreamId: 'v1', params: { pitch: 2 } };
    expect(voiceOnUpstream(profile, a)).toBe(profile);
    expect(voiceOnUpstream(profile, b)).toBe(profile);
  });

  it('with them: the id named for the upstream, the map left out of the params; none for an upstream not named', () => {
    const profile = { upstreamId: 'v1', params: { pitch: 2, upstream_voices: { [a.url]: 'car-1' } } };
    expect(voiceOnUpstream(profile, a)).toEqual({ upstreamId: 'car-1', params: { pitch: 2 } });
    expect(voiceOnUpstream(profile, b)).toBeNull();
  });
});
