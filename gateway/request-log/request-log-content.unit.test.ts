// What of a body the request log keeps for an org that keeps content (textOf): never a
// credential, whether pasted into a prompt or handed out by a minting route's answer.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ACCESS_TOKEN_PREFIX, encodeClientSecret } from '../../server/services/keys/client-secret-format.ts';
import { CONTENT_MAX_CHARS } from './request-log.ts';
import { textOf } from './request-log-hooks.ts';

const serverSecret = randomBytes(32);
const claims = { orgId: 'org_1', keyHash: 'ab'.repeat(32), expiresAt: 1_800_000_000 };
const clientSecret = encodeClientSecret(serverSecret, { ...claims, session: { type: 'realtime' } });
const accessToken = encodeClientSecret(serverSecret, { ...claims, session: { grants: { tts: true, stt: false } } }, ACCESS_TOKEN_PREFIX);

describe('textOf', () => {
  it("masks a minted client secret and access token as the routes answer them, and the same pasted into a prompt's text", () => {
    expect(textOf({ token: accessToken }, 'application/json')).toBe('{"token":"at_[redacted]"}');
    expect(textOf({ value: clientSecret, expires_at: 1 }, 'application/json; charset=utf-8')).toBe('{"value":"ek_[redacted]","expires_at":1}');
    expect(textOf(`use ${accessToken} and ${clientSecret}.`, 'text/plain')).toBe('use at_[redacted] and ek_[redacted].');
  });

  it('masks one cut short by the length cap (its payload alone is no credential, but says whose it is)', () => {
    const text = `${'x '.repeat((CONTENT_MAX_CHARS - 20) / 2)}${accessToken}`;
    const kept = textOf(text, 'text/plain')!;
    expect(kept).toHaveLength(CONTENT_MAX_CHARS - 20 + 'at_[redacted]'.length);
    expect(kept.endsWith(' at_[redacted]')).toBe(true);
  });

  it('leaves words that merely start alike', () => {
    const text = 'what_eyJ is at_home.jpg, ek_1.2 and flat_eyJx.y';
    expect(textOf(text, 'text/plain')).toBe(text);
  });
});
