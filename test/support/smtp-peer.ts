// A scripted SMTP server on loopback for tests (RFC 5321's dialogue, no TLS): it accepts
// every message, keeps what it received, and can be told to refuse the next ones. Enough for
// nodemailer to deliver a real message over a real socket; not a mail server.
import { createServer, type Server, type Socket } from 'node:net';

export interface ReceivedMail {
  from: string;
  to: string[];
  /** The raw message as sent (headers and body, dot-stuffing removed). */
  raw: string;
  headers: Record<string, string>;
  /** The body decoded from its Content-Transfer-Encoding (7bit, quoted-printable or base64). */
  text: string;
  /** The AUTH PLAIN user, when the client authenticated. */
  authUser: string | null;
}

export interface SmtpPeer {
  url: string;
  port: number;
  received: ReceivedMail[];
  /** Resolves with the next message received (or one already received and not yet taken). */
  nextMail(): Promise<ReceivedMail>;
  /** While true, every message is refused at DATA's end with 554. */
  refuse: boolean;
  close(): Promise<void>;
}

export async function startSmtpPeer(): Promise<SmtpPeer> {
  const received: ReceivedMail[] = [];
  let taken = 0;
  const waiters: Array<(m: ReceivedMail) => void> = [];
  const sockets = new Set<Socket>();
  const peer = { refuse: false } as SmtpPeer;

  const deliver = (mail: ReceivedMail) => {
    received.push(mail);
    const waiter = waiters.shift();
    if (waiter) {
      taken++;
      waiter(mail);
    }
  };

  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.setEncoding('utf8');
    const reply = (line: string) => socket.write(`${line}\r\n`);
    let buffer = '';
    let inData = false;
    let data: string[] = [];
    let from = '';
    let to: string[] = [];
    let authUser: string | null = null;
    reply('220 smtp-peer.test ESMTP ready');
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      let at: number;
      while ((at = buffer.indexOf('\r\n')) >= 0) {
        const line = buffer.slice(0, at);
        buffer = buffer.slice(at + 2);
        if (inData) {
          if (line === '.') {
            inData = false;
            if (peer.refuse) {
              reply('554 5.7.1 refused by the test');
            } else {
              const raw = data.join('\r\n');
              deliver({ from, to, raw, ...parseMessage(raw), authUser });
              reply('250 2.0.0 queued');
            }
            data = [];
          } else {
            data.push(line.startsWith('..') ? line.slice(1) : line);
          }
          continue;
        }
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === 'EHLO') reply('250-smtp-peer.test\r\n250-AUTH PLAIN\r\n250-8BITMIME\r\n250 SMTPUTF8');
        else if (verb === 'HELO') reply('250 smtp-peer.test');
        else if (verb === 'AUTH') {
          const [, mech, initial] = line.split(' ');
          if (mech?.toUpperCase() !== 'PLAIN' || !initial) reply('504 5.5.4 only AUTH PLAIN with an initial response');
          else {
            authUser = Buffer.from(initial, 'base64').toString('utf8').split('\u0000')[1] ?? null;
            reply('235 2.7.0 authenticated');
          }
        } else if (verb === 'MAIL') {
          from = /<([^>]*)>/.exec(line)?.[1] ?? '';
          to = [];
          reply('250 2.1.0 ok');
        } else if (verb === 'RCPT') {
          to.push(/<([^>]*)>/.exec(line)?.[1] ?? '');
          reply('250 2.1.5 ok');
        } else if (verb === 'DATA') {
          inData = true;
          reply('354 end with <CRLF>.<CRLF>');
        } else if (verb === 'RSET') {
          from = '';
          to = [];
          reply('250 2.0.0 ok');
        } else if (verb === 'NOOP') reply('250 2.0.0 ok');
        else if (verb === 'QUIT') {
          reply('221 2.0.0 bye');
          socket.end();
        } else reply('502 5.5.2 not implemented');
      }
    });
    socket.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return Object.assign(peer, {
    url: `smtp://127.0.0.1:${port}`,
    port,
    received,
    nextMail() {
      if (taken < received.length) return Promise.resolve(received[taken++]!);
      return new Promise<ReceivedMail>((resolve) => waiters.push(resolve));
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

function parseMessage(raw: string): { headers: Record<string, string>; text: string } {
  const split = raw.indexOf('\r\n\r\n');
  const head = split >= 0 ? raw.slice(0, split) : raw;
  const body = split >= 0 ? raw.slice(split + 4) : '';
  const headers: Record<string, string> = {};
  // Folded header lines continue with whitespace.
  for (const line of head.replace(/\r\n[ \t]+/g, ' ').split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  const encoding = (headers['content-transfer-encoding'] ?? '7bit').toLowerCase();
  let text = body;
  if (encoding === 'quoted-printable') {
    text = body.replace(/=\r\n/g, '').replace(/=([0-9A-F]{2})/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
  } else if (encoding === 'base64') {
    text = Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  }
  return { headers, text: text.replace(/\r\n/g, '\n') };
}
