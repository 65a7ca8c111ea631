// The HTTP face of an error (shared by the gateway and the dashboard's gateway proxy): when a
// refusal passes with time, Retry-After in whole seconds, rounded up so that a client waiting
// that long is never early; and read back (the dashboard server reading the gateway's answer).
import { describe, expect, it } from 'vitest';
import { envelope, errorHeaders, serviceErrorOf } from './error-envelope.ts';
import { ServiceError } from './services/errors.ts';

describe('errorHeaders', () => {
  it.each([
    [5, '5'],
    [0.2, '1'],
    [14.5, '15'],
  ])('retryAfterSeconds %s -> Retry-After %s', (seconds, header) => {
    const err = new ServiceError('rate_limit_exceeded', 'Too many.', null, { retryAfterSeconds: seconds });
    expect(errorHeaders(err)).toEqual({ 'retry-after': header });
    expect(envelope(err).status).toBe(429);
  });

  it('no Retry-After for a refusal that time does not change', () => {
    expect(errorHeaders(new ServiceError('invalid_request', 'Bad.', 'name'))).toEqual({});
  });
});

describe('serviceErrorOf', () => {
  it('reads back the ServiceError an envelope was written from, with its Retry-After', () => {
    const sent = new ServiceError('temporarily_unavailable', 'Full.', 'model', { retryAfterSeconds: 3 });
    const { status, body } = envelope(sent);
    const read = serviceErrorOf(status, JSON.parse(JSON.stringify(body)), errorHeaders(sent)['retry-after']!);
    expect([read.code, read.message, read.param, read.retryAfterSeconds]).toEqual(['temporarily_unavailable', 'Full.', 'model', 3]);
    expect(serviceErrorOf(404, envelope(new ServiceError('model_not_found', 'No such model.')).body, null)).toMatchObject({
      code: 'model_not_found',
      param: null,
      retryAfterSeconds: undefined,
    });
  });

  it('an answer that is not the envelope, or names a code of no one, is the gateway failing', () => {
    for (const body of [null, 'Bad Gateway', { error: 'nope' }, { error: { code: 'teapot', message: 'short and stout' } }, { error: { code: 'not_found' } }]) {
      expect(serviceErrorOf(502, body, null)).toMatchObject({ code: 'upstream_error', message: 'The gateway answered 502 without an error envelope.' });
    }
  });
});
