// Black-box test of the Talk page as a user drives it: Debian's Chromium with a fake microphone
// fed from a WAV file (--use-file-for-fake-audio-capture; Chromium loops it), `next start` and
// `svc gateway` on a throw-away SQLite database, a realtime profile of local engines (local-stt,
// local-flite) and a scripted OpenAI-compatible LLM (test/support/scripted-openai-upstream.ts),
// so the answer is always the same words. The question is spoken by flite in the test's setup,
// followed by silence; when the file loops the question comes again while the (long) answer is
// playing: that is the barge-in. Sign up, grant credit, open Talk, start: the question's
// transcript appears, the answer's text appears and its audio arrives on the remote track (the
// track's received audio energy grows), the answer is cut short by the user talking over it, the
// gateway's latencies of the answer are shown, and Stop hangs up.
//
//   npx playwright test e2e/talk.e2e.ts      (builds the dashboard when there is no build; E2E_BUILD=1 rebuilds)
//
// Screenshots go to e2e/screenshots/talk*.png. Processes, browser and accounts: e2e/support/.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type Page } from '@playwright/test';
import { startScriptedUpstream, type ScriptedUpstream } from '../test/support/scripted-openai-upstream.ts';
import { until } from '../test/support/poll.ts';
import { grantCredits, PASSWORD, signUp, type Account } from './support/accounts.ts';
import { assertPagesFitPhone, mainNav, type BrowserSession } from './support/browser.ts';
import { NODE, ROOT } from './support/processes.ts';
import { setUpStory } from './support/story.ts';

const USER: Account = { name: 'Talk Tester', email: 'e2e.talk@example.com', password: PASSWORD };
const QUESTION = 'What is the capital of France?';
// Long enough (about fifteen seconds of speech) that the looped question always comes back while it plays.
const ANSWER =
  'Paris is the capital of France. It stands on the river Seine, in the north of the country. ' +
  'It is known for its museums, its cafes and its long avenues, and millions of people visit it every year. ' +
  'The city has been the seat of the government for many centuries, and it is also the largest city of France.';
const PROFILE = 'talk-e2e';
const LLM = 'talk-e2e-llm';
// The pause after the question: the turn ends well within it, and the answer's first sentence
// (about two seconds) plays whole before the question comes again, even on a loaded machine.
const SILENCE_SECONDS = 6;

const fixtures = mkdtempSync(join(tmpdir(), 'svc-e2e-talk-'));

/** flite's 16-bit mono WAV of `text`, followed by `silenceSeconds` of silence (one canonical RIFF file). */
function spokenWav(text: string, silenceSeconds: number): Buffer {
  const file = join(fixtures, 'flite.wav');
  const flite = spawnSync('flite', ['-voice', 'rms', '-o', file, text], { encoding: 'utf8' });
  if (flite.status !== 0) throw new Error(`flite failed: ${flite.stderr}`);
  const wav = readFileSync(file);
  let offset = 12;
  let rate = 0;
  while (offset + 8 <= wav.length) {
    const id = wav.toString('ascii', offset, offset + 4);
    const size = wav.readUInt32LE(offset + 4);
    if (id === 'fmt ') {
      assert(
        wav.readUInt16LE(offset + 8) === 1 && wav.readUInt16LE(offset + 10) === 1 && wav.readUInt16LE(offset + 22) === 16,
        'flite did not write 16-bit mono PCM',
      );
      rate = wav.readUInt32LE(offset + 12);
    }
    if (id === 'data') {
      const pcm = Buffer.concat([wav.subarray(offset + 8, offset + 8 + size), Buffer.alloc(Math.round(rate * silenceSeconds) * 2)]);
      const header = Buffer.alloc(44);
      header.write('RIFF', 0, 'ascii');
      header.writeUInt32LE(36 + pcm.length, 4);
      header.write('WAVEfmt ', 8, 'ascii');
      header.writeUInt32LE(16, 16);
      header.writeUInt16LE(1, 20);
      header.writeUInt16LE(1, 22);
      header.writeUInt32LE(rate, 24);
      header.writeUInt32LE(rate * 2, 28);
      header.writeUInt16LE(2, 32);
      header.writeUInt16LE(16, 34);
      header.write('data', 36, 'ascii');
      header.writeUInt32LE(pcm.length, 40);
      return Buffer.concat([header, pcm]);
    }
    offset += 8 + size + (size % 2);
  }
  throw new Error('flite wrote a WAV without a data chunk');
}

// The fake microphone's file and the profiles file are made as the file loads: the browser's
// launch options and the stack's environment name them.
const MICROPHONE = join(fixtures, 'question.wav');
writeFileSync(MICROPHONE, spokenWav(QUESTION, SILENCE_SECONDS));
const PROFILES = join(fixtures, 'realtime-profiles.json');
writeFileSync(
  PROFILES,
  JSON.stringify({ profiles: [{ id: PROFILE, stt: 'local-stt', llm: LLM, tts: 'local-flite', voice: 'flite-slt', instructions: 'Answer the question.' }] }),
);

test.use({
  launchOptions: [
    async ({ launchOptions }, use) =>
      use({
        ...launchOptions,
        args: [
          ...(launchOptions.args ?? []),
          '--use-fake-ui-for-media-stream',
          '--use-fake-device-for-media-stream',
          `--use-file-for-fake-audio-capture=${MICROPHONE}`,
          '--autoplay-policy=no-user-gesture-required',
        ],
      }),
    { scope: 'worker' },
  ],
});

/** Received audio of the page's peer connections (captured by the init script below): the inbound audio's total energy. */
const receivedAudioEnergy = (page: Page) =>
  page.evaluate(async () => {
    const pcs = (window as unknown as { __talkPcs: RTCPeerConnection[] }).__talkPcs;
    let energy = 0;
    for (const pc of pcs) {
      const stats = await pc.getStats();
      stats.forEach((s: { type: string; kind?: string; totalAudioEnergy?: number }) => {
        if (s.type === 'inbound-rtp' && s.kind === 'audio') energy += s.totalAudioEnergy ?? 0;
      });
    }
    return energy;
  });

test.describe.serial('talk', () => {
  test.describe.configure({ timeout: 90_000 });
  let llm: ScriptedUpstream;
  const story = setUpStory(
    {
      name: 'talk',
      // The browser sends its offer to the gateway's public URL; both processes read the profiles.
      env: ({ dash, api }) => ({ PUBLIC_BASE_URL: api, DASHBOARD_URL: dash, SVC_REALTIME_PROFILES_FILE: PROFILES }),
      gatewayEnv: { SVC_HEALTH_CHECK_SECONDS: '1', SVC_REGISTRY_REFRESH_SECONDS: '0.5' },
    },
    { actionTimeoutMs: 30_000, screenshotPrefix: 'talk-' },
  );
  let dash = '';
  let api = '';
  let browser: BrowserSession;
  let page: Page;
  let shot: BrowserSession['shot'];

  test.beforeAll(async () => {
    ({ dash, api } = story.stack);
    ({ browser } = story);
    ({ page, shot } = browser);
    llm = await startScriptedUpstream({ kind: 'stream', chunks: ANSWER.split(/(?<= )/), usage: { prompt_tokens: 20, completion_tokens: 60 } });
    const svc = (...args: string[]): unknown => {
      const run = spawnSync(NODE, ['bin/svc.mjs', ...args], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NODE_ENV: 'production', SVC_DATA_DIR: story.stack.dataDir },
        encoding: 'utf8',
      });
      assert(run.status === 0, `svc ${args.slice(0, 2).join(' ')} failed: ${run.stderr}`);
      return JSON.parse(run.stdout || 'null');
    };
    svc(
      'model',
      'upsert',
      '--id',
      LLM,
      '--modality',
      'llm',
      '--upstream',
      llm.baseUrl,
      '--protocol',
      'openai',
      '--price-input-per-mtok',
      '1',
      '--price-output-per-mtok',
      '2',
      '--json',
    );
    // The gateway's registry reloads from the database: wait until it serves the new LLM (asked
    // with a key of an org of the test's own, not the user's).
    const org = svc('org', 'create', '--name', 'E2E probe', '--json') as { id: string };
    const { key } = svc('key', 'create', '--org', org.id, '--json') as { key: string };
    await until(
      `the gateway to serve ${LLM}`,
      async () => {
        const answer = await fetch(`${api}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
        const models = (await answer.json()) as { data?: { id: string }[] };
        return models.data?.some((m) => m.id === LLM) ?? false;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    // Every peer connection the page makes, to read its received audio; and what the remote
    // track plays, recorded (MediaRecorder: off the page's main thread, so a busy machine does
    // not drop any of it) to transcribe back.
    await page.addInitScript(() => {
      const w = window as unknown as { __talkPcs: RTCPeerConnection[]; __talkRecorders: MediaRecorder[]; __talkChunks: Blob[] };
      w.__talkPcs = [];
      w.__talkRecorders = [];
      w.__talkChunks = [];
      const Native = window.RTCPeerConnection;
      window.RTCPeerConnection = class extends Native {
        constructor(config?: RTCConfiguration) {
          super(config);
          w.__talkPcs.push(this);
          this.addEventListener('track', (e) => {
            const recorder = new MediaRecorder(e.streams[0] ?? new MediaStream([e.track]), { mimeType: 'audio/webm;codecs=opus' });
            recorder.ondataavailable = (d) => w.__talkChunks.push(d.data);
            recorder.start(500);
            w.__talkRecorders.push(recorder);
          });
        }
      };
    });
  });
  test.afterAll(async () => {
    await llm?.close();
  });

  test('signs up; without credit Start is disabled and says why', async () => {
    await signUp(page, dash, USER);
    await mainNav(page, 'Talk').click();
    await page.waitForURL(`${dash}/talk`);
    await page.getByRole('heading', { level: 1, name: 'Talk' }).waitFor();
    const start = page.getByRole('button', { name: 'Start talking' });
    await page.getByText('Your organization has no credit').waitFor();
    assert(await start.isDisabled(), 'Start is offered without credit');
    await shot('no-credit');
  });

  test('with credit, the profile is offered and Start is enabled', async () => {
    await grantCredits(page, '5');
    await mainNav(page, 'Talk').click();
    await page.waitForURL(`${dash}/talk`);
    const select = page.getByLabel('Agent', { exact: true });
    await select.locator(`option[value="${PROFILE}"]`).waitFor({ state: 'attached' });
    assert((await select.inputValue()) === PROFILE, 'the profile is not chosen');
    const start = page.getByRole('button', { name: 'Start talking' });
    await page.waitForFunction(() => !document.querySelector<HTMLButtonElement>('button[aria-describedby="talk-why"]'));
    assert(await start.isEnabled(), 'Start is disabled with credit, a profile and the microphone');
  });

  test('an LLM, a TTS model and a voice may be chosen instead of a profile', async () => {
    const agent = page.getByLabel('Agent', { exact: true });
    await agent.selectOption('__custom__');
    const llmSelect = page.getByLabel('LLM', { exact: true });
    await llmSelect.locator(`option[value="${LLM}"]`).waitFor({ state: 'attached' });
    await llmSelect.selectOption(LLM);
    await page.getByLabel('TTS model').selectOption('local-flite');
    const voice = page.getByLabel('Voice', { exact: true });
    await voice.locator('option').first().waitFor({ state: 'attached' });
    assert((await voice.inputValue()) !== '', 'no voice is offered for local-flite');
    await page.waitForFunction(() => !document.querySelector<HTMLButtonElement>('button[aria-describedby="talk-why"]'));
    assert(await page.getByRole('button', { name: 'Start talking' }).isEnabled(), 'Start is disabled with a model and a voice chosen');
    await shot('custom-agent');
    // The call below is the profile's.
    await agent.selectOption(PROFILE);
    await llmSelect.waitFor({ state: 'detached' });
  });

  test("a call: the question's transcript, the answer's text and audio, a barge-in, the latencies", async () => {
    await page.getByRole('button', { name: 'Start talking' }).click();
    await page.locator('[data-testid="talk-status"][data-phase="live"]').waitFor();
    // The question, transcribed by the local recognizer, as a final line. The call may open in
    // the middle of the looped file (its first line then holds the question's end): any line.
    const question = page
      .locator('[data-testid="talk-line-user"][data-done="true"]')
      .filter({ hasText: /capital/ })
      .first();
    await question.waitFor({ timeout: 60_000 });
    console.log(`      the question was heard as: ${((await question.textContent()) ?? '').replace(/^You: /, '').trim()}`);
    // The answer's words.
    const answer = page.getByTestId('talk-line-assistant').first();
    await answer.getByText('Paris is the capital', { exact: false }).waitFor({ timeout: 60_000 });
    // Its audio arrives on the remote track: the received energy grows past nothing.
    await until('the answer audio to arrive', async () => (await receivedAudioEnergy(page)) > 0, { timeoutMs: 30_000, intervalMs: 200 });
    const playing = await page.getByTestId('talk-audio').evaluate((el: HTMLAudioElement) => !el.paused && el.srcObject !== null);
    assert(playing, 'the answer audio element is not playing');
    // The looped question comes again while the answer plays: the answer is cut short.
    await page.locator('[data-testid="talk-line-assistant"][data-interrupted="true"]').first().waitFor({ timeout: 60_000 });
    // What the remote track played, transcribed back by the gateway's recognizer (through the
    // dashboard's proxy, as the playground sends a recording): the answer's words.
    const heardBack = await page.evaluate(async () => {
      const w = window as unknown as { __talkRecorders: MediaRecorder[]; __talkChunks: Blob[] };
      const recorder = w.__talkRecorders[0]!;
      await new Promise((resolve) => {
        recorder.onstop = resolve;
        recorder.stop();
      });
      const decoded = await new AudioContext().decodeAudioData(await new Blob(w.__talkChunks, { type: 'audio/webm' }).arrayBuffer());
      const heard = { rate: decoded.sampleRate, chunks: [decoded.getChannelData(0)] };
      const samples = heard.chunks.reduce((n, c) => n + c.length, 0);
      const wav = new DataView(new ArrayBuffer(44 + samples * 2));
      const text = (at: number, s: string) => [...s].forEach((ch, i) => wav.setUint8(at + i, ch.charCodeAt(0)));
      text(0, 'RIFF');
      wav.setUint32(4, 36 + samples * 2, true);
      text(8, 'WAVEfmt ');
      wav.setUint32(16, 16, true);
      wav.setUint16(20, 1, true);
      wav.setUint16(22, 1, true);
      wav.setUint32(24, heard.rate, true);
      wav.setUint32(28, heard.rate * 2, true);
      wav.setUint16(32, 2, true);
      wav.setUint16(34, 16, true);
      text(36, 'data');
      wav.setUint32(40, samples * 2, true);
      let at = 44;
      for (const chunk of heard.chunks) {
        for (const x of chunk) {
          wav.setInt16(at, Math.max(-1, Math.min(1, x)) * 0x7fff, true);
          at += 2;
        }
      }
      const form = new FormData();
      form.set('file', new Blob([wav.buffer], { type: 'audio/wav' }), 'heard.wav');
      form.set('model', 'local-stt');
      const answer = await fetch('/api/gateway/v1/audio/transcriptions', { method: 'POST', body: form });
      return { status: answer.status, seconds: samples / heard.rate, body: (await answer.json()) as { text?: string } };
    });
    console.log(`      the answer was heard back (${heardBack.seconds.toFixed(1)} s) as: ${heardBack.body.text}`);
    assert(heardBack.status === 200, `transcription answered ${heardBack.status}: ${JSON.stringify(heardBack.body)}`);
    // Words of the answer's first two sentences (the recognizer hears the Opus round trip of a
    // synthetic voice imperfectly: one of them is enough; none of them would be another sound).
    const answerWords = ['paris', 'capital', 'france', 'stands', 'river', 'seine', 'north', 'country'];
    const heardWords = (heardBack.body.text ?? '').toLowerCase().split(/\W+/);
    assert(
      answerWords.some((w) => heardWords.includes(w)),
      `the answer's audio was heard as: ${heardBack.body.text}`,
    );
    // Cut short: the answer's last sentence never played.
    assert(!/largest/i.test(heardBack.body.text ?? ''), `the whole answer played: ${heardBack.body.text}`);
    // The gateway's latencies of the answer.
    const latency = (await page.getByTestId('talk-latency').first().textContent({ timeout: 30_000 })) ?? '';
    console.log(`      latency of the first answer: ${latency}`);
    assert(/first token \d+ ms/.test(latency), `latency reads: ${latency}`);
    await shot('call');
  });

  test('Stop hangs up and releases the microphone', async () => {
    await page.getByRole('button', { name: 'Stop' }).click();
    await page.getByRole('button', { name: 'Start talking' }).waitFor();
    const states = await page.evaluate(() => (window as unknown as { __talkPcs: RTCPeerConnection[] }).__talkPcs.map((pc) => pc.connectionState));
    assert(states.length === 1 && states[0] === 'closed', `peer connections: ${states.join(', ')}`);
  });

  test('the page fits a phone-width screen', async () => {
    await assertPagesFitPhone(browser, dash, ['/talk'], () => 'phone');
  });

  test('no uncaught errors in the browser', async () => {
    assert(browser.errors.length === 0, browser.errors.join('\n'));
  });
});
