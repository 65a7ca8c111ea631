// A turn's finalize lands where the gateway's turn detector decided the turn was over
// (stt-session.ts, detectTurns): a word that begins right after the turn's silence, in the same
// frame of the client's audio as the decision, is not sent to the engine before the finalize, so
// the engine hears it whole in the next utterance instead of cutting it in two. The real gateway
// (a fresh database), the scripted Deepgram and Cartesia (test/support/scripted-*.ts: one word
// per voiced burst, a finalize closing the burst open), /stt/websocket with turn_source=gateway.
// The turn ends on its timeout alone (turn_end_threshold=0), so where the detector decides
// depends on the audio only: the test finds it by running a detector with the same settings over
// the first turn, then starts the next word 5 ms after it.
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { upsertModel } from '../../server/services/models/upsert-model.ts';
import { startGateway, type GatewayHarness } from '../../test/support/gateway-harness.ts';
import { startScriptedCartesia, type ScriptedCartesia } from '../../test/support/scripted-cartesia.ts';
import { startScriptedDeepgram, type ScriptedDeepgram } from '../../test/support/scripted-deepgram.ts';
import { speechBursts } from '../../test/support/speech-bursts.ts';
import { expectDebited, audioCost, openSession, s16le, summary } from '../../test/support/stt-routes.ts';
import { checkProtocol } from '../upstreams/protocols/index.ts';
import { TurnDetector } from './turn-detector.ts';
import { turnSettingsFromQuery } from './turn-params.ts';

const DG_KEY = 'dg_turn_finalize_4c1a';
const CA_KEY = 'sk_car_turn_finalize_77b2';
process.env.TURN_FINALIZE_DG_KEY = DG_KEY;
process.env.TURN_FINALIZE_CA_KEY = CA_KEY;
const STT_PRICE = 100_000_000n;
const RATE = 16000;
const FRAME_SECONDS = 0.1;
/** The turn ends after 300 ms of silence, whatever else (evidence never ends it: end threshold 0 in Cartesia's terms). */
const TURNS = { turn_source: 'gateway', turn_detection: 'balanced', turn_end_threshold: '0', turn_end_timeout_ms: '300' };
const FIRST: [number, number] = [0.3, 0.6];

let h: GatewayHarness;
let dg: ScriptedDeepgram;
let ca: ScriptedCartesia;

beforeAll(async () => {
  [dg, ca] = await Promise.all([startScriptedDeepgram({ apiKey: DG_KEY }), startScriptedCartesia({ apiKey: CA_KEY, words: ['one', 'two', 'three'] })]);
  h = await startGateway({ creditsMicros: 100_000_000n, env: { SVC_HEALTH_CHECK_SECONDS: '3600' } });
  const prisma = h.testDb.db.prisma;
  await upsertModel(prisma, checkProtocol, {
    id: 'tf-deepgram',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: dg.url, protocol: 'deepgram', upstreamModel: 'nova-3', apiKeyEnv: 'TURN_FINALIZE_DG_KEY', weight: 1 },
  });
  await upsertModel(prisma, checkProtocol, {
    id: 'tf-cartesia',
    modality: 'stt',
    prices: { picoPerSecond: STT_PRICE },
    upstream: { url: ca.url, protocol: 'cartesia', upstreamModel: 'ink-whisper', apiKeyEnv: 'TURN_FINALIZE_CA_KEY', weight: 1 },
  });
  await h.runtime.ctx.registry.refresh();
}, 60_000);

afterAll(async () => {
  await h?.close();
  await Promise.allSettled([dg?.close(), ca?.close()]);
});

/** Where (s of audio) a detector with the session's settings decides that the first word's turn is over. */
async function decisionPoint(): Promise<number> {
  const query = new URLSearchParams(TURNS);
  const detector = new TurnDetector(
    RATE,
    turnSettingsFromQuery((name) => query.get(name) ?? undefined, true),
  );
  onTestFinished(() => detector.close());
  const audio = speechBursts(RATE, [FIRST], 2);
  for (let at = 0; at < audio.length; at += FRAME_SECONDS * RATE) {
    const end = (await detector.push(audio.subarray(at, at + FRAME_SECONDS * RATE))).find((e) => e.type === 'turn.end');
    if (end) return end.decidedAtSeconds;
  }
  throw new Error('the detector never ended the first turn');
}

interface Word {
  word: string;
  start: number;
  end: number;
}

describe("a turn's finalize at the detector's decision point", () => {
  it.each(['tf-deepgram', 'tf-cartesia'])(
    '%s: a word begun 5 ms after the turn ended, in the same client frame, is heard whole in the next turn; the audio billed once',
    async (model) => {
      const decided = await decisionPoint();
      const second: [number, number] = [decided + 0.005, decided + 0.305];
      // A whole number of milliseconds, as the ledger counts them.
      const total = Math.ceil((second[1] + 1.5) * 1000) / 1000;
      const audio = s16le(speechBursts(RATE, [FIRST, second], total));
      const client = await openSession(h, { model, sample_rate: String(RATE), ...TURNS, api_key: h.key });
      onTestFinished(() => client.ws.close());
      const started = await client.until((e) => e.type === 'session.started');
      // Client frames of 100 ms, one of them from 50 ms before the decision to 50 ms after it: the start of the second word comes with the audio that ends the first turn.
      const cuts = [0, Math.round((decided - 0.05) * RATE) * 2];
      while (cuts.at(-1)! < audio.length) cuts.push(Math.min(audio.length, cuts.at(-1)! + FRAME_SECONDS * RATE * 2));
      for (let i = 1; i < cuts.length; i++) client.ws.send(audio.subarray(cuts[i - 1], cuts[i]));
      client.command({ type: 'close' });
      const closed = await client.closed;
      expect(closed.code, summary(client.events)).toBe(1000);
      const finals = client.events.filter((e) => e.type === 'transcript' && e.is_final && (e.words as Word[]).length > 0);
      const words = finals.flatMap((e) => e.words as Word[]);
      // Two words, each whole: the first turn's final holds the first alone, the second word starts where its burst does.
      expect(words, summary(client.events)).toHaveLength(2);
      expect((finals[0]!.words as Word[]).length).toBe(1);
      expect(words[0]!.start).toBeCloseTo(FIRST[0], 1);
      expect(words[0]!.end).toBeCloseTo(FIRST[1], 1);
      expect(words[1]!.start).toBeCloseTo(second[0], 1);
      expect(words[1]!.end).toBeCloseTo(second[1], 1);
      expect(client.ofType('turn.end')).toHaveLength(2);
      await expectDebited(h, started.request_id as string, audioCost(total * 1000, STT_PRICE));
    },
  );
});
