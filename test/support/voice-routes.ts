// Shared pieces of the voice-library tests: a gateway with the local TTS engines, a second
// org and key, clips spoken by the local engines, and small HTTP helpers.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from './gateway-harness.ts';
import { until } from './poll.ts';

export const LONG_TEXT =
  'Good morning, and thank you for calling the support line. My name is Alex, and I will help you today. ' +
  'Please tell me your account number, and then describe the problem you are having with your order. ' +
  'If you prefer, I can also send you a text message with a link to track the delivery.';

/** A WAV clip of a local engine's voice: flite (`slt`, `rms`...) or espeak-ng (`en-us+f3`...). */
export function speak(engine: 'flite' | 'espeak-ng', voice: string, text = LONG_TEXT): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'svc-clip-'));
  try {
    const out = join(dir, 'clip.wav');
    if (engine === 'flite') execFileSync('flite', ['-voice', voice, '-o', out, text]);
    else execFileSync('espeak-ng', ['-v', voice, '-w', out, text]);
    return readFileSync(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface OtherOrg {
  orgId: string;
  headers: Record<string, string>;
}

export async function otherOrg(h: GatewayHarness): Promise<OtherOrg> {
  const org = await createOrg(h.testDb.db, { name: 'other org', creditsMicros: 10_000_000n });
  const key = await createApiKey(h.testDb.db.prisma, { orgId: org.id, name: 'other', rateLimitRpm: 100_000 });
  return { orgId: org.id, headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' } };
}

export async function call(
  h: GatewayHarness,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = h.headers,
): Promise<{ status: number; body: any; res: Response }> {
  const res = await fetch(`${h.url}${path}`, {
    method,
    headers: body === undefined ? { authorization: headers.authorization! } : headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, body: parsed, res };
}

/** POST /voices/clone as multipart. */
export async function cloneMultipart(h: GatewayHarness, clip: Buffer, fields: Record<string, string>, headers: Record<string, string> = h.headers) {
  const form = new FormData();
  form.set('file', new Blob([new Uint8Array(clip)], { type: 'audio/wav' }), 'clip.wav');
  for (const [k, v] of Object.entries(fields)) form.set(k, v);
  const res = await fetch(`${h.url}/voices/clone`, { method: 'POST', headers: { authorization: headers.authorization! }, body: form });
  return { status: res.status, body: (await res.json()) as any };
}

export async function uploadBlob(h: GatewayHarness, clip: Buffer, headers: Record<string, string> = h.headers) {
  const res = await fetch(`${h.url}/blobs`, {
    method: 'POST',
    headers: { authorization: headers.authorization!, 'content-type': 'audio/wav' },
    body: new Uint8Array(clip),
  });
  return { status: res.status, body: (await res.json()) as any };
}

/** Polls GET /jobs/{id} until it is no longer queued or running. */
export async function waitForJob(h: GatewayHarness, jobId: string, headers: Record<string, string> = h.headers, timeoutMs = 20_000): Promise<any> {
  let last = 'unseen';
  return until(
    `job ${jobId} to finish`,
    async () => {
      const { body } = await call(h, 'GET', `/jobs/${jobId}`, undefined, headers);
      last = body.status;
      return body.status === 'succeeded' || body.status === 'failed' ? body : undefined;
    },
    { timeoutMs, seen: () => `still ${last}` },
  );
}
