// Deepgram's text-to-speech as Deepgram's own client sees it (@deepgram/sdk 5.13.0, unmodified but
// for its `baseUrl`; it sends `Authorization: Token <key>`): `speak.v1.audio.generate` (POST
// /v1/speak) in Deepgram's encodings and containers, and the `speak.v1.connect` socket (Speak,
// Flush, Clear, Close; binary audio, Metadata, Flushed, Cleared, Warning). Real gateway, real
// database, the local flite engine; usage rows checked to the character.
import { DeepgramClient } from '@deepgram/sdk';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { GatewayHarness } from '../../test/support/gateway-harness.ts';
import { EventLog } from '../../test/support/socket-events.ts';
import { FLITE_PRICE, FOX, codePoints, costOf, decodeRaw, expectSpeechLevel, expectWithin, natural, startTtsGateway } from '../../test/support/tts-routes.ts';
import { usageRows } from '../../test/support/usage-rows.ts';
import { scanMpegFrames } from '../audio/mp3-frames.ts';

const CALL = 'Please call me tomorrow morning about the meeting.';

let h: GatewayHarness;

beforeAll(async () => {
  h = await startTtsGateway();
}, 60_000);

afterAll(async () => {
  await h?.close();
});

const deepgram = (apiKey = h.key) => new DeepgramClient({ apiKey, baseUrl: h.url });

async function expectBilled(requestId: string, route: string, characters: number): Promise<void> {
  const prisma = h.testDb.db.prisma;
  await vi.waitFor(async () => expect((await usageRows(prisma, { requestId })).reduce((n, r) => n + r.characters, 0)).toBe(characters), {
    timeout: 10_000,
    interval: 25,
  });
  for (const r of await usageRows(prisma, { requestId }))
    expect({ route: r.route, modelId: r.modelId, costMicros: r.costMicros }).toEqual({
      route,
      modelId: 'local-flite',
      costMicros: costOf(r.characters, FLITE_PRICE),
    });
}

describe('POST /v1/speak', () => {
  it('linear16 at 16 kHz, container none, model <model>:<voice>: flite\u2019s samples, Deepgram\u2019s headers, billed per character', async () => {
    const { data, rawResponse } = await deepgram()
      .speak.v1.audio.generate({ text: FOX, model: 'local-flite:flite-slt', encoding: 'linear16', sample_rate: 16000, container: 'none' })
      .withRawResponse();
    const audio = Buffer.from(await data.arrayBuffer());
    expect(audio.length / 2).toBe(natural('flite', 'slt', FOX).samples.length);
    expectSpeechLevel(decodeRaw(audio, 'pcm_s16le'));
    expect(rawResponse.headers.get('dg-char-count')).toBe(String(codePoints(FOX)));
    expect(rawResponse.headers.get('dg-model-name')).toBe('local-flite:flite-slt');
    await expectBilled(rawResponse.headers.get('dg-request-id')!, 'deepgram.speak', codePoints(FOX));
  });

  it('the client\u2019s defaults with an Aura name: mp3 at 22.05 kHz from the default model and voice', async () => {
    const data = await deepgram().speak.v1.audio.generate({ text: FOX, model: 'aura-2-thalia-en' });
    const mp3 = scanMpegFrames(new Uint8Array(await data.arrayBuffer()));
    expect(new Set(mp3.frames.map((f) => f.sampleRate))).toEqual(new Set([22050]));
    expect(mp3.durationSeconds).toBeGreaterThan(1);
  });

  it('a voice id as the model, mulaw in a WAV file at 8 kHz', async () => {
    const data = await deepgram().speak.v1.audio.generate({ text: CALL, model: 'flite-rms', encoding: 'mulaw', sample_rate: 8000 });
    const wav = Buffer.from(await data.arrayBuffer());
    expect(wav.subarray(0, 4).toString('latin1')).toBe('RIFF');
    expect(wav.readUInt16LE(20)).toBe(7); // WAVE_FORMAT_MULAW
    expect(wav.readUInt32LE(24)).toBe(8000);
    expectWithin((wav.length - 44) / 8000, natural('flite', 'rms', CALL).seconds, 0.05);
  });

  it('errors as the SDK reports them: Deepgram\u2019s err_code and err_msg beside the envelope', async () => {
    // Each call made when its turn comes: a call made earlier would reject before anyone awaits it.
    const cases: [() => Promise<unknown>, number, string][] = [
      [() => deepgram().speak.v1.audio.generate({ text: '' }), 400, 'INVALID_REQUEST'],
      [() => deepgram().speak.v1.audio.generate({ text: 'a'.repeat(2001) }), 400, 'INVALID_REQUEST'],
      [() => deepgram().speak.v1.audio.generate({ text: FOX, encoding: 'mp3', container: 'wav' }), 400, 'INVALID_OUTPUT_FORMAT'],
      [() => deepgram().speak.v1.audio.generate({ text: FOX, model: 'no-such-voice' }), 404, 'VOICE_NOT_FOUND'],
      [() => deepgram('sk_svc_unknown').speak.v1.audio.generate({ text: FOX }), 401, 'INVALID_AUTH'],
    ];
    for (const [call, status, code] of cases) {
      const e = await call().then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(e).toMatchObject({ statusCode: status, body: { err_code: code, err_msg: expect.any(String) } });
    }
  });
});

type Message = { type: string; [k: string]: unknown } | Blob;

async function speakSocket(query: Record<string, string | number>) {
  const connection = await deepgram().speak.v1.connect({ ...query, Authorization: `Token ${h.key}` } as Parameters<
    DeepgramClient['speak']['v1']['connect']
  >[0]);
  const log = new EventLog<Message>((m) => (m instanceof Blob ? `audio(${m.size})` : m.type));
  const closed = new Promise<number>((resolve) =>
    connection.on('close', (event) => {
      log.end(`closed (${event.code})`);
      resolve(event.code);
    }),
  );
  connection.on('message', (m) => log.push(m as Message));
  connection.connect();
  await connection.waitForOpen();
  const json = (type: string) => log.events.filter((m): m is Exclude<Message, Blob> => !(m instanceof Blob) && m.type === type);
  const audio = async (from = 0, to = log.events.length) =>
    Buffer.concat(await Promise.all(log.events.slice(from, to).flatMap((m) => (m instanceof Blob ? [m.arrayBuffer().then((b) => Buffer.from(b))] : []))));
  return { connection, log, closed, json, audio };
}

describe('the /v1/speak socket', () => {
  it('Metadata first; Speak + Flush: the audio in binary frames, then Flushed 0; Clear: Cleared; Close: closed; billed per character', async () => {
    const s = await speakSocket({ model: 'local-flite:flite-slt', encoding: 'linear16', sample_rate: 16000 });
    const metadata = await s.log.first((m) => !(m instanceof Blob) && m.type === 'Metadata');
    expect(metadata).toMatchObject({ type: 'Metadata', request_id: expect.any(String), model_name: 'local-flite:flite-slt' });
    s.connection.sendText({ type: 'Speak', text: FOX });
    s.connection.sendFlush({ type: 'Flush' });
    await s.log.first((m) => !(m instanceof Blob) && m.type === 'Flushed');
    const flushedAt = s.log.events.findIndex((m) => !(m instanceof Blob) && m.type === 'Flushed');
    expect(s.json('Flushed')).toEqual([{ type: 'Flushed', sequence_id: 0 }]);
    const samples = decodeRaw(await s.audio(0, flushedAt), 'pcm_s16le');
    expect(samples.length).toBe(natural('flite', 'slt', FOX).samples.length);
    expectSpeechLevel(samples);

    // A fragment (no sentence end) waits for the 3 s buffer delay before it is spoken: the Clear sent with it comes first.
    s.connection.sendText({ type: 'Speak', text: 'Please call me' });
    s.connection.sendClear({ type: 'Clear' });
    await s.log.first((m) => !(m instanceof Blob) && m.type === 'Cleared');
    expect(s.json('Cleared')).toEqual([{ type: 'Cleared', sequence_id: 1 }]);
    s.connection.sendClose({ type: 'Close' });
    expect(await s.closed).toBe(1000);
    // The cleared text was never spoken, nor billed.
    await expectBilled(metadata instanceof Blob ? '' : (metadata.request_id as string), 'deepgram.speak.websocket', codePoints(FOX));
  });

  it('Close speaks what is left, then closes; a bad message is a Warning and the socket stays open', async () => {
    const s = await speakSocket({ model: 'local-flite:flite-slt', encoding: 'mulaw', sample_rate: 8000 });
    s.connection.socket.send('{not json');
    const warning = await s.log.first((m) => !(m instanceof Blob) && m.type === 'Warning');
    expect(warning).toMatchObject({ type: 'Warning', code: 'INVALID_JSON', description: expect.stringMatching(/Speak/) });
    // A Speak over Deepgram's 2000 characters is refused the same way, and nothing of it is spoken.
    s.connection.sendText({ type: 'Speak', text: 'a'.repeat(2001) });
    const tooLong = await s.log.first((m) => !(m instanceof Blob) && m.type === 'Warning' && m.code === 'INVALID_REQUEST');
    expect(tooLong).toMatchObject({ description: expect.stringMatching(/2000 characters/) });
    s.connection.sendText({ type: 'Speak', text: CALL });
    s.connection.sendClose({ type: 'Close' });
    expect(await s.closed).toBe(1000);
    expect((await s.audio()).length).toBe(Math.round((natural('flite', 'slt', CALL).samples.length * 8000) / 16000));
  });
});
