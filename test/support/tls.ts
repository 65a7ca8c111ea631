// A self-signed certificate for tests that need TLS (the gateway with SVC_TLS_CERT/SVC_TLS_KEY,
// and clients that force `https:`/`wss:` whatever their base URL says: the Cartesia SDK's TTS
// socket, OpenAI's realtime client, LiveKit's Cartesia synthesizer).
//
//   const tls = await makeTestCertificate();
//   startGateway({ env: { SVC_TLS_CERT: tls.certPath, SVC_TLS_KEY: tls.keyPath } });
//   new WebSocket('wss://127.0.0.1:…', { ca: tls.ca });          // ws: the client's `ca` option
//   new Agent({ connect: { ca: tls.ca } });                        // undici
//   spawn(node, …, { env: { NODE_EXTRA_CA_CERTS: tls.certPath } }) // a client that takes no `ca`
//
// Made at test time by Debian's `openssl` (RSA 2048, valid 2 days) for the names `localhost`
// and `127.0.0.1`; the certificate is its own CA, so trusting it is trusting `ca`. Each call
// makes a fresh pair in its own temporary directory; `remove()` deletes it.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

export interface TestCertificate {
  /** PEM certificate file (the value for SVC_TLS_CERT or NODE_EXTRA_CA_CERTS). */
  certPath: string;
  /** PEM private key file, unencrypted (SVC_TLS_KEY). */
  keyPath: string;
  /** The certificate as a PEM string: what a client's `ca` option takes to trust it. */
  ca: string;
  /** Deletes the directory holding both files. */
  remove(): Promise<void>;
}

export async function makeTestCertificate(): Promise<TestCertificate> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-tls-'));
  const certPath = join(dir, 'cert.pem');
  const keyPath = join(dir, 'key.pem');
  // prettier-ignore
  await promisify(execFile)('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2',
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
    '-keyout', keyPath, '-out', certPath,
  ], { timeout: 30_000 });
  return { certPath, keyPath, ca: await readFile(certPath, 'utf8'), remove: () => rm(dir, { recursive: true, force: true }) };
}
