// TLS served by the gateway itself (SVC_TLS_CERT / SVC_TLS_KEY): HTTPS and WSS on the one port,
// with a self-signed certificate made for the test (test/support/tls.ts) and trusted by each
// client through its own `ca` option. Also: the dashboard's proxy reaches a TLS gateway, and a
// configuration with one variable without the other, an unreadable file or a key that does not
// match the certificate stops the start with a message naming the variables.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { ConfigError, loadConfig } from '../server/config/env.ts';
import { gatewayInternalUrl, proxyToGateway } from '../server/api/gateway-proxy.ts';
import { getOrCreateDashboardKey } from '../server/services/keys/get-dashboard-key.ts';
import type { GatewayHarness } from '../test/support/gateway-harness.ts';
import { socketEvents } from '../test/support/socket-events.ts';
import { settleRecognizers, s16le, speech, startSttGateway, trimSilence, wavFile, wer, wsUrl, type SttEvent } from '../test/support/stt-routes.ts';
import { ROOT } from '../test/support/svc-process.ts';
import { makeTestCertificate, type TestCertificate } from '../test/support/tls.ts';
import { createGatewayRuntime } from './runtime.ts';

const FOX = 'the quick brown fox jumps over the lazy dog';

let cert: TestCertificate;
let other: TestCertificate; // a second pair: its key does not match `cert`
let h: GatewayHarness;
let trusting: Agent;

beforeAll(async () => {
  [cert, other] = await Promise.all([makeTestCertificate(), makeTestCertificate()]);
  h = await startSttGateway({ env: { SVC_TLS_CERT: cert.certPath, SVC_TLS_KEY: cert.keyPath } });
  trusting = new Agent({ connect: { ca: cert.ca } });
  await speech(FOX);
}, 60_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
  await trusting?.close();
  await Promise.all([cert?.remove(), other?.remove()]);
});

const port = () => Number(new URL(h.url).port);

describe('a gateway with SVC_TLS_CERT and SVC_TLS_KEY', () => {
  it('listens for HTTPS: a client trusting the certificate gets its answer over TLS', async () => {
    expect(h.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const res = await undiciFetch(`${h.url}/v1/models`, { headers: { authorization: `Bearer ${h.key}` }, dispatcher: trusting });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: { id: string }[] }).data.map((m) => m.id)).toContain('local-stt');
  });

  it('serves the certificate it was given: a client that does not trust it refuses the connection', async () => {
    const err = await fetch(`${h.url}/health`).then(
      () => null,
      (e: Error & { cause?: { code?: string } }) => e,
    );
    expect(err?.cause?.code).toBe('DEPTH_ZERO_SELF_SIGNED_CERT');
  });

  it('speaks no plain HTTP on that port', async () => {
    const outcome = await new Promise<string>((resolve) => {
      const req = httpRequest({ host: '127.0.0.1', port: port(), path: '/health' });
      req.once('response', (res) => {
        res.resume();
        resolve(`answered ${res.statusCode}`);
      });
      req.once('error', (err: NodeJS.ErrnoException) => resolve(`refused: ${err.code}`));
      req.end();
    });
    expect(outcome).toBe('refused: ECONNRESET');
  });

  it('runs a WSS /stt/websocket session: speech in, the spoken words out', async () => {
    const audio = s16le(trimSilence((await speech(FOX)).samples));
    const ws = new WebSocket(wsUrl(h, { model: 'local-stt', sample_rate: '16000' }), { headers: { authorization: `Bearer ${h.key}` }, ca: cert.ca });
    expect(ws.url).toMatch(/^wss:/);
    const { log, closed } = socketEvents<SttEvent>(ws);
    const { events } = log;
    await once(ws, 'open');
    // 100 ms frames, all at once: the session takes audio as fast as it comes.
    for (let at = 0; at < audio.length; at += 3200) ws.send(audio.subarray(at, at + 3200));
    ws.send(JSON.stringify({ type: 'finalize' }));
    await log.first((e) => e.type === 'flush_done');
    const text = events
      .filter((e) => e.type === 'transcript' && e.is_final === true)
      .map((e) => e.text as string)
      .join(' ');
    expect(wer(FOX, text), text).toBeLessThanOrEqual(0.25);
    ws.send(JSON.stringify({ type: 'close' }));
    expect((await closed).code).toBe(1000);
    expect(events[0]?.type).toBe('session.started');
  });

  it('the dashboard proxy reaches it at its public URL (the name on the certificate) and passes the answer through', async () => {
    const config = { gatewayHost: '0.0.0.0', gatewayPort: port(), publicBaseUrl: `https://localhost:${port()}`, tls: h.runtime.ctx.config.tls };
    const gatewayUrl = gatewayInternalUrl(config);
    expect(gatewayUrl).toBe(`https://localhost:${port()}`);
    // Without TLS the same configuration is reached over loopback, as before.
    expect(gatewayInternalUrl({ ...config, tls: undefined })).toBe(`http://127.0.0.1:${port()}`);

    const form = new FormData();
    form.set('model', 'local-stt');
    form.set('file', new Blob([new Uint8Array(wavFile([(await speech(FOX)).samples], 16000))], { type: 'audio/wav' }), 'fox.wav');
    const request = new Request('http://dash.example:3000/api/gateway/v1/audio/transcriptions', { method: 'POST', body: form });
    const res = await proxyToGateway(request, ['v1', 'audio', 'transcriptions'], {
      gatewayUrl,
      resolveOrg: async () => ({ orgId: h.orgId }),
      keyFor: (orgId) => getOrCreateDashboardKey(h.testDb.db, orgId),
      // The dashboard trusts the certificate through NODE_EXTRA_CA_CERTS; a test process, through its agent.
      fetch: ((url: string, init: RequestInit) => undiciFetch(url, { ...(init as object), dispatcher: trusting })) as unknown as typeof fetch,
    });
    const body = await res.text();
    expect(res.status, body).toBe(200);
    expect(wer(FOX, (JSON.parse(body) as { text: string }).text)).toBeLessThanOrEqual(0.25);
  });
});

describe('TLS configuration errors stop the start, naming the variables', () => {
  it('one variable without the other', () => {
    expect(() => loadConfig({ SVC_TLS_CERT: cert.certPath })).toThrow(ConfigError);
    expect(() => loadConfig({ SVC_TLS_CERT: cert.certPath })).toThrow(
      /SVC_TLS_KEY: required when SVC_TLS_CERT is set \(TLS needs both SVC_TLS_CERT and SVC_TLS_KEY/,
    );
    expect(() => loadConfig({ SVC_TLS_KEY: cert.keyPath })).toThrow(
      /SVC_TLS_CERT: required when SVC_TLS_KEY is set \(TLS needs both SVC_TLS_CERT and SVC_TLS_KEY/,
    );
    // Empty is unset: neither is plain HTTP.
    expect(loadConfig({ SVC_TLS_CERT: '', SVC_TLS_KEY: '' }).tls).toBeUndefined();
  });

  it('a file that cannot be read', () => {
    const missing = join(tmpdir(), 'no-such-dir-svc', 'cert.pem');
    expect(() => loadConfig({ SVC_TLS_CERT: missing, SVC_TLS_KEY: cert.keyPath })).toThrow(`SVC_TLS_CERT: cannot read ${missing} (ENOENT)`);
  });

  it('TLS makes the default public URL https', () => {
    expect(loadConfig({ SVC_TLS_CERT: cert.certPath, SVC_TLS_KEY: cert.keyPath, GATEWAY_PORT: '8443' }).publicBaseUrl).toBe('https://localhost:8443');
    expect(loadConfig({ GATEWAY_PORT: '8443' }).publicBaseUrl).toBe('http://localhost:8443');
  });

  it.each([
    [
      'a key that does not belong to the certificate',
      () => ({ certPath: cert.certPath, keyPath: other.keyPath }),
      /SVC_TLS_CERT \/ SVC_TLS_KEY: .* must be a PEM certificate and its PEM private key/,
    ],
    [
      'the certificate and key swapped',
      () => ({ certPath: cert.keyPath, keyPath: cert.certPath }),
      /SVC_TLS_CERT \/ SVC_TLS_KEY: .* must be a PEM certificate and its PEM private key/,
    ],
    ['a directory as the key', () => ({ certPath: cert.certPath, keyPath: tmpdir() }), /SVC_TLS_CERT \/ SVC_TLS_KEY: cannot read .* \(EISDIR\)/],
  ])('%s: the runtime refuses to start', async (_name, paths, message) => {
    const config = loadConfig({ SVC_DATA_DIR: join(tmpdir(), 'svc-tls-unused') });
    config.tls = paths();
    // Refused before the database is opened: nothing to clean up.
    await expect(createGatewayRuntime(config, { logger: false })).rejects.toThrow(message);
  });

  it('`svc gateway` with SVC_TLS_CERT alone exits 1 with the message', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'svc-tls-cli-'));
    try {
      const child = spawn(process.execPath, [join(ROOT, 'bin/svc.mjs'), 'gateway'], {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '/tmp',
          SVC_DATA_DIR: dataDir,
          SVC_TLS_CERT: cert.certPath,
        } as unknown as NodeJS.ProcessEnv,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      child.stdout!.resume();
      const [code] = (await once(child, 'close')) as [number | null];
      expect(code, stderr).toBe(1);
      expect(stderr).toContain('svc: invalid configuration:\n  SVC_TLS_KEY: required when SVC_TLS_CERT is set (TLS needs both SVC_TLS_CERT and SVC_TLS_KEY');
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
