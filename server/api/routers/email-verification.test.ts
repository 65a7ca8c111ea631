// Proving an email with SVC_SMTP_URL set: sign-up mails a link through a real SMTP dialogue
// (nodemailer talking to a scripted SMTP peer on loopback), the test reads the link out of
// the message received and follows it as the browser's page does (account.verifyEmail).
// Against a real database (SQLite, or PostgreSQL with TEST_DB=postgresql).
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMemoryRateLimiter } from '../../rate-limit/rate-limiter.ts';
import { startSmtpPeer, type SmtpPeer } from '../../../test/support/smtp-peer.ts';
import { createCredentialThrottle } from '../../auth/credential-throttle.ts';
import { ConfigError, loadConfig } from '../../config/env.ts';
import { createSmtpMailer, type Mailer } from '../../services/users/mailer.ts';
import { hashLinkToken } from '../../services/users/link-token.ts';
import { EMAIL_VERIFICATION_TTL_MS, sendVerificationEmail, verifyEmail } from '../../services/users/verify-email.ts';
import { createCaller } from '../root.ts';
import { createApiHarness, TEST_PASSWORD, type ApiHarness } from '../test-harness.ts';
import type { SessionUser } from '../trpc.ts';

let h: ApiHarness;
let smtp: SmtpPeer;
let mailer: Mailer;
let n = 0;
const FROM = 'svc test <no-reply@svc.test>';

beforeAll(async () => {
  h = await createApiHarness();
  smtp = await startSmtpPeer();
  // Credentials in the URL, as an operator would write SVC_SMTP_URL.
  mailer = createSmtpMailer({ smtpUrl: `smtp://mailuser:s3cret-pass@127.0.0.1:${smtp.port}`, from: FROM });
});
afterAll(async () => {
  mailer?.close();
  await smtp?.close();
  await h?.drop();
});

const email = (what: string) => `verify-${what}-${++n}@example.com`;
const throttle = createCredentialThrottle(createMemoryRateLimiter());
const withMail = (user: SessionUser | null) =>
  createCaller({ db: h.db, session: user ? { user } : null, requestedOrgId: null, credentialThrottle: throttle, mailer });
const userOf = async (address: string): Promise<SessionUser> => {
  const u = await h.db.prisma.user.findUniqueOrThrow({ where: { email: address } });
  return { id: u.id, email: u.email, name: u.name };
};
/** The link's token as the message carries it: {dashboard_url}/verify-email/<token>. */
const tokenIn = (text: string) => /\/verify-email\/([A-Za-z0-9_-]{43})\b/.exec(text)?.[1];

describe('email verification over SMTP', () => {
  it('sign-up mails a single-use link; following it verifies the email and only then applies the invitation waiting for it', async () => {
    const owner = await h.signUpUser(email('owner'));
    const address = email('new');
    await expect(owner.caller.orgs.addMember({ email: address })).resolves.toMatchObject({ status: 'invited' });

    await expect(withMail(null).auth.signUp({ email: address, password: TEST_PASSWORD })).resolves.toEqual({ email: address, verificationEmail: 'sent' });
    const mail = await smtp.nextMail();
    expect(mail).toMatchObject({ from: 'no-reply@svc.test', to: [address], authUser: 'mailuser' });
    expect(mail.headers.subject).toBe('Verify your email address');
    expect(mail.headers.from).toBe('svc test <no-reply@svc.test>');
    const token = tokenIn(mail.text);
    expect(token).toBeDefined();
    expect(mail.text).toContain(`/verify-email/${token}`);

    // Stored as its hash only, for 24 hours; the address is not verified, the invitation waits.
    const row = await h.db.prisma.emailToken.findFirstOrThrow({ where: { email: address } });
    expect(row.tokenHash).toBe(hashLinkToken(token!));
    expect(JSON.stringify(row)).not.toContain(token);
    expect(row.expiresAt.getTime() - row.createdAt.getTime()).toBe(EMAIL_VERIFICATION_TTL_MS);
    const user = await userOf(address);
    expect((await h.db.prisma.user.findUniqueOrThrow({ where: { id: user.id } })).emailVerifiedAt).toBeNull();
    expect((await withMail(user).orgs.mine()).orgs.map((o) => o.id)).not.toContain(owner.orgId);

    await expect(withMail(user).account.verifyEmail({ token: token! })).resolves.toEqual({ email: address, joinedOrgs: 1 });
    expect((await h.db.prisma.user.findUniqueOrThrow({ where: { id: user.id } })).emailVerifiedAt).toBeInstanceOf(Date);
    expect((await withMail(user).orgs.mine()).orgs).toContainEqual({ id: owner.orgId, name: expect.any(String), role: 'member' });
    await expect(withMail(user).account.me()).resolves.toMatchObject({ user: { emailVerified: true }, mailEnabled: true });

    // Single use.
    await expect(withMail(user).account.verifyEmail({ token: token! })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('not valid'),
    });
  });

  it('the link verifies only the account it was sent to: another signed-in account is refused and nothing changes', async () => {
    const address = email('target');
    await withMail(null).auth.signUp({ email: address, password: TEST_PASSWORD });
    const token = tokenIn((await smtp.nextMail()).text)!;
    const stranger = await h.signUpUser(email('stranger'), { verified: false });
    await expect(withMail(stranger.user).account.verifyEmail({ token })).rejects.toMatchObject({
      code: 'FORBIDDEN',
      message: expect.stringContaining('another account'),
    });
    expect((await h.db.prisma.user.findUniqueOrThrow({ where: { id: stranger.user.id } })).emailVerifiedAt).toBeNull();
    // Still usable by its account.
    await expect(withMail(await userOf(address)).account.verifyEmail({ token })).resolves.toMatchObject({ email: address });
  });

  it('an expired link is refused with a way forward, and a made-up one is not valid', async () => {
    const address = email('late');
    await withMail(null).auth.signUp({ email: address, password: TEST_PASSWORD });
    const token = tokenIn((await smtp.nextMail()).text)!;
    const user = await userOf(address);
    const later = new Date(Date.now() + EMAIL_VERIFICATION_TTL_MS + 60_000);
    await expect(verifyEmail(h.db, { token, userId: user.id, now: later })).rejects.toMatchObject({
      code: 'expired_token',
      message: expect.stringContaining('Send a new one'),
    });
    for (const bad of ['x'.repeat(43), 'short', `${token}x`]) {
      await expect(withMail(user).account.verifyEmail({ token: bad })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    }
    expect((await h.db.prisma.user.findUniqueOrThrow({ where: { id: user.id } })).emailVerifiedAt).toBeNull();
  });

  it('an SMTP server that refuses: the account is made, no live token is left, the link can be sent again; the log names neither password nor token', async () => {
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const address = email('refused');
      smtp.refuse = true;
      await expect(withMail(null).auth.signUp({ email: address, password: TEST_PASSWORD })).resolves.toEqual({ email: address, verificationEmail: 'failed' });
      const user = await userOf(address);
      expect(await h.db.prisma.emailToken.count({ where: { userId: user.id } })).toBe(0);
      await expect(withMail(user).account.sendVerificationEmail()).rejects.toMatchObject({
        code: 'SERVICE_UNAVAILABLE',
        message: expect.stringContaining('could not be sent'),
      });
      expect(logged).toHaveBeenCalled();
      expect(logged.mock.calls.flat().join(' ')).not.toMatch(/s3cret-pass|verify-email\//);

      smtp.refuse = false;
      await expect(withMail(user).account.sendVerificationEmail()).resolves.toMatchObject({ email: address });
      const token = tokenIn((await smtp.nextMail()).text)!;
      await expect(withMail(user).account.verifyEmail({ token })).resolves.toMatchObject({ email: address });
      // Verified now; and two link requests this minute were the most this address gets.
      await expect(sendVerificationEmail({ db: h.db, mailer, dashboardUrl: 'http://dash.test' }, { userId: user.id })).rejects.toMatchObject({
        code: 'conflict',
        message: 'Your email address is already verified.',
      });
      await expect(withMail(user).account.sendVerificationEmail()).rejects.toMatchObject({
        code: 'TOO_MANY_REQUESTS',
        message: expect.stringContaining('Too many verification emails'),
      });
    } finally {
      smtp.refuse = false;
      logged.mockRestore();
    }
  });

  it('without mail configured: sign-up sends nothing, and asking for a link says why it cannot', async () => {
    const received = smtp.received.length;
    const noMail = (user: SessionUser | null) =>
      createCaller({ db: h.db, session: user ? { user } : null, requestedOrgId: null, credentialThrottle: throttle, mailer: null });
    const address = email('nomail');
    await expect(noMail(null).auth.signUp({ email: address, password: TEST_PASSWORD })).resolves.toEqual({ email: address, verificationEmail: 'off' });
    await expect(noMail(await userOf(address)).account.sendVerificationEmail()).rejects.toMatchObject({
      code: 'SERVICE_UNAVAILABLE',
      message: expect.stringContaining('does not send email'),
    });
    expect(smtp.received.length).toBe(received);
  });
});

describe('mail configuration', () => {
  it('needs SVC_SMTP_URL and SVC_MAIL_FROM together, and says which is missing or wrong', () => {
    expect(loadConfig({}).mail).toBeUndefined();
    expect(loadConfig({ SVC_SMTP_URL: 'smtps://u:p@mail.example.com:465', SVC_MAIL_FROM: 'svc <no-reply@example.com>' }).mail).toEqual({
      smtpUrl: 'smtps://u:p@mail.example.com:465',
      from: 'svc <no-reply@example.com>',
    });
    expect(() => loadConfig({ SVC_SMTP_URL: 'smtp://mail.example.com' })).toThrow(/SVC_MAIL_FROM: required when SVC_SMTP_URL is set/);
    expect(() => loadConfig({ SVC_MAIL_FROM: 'no-reply@example.com' })).toThrow(/SVC_SMTP_URL: required when SVC_MAIL_FROM is set/);
    expect(() => loadConfig({ SVC_SMTP_URL: 'http://mail.example.com', SVC_MAIL_FROM: 'a@b.c' })).toThrow(
      /SVC_SMTP_URL: must be an smtp:\/\/ or smtps:\/\/ URL/,
    );
    expect(() => loadConfig({ SVC_SMTP_URL: 'http://mail.example.com', SVC_MAIL_FROM: 'a@b.c' })).toThrow(ConfigError);
  });
});
