// The libc bindings the server relies on for the commit watch (which has its own tests for the
// mapping): they must load on the Linux it runs on.
import { describe, expect, it } from 'vitest';
import { libc } from './libc.ts';

describe('libc', () => {
  it('loads on glibc Linux', () => {
    expect(libc()).not.toBeNull();
  });
});
