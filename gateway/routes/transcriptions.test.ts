// Route tests of POST /v1/audio/transcriptions over real HTTP (real gateway runtime, throw-away
// SQLite or PostgreSQL database, the local pocketsphinx recogniser on speech flite makes here):
// every error with its exact status, code and param and no debit; the accepted audio shapes;
// the response, its word times, its duration and its exact billing; recognition quality; the
// official OpenAI client; fuzzed and truncated files; an OpenAI-compatible upstream.
import { request as httpRequest } from 'node:http';
import OpenAI from 'openai';
import { toFile } from 'openai/uploads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeMp3 } from '../audio/mp3.ts';
import { createApiKey } from '../../server/services/keys/create-api-key.ts';
import { revokeApiKey } from '../../server/services/keys/revoke-api-key.ts';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { createOrg } from '../../server/services/orgs/create-org.ts';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import {
  STT_PRICE,
  audioCost,
  concat,
  expectDebited,
  expectTimedWords,
  ledgerOf,
  ledgerRowCount,
  requestId,
  s16le,
  settleRecognizers,
  silence,
  speech,
  startSttGateway,
  startTranscriptionServer,
  toRate,
  transcribe,
  wavFile,
  wer,
  words,
  type TranscriptionServer,
  type Voice,
} from '../../test/support/stt-routes.ts';
import { A_WINDOW_START, manualClock } from '../../test/support/manual-clock.ts';
import { expectError, usd } from '../../test/support/tts-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';

let h: GatewayHarness;
const keys = { zero: '', revoked: '', limited: '' };
// Rate-limit windows read a clock held 15 s into a minute: the one-request-a-minute key is
// refused with 45 s to wait whenever the test runs.
const clock = manualClock(A_WINDOW_START + 15_000);
const FOX = 'the quick brown fox jumps over the lazy dog';
const CALL = 'please call me tomorrow morning about the meeting';

interface TranscriptionBody {
  text: string;
  words: { word: string; start: number; end: number }[];
  duration_seconds: number;
}

beforeAll(async () => {
  h = await startSttGateway({ clock });
  const prisma = h.testDb.db.prisma;
  const zeroOrg = await createOrg(h.testDb.db, { name: 'broke', creditsMicros: 0n });
  keys.zero = (await createApiKey(prisma, { orgId: zeroOrg.id, name: 'zero' })).key;
  const revoked = await createApiKey(prisma, { orgId: h.orgId, name: 'revoked' });
  await revokeApiKey(prisma, { id: revoked.id });
  keys.revoked = revoked.key;
  keys.limited = (await createApiKey(prisma, { orgId: h.orgId, name: 'one per minute', rateLimitRpm: 1 })).key;
  await upsertModel(prisma, checkProtocol, {
    id: 'stt-disabled',
    modality: 'stt',
    status: 'disabled',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: 'local:pocketsphinx', protocol: 'pocketsphinx' },
  });
  await h.runtime.ctx.registry.refresh();
  // Speech made up front, in parallel.
  await Promise.all([speech(FOX), speech(CALL), ...SENTENCES.map(([text, voice]) => speech(text, voice))]);
}, 120_000);

afterAll(async () => {
  await settleRecognizers();
  await h?.close();
});

/** A 200 from the local model: shape, word times inside the audio, exact duration and billing. */
async function expectTranscription(
  res: Response,
  audio: { frames: number; sampleRate: number },
  id: string,
  picoPerSecond = STT_PRICE,
  options: { wordTimes?: boolean } = {},
): Promise<TranscriptionBody> {
  const text = await res.text();
  expect(res.status, text).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.headers.get('x-request-id')).toBe(id);
  const body = JSON.parse(text) as TranscriptionBody;
  expect(Object.keys(body).sort()).toEqual(['duration_seconds', 'text', 'words']);
  const exact = audio.frames / audio.sampleRate;
  const millis = Math.round(exact * 1000);
  // Reported to the millisecond the audio is billed by.
  expect(body.duration_seconds).toBe(millis / 1000);
  expect(Math.abs(body.duration_seconds - exact)).toBeLessThanOrEqual(0.0005);
  if (options.wordTimes !== false) expectTimedWords(body.words, 0, exact);
  const cost = audioCost(millis, picoPerSecond);
  expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
  const billed = await expectDebited(h, id, cost);
  expect(billed.ledger).toHaveLength(1);
  expect(billed.usage).toHaveLength(1);
  expect(billed.usage[0]).toMatchObject({
    modality: 'stt',
    route: 'audio.transcriptions',
    audioMillis: millis,
    costMicros: cost,
    inputTokens: 0,
    outputTokens: 0,
    characters: 0,
  });
  expect(billed.ledger[0]!.amountMicros).toBe(-cost);
  expect(res.headers.get('x-svc-credits-remaining-usd')).toBe(usd(billed.ledger[0]!.balanceAfterMicros));
  return body;
}

// ---------------------------------------------------------------------------------------

describe('errors', () => {
  /** Expects the error and that nothing was debited by it. */
  async function rejected(send: (id: string) => Promise<Response>, expected: { status: number; code: string; param: string | null; type?: string }) {
    const before = await ledgerRowCount(h);
    const balance = await h.balanceMicros();
    const id = requestId('err');
    const res = await send(id);
    const err = await expectError(res, expected);
    expect(await ledgerRowCount(h)).toBe(before);
    expect(await h.balanceMicros()).toBe(balance);
    expect(res.headers.get('x-svc-request-cost-usd')).toBeNull();
    return { err, res };
  }

  it('401 without a key, with an unknown key, and with a revoked key', async () => {
    const wav = (await speech(FOX)).wav;
    const { err } = await rejected((id) => transcribe(h, wav, { model: 'local-stt' }, { key: null, requestId: id }), {
      status: 401,
      code: 'invalid_api_key',
      param: null,
      type: 'invalid_request_error',
    });
    expect(err.message).toMatch(/key/i);
    await rejected((id) => transcribe(h, wav, { model: 'local-stt' }, { key: 'sk_svc_not_a_real_key_at_all_0000000000000', requestId: id }), {
      status: 401,
      code: 'invalid_api_key',
      param: null,
    });
    await rejected((id) => transcribe(h, wav, { model: 'local-stt' }, { key: keys.revoked, requestId: id }), {
      status: 401,
      code: 'api_key_disabled',
      param: null,
    });
  });

  it('402 insufficient_quota for an org with a zero balance', async () => {
    const wav = (await speech(FOX)).wav;
    await rejected((id) => transcribe(h, wav, { model: 'local-stt' }, { key: keys.zero, requestId: id }), {
      status: 402,
      code: 'insufficient_quota',
      param: null,
      type: 'insufficient_quota',
    });
  });

  it('429 rate_limit_exceeded past the key own limit, with Retry-After', async () => {
    // The first request of the minute is admitted (and fails for its missing file), the second is not.
    await rejected((id) => transcribe(h, null, { model: 'local-stt' }, { key: keys.limited, requestId: id }), {
      status: 400,
      code: 'invalid_request',
      param: 'file',
    });
    const wav = (await speech(FOX)).wav;
    const { err, res } = await rejected((id) => transcribe(h, wav, { model: 'local-stt' }, { key: keys.limited, requestId: id }), {
      status: 429,
      code: 'rate_limit_exceeded',
      param: null,
      type: 'rate_limit_error',
    });
    expect(res.headers.get('retry-after')).toBe('45');
    expect(err.message).toMatch(/try again in 45s$/);
  });

  it('404 model_not_found for an unknown id, an llm model and a disabled stt model; 400 without a model', async () => {
    const wav = (await speech(FOX)).wav;
    for (const model of ['no-such-model', 'chat-model', 'stt-disabled']) {
      const { err } = await rejected((id) => transcribe(h, wav, { model }, { requestId: id }), { status: 404, code: 'model_not_found', param: 'model' });
      expect(err.message).toContain(model);
    }
    await rejected((id) => transcribe(h, wav, {}, { requestId: id }), { status: 400, code: 'invalid_request', param: 'model' });
    await rejected((id) => transcribe(h, wav, { model: '' }, { requestId: id }), { status: 400, code: 'invalid_request', param: 'model' });
  });

  describe('400 unsupported_audio_format for compressed audio, by its magic bytes', () => {
    const tone = new Float32Array(16000).map((_, i) => 0.3 * Math.sin((2 * Math.PI * 440 * i) / 16000));
    const mp3 = encodeMp3(tone, 16000, 32000);
    const id3 = (() => {
      const frame = Buffer.concat([Buffer.from('TIT2', 'latin1'), Buffer.from([0, 0, 0, 6, 0, 0, 3]), Buffer.from('hello', 'latin1')]);
      const size = frame.length;
      const header = Buffer.from([0x49, 0x44, 0x33, 4, 0, 0, (size >> 21) & 0x7f, (size >> 14) & 0x7f, (size >> 7) & 0x7f, size & 0x7f]);
      return Buffer.concat([header, frame]);
    })();
    const random = (n: number, seed: number) => {
      const out = Buffer.alloc(n);
      let x = seed;
      for (let i = 0; i < n; i++) {
        x = (x * 1103515245 + 12345) >>> 0;
        out[i] = x >>> 24;
      }
      return out;
    };
    const adtsFrame = (length: number) => {
      const f = random(length, length);
      // MPEG-4 AAC LC, 16 kHz (index 8), mono, no CRC; the 13-bit frame length covers the header.
      f.set([0xff, 0xf1, (1 << 6) | (8 << 2), (1 << 6) | (length >> 11), (length >> 3) & 0xff, ((length & 7) << 5) | 0x1f, 0xfc]);
      return f;
    };
    const box = (type: string, payload: Buffer) => {
      const b = Buffer.alloc(8);
      b.writeUInt32BE(8 + payload.length, 0);
      b.write(type, 4, 'latin1');
      return Buffer.concat([b, payload]);
    };
    const files: Record<string, Buffer> = {
      'mp3 (LAME frames, no tag)': mp3,
      'mp3 with an ID3v2 tag': Buffer.concat([id3, mp3]),
      'ogg (Vorbis)': Buffer.concat([
        Buffer.from('OggS', 'latin1'),
        Buffer.from([0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 30]),
        Buffer.from('\x01vorbis', 'latin1'),
        random(23, 7),
      ]),
      flac: Buffer.concat([Buffer.from('fLaC', 'latin1'), Buffer.from([0x80, 0, 0, 34]), random(34, 3), random(500, 4)]),
      'mp4 (ftyp isom)': Buffer.concat([
        box('ftyp', Buffer.concat([Buffer.from('isom', 'latin1'), Buffer.from([0, 0, 2, 0]), Buffer.from('isomiso2mp41', 'latin1')])),
        box('mdat', random(400, 5)),
      ]),
      'm4a (ftyp M4A)': Buffer.concat([
        box('ftyp', Buffer.concat([Buffer.from('M4A ', 'latin1'), Buffer.from([0, 0, 0, 0]), Buffer.from('M4A mp42isom', 'latin1')])),
        box('mdat', random(400, 6)),
      ]),
      'webm (EBML)': Buffer.concat([
        Buffer.from([0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86, 0x81, 0x01, 0x42, 0x82, 0x84]),
        Buffer.from('webm', 'latin1'),
        random(300, 8),
      ]),
      'aac (ADTS frames)': Buffer.concat([adtsFrame(200), adtsFrame(180), adtsFrame(190)]),
    };

    it('the fixtures are what they claim', () => {
      expect(mp3[0]).toBe(0xff);
      expect(mp3[1]! & 0xe0).toBe(0xe0);
      expect(files['mp3 with an ID3v2 tag']!.subarray(0, 3).toString('latin1')).toBe('ID3');
    });

    for (const [name, bytes] of Object.entries(files)) {
      it(name, async () => {
        const { err } = await rejected((id) => transcribe(h, bytes, { model: 'local-stt' }, { requestId: id, filename: 'audio.bin' }), {
          status: 400,
          code: 'unsupported_audio_format',
          param: 'file',
        });
        expect(err.message.length).toBeGreaterThan(10);
      });
    }
  });

  it('400 invalid_sample_rate: a sample_rate field outside the six, WAV headers at 11025 and 96000 Hz, and rates outside a model allowlist', async () => {
    const fox = await speech(FOX);
    const pcm = s16le(fox.samples);
    for (const rate of ['11025', '96000', '7999', 'abc', '16000.5', '-16000']) {
      await rejected((id) => transcribe(h, pcm, { model: 'local-stt', sample_rate: rate }, { requestId: id }), {
        status: 400,
        code: 'invalid_sample_rate',
        param: 'sample_rate',
      });
    }
    for (const rate of [11025, 96000, 32000, 4000]) {
      const wav = wavFile([fox.samples.subarray(0, 8000)], rate);
      const { err } = await rejected((id) => transcribe(h, wav, { model: 'local-stt' }, { requestId: id }), {
        status: 400,
        code: 'invalid_sample_rate',
        param: 'sample_rate',
      });
      expect(err.message).toContain(String(rate));
    }
    // local-stt-16k accepts only 16000: 8 kHz audio is refused as a WAV and as raw PCM.
    const wav8k = wavFile([toRate(fox.samples, 8000)], 8000);
    const { err } = await rejected((id) => transcribe(h, wav8k, { model: 'local-stt-16k' }, { requestId: id }), {
      status: 400,
      code: 'invalid_sample_rate',
      param: 'sample_rate',
    });
    expect(err.message).toContain('16000');
    await rejected((id) => transcribe(h, s16le(toRate(fox.samples, 8000)), { model: 'local-stt-16k', sample_rate: '8000' }, { requestId: id }), {
      status: 400,
      code: 'invalid_sample_rate',
      param: 'sample_rate',
    });
    // ...and its own rate is fine.
    const id = requestId('16k');
    await expectTranscription(
      await transcribe(h, fox.wav, { model: 'local-stt-16k' }, { requestId: id }),
      { frames: fox.samples.length, sampleRate: 16000 },
      id,
    );
  });

  it('400 invalid_request without a file, with an empty file, with the file under another name, and with two files', async () => {
    await rejected((id) => transcribe(h, null, { model: 'local-stt' }, { requestId: id }), { status: 400, code: 'invalid_request', param: 'file' });
    await rejected((id) => transcribe(h, Buffer.alloc(0), { model: 'local-stt' }, { requestId: id }), { status: 400, code: 'invalid_request', param: 'file' });
    const wav = (await speech(FOX)).wav;
    await rejected((id) => transcribe(h, wav, { model: 'local-stt' }, { requestId: id, fileField: 'audio' }), {
      status: 400,
      code: 'invalid_request',
      param: 'audio',
    });
    await rejected(
      (id) => {
        const form = new FormData();
        form.append('model', 'local-stt');
        form.append('file', new Blob([new Uint8Array(wav)]), 'a.wav');
        form.append('file', new Blob([new Uint8Array(wav)]), 'b.wav');
        return fetch(`${h.url}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${h.key}`, 'x-request-id': id }, body: form });
      },
      { status: 400, code: 'invalid_request', param: 'file' },
    );
  });

  it('a body that is not multipart is 415 in the envelope; a broken multipart body is 400, never 500', async () => {
    const post = (body: string | Buffer, contentType: string | null, id: string) =>
      fetch(`${h.url}/v1/audio/transcriptions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}`, 'x-request-id': id, ...(contentType ? { 'content-type': contentType } : {}) },
        body: typeof body === 'string' ? body : new Uint8Array(body),
      });
    const wav = (await speech(FOX)).wav;
    for (const type of ['application/json', 'audio/wav', 'application/octet-stream', 'text/plain', 'application/x-www-form-urlencoded']) {
      const body =
        type === 'application/json'
          ? JSON.stringify({ model: 'local-stt', file: 'x' })
          : type.startsWith('audio') || type.includes('octet')
            ? wav
            : 'model=local-stt';
      const { err } = await rejected((id) => post(body, type, id), { status: 415, code: 'unsupported_media_type', param: null });
      expect(err.message).toMatch(/multipart\/form-data/);
    }
    await rejected((id) => post(wav, null, id), { status: 415, code: 'unsupported_media_type', param: null });
    await rejected((id) => post('--x\r\nContent-Disposition: form-data; name="model"\r\n\r\nlocal-stt\r\n--x--\r\n', 'multipart/form-data', id), {
      status: 400,
      code: 'invalid_request',
      param: null,
    });
    await rejected((id) => post('--x\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nRIFF', 'multipart/form-data; boundary=x', id), {
      status: 400,
      code: 'invalid_request',
      param: null,
    });
    expect((await fetch(`${h.url}/health`)).status).toBe(200);
  });

  it('413 body_too_large as soon as the file passes 25 MB, while the upload is still open; the gateway carries on', async () => {
    const boundary = 'sttboundary4f2a';
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nlocal-stt\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.raw"\r\nContent-Type: application/octet-stream\r\n\r\n`,
    );
    const chunk = Buffer.alloc(1024 * 1024, 0x01);
    const rssBefore = process.memoryUsage().rss;
    const id = requestId('413');
    const result = await new Promise<{ status: number; body: string; sentBytes: number; ended: boolean }>((resolve, reject) => {
      // Chunked upload that never ends on its own: 27 MB of file, then it waits. A gateway that
      // buffered the whole body before checking would never answer.
      const req = httpRequest(`${h.url}/v1/audio/transcriptions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.key}`, 'x-request-id': id, 'content-type': `multipart/form-data; boundary=${boundary}` },
      });
      let sentBytes = 0;
      let answered = false;
      req.on('response', (res) => {
        answered = true;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, body, sentBytes, ended: req.writableEnded });
          req.destroy();
        });
      });
      req.on('error', (err) => {
        if (!answered) reject(err);
      });
      // Never left open, whatever happens (an open request would hold the gateway's close).
      setTimeout(() => {
        if (!answered) reject(new Error(`no response after ${sentBytes} bytes`));
        req.destroy();
      }, 20_000).unref();
      req.write(head);
      const pump = () => {
        while (!answered && sentBytes < 27 * chunk.length) {
          sentBytes += chunk.length;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
      };
      pump();
    });
    expect(result.status).toBe(413);
    expect(result.ended).toBe(false);
    expect(result.sentBytes).toBeGreaterThan(25 * 1024 * 1024);
    const body = JSON.parse(result.body) as { error: { code: string; param: string | null; type: string } };
    expect(body.error).toMatchObject({ code: 'body_too_large', param: null, type: 'invalid_request_error' });
    expect(await ledgerOf(h, id)).toMatchObject({ debited: 0n, audioMillis: 0 });
    // Informational only: the process did not keep the upload around.
    console.log(
      `RSS ${Math.round(rssBefore / 2 ** 20)} MB before, ${Math.round(process.memoryUsage().rss / 2 ** 20)} MB after a 27 MB upload refused at 25 MB`,
    );
    expect((await fetch(`${h.url}/health`)).status).toBe(200);
    const ok = requestId('after-413');
    const fox = await speech(FOX);
    await expectTranscription(await transcribe(h, fox.wav, { model: 'local-stt' }, { requestId: ok }), { frames: fox.samples.length, sampleRate: 16000 }, ok);
  });

  it('413 body_too_large for a plain 26 MB file sent with its length', async () => {
    const id = requestId('413b');
    const big = Buffer.alloc(26 * 1024 * 1024, 0x02);
    let res: Response;
    try {
      res = await transcribe(h, big, { model: 'local-stt' }, { requestId: id, filename: 'big.raw' });
    } catch (err) {
      // The gateway may stop reading the upload after answering; the answer must still be 413.
      throw new Error(`the upload failed instead of getting a 413: ${(err as Error).message}`, { cause: err });
    }
    await expectError(res, { status: 413, code: 'body_too_large', param: null });
    expect(await ledgerOf(h, id)).toMatchObject({ debited: 0n });
  });
});

// ---------------------------------------------------------------------------------------

const SENTENCES: [string, Voice][] = [
  [FOX, 'slt'],
  [CALL, 'rms'],
  ['i would like to book a table for two people tonight', 'awb'],
  ['the weather today is sunny with a light breeze', 'slt'],
  ['can you tell me how to get to the train station', 'rms'],
  ['my phone number has changed since last year', 'awb'],
  ['she bought three apples and a loaf of bread', 'slt'],
  ['turn off the lights when you leave the room', 'rms'],
];

describe('transcription', () => {
  it('a 16 kHz WAV: text, timed words in order inside the audio, exact duration, exact debit with its ledger and usage rows', async () => {
    const fox = await speech(FOX);
    const id = requestId('wav16');
    const balance = await h.balanceMicros();
    const body = await expectTranscription(
      await transcribe(h, fox.wav, { model: 'local-stt' }, { requestId: id }),
      { frames: fox.samples.length, sampleRate: 16000 },
      id,
    );
    expect(body.text).toBe(body.words.map((w) => w.word).join(' '));
    expect(wer(FOX, body.text)).toBeLessThanOrEqual(0.15);
    expect(words(body.text)).toEqual(expect.arrayContaining(['quick', 'brown', 'fox', 'lazy', 'dog']));
    expect(body.words[0]!.word).toBe('the');
    expect(body.words.at(-1)!.word).toBe('dog');
    expect(await h.balanceMicros()).toBe(balance - audioCost(Math.round((fox.samples.length / 16000) * 1000)));
  });

  it('WAVs at 8, 22.05, 24, 44.1 and 48 kHz (flite speech resampled) are transcribed and billed by their own duration', async () => {
    const call = await speech(CALL);
    for (const rate of [8000, 22050, 24000, 44100, 48000]) {
      const samples = toRate(call.samples, rate);
      const id = requestId(`wav${rate}`);
      const body = await expectTranscription(
        await transcribe(h, wavFile([samples], rate), { model: 'local-stt' }, { requestId: id }),
        { frames: samples.length, sampleRate: rate },
        id,
      );
      expect(wer(CALL, body.text), `${rate} Hz: "${body.text}"`).toBeLessThanOrEqual(rate === 8000 ? 0.35 : 0.2);
      expect(words(body.text), `${rate} Hz`).toEqual(expect.arrayContaining(['please', 'call', 'tomorrow', 'morning']));
    }
  });

  it('a stereo WAV is mixed down to mono (the mean of the channels), billed by its frames', async () => {
    const fox = await speech(FOX);
    const monoId = requestId('mono');
    const mono = await expectTranscription(
      await transcribe(h, fox.wav, { model: 'local-stt' }, { requestId: monoId }),
      { frames: fox.samples.length, sampleRate: 16000 },
      monoId,
    );
    // Both channels the same: the mix is the mono signal, so the same transcript.
    const id = requestId('stereo');
    const wav = wavFile([fox.samples, fox.samples], 16000);
    expect(wav.readUInt16LE(22)).toBe(2);
    const body = await expectTranscription(
      await transcribe(h, wav, { model: 'local-stt' }, { requestId: id }),
      { frames: fox.samples.length, sampleRate: 16000 },
      id,
    );
    expect(body).toEqual(mono);
    // Opposite channels cancel out: silence, not the left channel alone.
    const id2 = requestId('stereo-cancel');
    const cancel = await expectTranscription(
      await transcribe(h, wavFile([fox.samples, fox.samples.map((v) => -v)], 16000), { model: 'local-stt' }, { requestId: id2 }),
      { frames: fox.samples.length, sampleRate: 16000 },
      id2,
    );
    expect(cancel.text).toBe('');
  });

  it('a float32 WAV (format 3) and a 4-channel 48 kHz float WAV', async () => {
    const call = await speech(CALL);
    const id = requestId('f32');
    const body = await expectTranscription(
      await transcribe(h, wavFile([call.samples], 16000, 'f32'), { model: 'local-stt' }, { requestId: id }),
      { frames: call.samples.length, sampleRate: 16000 },
      id,
    );
    expect(wer(CALL, body.text), body.text).toBeLessThanOrEqual(0.15);
    const at48 = toRate(call.samples, 48000);
    const quiet = at48.map((v) => v * 0.25);
    const id2 = requestId('f32x4');
    const body2 = await expectTranscription(
      await transcribe(h, wavFile([at48, at48, quiet, quiet], 48000, 'f32'), { model: 'local-stt' }, { requestId: id2 }),
      { frames: at48.length, sampleRate: 48000 },
      id2,
    );
    expect(wer(CALL, body2.text), body2.text).toBeLessThanOrEqual(0.2);
  });

  it('raw PCM16 at the declared sample_rate, 16000 by default; an odd trailing byte is not a sample', async () => {
    const fox = await speech(FOX);
    const cases: { rate?: number; extraByte?: boolean }[] = [{}, { rate: 16000 }, { rate: 22050 }, { rate: 8000, extraByte: true }];
    for (const c of cases) {
      const rate = c.rate ?? 16000;
      const samples = toRate(fox.samples, rate);
      const pcm = c.extraByte ? Buffer.concat([s16le(samples), Buffer.from([0x7f])]) : s16le(samples);
      const id = requestId(`raw${rate}`);
      const fields: Record<string, string> = { model: 'local-stt', ...(c.rate ? { sample_rate: String(c.rate) } : {}) };
      const body = await expectTranscription(
        await transcribe(h, pcm, fields, { requestId: id, filename: 'audio.pcm' }),
        { frames: samples.length, sampleRate: rate },
        id,
      );
      expect(wer(FOX, body.text), `${JSON.stringify(c)}: ${body.text}`).toBeLessThanOrEqual(rate === 8000 ? 0.35 : 0.2);
    }
    // A WAV's own header wins over the field.
    const id = requestId('wav-wins');
    await expectTranscription(
      await transcribe(h, fox.wav, { model: 'local-stt', sample_rate: '8000' }, { requestId: id }),
      { frames: fox.samples.length, sampleRate: 16000 },
      id,
    );
  });

  it('silence gives an empty transcript, billed for its duration', async () => {
    const id = requestId('silence');
    const body = await expectTranscription(
      await transcribe(h, wavFile([silence(1.5)], 16000), { model: 'local-stt' }, { requestId: id }),
      { frames: 24000, sampleRate: 16000 },
      id,
    );
    expect(body).toEqual({ text: '', words: [], duration_seconds: 1.5 });
  });

  it('word error rate at most 15 % over eight flite sentences in three voices', async () => {
    let errors = 0;
    let total = 0;
    const misses: string[] = [];
    for (const [text, voice] of SENTENCES) {
      const s = await speech(text, voice);
      const id = requestId(`wer-${voice}`);
      const body = await expectTranscription(
        await transcribe(h, s.wav, { model: 'local-stt' }, { requestId: id }),
        { frames: s.samples.length, sampleRate: 16000 },
        id,
      );
      const e = Math.round(wer(text, body.text) * words(text).length);
      if (e) misses.push(`${voice}: "${body.text}"`);
      errors += e;
      total += words(text).length;
    }
    console.log(`batch WER ${((100 * errors) / total).toFixed(1)} % over ${total} words; misses:\n  ${misses.join('\n  ')}`);
    expect(errors / total).toBeLessThanOrEqual(0.15);
  }, 120_000);

  // A recording with a pause: the second sentence follows 1 s of silence.
  let twoSentences: { body: TranscriptionBody; secondStarts: number; duration: number } | null = null;

  it('a longer recording, two sentences with a 1 s pause: both transcribed, billed by the whole duration', async () => {
    const a = await speech(FOX);
    const b = await speech(CALL, 'rms');
    const samples = concat(a.samples, silence(1), b.samples);
    const id = requestId('two');
    const body = await expectTranscription(
      await transcribe(h, wavFile([samples], 16000), { model: 'local-stt' }, { requestId: id }),
      { frames: samples.length, sampleRate: 16000 },
      id,
      STT_PRICE,
      { wordTimes: false },
    );
    expect(wer(`${FOX} ${CALL}`, body.text), body.text).toBeLessThanOrEqual(0.15);
    expect(body.words.map((w) => w.word).join(' ')).toBe(body.text);
    twoSentences = { body, secondStarts: (a.samples.length + 16000) / 16000, duration: samples.length / 16000 };
  });

  // Regression: with pocketsphinx's silence removal on (its default), a pause of 0.5 s or more
  // inside one utterance renumbered the frames, so every word after it was misplaced.
  it('the word times of that recording run across the whole file, through the pause', () => {
    const { body, secondStarts, duration } = twoSentences!;
    expectTimedWords(body.words, 0, duration);
    const please = body.words.find((w) => w.word === 'please');
    expect(please, body.text).toBeDefined();
    expect(please!.start).toBeGreaterThanOrEqual(secondStarts - 0.05);
    expect(body.words.find((w) => w.word === 'quick')!.start).toBeLessThan(1);
    expect(body.words.filter((w) => w.word === 'dog').every((w) => w.end <= secondStarts)).toBe(true);
  });

  it('the official OpenAI client: audio.transcriptions.create with local-stt, and its errors', async () => {
    const fox = await speech(FOX);
    const client = new OpenAI({ apiKey: h.key, baseURL: `${h.url}/v1`, maxRetries: 0 });
    const { data, response } = await client.audio.transcriptions
      .create({ file: await toFile(fox.wav, 'speech.wav', { type: 'audio/wav' }), model: 'local-stt' })
      .withResponse();
    expect(response.status).toBe(200);
    expect(wer(FOX, data.text), data.text).toBeLessThanOrEqual(0.15);
    const body = data as unknown as TranscriptionBody;
    expect(body.duration_seconds).toBe(Math.round((fox.samples.length / 16000) * 1000) / 1000);
    expectTimedWords(body.words, 0, fox.samples.length / 16000);
    const id = response.headers.get('x-request-id')!;
    await expectDebited(h, id, audioCost(Math.round((fox.samples.length / 16000) * 1000)));

    const err = await client.audio.transcriptions.create({ file: await toFile(fox.wav, 'speech.wav'), model: 'whisper-1' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe('model_not_found');
    const err2 = await client.audio.transcriptions
      .create({ file: await toFile(Buffer.from('ID3\x04\x00\x00\x00\x00\x00\x00', 'latin1'), 'x.mp3'), model: 'local-stt' })
      .catch((e: unknown) => e);
    expect(err2).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err2 as InstanceType<typeof OpenAI.APIError>).code).toBe('unsupported_audio_format');
  });
});

// ---------------------------------------------------------------------------------------

describe('malformed audio never crashes the route', () => {
  /** xorshift32, seeded: the same cases every run. */
  function prng(seed: number) {
    let x = seed >>> 0 || 1;
    return () => {
      x ^= x << 13;
      x >>>= 0;
      x ^= x >>> 17;
      x ^= x << 5;
      x >>>= 0;
      return x / 2 ** 32;
    };
  }

  async function expect200or400(file: Buffer, label: string, fields: Record<string, string> = { model: 'local-stt' }) {
    const res = await transcribe(h, file, fields, { requestId: requestId('fuzz') });
    const text = await res.text();
    expect([200, 400], `${label}: ${res.status} ${text.slice(0, 200)}`).toContain(res.status);
    const body = JSON.parse(text) as { error?: { code: string } } & Partial<TranscriptionBody>;
    if (res.status === 400) expect(['unsupported_audio_format', 'invalid_sample_rate', 'invalid_request'], label).toContain(body.error!.code);
    else {
      expect(typeof body.text, label).toBe('string');
      expect(Number.isFinite(body.duration_seconds), label).toBe(true);
    }
    return res.status;
  }

  it('fuzzed WAV headers, odd chunk sizes, truncations and odd-length PCM: 200 or 400, never 500; the process still answers', async () => {
    const fox = await speech(FOX);
    const short = fox.samples.subarray(4000, 4000 + 6400); // 0.4 s of speech
    const base = wavFile([short], 16000);
    const statuses: number[] = [];
    const rand = prng(20251122);
    // Random bytes in the 44-byte header.
    for (let i = 0; i < 24; i++) {
      const f = Buffer.from(base);
      const n = 1 + Math.floor(rand() * 4);
      for (let k = 0; k < n; k++) f[Math.floor(rand() * 44)] = Math.floor(rand() * 256);
      statuses.push(await expect200or400(f, `header fuzz ${i}`));
    }
    // Fields set to edge values.
    const edits: [string, (b: Buffer) => void][] = [
      ['data size 0 (streaming writer)', (b) => b.writeUInt32LE(0, 40)],
      ['data size 0xFFFFFFFF', (b) => b.writeUInt32LE(0xffffffff, 40)],
      ['data size past the end', (b) => b.writeUInt32LE(10_000_000, 40)],
      ['fmt size 0', (b) => b.writeUInt32LE(0, 16)],
      ['fmt size huge', (b) => b.writeUInt32LE(0xfffffff0, 16)],
      ['channels 0', (b) => b.writeUInt16LE(0, 22)],
      ['channels 65535', (b) => b.writeUInt16LE(65535, 22)],
      ['sample rate 0', (b) => b.writeUInt32LE(0, 24)],
      ['sample rate 0xFFFFFFFF', (b) => b.writeUInt32LE(0xffffffff, 24)],
      ['block align 0', (b) => b.writeUInt16LE(0, 32)],
      ['bits 0', (b) => b.writeUInt16LE(0, 34)],
      ['bits 13', (b) => b.writeUInt16LE(13, 34)],
      ['format code 0', (b) => b.writeUInt16LE(0, 20)],
      ['format 0xFFFE with a 16-byte fmt', (b) => b.writeUInt16LE(0xfffe, 20)],
      ['format 3 with 16 bits', (b) => b.writeUInt16LE(3, 20)],
      ['RIFF size 0', (b) => b.writeUInt32LE(0, 4)],
      ['RIFX', (b) => b.write('RIFX', 0, 'latin1')],
      ['fmt renamed', (b) => b.write('fmx ', 12, 'latin1')],
      ['data renamed', (b) => b.write('dada', 36, 'latin1')],
    ];
    for (const [label, edit] of edits) {
      const f = Buffer.from(base);
      edit(f);
      statuses.push(await expect200or400(f, label));
    }
    // An odd-sized LIST chunk before data (with its pad byte), and one without the pad byte.
    const list = (pad: boolean) =>
      Buffer.concat([Buffer.from('LIST', 'latin1'), Buffer.from([5, 0, 0, 0]), Buffer.from('INFOx', 'latin1'), pad ? Buffer.from([0]) : Buffer.alloc(0)]);
    for (const pad of [true, false])
      statuses.push(await expect200or400(Buffer.concat([base.subarray(0, 36), list(pad), base.subarray(36)]), `odd LIST chunk, pad ${pad}`));
    // Truncations: inside the header, and inside the samples (odd lengths too).
    for (const cut of [1, 4, 11, 12, 20, 35, 36, 43, 44, 45, 1001, 4099]) statuses.push(await expect200or400(base.subarray(0, cut), `cut at ${cut}`));
    // Raw PCM of odd lengths, including a single byte.
    for (const n of [1, 3, 333, 6401])
      statuses.push(await expect200or400(s16le(short).subarray(0, n), `raw PCM of ${n} bytes`, { model: 'local-stt', sample_rate: '16000' }));
    // Pure noise bytes.
    const noise = Buffer.alloc(9999);
    for (let i = 0; i < noise.length; i++) noise[i] = Math.floor(rand() * 256);
    statuses.push(await expect200or400(noise, 'noise'));
    // Both outcomes occurred: the cases reach the recogniser as well as the format checks.
    expect(statuses).toContain(200);
    expect(statuses).toContain(400);
    const health = await fetch(`${h.url}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    // And the route still transcribes.
    const id = requestId('after-fuzz');
    const body = await expectTranscription(
      await transcribe(h, fox.wav, { model: 'local-stt' }, { requestId: id }),
      { frames: fox.samples.length, sampleRate: 16000 },
      id,
    );
    expect(wer(FOX, body.text)).toBeLessThanOrEqual(0.15);
  }, 180_000);
});

// ---------------------------------------------------------------------------------------

describe('an OpenAI-compatible transcription upstream', () => {
  const PRICE = 123_456_789n; // pico-USD per second: costs need rounding up
  let server: TranscriptionServer;

  beforeAll(async () => {
    server = await startTranscriptionServer({
      kind: 'ok',
      body: {
        task: 'transcribe',
        language: 'english',
        duration: 99,
        text: ' Hello Kubernetes world. ',
        words: [
          { word: ' Hello', start: 0.1, end: 0.4 },
          { word: 'Kubernetes', start: 0.45, end: 1.1 },
          { word: 'broken', start: 'x' },
          { word: ' world.', start: 1.2, end: 1.6 },
        ],
      },
    });
    await upsertModel(h.testDb.db.prisma, checkProtocol, {
      id: 'remote-stt',
      modality: 'stt',
      prices: { picoPerSecond: PRICE },
      upstream: { url: server.baseUrl, protocol: 'openai', upstreamModel: 'whisper-large' },
    });
    await h.runtime.ctx.registry.refresh();
    await h.runtime.ctx.health.checkAll();
  });

  afterAll(async () => {
    await server?.close();
  });

  it('forwards the audio as a mono 16-bit WAV with the model, language, keyterms as prompt and verbose_json; returns its text and words', async () => {
    const call = await speech(CALL);
    const at22 = toRate(call.samples, 22050);
    const id = requestId('remote');
    server.received.length = 0;
    const res = await transcribe(
      h,
      wavFile([at22, at22.map((v) => v * 0.5)], 22050, 'f32'),
      { model: 'remote-stt', language: 'en', keyterms: 'Kubernetes, Grafana\nPrometheus' },
      { requestId: id },
    );
    const text = await res.text();
    expect(res.status, text).toBe(200);
    const body = JSON.parse(text) as TranscriptionBody;
    expect(body).toEqual({
      text: 'Hello Kubernetes world.',
      words: [
        { word: 'Hello', start: 0.1, end: 0.4 },
        { word: 'Kubernetes', start: 0.45, end: 1.1 },
        { word: 'world.', start: 1.2, end: 1.6 },
      ],
      duration_seconds: Math.round((at22.length / 22050) * 1000) / 1000,
    });
    expect(server.received).toHaveLength(1);
    const got = server.received[0]!;
    expect(got.fields).toEqual({
      model: ['whisper-large'],
      response_format: ['verbose_json'],
      'timestamp_granularities[]': ['word'],
      language: ['en'],
      prompt: ['Kubernetes, Grafana, Prometheus'],
    });
    expect(got.filename).toMatch(/\.wav$/);
    // The WAV it got: canonical 16-bit mono at the input rate, every frame of the input.
    expect(got.file.subarray(0, 4).toString('latin1')).toBe('RIFF');
    expect(got.file.readUInt16LE(20)).toBe(1);
    expect(got.file.readUInt16LE(22)).toBe(1);
    expect(got.file.readUInt32LE(24)).toBe(22050);
    expect(got.file.readUInt16LE(34)).toBe(16);
    expect(got.file.readUInt32LE(40)).toBe(at22.length * 2);
    // The mix-down: (1 + 0.5) / 2 of the signal.
    let peak = 0;
    for (let at = 44; at < got.file.length; at += 2) peak = Math.max(peak, Math.abs(got.file.readInt16LE(at)));
    let inPeak = 0;
    for (const v of at22) inPeak = Math.max(inPeak, Math.abs(v));
    expect(peak / 32768).toBeCloseTo(inPeak * 0.75, 2);
    const millis = Math.round((at22.length / 22050) * 1000);
    const cost = audioCost(millis, PRICE);
    expect(res.headers.get('x-svc-request-cost-usd')).toBe(usd(cost));
    const billed = await expectDebited(h, id, cost);
    expect(billed.usage).toEqual([expect.objectContaining({ modelId: 'remote-stt', audioMillis: millis, costMicros: cost })]);
  });

  it('without language or keyterms, neither is sent', async () => {
    server.received.length = 0;
    const res = await transcribe(h, (await speech(FOX)).wav, { model: 'remote-stt' });
    expect(res.status).toBe(200);
    expect(Object.keys(server.received[0]!.fields).sort()).toEqual(['model', 'response_format', 'timestamp_granularities[]']);
  });

  it('an upstream failure is 502 upstream_error and is not billed; its 400 is the caller 400', async () => {
    const wav = (await speech(FOX)).wav;
    server.behaviour = { kind: 'error', status: 500, body: { error: { message: 'GPU on fire' } } };
    let id = requestId('remote-500');
    await expectError(await transcribe(h, wav, { model: 'remote-stt' }, { requestId: id }), {
      status: 502,
      code: 'upstream_error',
      param: null,
      type: 'api_error',
    });
    expect(await ledgerOf(h, id)).toMatchObject({ debited: 0n });
    server.behaviour = { kind: 'error', status: 400, body: { error: { message: 'language xx is not supported', param: 'language' } } };
    id = requestId('remote-400');
    const err = await expectError(await transcribe(h, wav, { model: 'remote-stt', language: 'xx' }, { requestId: id }), {
      status: 400,
      code: 'invalid_request',
      param: 'language',
    });
    expect(err.message).toContain('language xx');
    expect(await ledgerOf(h, id)).toMatchObject({ debited: 0n });
    server.behaviour = { kind: 'ok', body: { text: 'ok' } };
  });
});
