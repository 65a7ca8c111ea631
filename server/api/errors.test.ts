import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../services/errors.js';
import { trpcCodeFor } from './errors.js';

describe('trpcCodeFor', () => {
  it.each([
    ['invalid_request', 'BAD_REQUEST'],
    ['conflict', 'CONFLICT'],
    ['forbidden', 'FORBIDDEN'],
    ['key_not_found', 'NOT_FOUND'],
    ['org_not_found', 'NOT_FOUND'],
    ['not_found', 'NOT_FOUND'],
    ['insufficient_quota', 'PAYMENT_REQUIRED'],
    ['rate_limit_exceeded', 'TOO_MANY_REQUESTS'],
    ['internal_error', 'INTERNAL_SERVER_ERROR'],
  ] as const)('%s -> %s', (code, expected) => {
    expect(trpcCodeFor(code)).toBe(expected);
  });

  it('maps every code the product speaks', () => {
    for (const code of ERROR_CODES) expect(typeof trpcCodeFor(code)).toBe('string');
  });
});
