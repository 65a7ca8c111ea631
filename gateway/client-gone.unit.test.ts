import { describe, expect, it } from 'vitest';
import { childController } from './client-gone.ts';

describe('childController', () => {
  it('is aborted with its parent, with the parent’s reason', () => {
    const parent = new AbortController();
    const child = childController(parent.signal);
    expect(child.signal.aborted).toBe(false);
    const reason = new Error('client gone');
    parent.abort(reason);
    expect(child.signal.aborted).toBe(true);
    expect(child.signal.reason).toBe(reason);
  });

  it('starts aborted when its parent already is', () => {
    const parent = new AbortController();
    parent.abort('shutdown');
    const child = childController(parent.signal);
    expect(child.signal.aborted).toBe(true);
    expect(child.signal.reason).toBe('shutdown');
  });

  it('is aborted on its own without aborting its parent or its siblings', () => {
    const parent = new AbortController();
    const child = childController(parent.signal);
    const sibling = childController(parent.signal);
    child.abort('attempt cancelled');
    expect(child.signal.reason).toBe('attempt cancelled');
    expect(parent.signal.aborted).toBe(false);
    expect(sibling.signal.aborted).toBe(false);
  });
});
