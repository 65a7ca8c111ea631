// Outgoing mail over SMTP (nodemailer), used only when SVC_SMTP_URL is set. The URL may carry
// credentials: it is handed to nodemailer and never logged; nodemailer's own logger is off.
import nodemailer from 'nodemailer';

export interface OutgoingMail {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  /** Resolves once the SMTP server accepted the message; rejects otherwise. */
  send(mail: OutgoingMail): Promise<void>;
  close(): void;
}

export function createSmtpMailer(config: { smtpUrl: string; from: string }): Mailer {
  const transport = nodemailer.createTransport(config.smtpUrl, {
    // Sign-up waits for the hand-over; an SMTP server that does not answer must not hold it
    // for nodemailer's default minutes.
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 30_000,
    logger: false,
  });
  return {
    async send(mail) {
      try {
        await transport.sendMail({ from: config.from, to: mail.to, subject: mail.subject, text: mail.text });
      } catch (e) {
        // For the operator: the SMTP server's answer, never the message (it holds a link's token).
        console.error(`SMTP delivery failed: ${(e as Error).message}`);
        throw e;
      }
    },
    close: () => transport.close(),
  };
}
