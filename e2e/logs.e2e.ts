// Black-box story of the Logs page with the gateway, as a developer chasing a request would drive
// them: a migrated throw-away SQLite database, `next start` and `svc gateway` on free ports
// against it, Debian's Chromium through @playwright/test. Sign up, two keys, credit; requests
// through the gateway (speech on both local engines, one refused, one TTS WebSocket session);
// find the failed one by the x-request-id its answer carried and open it; filter by key and by
// model (the filters in the URL); export CSV; open the session's detail with its per-turn
// waterfall; the Usage page's request figures and its link to the logs; phone width.
//
//   npx playwright test e2e/logs.e2e.ts      (builds the dashboard when there is no build; E2E_BUILD=1 rebuilds)
//
// Each step is a test of one serial chain: after a failure the rest are skipped.
// Screenshots go to e2e/screenshots/logs-*.png. Processes, browser and accounts: e2e/support/.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect, test, type Page } from '@playwright/test';
import WebSocket from 'ws';
import { createApiKey, grantCredits, PASSWORD, signUp } from './support/accounts.ts';
import { assertFitsWidth, DESKTOP, mainNav, PHONE } from './support/browser.ts';
import { setUpStory } from './support/story.ts';

const VOICES: Record<string, string> = { 'local-flite': 'flite-slt', 'local-espeak': 'espeak-en-us-m' };

interface ApiLog {
  id: string;
  request_id: string;
  kind: string;
  status: number;
  model: string | null;
  key: { id: string | null; name: string };
}

test.describe.serial('request logs', () => {
  // Rows are written every 200 ms here (1 s by default), so the page has them by the next poll.
  const story = setUpStory({ name: 'logs', gatewayEnv: { SVC_LOG_FLUSH_MS: '200' } }, { screenshotPrefix: 'logs-' });
  let dash = '';
  let api = '';
  let page: Page;
  let shot: (name: string) => Promise<void>;
  test.beforeAll(() => {
    ({ dash, api } = story.stack);
    ({ page, shot } = story.browser);
  });
  const nav = (label: string) => mainNav(page, label).click();

  const keys = { alpha: '', beta: '' };
  const ids = { alphaOk: 'e2e-alpha-speech', betaOk: 'e2e-beta-speech', failed: '', session: 'e2e-beta-session' };

  const speech = async (key: string, model: string, requestId?: string) => {
    const res = await fetch(`${api}/v1/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...(requestId ? { 'x-request-id': requestId } : {}) },
      body: JSON.stringify({ model, voice: VOICES[model] ?? 'flite-slt', input: 'Logs make every request visible.', response_format: 'wav' }),
    });
    await res.arrayBuffer();
    return { status: res.status, requestId: res.headers.get('x-request-id')! };
  };
  const apiLogs = async (query: string): Promise<ApiLog[]> => {
    const res = await fetch(`${api}/v1/logs?${query}`, { headers: { authorization: `Bearer ${keys.alpha}` } });
    assert(res.status === 200, `GET /v1/logs?${query}: ${res.status}`);
    return ((await res.json()) as { data: ApiLog[] }).data;
  };
  const rows = () => page.getByTestId('log-row');
  const requestIdsShown = () => rows().evaluateAll((els) => els.map((e) => e.getAttribute('data-request-id')));

  test('signs up, makes two keys and grants the org credit', async () => {
    await signUp(page, dash, { email: 'logs.e2e@example.com', password: PASSWORD });
    await nav('API keys');
    keys.alpha = await createApiKey(page, 'alpha');
    keys.beta = await createApiKey(page, 'beta');
    await grantCredits(page, '1');
  });

  test('requests through the gateway: speech with each key, one refused, one WebSocket session', async () => {
    assert.equal((await speech(keys.alpha, 'local-flite', ids.alphaOk)).status, 200);
    assert.equal((await speech(keys.beta, 'local-espeak', ids.betaOk)).status, 200);
    const failed = await speech(keys.alpha, 'no-such-model');
    assert.equal(failed.status, 404);
    assert.match(failed.requestId, /^req_/);
    ids.failed = failed.requestId;
    // A TTS WebSocket session, the key in its query as a browser client sends it.
    const ws = new WebSocket(`${api.replace(/^http/, 'ws')}/tts/websocket?api_key=${keys.beta}&cartesia_version=2025-04-16`, {
      headers: { 'x-request-id': ids.session },
    });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const done = new Promise<void>((resolve) => ws.on('message', (data) => (JSON.parse(String(data)) as { type: string }).type === 'done' && resolve()));
    ws.send(
      JSON.stringify({
        model_id: 'local-flite',
        voice: { mode: 'id', id: 'flite-slt' },
        output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 },
        language: 'en',
        context_id: 'c1',
        transcript: 'One turn.',
        continue: false,
      }),
    );
    await done;
    ws.close();
    await new Promise((resolve) => ws.once('close', resolve));
    // The session's row is written a flush after its socket closes (the others before it).
    await expect.poll(async () => (await apiLogs(`request_id=${ids.session}`)).length, { timeout: 15_000 }).toBe(1);
    assert.equal((await apiLogs('')).length, 4);
    // Its turns, as a realtime session records them (ctx.requestLog.turn, docs/logs.md), written
    // straight into the database: the TTS socket has no conversation turns of its own.
    const [session] = await apiLogs(`request_id=${ids.session}`);
    const db = new Database(join(story.stack.dataDir, 'svc.db'));
    const insert = db.prepare(
      `INSERT INTO "RequestLogTurn" (id, "requestLogId", "orgId", "turnIndex", "startMs", "speechEndMs", "endOfTurnMs", "llmFirstTokenMs", "ttsFirstAudioMs", "firstAudibleMs", "bargeInMs", "failoverReason", "createdAt")
       SELECT ?, id, "orgId", ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM "RequestLog" WHERE id = ?`,
    );
    const now = new Date().toISOString().replace('Z', '+00:00');
    insert.run('turn_e2e_0', 0, 200, 1400, 1750, 2300, 2650, 2700, null, null, now, session!.id);
    insert.run('turn_e2e_1', 1, 5200, 900, 1300, 3100, 3600, 3660, 4200, 'connect', now, session!.id);
    db.close();
  });

  test('finds the failed request by the request id its answer carried, and opens it', async () => {
    await nav('Logs');
    await page.waitForURL(`${dash}/logs`);
    await page.getByRole('heading', { level: 1, name: 'Logs' }).waitFor();
    await expect(rows()).toHaveCount(4);
    await shot('all');
    await page.getByLabel('Request id').fill(ids.failed);
    await page.getByRole('button', { name: 'Find' }).click();
    await page.waitForURL((url) => url.searchParams.get('request_id') === ids.failed);
    await expect(rows()).toHaveCount(1);
    const row = rows().first();
    assert.equal(await row.getAttribute('data-request-id'), ids.failed);
    await row.getByText('404').waitFor();
    await row.getByText('model_not_found').waitFor();
    await row.getByRole('link', { name: `Details of ${ids.failed}` }).click();
    await page.getByRole('heading', { level: 1, name: 'Request' }).waitFor();
    await page.getByTestId('log-status').getByText('404').waitFor();
    await page.getByTestId('log-status').getByText('model_not_found').waitFor();
    await page.getByText('/v1/audio/speech').first().waitFor();
    await shot('failed-detail');
    // An id that is not the org's finds nothing.
    await page.goto(`${dash}/logs?request_id=req_not_ours`);
    await page.getByText('No request with this id').waitFor();
  });

  test('filters by key and by model, the filters in the URL', async () => {
    await page.goto(`${dash}/logs`);
    await expect(rows()).toHaveCount(4);
    await page.getByLabel('Key').selectOption({ label: 'beta' });
    await page.waitForURL((url) => url.searchParams.has('key'));
    await expect.poll(async () => (await requestIdsShown()).sort()).toEqual([ids.betaOk, ids.session].sort());
    await page.getByLabel('Model').selectOption('local-espeak');
    await page.waitForURL((url) => url.searchParams.get('model') === 'local-espeak');
    await expect.poll(requestIdsShown).toEqual([ids.betaOk]);
    // The URL is the view: reloading it shows the same rows.
    await page.reload();
    await expect.poll(requestIdsShown).toEqual([ids.betaOk]);
    assert.equal(await page.getByLabel('Model').inputValue(), 'local-espeak');
    await shot('filtered');
  });

  test('exports the filtered rows as CSV', async () => {
    await page.goto(`${dash}/logs?model=local-flite`);
    await expect(rows()).toHaveCount(2);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export CSV' }).click()]);
    assert.equal(download.suggestedFilename(), 'svc-logs.csv');
    const csv = readFileSync((await download.path())!, 'utf8');
    const lines = csv.trimEnd().split('\r\n');
    assert.match(lines[0]!, /^id,created_at,request_id,kind,method,route,model,status,error_code,key_id,key_name,/);
    assert.equal(lines.length, 3, csv);
    assert(csv.includes(ids.alphaOk) && csv.includes(ids.session), csv);
    assert(!csv.includes(ids.betaOk), 'the espeak request is not in a local-flite export');
    assert(!csv.includes(keys.alpha) && !csv.includes(keys.beta), 'no key in the export');
  });

  test("opens the session's detail: its per-turn waterfall, a barge-in and a failover", async () => {
    await page.goto(`${dash}/logs?kind=session`);
    await expect(rows()).toHaveCount(1);
    await rows().first().getByText('101').waitFor();
    await rows()
      .first()
      .getByRole('link', { name: `Details of ${ids.session}` })
      .click();
    await page.getByRole('heading', { level: 1, name: 'Session' }).waitFor();
    const waterfall = page.getByTestId('turn-waterfall');
    await waterfall.waitFor();
    assert.equal(await waterfall.getByTestId('turn-row').count(), 2);
    await waterfall.getByText('Barge-in at 4.2 s').waitFor();
    await waterfall.getByText('Failover: connect').waitFor();
    const first = waterfall.getByRole('img', { name: /^Turn 1: / });
    assert.match((await first.getAttribute('aria-label'))!, /end of turn 1.75 s, LLM first token 2.3 s, TTS first audio 2.65 s, first audible 2.7 s/);
    await shot('session');
    await page.setViewportSize(PHONE);
    await assertFitsWidth(page, 'the session page');
    await shot('session-phone');
    await page.setViewportSize(DESKTOP);
  });

  test("Usage shows the requests, latency and errors per model and key, and links to the model's logs", async () => {
    await nav('Usage');
    const stats = page.getByTestId('request-stats-model');
    await stats.waitFor();
    const flite = stats.getByRole('row', { name: /local-flite/ });
    await flite.waitFor();
    assert.match((await flite.innerText()).replace(/\s+/g, ' '), /local-flite 2 0 /);
    await page.getByRole('link', { name: 'Logs of local-flite' }).click();
    await page.waitForURL((url) => url.pathname === '/logs' && url.searchParams.get('model') === 'local-flite');
    await expect(rows()).toHaveCount(2);
    await shot('from-usage');
  });

  test('an error in the playground names its request and links to it in Logs', async () => {
    const notes = join(story.stack.tmp, 'notes.wav');
    writeFileSync(notes, 'Not a recording: these are notes.\n');
    await nav('Playground');
    const form = page.getByRole('form', { name: 'Transcribe a recording' });
    await form.getByLabel('Recording (WAV or raw 16-bit PCM)').setInputFiles(notes);
    await form.getByRole('button', { name: 'Transcribe' }).click();
    const alert = form.getByRole('alert').filter({ hasText: 'Transcription failed' });
    await alert.getByRole('link', { name: 'See it in Logs' }).click();
    await page.waitForURL((url) => url.pathname === '/logs' && /^req_/.test(url.searchParams.get('request_id') ?? ''));
    await expect(rows()).toHaveCount(1);
    await rows().first().getByText('unsupported_audio_format').waitFor();
    await shot('from-playground');
  });

  test('the Models page shows each upstream’s last 24 hours, “—” where nothing was measured', async () => {
    await nav('Models');
    const history = page.getByTestId('upstream-history').first();
    await history.waitFor();
    const p95 = await page.getByTestId('upstream-p95').allInnerTexts();
    assert(p95.length > 0 && p95.every((t) => t === '—' || /\d/.test(t)), p95.join(','));
    assert(!p95.includes('0 ms'), 'nothing measured shows as —');
  });
});
