// The dashboard's tRPC endpoint as the browser reaches it (the handler behind
// app/api/trpc/[trpc]/route.ts, fed real Requests), against a real database: batches beyond
// 10 calls and bodies beyond 1 MiB are refused before any procedure runs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WINDOW_MS, createMemoryRateLimiter } from '../rate-limit/rate-limiter.ts';
import { manualClock } from '../../test/support/manual-clock.ts';
import { createTestDatabase, type TestDatabase } from '../../test/support/test-database.ts';
import { createCredentialThrottle } from '../auth/credential-throttle.ts';
import { MAX_BATCH_CALLS, MAX_BODY_BYTES, handleTrpcRequest } from './trpc-http.ts';
import type { TrpcContext } from './trpc.ts';

let t: TestDatabase;
let context: () => Promise<TrpcContext>;

beforeAll(async () => {
  t = await createTestDatabase();
  // Limits out of the way: this file is about the endpoint's bounds, not the throttle's.
  const roomy = { perEmail: 1000, perAddress: 1000, unknownAddresses: 1000 };
  const credentialThrottle = createCredentialThrottle(createMemoryRateLimiter(), { limits: { sign_in: roomy, sign_up: roomy, verification_mail: roomy } });
  context = async () => ({ db: t.db, session: null, requestedOrgId: null, clientIp: '192.0.2.10', credentialThrottle, mailer: null });
});
afterAll(async () => {
  await t?.drop();
});

const BASE = 'http://dash.test/api/trpc';
const post = (path: string, body: BodyInit, headers: Record<string, string> = {}) =>
  handleTrpcRequest(
    new Request(`${BASE}/${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers }, duplex: 'half' } as RequestInit),
    context,
  );

/** A batch of `n` signUp calls with distinct emails, as httpBatchLink would send it. */
function signUpBatch(n: number) {
  const inputs = Object.fromEntries(Array.from({ length: n }, (_, i) => [i, { email: `batch-${n}-${i}@example.com`, password: 'correct horse battery' }]));
  return post(`${Array.from({ length: n }, () => 'auth.signUp').join(',')}?batch=1`, JSON.stringify(inputs));
}

describe('tRPC batches', () => {
  it.each([11, 1000])('a batch of %i signUp calls is refused whole with 400, creating no account', async (n) => {
    const res = await signUpBatch(n);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: {
        message: `A request may carry at most ${MAX_BATCH_CALLS} calls; this one carries ${n}. Send them in several requests.`,
        data: { code: 'BAD_REQUEST', httpStatus: 400 },
      },
    });
    expect(await t.db.prisma.user.count({ where: { email: { startsWith: `batch-${n}-` } } })).toBe(0);
  });

  it('a batch of 10 is served, each call answered', async () => {
    const inputs = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [i, { email: `short-${i}@example.com`, password: 'short' }]));
    const res = await post(`${Array.from({ length: 10 }, () => 'auth.signUp').join(',')}?batch=1`, JSON.stringify(inputs));
    const body = (await res.json()) as Array<{ error?: { message: string } }>;
    expect(body).toHaveLength(10);
    expect(body.every((r) => r.error?.message === 'Password must be at least 8 characters.')).toBe(true);
  });

  it('a single call still works', async () => {
    const res = await post('auth.signUp', JSON.stringify({ email: 'single@example.com', password: 'correct horse battery' }));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ result: { data: { email: 'single@example.com', verificationEmail: 'off' } } });
  });
});

describe('tRPC body size', () => {
  const big = (bytes: number) => JSON.stringify({ email: 'big@example.com', password: 'x'.repeat(bytes) });

  it('a body declared larger than 1 MiB is refused with 413 before it is read', async () => {
    const res = await post('auth.signUp', big(MAX_BODY_BYTES));
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({
      error: { message: 'The request body is larger than 1 MiB, the most this endpoint reads.', data: { code: 'PAYLOAD_TOO_LARGE', httpStatus: 413 } },
    });
  });

  it('a streamed body without Content-Length is cut off at 1 MiB too', async () => {
    const chunk = new Uint8Array(64 * 1024).fill(0x20);
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        // 32 MiB on offer: the handler must stop reading long before the end.
        if (sent >= 32 * 1024 * 1024) return controller.close();
        sent += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    const res = await post('auth.signUp', stream);
    expect(res.status).toBe(413);
    expect(sent).toBeLessThan(2 * MAX_BODY_BYTES);
  });

  it('a dictionary save may be larger (the API takes 8 MiB for one): it passes the cap and reaches the procedure', async () => {
    const res = await post('dicts.update', JSON.stringify({ id: 'dict_x', entries: [{ grapheme: 'a', alias: 'b'.repeat(2 * MAX_BODY_BYTES) }] }));
    // No session: the procedure's own answer, not the size refusal.
    expect(res.status).toBe(401);
  });
});

describe('tRPC refusals that pass with time', () => {
  it('say when to retry in the error data (retryAfterSeconds), the tRPC edge\u2019s way of Retry-After', async () => {
    // 45.5 s into a one-minute window: the next window opens in 15 s (rounded up).
    const clock = manualClock(31_000_000 * WINDOW_MS + 45_500);
    const oneSignUp = { perEmail: 1, perAddress: 1000, unknownAddresses: 1000 };
    const credentialThrottle = createCredentialThrottle(createMemoryRateLimiter(clock), {
      limits: { sign_in: oneSignUp, sign_up: oneSignUp, verification_mail: oneSignUp },
    });
    const throttled = async (): Promise<TrpcContext> => ({ ...(await context()), credentialThrottle });
    const signUp = () =>
      handleTrpcRequest(
        new Request(`${BASE}/auth.signUp`, {
          method: 'POST',
          body: JSON.stringify({ email: 'hasty@example.com', password: 'correct horse battery' }),
          headers: { 'content-type': 'application/json' },
        }),
        throttled,
      );
    expect((await signUp()).status).toBe(200);
    const refused = await signUp();
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({
      error: {
        message: 'Too many sign-ups. Try again in 15 seconds.',
        data: { code: 'TOO_MANY_REQUESTS', serviceCode: 'rate_limit_exceeded', serviceParam: 'email', retryAfterSeconds: 15 },
      },
    });
  });
});
