// The HTTP face of an error (shared by the gateway and the dashboard's gateway proxy): when a
// refusal passes with time, Retry-After in whole seconds, rounded up so that a client waiting
// that long is never early.
import { describe, expect, it } from 'vitest';
import { envelope, errorHeaders } from './error-envelope.ts';
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
