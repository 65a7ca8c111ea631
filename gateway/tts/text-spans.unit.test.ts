import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MIN_CLAUSE_WORDS, isSpeakable, takeSpans, takeWords } from './text-spans.ts';

/** Feeds `pieces` one by one, as a session does, and returns the spans cut along the way. */
function feed(pieces: string[]): { spans: string[]; rest: string } {
  const spans: string[] = [];
  let buffer = '';
  for (const p of pieces) {
    const r = takeSpans(buffer + p);
    spans.push(...r.spans);
    buffer = r.rest;
  }
  return { spans, rest: buffer };
}

describe('takeSpans', () => {
  it('cuts after each sentence, keeping the whitespace after it', () => {
    expect(takeSpans('Hello there. How are you? Fine! And')).toEqual({ spans: ['Hello there. ', 'How are you? ', 'Fine! '], rest: 'And' });
  });

  it('cuts at a sentence end with nothing after it yet (the next token starts with a space)', () => {
    expect(takeSpans('Hello there.')).toEqual({ spans: ['Hello there.'], rest: '' });
    expect(takeSpans('Really?!')).toEqual({ spans: ['Really?!'], rest: '' });
    expect(takeSpans('He said "stop."')).toEqual({ spans: ['He said "stop."'], rest: '' });
  });

  it('does not cut after an abbreviation, an initial, or a number that may continue ("3." then "5")', () => {
    expect(takeSpans('Ask Dr. Smith and Mr. Jones')).toEqual({ spans: [], rest: 'Ask Dr. Smith and Mr. Jones' });
    expect(takeSpans('by J. K. Rowling')).toEqual({ spans: [], rest: 'by J. K. Rowling' });
    expect(takeSpans('for example e.g. this')).toEqual({ spans: [], rest: 'for example e.g. this' });
    expect(takeSpans('It costs 3.')).toEqual({ spans: [], rest: 'It costs 3.' });
    expect(takeSpans('It costs 3.5 dollars')).toEqual({ spans: [], rest: 'It costs 3.5 dollars' });
    // A number then a space: that sentence is over.
    expect(takeSpans('It was 2023. Then')).toEqual({ spans: ['It was 2023. '], rest: 'Then' });
  });

  it(`cuts at a clause boundary only with at least ${MIN_CLAUSE_WORDS} words and a space after it`, () => {
    expect(takeSpans('Well, maybe')).toEqual({ spans: [], rest: 'Well, maybe' });
    expect(takeSpans('I checked the order you placed yesterday, and it')).toEqual({ spans: ['I checked the order you placed yesterday, '], rest: 'and it' });
    expect(takeSpans('I checked the order you placed yesterday,')).toEqual({ spans: [], rest: 'I checked the order you placed yesterday,' });
    expect(takeSpans('The price is 3,000 dollars for the six of them')).toEqual({ spans: [], rest: 'The price is 3,000 dollars for the six of them' });
  });

  it('cuts at line breaks, and at CJK sentence ends without spaces', () => {
    expect(takeSpans('First item\nSecond item')).toEqual({ spans: ['First item\n'], rest: 'Second item' });
    expect(takeSpans('你好。今天天气很好')).toEqual({ spans: ['你好。'], rest: '今天天气很好' });
  });

  it('makes no span of punctuation or whitespace alone', () => {
    expect(takeSpans('... ')).toEqual({ spans: [], rest: '... ' });
    expect(takeSpans('Wait.')).toEqual({ spans: ['Wait.'], rest: '' });
    // The dots that follow join the next sentence rather than being a span of their own.
    expect(feed(['Wait.', '..', ' What?'])).toEqual({ spans: ['Wait.', '.. What?'], rest: '' });
  });

  it('gives the same sentences whether the text comes whole or in LLM-sized pieces', () => {
    const text = 'Thanks for waiting. I found your order from last Tuesday: two boxes of printer paper. Would you like the link? ';
    const pieces = text.match(/.{1,4}/gs)!;
    expect(feed(pieces).spans).toEqual(takeSpans(text).spans);
    expect(takeSpans(text).spans).toEqual([
      'Thanks for waiting. ',
      'I found your order from last Tuesday: ',
      'two boxes of printer paper. ',
      'Would you like the link? ',
    ]);
  });

  it('spans and rest put back together are always the text, and every span is speakable (property)', () => {
    const alphabet = fc.constantFrom('a', 'b', 'Z', '3', ' ', ' ', '.', ',', '!', '?', '\n', '"', ':', '。', 'é');
    fc.assert(
      fc.property(fc.array(fc.string({ unit: alphabet, maxLength: 8 }), { maxLength: 30 }), (pieces) => {
        const { spans, rest } = feed(pieces);
        expect(spans.join('') + rest).toBe(pieces.join(''));
        for (const s of spans) expect(isSpeakable(s)).toBe(true);
      }),
    );
  });
});

describe('takeWords', () => {
  it('takes up to the last whitespace, keeping a word that may still grow', () => {
    expect(takeWords('Hello wor', false)).toEqual({ span: 'Hello ', rest: 'wor' });
    expect(takeWords('Hello world ', false)).toEqual({ span: 'Hello world ', rest: '' });
  });

  it('with no whitespace at all: nothing, or everything when told to take it whole', () => {
    expect(takeWords('Hello', false)).toEqual({ span: '', rest: 'Hello' });
    expect(takeWords('今天天气很好', true)).toEqual({ span: '今天天气很好', rest: '' });
  });
});
