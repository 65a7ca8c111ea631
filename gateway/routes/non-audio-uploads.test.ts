// Files that are not audio, sent where audio is expected: the transcription, clone and blob
// routes refuse them with 400 unsupported_audio_format and a message that says the file is not
// a WAV file and what it looks like, before anything is billed. (Raw PCM has no magic bytes:
// before, a .txt was transcribed as "0.00 s of audio" and a clone said "the clip is 0.0 s long".)
// Real gateway over HTTP, local engines, throw-away database (TEST_DB=postgresql for PostgreSQL).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { ledgerRowCount, settleRecognizers, startSttGateway, transcribe } from '../../test/support/stt-routes.ts';
import { expectError, startTtsGateway } from '../../test/support/tts-routes.ts';
import { cloneMultipart, speak } from '../../test/support/voice-routes.ts';

const NOTES = Buffer.from('Meeting notes\nBring the slides for Monday and the budget for the new studio microphones.\n');
const PNG = Buffer.concat([Buffer.from('\x89PNG\r\n\x1a\n\0\0\0\rIHDR', 'latin1'), Buffer.alloc(64, 7)]);

let stt: GatewayHarness;
let tts: GatewayHarness;

beforeAll(async () => {
  [stt, tts] = await Promise.all([startSttGateway(), startTtsGateway()]);
}, 60_000);

afterAll(async () => {
  await settleRecognizers();
  await Promise.all([stt?.close(), tts?.close()]);
});

describe('POST /v1/audio/transcriptions with a file that is not audio', () => {
  it.each([
    ['a .txt', NOTES, 'notes.txt', /not a WAV file: it is text, not audio/],
    ['text renamed .wav', NOTES, 'fake.wav', /not a WAV file: it is text, not audio/],
    ['a PNG renamed .wav', PNG, 'fake.wav', /not a WAV file: it is a PNG image, not audio/],
  ])('%s -> 400 unsupported_audio_format, nothing billed', async (_name, bytes, filename, message) => {
    const [balance, rows] = [await stt.balanceMicros(), await ledgerRowCount(stt)];
    const error = await expectError(await transcribe(stt, bytes, { model: 'local-stt' }, { filename }), {
      status: 400,
      code: 'unsupported_audio_format',
      param: 'file',
    });
    expect(error.message).toMatch(message);
    expect(await stt.balanceMicros()).toBe(balance);
    expect(await ledgerRowCount(stt)).toBe(rows);
  });

  it('real speech as a WAV file is still transcribed (the check does not refuse audio)', async () => {
    const res = await transcribe(stt, speak('flite', 'slt', 'Good morning and thank you for calling.'), { model: 'local-stt' });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { text: string }).text.length).toBeGreaterThan(0);
  });
});

describe('POST /voices/clone and POST /blobs with a file that is not audio', () => {
  it.each([
    ['text renamed .wav', NOTES, /not a WAV file: it is text, not audio/],
    ['a PNG renamed .wav', PNG, /not a WAV file: it is a PNG image, not audio/],
  ])('clone from %s -> 400 unsupported_audio_format, no voice made', async (_name, bytes, message) => {
    const before = await tts.testDb.db.prisma.voice.count({ where: { orgId: tts.orgId } });
    const { status, body } = await cloneMultipart(tts, bytes, { name: 'Not a voice', language: 'en' });
    expect({ status, code: body.error?.code, param: body.error?.param }).toEqual({ status: 400, code: 'unsupported_audio_format', param: 'file' });
    expect(body.error.message).toMatch(message);
    expect(await tts.testDb.db.prisma.voice.count({ where: { orgId: tts.orgId } })).toBe(before);
  });

  it('a blob upload of text (multipart, or raw as application/octet-stream) -> 400 unsupported_audio_format, nothing stored', async () => {
    const form = new FormData();
    form.set('file', new Blob([new Uint8Array(NOTES)]), 'notes.wav');
    const multipart = await fetch(`${tts.url}/blobs`, { method: 'POST', headers: { authorization: tts.headers.authorization! }, body: form });
    const raw = await fetch(`${tts.url}/blobs?sample_rate=16000`, {
      method: 'POST',
      headers: { authorization: tts.headers.authorization!, 'content-type': 'application/octet-stream' },
      body: new Uint8Array(NOTES),
    });
    for (const res of [multipart, raw]) {
      const error = await expectError(res, { status: 400, code: 'unsupported_audio_format', param: 'file' });
      expect(error.message).toMatch(/not a WAV file: it is text/);
    }
    expect(await tts.testDb.db.prisma.blob.count({ where: { orgId: tts.orgId } })).toBe(0);
  });
});
