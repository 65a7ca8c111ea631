// A refused input reaches the browser with the field it names (error.data.serviceParam), so a
// page can mark that field and word the message for people: the tRPC endpoint as the browser
// reaches it (real Requests, real database), read by the pages' own humanError.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { humanError } from '../../app/_lib/format.ts';
import { handleTrpcRequest } from './trpc-http.ts';
import { createApiHarness, type ApiHarness, type TestUser } from './test-harness.ts';

let h: ApiHarness;
let user: TestUser;

beforeAll(async () => {
  h = await createApiHarness();
  user = await h.signUpUser('fields@example.com');
});
afterAll(async () => {
  await h?.drop();
});

type RefusedData = { code: string; serviceCode: string | null; serviceParam: string | null };

/** The error as the page's tRPC client holds it: an Error with the answer's message and data (TRPCClientError). */
async function refused(path: string, input: unknown): Promise<Error & { data: RefusedData }> {
  const request = new Request(`http://dash.test/api/trpc/${path}`, {
    method: 'POST',
    body: JSON.stringify(input),
    headers: { 'content-type': 'application/json' },
  });
  const res = await handleTrpcRequest(request, async () => ({ db: h.db, session: { user: user.user }, requestedOrgId: null, mailer: null }));
  expect(res.status).toBe(400);
  const { error } = (await res.json()) as { error: { message: string; data: RefusedData } };
  return Object.assign(new Error(error.message), { data: error.data });
}

describe('refused input: the field it names, and the words a page shows', () => {
  it('voices.update with an empty name: serviceParam changes.name; the edit form says "Name must not be empty."', async () => {
    const error = await refused('voices.update', { id: 'voice_any', changes: { name: '   ' } });
    expect(error).toMatchObject({
      message: 'changes.name: must not be empty',
      data: { code: 'BAD_REQUEST', serviceCode: 'invalid_request', serviceParam: 'changes.name' },
    });
    expect(humanError(error, { 'changes.name': 'name', 'changes.language': 'language' })).toEqual({ field: 'name', message: 'Name must not be empty.' });
  });

  it('a message that is a description gets "must be" ("Language must be a language tag such as en or en-US.")', async () => {
    const error = await refused('voices.update', { id: 'voice_any', changes: { language: 'english!' } });
    expect(error.data.serviceParam).toBe('changes.language');
    expect(humanError(error, { 'changes.language': 'language' })).toEqual({
      field: 'language',
      message: 'Language must be a language tag such as en or en-US.',
    });
  });

  it('a field the page has no label for, or an error without one, is left as it is', async () => {
    const error = await refused('dicts.create', { name: '' });
    expect(error.data.serviceParam).toBe('name');
    expect(humanError(error, {})).toEqual({ field: null, message: error.message });
    expect(humanError(new Error('Something else.'), { name: 'name' })).toEqual({ field: null, message: 'Something else.' });
  });
});
