import { describe, expect, it } from 'vitest';
import { isUpstreamError } from './contract.ts';
import { Slots } from './slots.ts';

describe('Slots: a bound on engine state', () => {
  it('hands out at most `size` slots; waiters get them in order as slots are released', async () => {
    const slots = new Slots(2, 10, 'engines');
    const a = await slots.acquire({ wait: true });
    const b = await slots.acquire({ wait: true });
    expect(slots.inUse).toBe(2);
    const order: string[] = [];
    const c = slots.acquire({ wait: true }).then((r) => (order.push('c'), r));
    const d = slots.acquire({ wait: true }).then((r) => (order.push('d'), r));
    a();
    a(); // idempotent: releasing twice frees one slot only
    const releaseC = await c;
    expect(order).toEqual(['c']);
    expect(slots.inUse).toBe(2);
    b();
    const releaseD = await d;
    expect(order).toEqual(['c', 'd']);
    releaseC();
    releaseD();
    expect(slots.inUse).toBe(0);
  });

  it('refuses as busy (503 temporarily_unavailable with Retry-After at the edge) when full and not waiting, or when the waiting line is full', async () => {
    const slots = new Slots(1, 1, 'speech engine processes');
    const held = await slots.acquire({ wait: false });
    const refused = await slots.acquire({ wait: false }).catch((e: unknown) => e);
    expect(isUpstreamError(refused) && refused.kind).toBe('busy');
    expect(isUpstreamError(refused) && refused.details.retryAfterSeconds).toBe(1);
    expect(String((refused as Error).message)).toMatch(/as many speech engine processes as it can \(1\)/);
    const waiting = slots.acquire({ wait: true });
    await expect(slots.acquire({ wait: true })).rejects.toMatchObject({ kind: 'busy' });
    held();
    (await waiting)();
    expect(slots.inUse).toBe(0);
  });

  it('a waiter whose signal aborts leaves the line with the signal reason, and takes no slot', async () => {
    const slots = new Slots(1, 5, 'engines');
    const held = await slots.acquire({ wait: true });
    const abort = new AbortController();
    const waiting = slots.acquire({ wait: true, signal: abort.signal });
    abort.abort(new Error('client went away'));
    await expect(waiting).rejects.toThrow('client went away');
    held();
    expect(slots.inUse).toBe(0);
    // The line is empty again: the next caller gets the free slot at once.
    const next = await slots.acquire({ wait: false });
    expect(slots.inUse).toBe(1);
    next();
  });

  it('resize lets waiters in when the bound grows', async () => {
    const slots = new Slots(1, 5, 'engines');
    const held = await slots.acquire({ wait: true });
    const waiting = slots.acquire({ wait: true });
    slots.resize(2);
    const second = await waiting;
    expect(slots.inUse).toBe(2);
    held();
    second();
  });

  it('tenant shares: alone a tenant uses every slot; it keeps at most its share of the line; freed slots go to the tenants in turn', async () => {
    const slots = new Slots(2, 4, 'speech engine processes', 1 / 2);
    const a1 = await slots.acquire({ wait: true, tenant: 'a' });
    const a2 = await slots.acquire({ wait: true, tenant: 'a' });
    expect(slots.inUse).toBe(2);
    const order: string[] = [];
    const waitFor = (tenant: string, name: string) => slots.acquire({ wait: true, tenant }).then((release) => (order.push(name), release));
    const a3 = waitFor('a', 'a3');
    const a4 = waitFor('a', 'a4');
    // Half of the line (2 of 4) is a's: its next one is refused at once, and b still finds a place.
    const refused = await slots.acquire({ wait: true, tenant: 'a' }).catch((e: unknown) => e);
    expect(isUpstreamError(refused) && refused.kind).toBe('busy');
    expect(String((refused as Error).message)).toMatch(/as many requests waiting for speech engine processes as one organization may \(2\)/);
    const b1 = waitFor('b', 'b1');
    // a was given both slots, b none: the freed slot goes to b, which came last.
    a1();
    const releaseB1 = await b1;
    expect(order).toEqual(['b1']);
    // b was served since: the next freed slot goes to a's first waiter.
    a2();
    const releaseA3 = await a3;
    expect(order).toEqual(['b1', 'a3']);
    releaseB1();
    const releaseA4 = await a4;
    expect(order).toEqual(['b1', 'a3', 'a4']);
    releaseA3();
    releaseA4();
    expect(slots.inUse).toBe(0);
    // With every waiter gone, a's share of the line is whole again.
    const again = await slots.acquire({ wait: false, tenant: 'a' });
    again();
  });

  it('callers that name no tenant wait in order, whatever the shares', async () => {
    const slots = new Slots(1, 4, 'engines', 1 / 2);
    const held = await slots.acquire({ wait: true });
    const order: string[] = [];
    const first = slots.acquire({ wait: true }).then((r) => (order.push('first'), r));
    const second = slots.acquire({ wait: true }).then((r) => (order.push('second'), r));
    const third = slots.acquire({ wait: true }).then((r) => (order.push('third'), r));
    held();
    (await first)();
    (await second)();
    (await third)();
    expect(order).toEqual(['first', 'second', 'third']);
  });
});
