// End of the user's speech to the answer's first audio on WS /v1/realtime (issue #21) and over a
// WebRTC call (issue #35), broken down by leg, against the same loop composed by a client over
// the gateway's separate routes (what a pipecat-style app does without /v1/realtime). One
// gateway process (bench/gateway-server.ts, bundled and run as `svc gateway` runs, on a fresh
// SQLite fixture: key auth, rate limit, reservations and debits on), the local engines
// (pocketsphinx, the Silero turn detector, flite) and a scripted LLM in a process of its own
// (bench/upstream-server.ts: --reply short, "Sure, I can help with that." in six chunks; --reply
// long, two sentences a word a chunk; --token-ms between chunks; with usage).
//
// A turn: a short question spoken by flite (eight, cycling) after 0.5 s of silence, streamed at
// real time (20 ms pcm16 frames at 24 kHz, paced by the clock: bench/lib/paced-turns.ts), then
// silence at real time until the answer's first audible sample arrives (a -70 dBFS noise floor
// under all of it, as a microphone has: bench/lib/paced-turns.ts says why); the next turn starts
// once the answer is done. E is when the frame holding the question's last voiced sample was sent
// (flite's audio trimmed of its silence). All times are the client's, at receipt, except
// svc_timings and svc.turn_latency (the gateway's).
// - realtime (one socket per setting, `?model=bench-llm`, the session's default voice,
//   `svc_turn_latency` on): turn detection = E → `input_audio_buffer.speech_stopped` (sent at the
//   detector's decision); final transcript = speech_stopped →
//   `conversation.item.input_audio_transcription.completed` (the recognizer's final decode: the
//   item is committed and answered then); LLM first token and first audio as the gateway
//   measures them from the response's start (`response.done.response.svc_timings`); TTS first
//   audio = first_audio_ms − llm_first_token_ms; gateway-added = (first
//   `response.output_audio.delta` − transcription.completed) − first_audio_ms: from the
//   transcript's commit to the response's start, plus the delivery of the events.
// - webrtc (a call per setting, POST /v1/realtime/calls with a client secret minted for
//   `bench-llm`, the setting's turn detection and `svc_turn_latency`; bench/lib/webrtc-call.ts,
//   werift): the question as 20 ms Opus frames on the audio track at real time, the events on the
//   data channel, the answer's audio from the track (paced by the gateway); the figures as
//   realtime's, first audio = the first RTP packet after E (as a browser plays the track, not
//   waiting for the data channel's response.created). A turn ends when the answer has played out
//   (output_audio_buffer.stopped). Where a call's time goes, stage by stage: bench/webrtc-stages.ts.
// - routes: WS /stt/websocket (the same detector settings) → at `turn.finalized` (the turn's
//   finals are in; it follows `turn.end`), POST /v1/chat/completions stream:true with the turn's
//   final transcript → each token as it arrives to WS /tts/websocket with continue:true, as
//   LiveKit's and pipecat's Cartesia TTS stream (a socket opened beforehand, a context per turn,
//   the realtime session's voice, pcm_s16le at 24 kHz). Turn detection = E → turn.end; final
//   transcript = turn.end → turn.finalized; LLM first token = turn.finalized → first content
//   delta; TTS first audio = first content delta → first chunk.
// - All three: end of speech → first audio (E → the first audio byte) and → first audible sample
//   (E → when a client playing the answer from its first byte, at receipt, hears its first sample
//   above -50 dBFS: gateway/audio/first-audible.ts's AudibleWatch on the received audio). For
//   realtime and webrtc, beside it, the gateway's own end of speech → first audible sample
//   (`svc.turn_latency.first_audible_ms`, from the arrival of the audio holding the end of speech).
//   WebRTC against the WebSocket: end of speech → first audible sample, difference of p50s and
//   median of the paired differences, and what each transport adds: the client's figure less the
//   gateway's (the end of speech's way in, the answer's way out, decoding and playout included).
// Settings: server_vad (a fixed 500 ms of silence; on /stt/websocket the same rule is
// turn_end_threshold=0, i.e. never by the evidence, with turn_end_timeout_ms=500) and
// semantic_vad eagerness high / auto / low (the presets responsive / balanced / patient, as
// turn_detection= on /stt/websocket). The three paths alternate turn by turn (the order
// rotating), each after --warmup turns of its own. A turn end before E (the question cut off at
// a pause) is counted and not measured: the turn is measured at the end after E. Reported: p50 /
// p90 in ms; realtime's speech_stopped → first audio against the routes' turn.end → first audio
// (difference of p50s, median of the paired per-turn differences, ratio of p50s). Targets:
// gateway-added ≤ 20 ms p50 (issue #21); WebRTC's first audible sample within 20 ms of the
// WebSocket's, p50 (issue #35).
//
// --preemptive: the realtime and WebRTC sessions prepare answers on the eager end of turn
// (`svc_preemptive_answers`); target (issue #32): end of speech → first audible sample within
// 30 ms of end of speech → turn end, p50.
//
// --first-turns N (default 6): N fresh sessions per setting, each measured on its first turn,
// against the long session's later turns (target, issue #32: within 10 %, p50).
//
// --settings high,auto: only the settings whose names contain one of these.
//
//   npx tsx bench/realtime.ts [--turns 20] [--warmup 2] [--reply short|long] [--token-ms 0] [--preemptive] [--first-turns 6] [--settings high,auto]
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';
import { checkProtocol } from '../gateway/upstreams/protocols/index.ts';
import { openDatabase } from '../server/db/database.ts';
import { upsertModel } from '../server/services/models/upsert-model.ts';
import { median, percentile, table } from './lib/load.ts';
import { EventSocket, FRAME_MS, question, RATE, withAudio, type Question, type Turn } from './lib/paced-turns.ts';
import { WebRtcCall, webrtcTurn } from './lib/webrtc-call.ts';
import { AudibleWatch } from '../gateway/audio/first-audible.ts';
import { startBundled, startTs } from './lib/processes.ts';
import { voiceFixture } from './lib/voice-fixture.ts';

const args = process.argv.slice(2);
if (args.includes('--help')) {
  console.log(
    'npx tsx bench/realtime.ts [--turns 20] [--warmup 2] [--reply short|long] [--token-ms 0] [--preemptive] [--first-turns 6] [--settings high,auto]\n(see the comment at the top of bench/realtime.ts)',
  );
  process.exit(0);
}
const { values } = parseArgs({
  args,
  options: {
    turns: { type: 'string', default: '20' },
    warmup: { type: 'string', default: '2' },
    reply: { type: 'string', default: 'short' },
    'token-ms': { type: 'string', default: '0' },
    preemptive: { type: 'boolean', default: false },
    'first-turns': { type: 'string', default: '6' },
    settings: { type: 'string' },
  },
});
/** Fresh /v1/realtime sessions per setting whose one turn is measured against the long session's later turns (issue #32: the first turn no slower). */
const firstTurns = Number(values['first-turns']);
/** The realtime and WebRTC sessions prepare their answers on the eager end of turn (svc_preemptive_answers). */
const preemptive = values.preemptive;
const turns = Number(values.turns);
const warmup = Number(values.warmup);
/** Between the LLM's streamed chunks (a real LLM streams some tens of tokens a second). */
const tokenMs = Number(values['token-ms']);

const QUESTIONS = [
  'What time do you open tomorrow?',
  'Can I change my delivery address?',
  'Where is my package right now?',
  'How much is the premium plan?',
  'Is the store open on Sunday?',
  'Can you book a table for two?',
  'What will the weather be like?',
  'Do you ship to Canada?',
];
const REPLIES: Record<string, string[]> = {
  short: ['Sure', ',', ' I can', ' help', ' with that', '.'],
  // Two sentences, a word a chunk: the first can be spoken while the rest streams.
  long: 'Sure, I can help with that. Our store opens at nine in the morning and closes at six in the evening, every day but Sunday.'.split(/(?= )/),
};
const REPLY = REPLIES[values.reply!];
if (!REPLY) throw new Error(`--reply must be one of ${Object.keys(REPLIES).join(', ')}`);
const LLM = 'bench-llm';
const TTS = 'local-flite';

interface Setting {
  name: string;
  realtime: Record<string, unknown>;
  stt: Record<string, string>;
}
const SETTINGS: Setting[] = [
  {
    name: 'server_vad, 500 ms',
    realtime: { type: 'server_vad', silence_duration_ms: 500 },
    stt: { turn_detection: 'balanced', turn_end_threshold: '0', turn_end_timeout_ms: '500' },
  },
  { name: 'semantic_vad high', realtime: { type: 'semantic_vad', eagerness: 'high' }, stt: { turn_detection: 'responsive' } },
  { name: 'semantic_vad auto', realtime: { type: 'semantic_vad', eagerness: 'auto' }, stt: { turn_detection: 'balanced' } },
  { name: 'semantic_vad low', realtime: { type: 'semantic_vad', eagerness: 'low' }, stt: { turn_detection: 'patient' } },
];

function realtimeTurn(s: EventSocket, q: Question): Promise<Turn> {
  return withAudio<Turn>(
    (frame) => s.ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: frame.toString('base64') })),
    q,
    'realtime',
    (audio, settle) => {
      let stoppedAt = NaN;
      let completedAt = NaN;
      let audioAt = NaN;
      let responseId: string | undefined;
      let done: { llm: number; firstAudio: number } | undefined;
      let cutOffs = 0;
      const audible = new AudibleWatch();
      s.handler = (e, at) => {
        if (e.type === 'error') return settle.reject(new Error(`realtime error event: ${JSON.stringify(e.error)}`));
        if (e.type === 'input_audio_buffer.speech_stopped') {
          if (Number.isNaN(audio.voicedSentAt)) cutOffs++;
          else if (Number.isNaN(stoppedAt)) stoppedAt = at;
        }
        if (e.type === 'conversation.item.input_audio_transcription.completed' && !Number.isNaN(stoppedAt) && Number.isNaN(completedAt)) completedAt = at;
        const response = e.response as { id: string; status: string; svc_timings: { llm_first_token_ms: number; first_audio_ms: number } } | undefined;
        if (e.type === 'response.created' && !Number.isNaN(stoppedAt) && !responseId) responseId = response!.id;
        if (e.type === 'response.output_audio.delta' && e.response_id === responseId) {
          if (Number.isNaN(audioAt)) audioAt = at;
          audible.sentBytes(Buffer.from(e.delta as string, 'base64'), 'pcm_s16le', RATE, at);
          if (audible.heardAt !== undefined) audio.stop();
        }
        if (e.type === 'response.done' && response!.id === responseId) {
          if (response!.status !== 'completed' || Number.isNaN(audioAt) || audible.heardAt === undefined)
            return settle.reject(new Error(`realtime response ${response!.status}${Number.isNaN(audioAt) ? ' without audio' : ''}`));
          done = { llm: response!.svc_timings.llm_first_token_ms, firstAudio: response!.svc_timings.first_audio_ms };
        }
        // The gateway's own figures for the turn come after response.done.
        if (e.type !== 'svc.turn_latency' || e.response_id !== responseId || !done) return;
        s.handler = undefined;
        settle.resolve({
          turnDetection: stoppedAt - audio.voicedSentAt,
          transcriptFinal: completedAt - stoppedAt,
          llmFirstToken: done.llm,
          ttsFirstAudio: done.firstAudio - done.llm,
          gatewayAdded: audioAt - completedAt - done.firstAudio,
          endToAudio: audioAt - stoppedAt,
          total: audioAt - audio.voicedSentAt,
          audible: audible.heardAt! - audio.voicedSentAt,
          gatewayAudible: e.first_audible_ms as number,
          cutOffs,
        });
      };
    },
  );
}

interface Routes {
  origin: string;
  key: string;
  agent: Agent;
  tts: EventSocket;
  voice: string;
}
let contexts = 0;

/** The LLM streamed to its end, then its whole reply spoken; `onAudio` at the first chunk. */
async function answerOverRoutes(
  r: Routes,
  transcript: string,
  onAudio: () => void,
): Promise<{ firstTokenAt: number; firstAudioAt: number; audibleAt: number }> {
  // As a streaming client composes the routes (LiveKit's and pipecat's Cartesia TTS): each LLM
  // token goes to the TTS socket as it arrives (continue: true), the context ends with the reply.
  const id = `turn-${++contexts}`;
  const generation = {
    model_id: TTS,
    voice: { mode: 'id', id: r.voice },
    output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: RATE },
    language: 'en',
    context_id: id,
  };
  const firstAudio = new Promise<{ first: number; audible: number }>((resolve, reject) => {
    let first = NaN;
    const audible = new AudibleWatch();
    r.tts.handler = (e, at) => {
      if (e.context_id !== id) return;
      if (e.type === 'chunk') {
        if (Number.isNaN(first)) first = at;
        audible.sentBytes(Buffer.from(e.data as string, 'base64'), 'pcm_s16le', RATE, at);
        if (audible.heardAt !== undefined) onAudio();
      }
      if (e.type === 'error') reject(new Error(`/tts/websocket error event: ${JSON.stringify(e)}`));
      if (e.type === 'done') {
        r.tts.handler = undefined;
        if (audible.heardAt === undefined) reject(new Error('/tts/websocket: done without audible audio'));
        else resolve({ first, audible: audible.heardAt });
      }
    };
  });
  const res = await request(`${r.origin}/v1/chat/completions`, {
    method: 'POST',
    dispatcher: r.agent,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${r.key}` },
    body: JSON.stringify({ model: LLM, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: transcript }] }),
  });
  let firstTokenAt = NaN;
  let reply = '';
  let buf = '';
  for await (const piece of res.body) {
    const at = performance.now();
    buf += (piece as Buffer).toString('utf8');
    let end: number;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const data = buf.slice(0, end).replace(/^data: /, '');
      buf = buf.slice(end + 2);
      if (data === '[DONE]' || !data.startsWith('{')) continue;
      const content = (JSON.parse(data) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content;
      if (!content) continue;
      if (Number.isNaN(firstTokenAt)) firstTokenAt = at;
      reply += content;
      r.tts.ws.send(JSON.stringify({ ...generation, transcript: content, continue: true }));
    }
  }
  if (res.statusCode !== 200 || !reply) throw new Error(`/v1/chat/completions answered ${res.statusCode} with "${reply}"`);
  r.tts.ws.send(JSON.stringify({ ...generation, transcript: '', continue: false }));
  const { first, audible } = await firstAudio;
  return { firstTokenAt, firstAudioAt: first, audibleAt: audible };
}

function routesTurn(stt: EventSocket, r: Routes, q: Question): Promise<Turn> {
  return withAudio<Turn>(
    (frame) => stt.ws.send(frame),
    q,
    'routes',
    (audio, settle) => {
      let cutOffs = 0;
      let endAt = NaN;
      let answering = false;
      const finals: string[] = [];
      stt.handler = (e, at) => {
        if (e.type === 'error') return settle.reject(new Error(`/stt/websocket error event: ${JSON.stringify(e)}`));
        if (e.type === 'transcript' && e.is_final && typeof e.text === 'string' && e.text) finals.push(e.text);
        if (e.type === 'turn.end') {
          if (Number.isNaN(audio.voicedSentAt)) return void cutOffs++;
          if (Number.isNaN(endAt)) endAt = at;
          return;
        }
        // The turn's final transcript is all in (it follows turn.end): the answer starts.
        if (e.type !== 'turn.finalized' || Number.isNaN(endAt) || answering) return;
        answering = true;
        const finalAt = at;
        answerOverRoutes(r, finals.join(' '), () => audio.stop()).then(({ firstTokenAt, firstAudioAt, audibleAt }) => {
          settle.resolve({
            turnDetection: endAt - audio.voicedSentAt,
            transcriptFinal: finalAt - endAt,
            llmFirstToken: firstTokenAt - finalAt,
            ttsFirstAudio: firstAudioAt - firstTokenAt,
            gatewayAdded: NaN,
            endToAudio: firstAudioAt - endAt,
            total: firstAudioAt - audio.voicedSentAt,
            audible: audibleAt - audio.voicedSentAt,
            gatewayAudible: NaN,
            cutOffs,
          });
        }, settle.reject);
      };
    },
  );
}

// ---- the run

const questions = await Promise.all(QUESTIONS.map((text) => question(text)));
const upstream = await startTs('bench/upstream-server.ts', {
  BENCH_UPSTREAM_MODE: 'stream',
  BENCH_STREAM_CHUNKS: JSON.stringify(REPLY),
  BENCH_STREAM_DELAY_MS: String(tokenMs),
});
const fx = await voiceFixture();
{
  const db = openDatabase(fx.databaseUrl);
  await upsertModel(db.prisma, checkProtocol, {
    id: LLM,
    modality: 'llm',
    prices: { inputPicoPerToken: 150_000n, outputPicoPerToken: 600_000n },
    upstream: { url: upstream.url, protocol: 'openai' },
  });
  await db.close();
}
// No periodic health checks against the scripted LLM while measuring. Each path's socket waits
// while the two others take their turns (a WebRTC turn lasts until its answer has played): the
// streaming sockets' idle limit is raised past that.
const gateway = await startBundled('bench/gateway-server.ts', { ...fx.env, SVC_HEALTH_CHECK_SECONDS: '3600', SVC_STT_IDLE_SECONDS: '120' });
const cleanup = () => {
  gateway.child.kill('SIGTERM');
  upstream.child.kill('SIGTERM');
  fx.remove();
};
process.once('SIGINT', () => {
  cleanup();
  process.exit(130);
});

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const fmt = (x: number) => (Number.isNaN(x) ? '-' : Math.abs(x) < 100 ? x.toFixed(1) : x.toFixed(0));
const p50 = (xs: number[]) => (xs.length ? median(xs) : NaN);
const p90 = (xs: number[]) => percentile(sorted(xs), 90);
const both = (xs: number[]) => `${fmt(p50(xs))} / ${fmt(p90(xs))}`;

try {
  const ws = gateway.url.replace(/^http/, 'ws');
  const auth = { authorization: `Bearer ${fx.key}` };
  const load = [loadavg()[0]!];
  const started = performance.now();
  const tts = (await EventSocket.open(`${ws}/tts/websocket`, { ...auth, 'cartesia-version': '2025-04-16' }, false)).socket;
  const agent = new Agent({ connections: 2, keepAliveTimeout: 60_000 });
  const rows: Record<string, string | number>[] = [];
  const comparisons: Record<string, string | number>[] = [];
  const transports: Record<string, string | number>[] = [];
  const verdicts: string[] = [];
  const firstTurnRows: Record<string, string | number>[] = [];
  for (const setting of SETTINGS.filter((s) => !values.settings || values.settings.split(',').some((want) => s.name.includes(want)))) {
    const openRealtime = async () => {
      const rt = await EventSocket.open(`${ws}/v1/realtime?model=${LLM}`, auth);
      if (rt.first?.type !== 'session.created') throw new Error(`/v1/realtime: first event ${JSON.stringify(rt.first)}`);
      const updated = rt.socket.next('session.updated');
      rt.socket.ws.send(
        JSON.stringify({
          type: 'session.update',
          session: { type: 'realtime', svc_turn_latency: true, svc_preemptive_answers: preemptive, audio: { input: { turn_detection: setting.realtime } } },
        }),
      );
      await updated;
      return rt;
    };
    const rt = await openRealtime();
    const voice = (rt.first!.session as { audio: { output: { voice: string } } }).audio.output.voice;
    const query = new URLSearchParams({ model: 'local-stt', sample_rate: String(RATE), encoding: 'pcm_s16le', turn_source: 'gateway', ...setting.stt });
    const stt = await EventSocket.open(`${ws}/stt/websocket?${query}`, auth);
    if (stt.first?.type !== 'session.started') throw new Error(`/stt/websocket: first event ${JSON.stringify(stt.first)}`);
    const routes: Routes = { origin: gateway.url, key: fx.key, agent, tts, voice };
    const session = {
      type: 'realtime',
      model: LLM,
      svc_turn_latency: true,
      svc_preemptive_answers: preemptive,
      audio: { input: { turn_detection: setting.realtime } },
    };
    const rtc = await WebRtcCall.open(gateway.url, fx.key, session);
    if (rtc.first.type !== 'session.created') throw new Error(`/v1/realtime/calls: first event ${JSON.stringify(rtc.first)}`);
    const realtime: Turn[] = [];
    const separate: Turn[] = [];
    const webrtc: Turn[] = [];
    for (let i = 0; i < warmup + turns; i++) {
      const q = questions[i % questions.length]!;
      const steps = [
        async () => realtime.push(await realtimeTurn(rt.socket, q)),
        async () => separate.push(await routesTurn(stt.socket, routes, q)),
        async () => webrtc.push(await webrtcTurn(rtc.call, q)),
      ];
      for (let k = 0; k < steps.length; k++) await steps[(k + i) % steps.length]!();
      process.stderr.write('.');
    }
    rt.socket.ws.close();
    await rtc.call.close();
    // Each a session's first turn: the engines it needs opened (or not) before the user's first words.
    const firsts: Turn[] = [];
    for (let i = 0; i < firstTurns; i++) {
      const fresh = await openRealtime();
      firsts.push(await realtimeTurn(fresh.socket, questions[i % questions.length]!));
      fresh.socket.ws.close();
      process.stderr.write(':');
    }
    stt.socket.ws.send(JSON.stringify({ type: 'close' }));
    const r = realtime.slice(warmup);
    const s = separate.slice(warmup);
    const w = webrtc.slice(warmup);
    const col = (ts: Turn[], k: keyof Turn) => ts.map((t) => t[k]);
    const cutOffs = (ts: Turn[]) => ts.reduce((n, t) => n + t.cutOffs, 0);
    const row = (path: string, ts: Turn[], endName: string) => ({
      setting: setting.name,
      path,
      'end of speech → turn end': both(col(ts, 'turnDetection')),
      'turn end → final transcript': both(col(ts, 'transcriptFinal')),
      'LLM first token': both(col(ts, 'llmFirstToken')),
      'TTS first audio': both(col(ts, 'ttsFirstAudio')),
      'gateway-added': both(col(ts, 'gatewayAdded')),
      [`turn end → first audio`]: `${both(col(ts, 'endToAudio'))} (${endName})`,
      'end of speech → first audio': both(col(ts, 'total')),
      'end of speech → first audible': both(col(ts, 'audible')),
      'same, gateway clock': both(col(ts, 'gatewayAudible')),
      'cut-offs': cutOffs(ts),
    });
    rows.push(row('/v1/realtime', r, 'speech_stopped'));
    rows.push(row('/v1/realtime/calls (WebRTC)', w, 'speech_stopped'));
    rows.push(row('stt + chat + tts routes', s, 'turn.end'));
    const rtEnd = col(r, 'endToAudio');
    const sEnd = col(s, 'endToAudio');
    comparisons.push({
      setting: setting.name,
      'realtime speech_stopped → first audio p50': fmt(p50(rtEnd)),
      'routes turn.end → first audio p50': fmt(p50(sEnd)),
      'realtime − routes p50': fmt(p50(rtEnd) - p50(sEnd)),
      'paired diff p50': fmt(p50(rtEnd.map((x, i) => x - sEnd[i]!))),
      'realtime / routes p50': (p50(rtEnd) / p50(sEnd)).toFixed(2),
    });
    const added = p50(col(r, 'gatewayAdded'));
    verdicts.push(`${setting.name}: gateway-added ${fmt(added)} ms p50 (target ≤ 20 ms): ${added <= 20 ? 'met' : 'NOT met'}`);
    if (firsts.length) {
      const first = p50(col(firsts, 'audible'));
      const later = p50(col(r, 'audible'));
      firstTurnRows.push({
        setting: setting.name,
        'first turn: end of speech → first audible p50 / p90': both(col(firsts, 'audible')),
        'later turns p50 / p90': both(col(r, 'audible')),
        'first / later p50': (first / later).toFixed(2),
      });
      verdicts.push(
        `${setting.name}: a session's first turn ${((first / later - 1) * 100).toFixed(0)} % slower than its later ones, p50 (target ≤ 10 %): ${first <= later * 1.1 ? 'met' : 'NOT met'}`,
      );
    }
    if (preemptive) {
      // Issue #32: with preemptive answers the first audible sample comes within 30 ms of the turn's end.
      const over = p50(col(r, 'audible')) - p50(col(r, 'turnDetection'));
      verdicts.push(
        `${setting.name}: end of speech → first audible ${fmt(over)} ms after end of speech → turn end, p50 (target ≤ 30 ms): ${over <= 30 ? 'met' : 'NOT met'}`,
      );
    }
    const wsAudible = col(r, 'audible');
    const rtcAudible = col(w, 'audible');
    const transportAdded = (ts: Turn[]) => fmt(p50(ts.map((t) => t.audible - t.gatewayAudible)));
    const gap = p50(rtcAudible) - p50(wsAudible);
    transports.push({
      setting: setting.name,
      'WebSocket: end of speech → first audible p50': fmt(p50(wsAudible)),
      'WebRTC: end of speech → first audible p50': fmt(p50(rtcAudible)),
      'WebRTC − WebSocket p50': fmt(gap),
      'paired diff p50': fmt(p50(rtcAudible.map((x, i) => x - wsAudible[i]!))),
      'transport-added WebSocket / WebRTC p50': `${transportAdded(r)} / ${transportAdded(w)}`,
    });
    verdicts.push(
      `${setting.name}: WebRTC's first audible sample ${fmt(gap)} ms after the WebSocket's, p50 (target ≤ 20 ms): ${gap <= 20 ? 'met' : 'NOT met'}`,
    );
  }
  tts.ws.close();
  await agent.close();
  load.push(loadavg()[0]!);
  process.stderr.write('\n');
  console.log(`\nRealtime loop, ${new Date().toISOString().slice(0, 10)}, \`npx tsx bench/realtime.ts${args.length ? ' ' + args.join(' ') : ''}\``);
  console.log(
    `${turns} turns per setting and path after ${warmup} warm-up, alternating; ${QUESTIONS.length} flite questions at real time in ${FRAME_MS} ms frames; scripted LLM "${REPLY.join('')}" in ${REPLY.length} chunks; ` +
      `local-stt, ${TTS}, pcm16 24 kHz; ${Math.round((performance.now() - started) / 1000)} s; load average (1 min) ${load.map((l) => l.toFixed(1)).join(' → ')} on ${availableParallelism()} cores. ms, p50 / p90\n`,
  );
  console.log(table(rows));
  console.log(
    "\nLLM first token: on /v1/realtime and the WebRTC call from the response's start, in the gateway (svc_timings); on the routes from turn.finalized, at the client (the request's round trip included). TTS first audio: from the LLM's first token. First audible: the first sample above -50 dBFS as a client playing from the first byte hears it.",
  );
  console.log('\n' + table(comparisons));
  console.log(
    "\nTransport-added: end of speech → first audible sample at the client less the same on the gateway's clock (svc.turn_latency.first_audible_ms).",
  );
  console.log('\n' + table(transports));
  if (firstTurnRows.length) {
    console.log(`\nFirst turns: ${firstTurns} fresh /v1/realtime sessions per setting, one question each, against the later turns of the long session above.`);
    console.log('\n' + table(firstTurnRows));
  }
  console.log('\n' + verdicts.join('\n'));
} finally {
  cleanup();
}
// werift (0.25.2) keeps a call's ICE sockets open after close(): the run ends here, not when they do.
process.exit();
