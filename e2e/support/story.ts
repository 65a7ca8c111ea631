// What every story shares around its steps: before the first, the stack and a page of its own;
// after a failed step, both processes' log tails (printed, and attached to the report); after
// the last, both stopped. Playwright runs the afterAll hooks after a failure and on Ctrl-C too.
import { test } from '@playwright/test';
import { openBrowser, type BrowserOptions, type BrowserSession } from './browser.ts';
import { startStack, type Stack, type StackOptions } from './processes.ts';

// Migrating and starting both processes takes longer than a step on a busy machine.
const SETUP_TIMEOUT_MS = 180_000;

export interface Story {
  stack: Stack;
  browser: BrowserSession;
}

/** Call inside the story's `test.describe.serial`: the object is filled before its first step. */
export function setUpStory(stackOptions: StackOptions, browserOptions: BrowserOptions = {}): Story {
  const story = {} as Story;
  test.beforeAll(async ({ browser }) => {
    test.setTimeout(SETUP_TIMEOUT_MS);
    story.stack = await startStack(stackOptions);
    story.browser = await openBrowser(browser, browserOptions);
  });
  test.afterEach(async () => {
    const info = test.info();
    if (info.status === info.expectedStatus || !story.stack) return;
    for (const [name, text] of Object.entries(story.stack.logTails())) {
      console.log(`\n--- ${name} log (tail) ---\n${text}\n`);
      await info.attach(`${name} log (tail)`, { body: text, contentType: 'text/plain' });
    }
  });
  test.afterAll(async () => {
    await story.browser?.close();
    await story.stack?.stop();
  });
  return story;
}
