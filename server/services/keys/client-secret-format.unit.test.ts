// Realtime client secrets as records of themselves: what a secret carries survives the trip, and
// anything not minted with the server's secret, or changed since, reads as nothing.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ACCESS_TOKEN_PREFIX, decodeClientSecret, encodeClientSecret, isAccessToken, isClientSecret, type ClientSecretClaims } from './client-secret-format.ts';

const serverSecret = randomBytes(32);
const claims: ClientSecretClaims = {
  orgId: 'org_1',
  keyHash: 'ab'.repeat(32),
  expiresAt: 1_800_000_000,
  session: { type: 'realtime', model: 'local-realtime', instructions: 'Be brief. «ünïcode»' },
};

describe('client secrets', () => {
  it('carry their claims, and two minted alike differ', () => {
    const a = encodeClientSecret(serverSecret, claims);
    expect(isClientSecret(a)).toBe(true);
    expect(a).toMatch(/^ek_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(decodeClientSecret(serverSecret, a)).toEqual(claims);
    expect(encodeClientSecret(serverSecret, claims)).not.toBe(a);
  });

  it('read as nothing when altered, truncated, signed with another secret, or not one at all', () => {
    const s = encodeClientSecret(serverSecret, claims);
    const dot = s.indexOf('.');
    const flip = (i: number) => `${s.slice(0, i)}${s[i] === 'A' ? 'B' : 'A'}${s.slice(i + 1)}`;
    expect(decodeClientSecret(serverSecret, flip(5))).toBeNull();
    expect(decodeClientSecret(serverSecret, flip(dot + 3))).toBeNull();
    expect(decodeClientSecret(serverSecret, s.slice(0, -2))).toBeNull();
    expect(decodeClientSecret(serverSecret, s.slice(0, dot))).toBeNull();
    expect(decodeClientSecret(randomBytes(32), s)).toBeNull();
    expect(decodeClientSecret(serverSecret, `sk_svc_${s.slice(3)}`)).toBeNull();
    expect(decodeClientSecret(serverSecret, `ek_${'x'.repeat(9000)}`)).toBeNull();
    // A validly signed payload that is not a secret's.
    expect(decodeClientSecret(serverSecret, 'ek_.')).toBeNull();
  });

  it('access tokens are the same record under their own prefix, and neither kind passes for the other', () => {
    const grants = { ...claims, session: { grants: { tts: true, stt: false } } };
    const token = encodeClientSecret(serverSecret, grants, ACCESS_TOKEN_PREFIX);
    expect(isAccessToken(token) && !isClientSecret(token)).toBe(true);
    expect(decodeClientSecret(serverSecret, token, ACCESS_TOKEN_PREFIX)).toEqual(grants);
    expect(decodeClientSecret(serverSecret, token)).toBeNull();
    const secret = encodeClientSecret(serverSecret, grants);
    expect(decodeClientSecret(serverSecret, `${ACCESS_TOKEN_PREFIX}${secret.slice(3)}`, ACCESS_TOKEN_PREFIX)).toBeNull();
    expect(decodeClientSecret(serverSecret, `ek_${token.slice(3)}`)).toBeNull();
  });
});
