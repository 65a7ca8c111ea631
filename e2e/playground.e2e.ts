// Black-box story of the playground's chat, streaming speech, microphone recording, "copy as
// code" and disabled buttons' reasons, as a user drives them at a desktop (1280×800) and a phone
// (390×844) viewport: Debian's Chromium with a fake microphone fed from a WAV file flite speaks
// (--use-file-for-fake-audio-capture; Chromium loops it), `next start` and `svc gateway` on a
// throw-away SQLite database, the local engines (flite, pocketsphinx) and a scripted
// OpenAI-compatible LLM (test/support/scripted-openai-upstream.ts) whose answer comes in pieces.
// Sign up; with no LLM configured the chat says so; register the LLM, grant credit; then at each
// viewport: a streamed chat answer with its tokens, cost and request id (its Logs row opens);
// streaming speech over /tts/websocket with an access token (never a key) and its time to first
// audio; a recording from the microphone with a level meter transcribed; a recording cloned into
// a voice; "copy as code" in curl, JavaScript and Python with $SVC_API_KEY, copied to the
// clipboard; and the reasons on disabled buttons.
//
//   npx playwright test e2e/playground.e2e.ts      (builds the dashboard when there is no build; E2E_BUILD=1 rebuilds)
//
// Screenshots go to e2e/screenshots/playground-*.png. Processes, browser and accounts: e2e/support/.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type Page } from '@playwright/test';
import { until } from '../test/support/poll.ts';
import { startScriptedUpstream, type ScriptedUpstream } from '../test/support/scripted-openai-upstream.ts';
import { grantCredits, PASSWORD, signUp, type Account } from './support/accounts.ts';
import { assertFitsWidth, PHONE, type BrowserSession } from './support/browser.ts';
import { NODE, ROOT } from './support/processes.ts';
import { setUpStory } from './support/story.ts';

const USER: Account = { name: 'Playground Tester', email: 'e2e.playground@example.com', password: PASSWORD };
const LLM = 'playground-e2e-llm';
const ANSWER_PIECES = ['The ', 'capital ', 'of ', 'France ', 'is ', 'Paris. ', 'It ', 'stands ', 'on ', 'the ', 'Seine.'];
const ANSWER = ANSWER_PIECES.join('');
// What the fake microphone says (looped): long enough for a clone's 10 s.
const SPOKEN =
  'Good morning, and thank you for calling. This recording is long enough to clone a voice from it. ' +
  'It talks about the weather, the trains that run late on Mondays, and the coffee that is never hot enough.';
const DESKTOP = { width: 1280, height: 800 };

const fixtures = mkdtempSync(join(tmpdir(), 'svc-e2e-playground-'));

/** flite's 16-bit mono WAV of `text` (rms voice), made as the file loads: the browser's launch options name it. */
function spokenWav(text: string): string {
  const file = join(fixtures, 'microphone.wav');
  const flite = spawnSync('flite', ['-voice', 'rms', '-o', file, text], { encoding: 'utf8' });
  if (flite.status !== 0) throw new Error(`flite failed: ${flite.stderr}`);
  return file;
}
const MICROPHONE = spokenWav(SPOKEN);

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

test.describe.serial('playground', () => {
  test.describe.configure({ timeout: 120_000 });
  let llm: ScriptedUpstream;
  const story = setUpStory(
    {
      name: 'playground',
      // The browser opens /tts/websocket at the gateway's public URL; "copy as code" names it too.
      env: ({ dash, api }) => ({ PUBLIC_BASE_URL: api, DASHBOARD_URL: dash }),
      gatewayEnv: { SVC_HEALTH_CHECK_SECONDS: '1', SVC_REGISTRY_REFRESH_SECONDS: '0.5', SVC_LOG_FLUSH_MS: '200' },
    },
    { actionTimeoutMs: 30_000, screenshotPrefix: 'playground-' },
  );
  let dash = '';
  let api = '';
  let browser: BrowserSession;
  let page: Page;
  let shot: BrowserSession['shot'];
  /** The URLs of the WebSockets the page opened. */
  const sockets: string[] = [];

  const svc = (...args: string[]): unknown => {
    const run = spawnSync(NODE, ['bin/svc.mjs', ...args, '--json'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', NODE_ENV: 'production', SVC_DATA_DIR: story.stack.dataDir },
      encoding: 'utf8',
    });
    assert(run.status === 0, `svc ${args.slice(0, 2).join(' ')} failed: ${run.stderr}`);
    return JSON.parse(run.stdout || 'null');
  };

  test.beforeAll(async () => {
    ({ dash, api } = story.stack);
    ({ browser } = story);
    ({ page, shot } = browser);
    // The list is all the origin gets: the microphone must be on it too.
    await browser.context.grantPermissions(['clipboard-read', 'clipboard-write', 'microphone'], { origin: dash });
    page.on('websocket', (ws) => sockets.push(ws.url()));
    // No LLM at first: the bundled llama.cpp model is switched off (it has no GGUF here anyway).
    svc('model', 'upsert', '--id', 'local-llm', '--modality', 'llm', '--status', 'disabled');
    llm = await startScriptedUpstream({ kind: 'stream', chunks: ANSWER_PIECES, delayMs: 150, usage: { prompt_tokens: 21, completion_tokens: 11 } });
  });
  test.afterAll(async () => {
    await llm?.close();
  });

  const section = (name: string) => page.getByRole('region', { name });
  const playground = async () => {
    await page.goto(`${dash}/playground`);
    await page.getByRole('heading', { level: 1, name: 'Playground' }).waitFor();
  };
  /** The code "Copy as code" shows in `language` for a section, and what Copy put on the clipboard. */
  const copyAsCode = async (name: string, language: 'curl' | 'JavaScript' | 'Python') => {
    const box = section(name).getByTestId('copy-as-code');
    if (!(await box.evaluate((el) => (el as HTMLDetailsElement).open))) await box.locator('summary').click();
    await box.getByRole('tab', { name: language, exact: true }).click();
    const code = (await box.getByTestId('code-sample').textContent()) ?? '';
    await box.getByRole('button', { name: 'Copy' }).click();
    await box.getByRole('button', { name: 'Copied' }).waitFor();
    const copied = await page.evaluate(() => navigator.clipboard.readText());
    assert.equal(copied, code, `${name}: the clipboard holds something else than the code shown`);
    assert(!code.includes('sk_svc_'), `${name}: a key in the code`);
    return code;
  };
  const assertCodeNames = (code: string, what: string, parts: string[]) => {
    for (const part of parts) assert(code.includes(part), `${what}: "${part}" is not in\n${code}`);
  };

  test('signs up; with no LLM configured the chat says so on its Send button', async () => {
    await signUp(page, dash, USER);
    await page.setViewportSize(DESKTOP);
    await playground();
    const chat = section('Chat');
    const send = chat.getByRole('button', { name: 'Send' });
    await chat.getByText('No LLM model is configured', { exact: false }).waitFor();
    assert(await send.isDisabled(), 'Send is offered without an LLM');
    assert.equal(
      await send.getAttribute('aria-describedby'),
      await chat.getByTestId('disabled-reason').getAttribute('id'),
      'the reason is not tied to the button',
    );
    await shot('no-llm');
  });

  test('an operator registers an LLM; the org gets credit', async () => {
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
    );
    // The gateway's registry reloads from the database: wait until it serves the LLM (asked with a key of an org of the test's own).
    const org = svc('org', 'create', '--name', 'E2E probe') as { id: string };
    const { key } = svc('key', 'create', '--org', org.id) as { key: string };
    await until(
      `the gateway to serve ${LLM}`,
      async () => {
        const models = (await (await fetch(`${api}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as { data?: { id: string }[] };
        return models.data?.some((m) => m.id === LLM) ?? false;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    await grantCredits(page, '5');
  });

  for (const viewport of [DESKTOP, PHONE]) {
    const at = `${viewport.width}×${viewport.height}`;
    const tag = viewport === DESKTOP ? 'desktop' : 'phone';

    test(`[${at}] the page fits, with a note on the local engines and where real ones come from`, async () => {
      await page.setViewportSize(viewport);
      await playground();
      await page.waitForLoadState('networkidle');
      await assertFitsWidth(page, `the playground at ${at}`);
      const note = page.getByTestId('local-engines-note');
      await note.locator('summary').click();
      await note.getByText('PocketSphinx, a small recognizer whose transcripts are rough', { exact: false }).waitFor();
      await note.getByText('docs/engines-and-protocols.md').waitFor();
      await note.getByText('svc model upsert').waitFor();
      await shot(`${tag}-page`);
    });

    test(`[${at}] chat: the answer streams in, with its tokens, cost and request id linking to its Logs row`, async () => {
      const chat = section('Chat');
      await chat.getByLabel('LLM').selectOption(LLM);
      await chat.getByText('Type a message.').waitFor();
      assert(await chat.getByRole('button', { name: 'Send' }).isDisabled(), 'Send is offered with no message');
      // Every text the answer shows while it streams.
      await page.evaluate(() => {
        const w = window as unknown as { __answers: string[] };
        w.__answers = [];
        new MutationObserver(() => {
          const text = document.querySelector('[data-testid="chat-assistant"][data-state="streaming"] [data-testid="chat-answer-text"]')?.textContent ?? '';
          if (text && text !== '…' && w.__answers.at(-1) !== text) w.__answers.push(text);
        }).observe(document.body, { subtree: true, childList: true, characterData: true });
      });
      await chat.getByLabel('Message').fill('What is the capital of France?');
      await chat.getByLabel('Message').press('Enter');
      const answer = chat.locator('[data-testid="chat-assistant"][data-state="done"]');
      await answer.getByText(ANSWER.trim()).waitFor();
      const seen = await page.evaluate(() => (window as unknown as { __answers: string[] }).__answers);
      assert(
        seen.some((text) => text.length < ANSWER.length && ANSWER.startsWith(text)),
        `the answer never showed in part while it streamed: ${JSON.stringify(seen)}`,
      );
      const usage = answer.getByTestId('chat-usage');
      await usage.getByTestId('chat-tokens').getByText('21 tokens in · 11 out').waitFor();
      const text = (await usage.textContent()) ?? '';
      // 21 × $1/M + 11 × $2/M = $0.000043.
      assert(text.includes('cost $0.000043'), `usage line: ${text}`);
      const requestId = /Request (\S+) ·/.exec(text)?.[1];
      assert(requestId, `no request id in: ${text}`);
      await shot(`${tag}-chat`);
      // Its row in Logs (written within a flush of the answer's end).
      await usage.getByRole('link', { name: 'See it in Logs' }).click();
      await page.waitForURL((url) => url.pathname === '/logs' && url.searchParams.get('request_id') === requestId);
      const row = page.locator(`[data-testid="log-row"][data-request-id="${requestId}"]`);
      await until(
        'the chat request in Logs',
        async () => {
          if ((await row.count()) > 0) return true;
          await page.reload();
          await page.getByRole('heading', { level: 1, name: 'Logs' }).waitFor();
          return (await row.count()) > 0;
        },
        { timeoutMs: 15_000, intervalMs: 300 },
      );
      await row.getByText(LLM).first().waitFor();
      await page.goBack();
      await page.getByRole('heading', { level: 1, name: 'Playground' }).waitFor();
    });

    test(`[${at}] chat: copy as code gives the conversation's request in curl, JavaScript and Python, with $SVC_API_KEY`, async () => {
      const chat = section('Chat');
      await chat.getByLabel('LLM').selectOption(LLM);
      await chat.getByLabel('Message').fill('And of Italy?');
      const curl = await copyAsCode('Chat', 'curl');
      assertCodeNames(curl, 'chat curl', [
        `${api}/v1/chat/completions`,
        '"Authorization: Bearer $SVC_API_KEY"',
        `"model": "${LLM}"`,
        'And of Italy?',
        '"stream": true',
      ]);
      const js = await copyAsCode('Chat', 'JavaScript');
      assertCodeNames(js, 'chat JavaScript', ['process.env.SVC_API_KEY', `"model": "${LLM}"`, 'And of Italy?']);
      const py = await copyAsCode('Chat', 'Python');
      assertCodeNames(py, 'chat Python', ["os.environ['SVC_API_KEY']", `"model": "${LLM}"`, 'And of Italy?', 'stream=True']);
      await shot(`${tag}-chat-code`);
    });

    test(`[${at}] streaming speech: played as it arrives over /tts/websocket with an access token, and its time to first audio`, async () => {
      const stream = section('Streaming speech');
      await stream.getByLabel('TTS model').selectOption('local-flite');
      await stream.getByLabel('Voice').locator('option[value="flite-slt"]').waitFor({ state: 'attached' });
      await stream.getByLabel('Voice').selectOption('flite-slt');
      const text = stream.getByLabel('Text');
      await text.fill('');
      await stream.getByText('Enter some text to speak.').waitFor();
      assert(await stream.getByRole('button', { name: 'Speak' }).isDisabled(), 'Speak is offered with no text');
      await text.fill('The first words play while the rest is still being made. Then the second sentence follows.');
      const before = sockets.length;
      await stream.getByRole('button', { name: 'Speak' }).click();
      await stream.locator('[data-testid="stream-status"][data-phase="done"]').waitFor();
      const url = sockets.slice(before).find((u) => u.includes('/tts/websocket'));
      assert(url, `no socket to /tts/websocket was opened: ${sockets.join(', ')}`);
      assert(url.startsWith(`${api.replace(/^http/, 'ws')}/tts/websocket?`), `the socket went to ${url}`);
      assert(/[?&]access_token=at_[A-Za-z0-9_.-]+/.test(url) && !url.includes('sk_svc_') && !url.includes('api_key'), `the socket's credential: ${url}`);
      const firstAudio = Number(await stream.getByTestId('first-audio-ms').getAttribute('data-ms'));
      assert(firstAudio > 0, `time to first audio: ${firstAudio}`);
      const seconds = Number(await stream.getByTestId('stream-seconds').getAttribute('data-seconds'));
      assert(seconds > 2, `only ${seconds} s of audio arrived`);
      console.log(`      [${at}] streaming speech: first audio ${Math.round(firstAudio)} ms after the text was sent, ${seconds} s of audio`);
      assert(!(await page.content()).includes('sk_svc_'), 'a key is in the page');
      await shot(`${tag}-stream`);
      const curl = await copyAsCode('Streaming speech', 'curl');
      assertCodeNames(curl, 'stream curl', [`${api}/tts/sse`, '$SVC_API_KEY', '"id": "flite-slt"', 'The first words play']);
      const js = await copyAsCode('Streaming speech', 'JavaScript');
      assertCodeNames(js, 'stream JavaScript', [
        `${api.replace(/^http/, 'ws')}/tts/websocket`,
        'process.env.SVC_API_KEY',
        '"model_id": "local-flite"',
        'The first words play',
      ]);
      const py = await copyAsCode('Streaming speech', 'Python');
      assertCodeNames(py, 'stream Python', ['websockets.connect', "os.environ['SVC_API_KEY']", '"flite-slt"']);
    });

    test(`[${at}] synthesize: its reasons, and copy as code for POST /tts/bytes`, async () => {
      const synth = section('Synthesize');
      const text = synth.getByLabel('Text');
      await text.fill('');
      await synth.getByTestId('disabled-reason').getByText('Enter some text to speak.').waitFor();
      assert(await synth.getByRole('button', { name: 'Synthesize' }).isDisabled(), 'Synthesize is offered with no text');
      await text.fill('Copy me as code, please.');
      await synth.getByTestId('disabled-reason').waitFor({ state: 'detached' });
      const curl = await copyAsCode('Synthesize', 'curl');
      assertCodeNames(curl, 'synthesize curl', [`${api}/tts/bytes`, '$SVC_API_KEY', '"transcript": "Copy me as code, please."', '-o speech.wav']);
      const py = await copyAsCode('Synthesize', 'Python');
      assertCodeNames(py, 'synthesize Python', ['requests.post', '"transcript": "Copy me as code, please."', 'speech.wav']);
    });

    test(`[${at}] transcribe: a recording from the microphone with a level meter, sent as the file`, async () => {
      const form = page.getByRole('form', { name: 'Transcribe a recording' });
      await form.getByText('Choose a recording, or record one.').waitFor();
      assert(await form.getByRole('button', { name: 'Transcribe' }).isDisabled(), 'Transcribe is offered without a recording');
      await recordFor(form, 3);
      await form.getByTestId('mic-take').waitFor();
      const file = await form
        .getByLabel('Recording (WAV or raw 16-bit PCM)')
        .evaluate((el: HTMLInputElement) => ({ name: el.files?.[0]?.name, size: el.files?.[0]?.size ?? 0 }));
      assert(file.name === 'recording.wav' && file.size > 16000 * 2 * 2, `the file input holds ${JSON.stringify(file)}`);
      await form.getByRole('button', { name: 'Transcribe' }).click();
      const transcript = page.getByTestId('transcript');
      await transcript.waitFor({ timeout: 60_000 });
      const heard = ((await transcript.textContent()) ?? '').trim();
      console.log(`      [${at}] the microphone was heard as: ${heard}`);
      assert(heard !== '' && heard !== '(no speech recognized)', 'nothing was recognized in the recording');
      await section('Transcribe').getByTestId('local-stt-note').waitFor();
      await shot(`${tag}-transcribed`);
      const curl = await copyAsCode('Transcribe', 'curl');
      assertCodeNames(curl, 'transcribe curl', [`${api}/v1/audio/transcriptions`, "-F 'file=@recording.wav'", "-F 'model=local-stt'"]);
      const js = await copyAsCode('Transcribe', 'JavaScript');
      assertCodeNames(js, 'transcribe JavaScript', ['openAsBlob("recording.wav")', 'process.env.SVC_API_KEY']);
    });

    test(`[${at}] clone: a recording of over 10 s from the microphone becomes a voice`, async () => {
      await page.goto(`${dash}/voices`);
      await page.getByRole('button', { name: 'Clone a voice' }).click();
      const form = page.getByRole('form', { name: 'Clone a voice' });
      await form.getByText('Choose a recording, or record one.').waitFor();
      assert(await form.getByRole('button', { name: 'Upload and clone' }).isDisabled(), 'Upload is offered without a recording');
      await recordFor(form, 11, true);
      await form.getByTestId('mic-take').waitFor();
      await form.getByText('Name the voice.').waitFor();
      await form.getByLabel('Voice name').fill(`Mic voice ${tag}`);
      await form.getByTestId('disabled-reason').waitFor({ state: 'detached' });
      await form.getByLabel('TTS model').selectOption('local-flite');
      await form.getByRole('button', { name: 'Upload and clone' }).click();
      const ready = form.getByText(`Voice “Mic voice ${tag}” is ready`);
      const queued = form.getByTestId('job-progress');
      await ready.or(queued).waitFor({ timeout: 60_000 });
      if (await queued.isVisible()) await form.locator('[data-testid="job-progress"][data-status="succeeded"]').waitFor({ timeout: 60_000 });
      // The form is cleared for the next voice: the take with it.
      await form.getByTestId('mic-take').waitFor({ state: 'detached' });
      await assertFitsWidth(page, `the clone form at ${at}`);
      await shot(`${tag}-cloned`);
    });
  }

  /** Records from the (fake) microphone until the clock passes `seconds`: the meter moves, Stop ends it. */
  async function recordFor(form: ReturnType<Page['getByRole']>, seconds: number, minimumSaid = false) {
    await form.getByRole('button', { name: 'Record from the microphone' }).click();
    const meter = form.getByRole('meter', { name: 'Microphone level' });
    await meter.waitFor();
    // The level meter follows the voice: it reads well above silence at some point.
    await page.waitForFunction(() => Number(document.querySelector('[data-testid="mic-level"]')?.getAttribute('aria-valuenow')) >= 20, undefined, {
      timeout: 20_000,
    });
    if (minimumSaid) await form.getByText('keep going: at least 10 s are needed', { exact: false }).waitFor();
    await page.waitForFunction((s) => Number(document.querySelector('[data-testid="mic-elapsed"]')?.getAttribute('data-seconds')) >= s, seconds, {
      timeout: 30_000,
    });
    await shot(`recording-${seconds}s`);
    await form.getByRole('button', { name: 'Stop recording' }).click();
  }

  test('no uncaught errors in the browser', async () => {
    assert(browser.errors.length === 0, browser.errors.join('\n'));
  });
});
