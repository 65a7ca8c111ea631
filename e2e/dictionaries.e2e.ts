// Black-box test of the pronunciation dictionary page with the gateway, as a user would drive
// them: a migrated throw-away SQLite database, `next start` and `svc gateway` on free ports
// against it, and Debian's Chromium through @playwright/test. Sign up, make a key and give the
// org credit (the dictionary routes are metered), create a dictionary in the page, edit its
// entries in the table (mouse and keyboard, an invalid cell pointed at), see every change
// through the API and in synthesis, hear an entry in the page (Hear: only saved rows, cost as
// the gateway reported it, the gateway's error), delete it after a confirmation, phone width.
//
//   npx playwright test e2e/dictionaries.e2e.ts      (builds the dashboard when there is no build; E2E_BUILD=1 rebuilds)
//
// Each step is a test of one serial chain: after a failure the rest are skipped.
// Screenshots go to e2e/screenshots/dict-*.png. Processes, browser and accounts: e2e/support/.
import assert from 'node:assert/strict';
import { test, type Page } from '@playwright/test';
import { createApiKey, grantCredits, PASSWORD, signUp } from './support/accounts.ts';
import { assertFitsWidth, audioSeconds, DESKTOP, mainNav, PHONE, type BrowserSession } from './support/browser.ts';
import { setUpStory } from './support/story.ts';

const DICT_NAME = 'E2E brand names';

interface ApiDict {
  id: string;
  name: string;
  entry_count: number;
  entries?: { grapheme: string; alias: string | null; phoneme: string | null; case_sensitive: boolean }[];
}

test.describe.serial('pronunciation dictionaries', () => {
  const story = setUpStory({ name: 'dicts' }, { screenshotPrefix: 'dict-' });
  let dash = '';
  let api = '';
  let browser: BrowserSession;
  let page: Page;
  let shot: BrowserSession['shot'];
  test.beforeAll(() => {
    ({ dash, api } = story.stack);
    ({ browser } = story);
    ({ page, shot } = browser);
  });
  const nav = (label: string) => mainNav(page, label).click();

  let apiKey = '';
  let dictId = '';
  const apiGet = async (path: string) => {
    const res = await fetch(`${api}${path}`, { headers: { authorization: `Bearer ${apiKey}` } });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const apiDict = async () => {
    const { status, body } = await apiGet(`/pronunciation-dicts/${dictId}`);
    assert(status === 200, `GET /pronunciation-dicts/${dictId}: ${status} ${JSON.stringify(body)}`);
    return body as unknown as ApiDict;
  };
  const editor = () => page.getByTestId('dict-editor');
  const rows = () => editor().getByTestId('entry-row');

  test('signs up, makes an API key and grants the org credit', async () => {
    await signUp(page, dash, { email: 'dicts.e2e@example.com', password: PASSWORD });
    await nav('API keys');
    apiKey = await createApiKey(page, 'dictionaries');
    await grantCredits(page, '1');
  });

  test('the dictionaries page starts empty, and the API agrees', async () => {
    await nav('Dictionaries');
    await page.waitForURL(`${dash}/dictionaries`);
    await page.getByRole('heading', { level: 1, name: 'Pronunciation dictionaries' }).waitFor();
    await page.getByText('No dictionaries yet').waitFor();
    const { status, body } = await apiGet('/pronunciation-dicts');
    assert(status === 200 && JSON.stringify(body) === '{"dicts":[]}', `GET /pronunciation-dicts: ${status} ${JSON.stringify(body)}`);
    await shot('empty');
  });

  test('an empty name is refused in the page, before anything is sent', async () => {
    await page.getByRole('button', { name: 'Create dictionary' }).click();
    await page.getByText('Name must not be empty').waitFor();
    assert((await page.getByLabel('Dictionary name').getAttribute('aria-invalid')) === 'true', 'the name field is not marked invalid');
  });

  test('creates a dictionary: it is listed and its editor opens', async () => {
    await page.getByLabel('Dictionary name').fill(DICT_NAME);
    await page.getByRole('button', { name: 'Create dictionary' }).click();
    const row = page.getByTestId('dict-row').filter({ hasText: DICT_NAME });
    await row.waitFor();
    dictId = (await row.getAttribute('data-dict-id')) ?? '';
    assert(/^pdict_[a-z0-9]{20}$/.test(dictId), `dictionary id ${dictId}`);
    await editor()
      .getByRole('heading', { name: `Edit “${DICT_NAME}”` })
      .waitFor();
    await editor().getByText('No entries yet').waitFor();
  });

  test('adds two entries in the table (an alias, and case-sensitive phonemes) and saves', async () => {
    await editor().getByRole('button', { name: 'Add entry' }).click();
    await editor().getByLabel('Word, entry 1').fill('NASA');
    await editor().getByLabel('Say as, entry 1').fill('the agency');
    await editor().getByRole('button', { name: 'Add entry' }).click();
    await editor().getByLabel('Word, entry 2').fill('GIF');
    await editor().getByLabel('Type, entry 2').selectOption('phoneme');
    await editor().getByLabel('Phonemes, entry 2').fill("dZ'If");
    await editor().getByLabel('Case-sensitive, entry 2').check();
    await editor().getByText('Unsaved changes.').waitFor();
    await shot('editing');
    await editor().getByRole('button', { name: 'Save dictionary' }).click();
    await editor().getByTestId('dict-editor-status').getByText('Saved.').waitFor();
    await page.getByTestId('dict-row').filter({ hasText: DICT_NAME }).getByTestId('dict-entry-count').getByText('2 entries').waitFor();
  });

  test('the API lists the dictionary and returns the entries as saved', async () => {
    const { status, body } = await apiGet('/pronunciation-dicts');
    const listed = (body.dicts as ApiDict[] | undefined)?.find((d) => d.id === dictId);
    assert(status === 200 && listed?.name === DICT_NAME && listed.entry_count === 2, `listed: ${JSON.stringify(body)}`);
    const d = await apiDict();
    const want = [
      { grapheme: 'NASA', alias: 'the agency', phoneme: null, case_sensitive: false },
      { grapheme: 'GIF', alias: null, phoneme: "dZ'If", case_sensitive: true },
    ];
    assert(JSON.stringify(d.entries) === JSON.stringify(want), `entries: ${JSON.stringify(d.entries)}`);
  });

  test("an invalid cell is pointed at, marked and explained in the table's words, and nothing is saved; fixed, the edit is saved", async () => {
    await editor().getByLabel('Say as, entry 1').fill('   ');
    await editor().getByRole('button', { name: 'Save dictionary' }).click();
    const cell = editor().getByLabel('Say as, entry 1');
    // Under the cell, named as its column is ("Say as", not the API's "replacement"/"alias").
    const message = rows().nth(0).getByTestId('cell-error');
    await message.getByText('Entry 1, Say as: must not be only spaces.', { exact: true }).waitFor();
    assert((await cell.getAttribute('aria-invalid')) === 'true', 'the invalid cell is not marked');
    assert((await cell.getAttribute('aria-describedby')) === (await message.getAttribute('id')), 'the message is not tied to the cell');
    assert(await cell.evaluate((el) => el === document.activeElement), 'focus did not move to the invalid cell');
    // Marked while it has the focus too (the focus ring used to paint over the red).
    const ring = await cell.evaluate((el) => getComputedStyle(el).boxShadow);
    const valid = editor().getByLabel('Word, entry 2');
    await valid.focus();
    const validRing = await valid.evaluate((el) => getComputedStyle(el).boxShadow);
    assert(ring !== validRing, `a focused invalid cell looks like a focused valid one (${ring})`);
    assert((await apiDict()).entries?.[0]?.alias === 'the agency', 'an invalid edit reached the server');
    await shot('invalid-cell');
    await cell.fill('National Aeronautics and Space Administration');
    await editor().getByRole('button', { name: 'Save dictionary' }).click();
    await editor().getByTestId('dict-editor-status').getByText('Saved.').waitFor();
    const d = await apiDict();
    assert(d.entries?.[0]?.alias === 'National Aeronautics and Space Administration', `after the edit: ${JSON.stringify(d.entries)}`);
  });

  test("a word entered twice is refused with entries numbered as the rows are (from 1) and the table's words", async () => {
    await editor().getByRole('button', { name: 'Add entry' }).click();
    await editor().getByLabel('Word, entry 3').fill('nasa');
    await editor().getByLabel('Say as, entry 3').fill('the agency again');
    await editor().getByRole('button', { name: 'Save dictionary' }).click();
    await rows()
      .nth(2)
      .getByTestId('cell-error')
      .getByText('Entry 3, Word: the same word as entry 1 (words are compared ignoring case).', { exact: true })
      .waitFor();
    assert(!((await editor().textContent()) ?? '').match(/entries\[|grapheme/), "the API's words are shown");
    assert((await editor().getByLabel('Word, entry 3').getAttribute('aria-invalid')) === 'true', 'the duplicate word is not marked');
    await shot('duplicate-word');
    await editor().getByRole('button', { name: 'Discard changes' }).click();
    await editor().getByText('Changes discarded.').waitFor();
  });

  test('the keyboard adds and removes a row, with focus where the next keystroke belongs', async () => {
    await editor().getByRole('button', { name: 'Add entry' }).focus();
    await page.keyboard.press('Enter');
    const word = editor().getByLabel('Word, entry 3');
    await word.waitFor();
    assert(await word.evaluate((el) => el === document.activeElement), 'the new row’s word field is not focused');
    await page.keyboard.type('temp');
    await editor().getByRole('button', { name: 'Remove entry 3 (temp)' }).focus();
    await page.keyboard.press('Enter');
    await editor().getByText('Entry 3 removed.', { exact: false }).waitFor();
    assert((await rows().count()) === 2, `rows after removal: ${await rows().count()}`);
    const focused = await page.evaluate(() => document.activeElement?.textContent?.trim());
    assert(focused === 'Remove', `focus after removal is on "${focused}"`);
    await editor().getByRole('button', { name: 'Discard changes' }).click();
    await editor().getByText('Changes discarded.').waitFor();
  });

  test('TTS through the gateway uses the dictionary as edited', async () => {
    const tts = (dict?: string) =>
      fetch(`${api}/tts/bytes`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model_id: 'local-flite',
          transcript: 'NASA launched it.',
          voice: { mode: 'id', id: 'flite-slt' },
          output_format: { container: 'raw', sample_rate: 16000, encoding: 'pcm_s16le' },
          ...(dict ? { pronunciation_dict_id: dict } : {}),
        }),
      });
    const [plain, expanded] = await Promise.all([tts(), tts(dictId)]);
    assert(
      plain.status === 200 && expanded.status === 200,
      `TTS: ${plain.status} ${await plain.clone().text()} / ${expanded.status} ${await expanded.clone().text()}`,
    );
    const [a, b] = [(await plain.arrayBuffer()).byteLength, (await expanded.arrayBuffer()).byteLength];
    // "National Aeronautics and Space Administration" takes far longer to say than "NASA".
    assert(b > 2 * a, `audio with the dictionary is ${b} bytes, without ${a}`);
  });

  test('Hear plays a saved entry in the page, through the dictionary, at the cost the gateway reported', async () => {
    const settings = editor().getByTestId('hear-settings');
    // eSpeak by default (the engine that honours phonemes), with an English voice.
    assert((await settings.getByLabel('Hear with model').inputValue()) === 'local-espeak', 'Hear does not default to local-espeak');
    await settings.getByLabel('Voice').locator('option[value="espeak-en-us-f"]').waitFor({ state: 'attached' });
    const voice = await settings.getByLabel('Voice').inputValue();
    assert(voice.startsWith('espeak-en'), `Hear defaults to voice ${voice}`);
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/api/gateway/tts/bytes') && r.request().method() === 'POST'),
      editor().getByRole('button', { name: 'Hear entry 1 (NASA)' }).click(),
    ]);
    const sent = JSON.parse(response.request().postData() ?? '{}') as {
      transcript?: string;
      pronunciation_dict_id?: string;
      model_id?: string;
      voice?: { id?: string };
    };
    assert(response.status() === 200, `POST /api/gateway/tts/bytes: ${response.status()} ${await response.text()}`);
    assert(
      sent.transcript === 'NASA' && sent.pronunciation_dict_id === dictId && sent.model_id === 'local-espeak' && sent.voice?.id === voice,
      `request: ${JSON.stringify(sent)}`,
    );
    const result = rows().nth(0).getByTestId('hear-result');
    // "National Aeronautics and Space Administration", not "NASA": well over a second.
    const seconds = await audioSeconds(result.getByTestId('hear-audio'));
    assert(seconds > 1.5, `the <audio> element holds ${seconds} s of audio`);
    const cost = response.headers()['x-svc-request-cost-usd'];
    assert(cost && /^0\.\d{6}$/.test(cost) && cost !== '0.000000', `x-svc-request-cost-usd: ${cost}`);
    const line = (await result.getByTestId('request-cost').textContent()) ?? '';
    assert(line.startsWith(`Cost $${cost}`), `the page shows "${line}", the gateway said ${cost}`);
    await shot('hear');
  });

  test('an edited or new row cannot be heard until it is saved, and the page says why', async () => {
    const note = editor().getByTestId('hear-unsaved-note');
    assert((await note.count()) === 0, 'the unsaved note shows with nothing unsaved');
    await editor().getByLabel('Say as, entry 1').fill('the space agency');
    const hear1 = editor().getByRole('button', { name: /^Hear entry 1/ });
    await note.getByText('save to hear new or changed entries').waitFor();
    assert(await hear1.isDisabled(), 'Hear is offered on an edited row');
    assert((await hear1.getAttribute('aria-describedby')) === (await note.getAttribute('id')), 'the disabled Hear does not point at the reason');
    assert((await rows().nth(0).getByTestId('hear-result').count()) === 0, 'the take of the saved text still shows under the edited row');
    assert(await editor().getByRole('button', { name: 'Hear entry 2 (GIF)' }).isEnabled(), 'Hear on an unchanged row is off');
    await editor().getByRole('button', { name: 'Add entry' }).click();
    assert(await editor().getByRole('button', { name: 'Hear entry 3' }).isDisabled(), 'Hear is offered on a new row');
    await editor().getByRole('button', { name: 'Discard changes' }).click();
    await note.waitFor({ state: 'detached' });
    assert(await hear1.isEnabled(), 'Hear is still off after the changes were discarded');
  });

  test('deletes the dictionary after a confirmation: gone from the page, the API and TTS', async () => {
    const row = page.getByTestId('dict-row').filter({ hasText: DICT_NAME });
    await row.getByRole('button', { name: `Delete dictionary ${DICT_NAME}` }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete this dictionary?' });
    await dialog.waitFor();
    await shot('delete-confirm');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'hidden' });
    assert((await apiGet(`/pronunciation-dicts/${dictId}`)).status === 200, 'cancel deleted the dictionary');
    await row.getByRole('button', { name: `Delete dictionary ${DICT_NAME}` }).click();
    await dialog.getByRole('button', { name: 'Delete dictionary' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await page.getByText('No dictionaries yet').waitFor();
    assert((await editor().count()) === 0, 'the editor of the deleted dictionary is still open');
    const { status, body } = await apiGet(`/pronunciation-dicts/${dictId}`);
    assert(status === 404 && (body.error as { code?: string }).code === 'dict_not_found', `after delete: ${status} ${JSON.stringify(body)}`);
  });

  test('fits a phone-width screen with the editor open', async () => {
    await page.getByLabel('Dictionary name').fill('Phone');
    await page.getByRole('button', { name: 'Create dictionary' }).click();
    await editor().getByRole('button', { name: 'Add entry' }).click();
    await editor().getByLabel('Word, entry 1').fill('svc');
    await editor().getByLabel('Say as, entry 1').fill('service');
    await page.setViewportSize(PHONE);
    await page.waitForLoadState('networkidle');
    await assertFitsWidth(page, '/dictionaries');
    // Without the header row, each cell carries its own visible label.
    assert(await rows().first().getByText('Word', { exact: true }).isVisible(), 'no visible Word label at phone width');
    await shot('phone');
    await page.setViewportSize(DESKTOP);
  });

  test("Hear shows the gateway's error: the dictionary was deleted elsewhere", async () => {
    await editor().getByRole('button', { name: 'Save dictionary' }).click();
    await editor().getByTestId('dict-editor-status').getByText('Saved.').waitFor();
    const phoneId = (await page.getByTestId('dict-row').filter({ hasText: 'Phone' }).getAttribute('data-dict-id')) ?? '';
    const deleted = await fetch(`${api}/pronunciation-dicts/${phoneId}`, { method: 'DELETE', headers: { authorization: `Bearer ${apiKey}` } });
    assert(deleted.status === 200, `DELETE /pronunciation-dicts/${phoneId}: ${deleted.status}`);
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/api/gateway/tts/bytes')),
      editor().getByRole('button', { name: 'Hear entry 1 (svc)' }).click(),
    ]);
    const envelope = (await response.json()) as { error?: { code?: string; message?: string } };
    assert(
      response.status() === 404 && envelope.error?.code === 'dict_not_found' && envelope.error.message,
      `the proxy answered ${response.status()} ${JSON.stringify(envelope)}`,
    );
    const alert = rows().nth(0).getByRole('alert').filter({ hasText: 'Could not hear “svc”' });
    await alert.getByText(envelope.error.message, { exact: true }).waitFor();
    await shot('hear-error');
  });

  test('no uncaught errors in the browser', async () => {
    assert(browser.errors.length === 0, browser.errors.join('\n'));
  });
});
