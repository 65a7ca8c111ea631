// The dashboard's mailer: one per process, made on first use from SVC_SMTP_URL and
// SVC_MAIL_FROM; null when they are unset (the server sends no mail).
import { loadConfig } from '../config/env.ts';
import { createSmtpMailer, type Mailer } from '../services/users/mailer.ts';

// On globalThis, not in a module variable: Next may evaluate this module once per route bundle.
const holder = globalThis as typeof globalThis & { __svcMailer?: Mailer | null };

export function getMailer(): Mailer | null {
  if (holder.__svcMailer !== undefined) return holder.__svcMailer;
  const { mail } = loadConfig();
  return (holder.__svcMailer = mail ? createSmtpMailer(mail) : null);
}
