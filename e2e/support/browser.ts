// A page of its own for a story, in a fresh context of the worker's Chromium (Debian's, as
// playwright.config.ts launches it) at desktop size: the page's uncaught errors collected,
// screenshots into e2e/screenshots/ (gitignored) and attached to the step in the report, and
// the checks every page gets (fits a phone screen).
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test, type Browser, type BrowserContext, type Locator, type Page } from '@playwright/test';
import { ROOT } from './processes.ts';

const SCREENSHOTS = join(ROOT, 'e2e/screenshots');

export const DESKTOP = { width: 1280, height: 900 };
export const PHONE = { width: 390, height: 844 };
const FULL_PAGE_SHOT_TIMEOUT_MS = 10_000;

export interface BrowserSession {
  context: BrowserContext;
  page: Page;
  /** Uncaught errors in the page, in order. */
  errors: string[];
  /** A full-page screenshot as e2e/screenshots/<prefix><name>.png, attached to the running step. */
  shot(name: string): Promise<void>;
  close(): Promise<void>;
}

export interface BrowserOptions {
  /** Put before every screenshot name, e.g. "dict-". */
  screenshotPrefix?: string;
  /** Playwright's default timeout for each action and wait; 15 s unless given. */
  actionTimeoutMs?: number;
}

/** A new context (its own cookies: another user) with one page; close it when the story ends. */
export async function openBrowser(browser: Browser, options: BrowserOptions = {}): Promise<BrowserSession> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const context = await browser.newContext({ viewport: DESKTOP });
  context.setDefaultTimeout(options.actionTimeoutMs ?? 15_000);
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const shot = async (name: string) => {
    const file = `${options.screenshotPrefix ?? ''}${name}.png`;
    const path = join(SCREENSHOTS, file);
    try {
      await page.screenshot({ path, fullPage: true, timeout: FULL_PAGE_SHOT_TIMEOUT_MS });
    } catch (error) {
      // Chromium's full-page capture (beyond the viewport) now and then never completes while the
      // page itself is responsive (microsoft/playwright#28995, #32849): the screenshot is
      // evidence, not an assertion, so take the viewport instead. A renderer that is really stuck
      // fails this one too.
      process.stderr.write(`      full-page screenshot ${file} failed (${(error as Error).message.split('\n')[0]}); taking the viewport\n`);
      await page.screenshot({ path });
    }
    await test.info().attach(file, { path, contentType: 'image/png' });
  };
  return { context, page, errors, shot, close: () => context.close() };
}

/** A link of the dashboard's main navigation. */
export function mainNav(page: Page, label: string) {
  return page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: label, exact: true });
}

/** Seconds of audio an <audio> element holds once its metadata loaded; -1 when it cannot play it. */
export function audioSeconds(audio: Locator): Promise<number> {
  return audio.evaluate(
    (el: HTMLAudioElement) =>
      new Promise<number>((resolve) => {
        if (el.readyState >= 1) return resolve(el.duration);
        el.addEventListener('loadedmetadata', () => resolve(el.duration), { once: true });
        el.addEventListener('error', () => resolve(-1), { once: true });
      }),
  );
}

/** Fails when the page is wider than its viewport (something would scroll sideways). */
export async function assertFitsWidth(page: Page, what: string): Promise<void> {
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert(overflow <= 0, `${what} is ${overflow}px wider than the screen`);
}

/**
 * At phone width: opens each path, waits for its heading and for the network to settle, checks
 * it fits, and screenshots it as shotName(path). Back at desktop width afterwards.
 */
export async function assertPagesFitPhone(browser: BrowserSession, base: string, paths: string[], shotName: (path: string) => string): Promise<void> {
  const { page } = browser;
  await page.setViewportSize(PHONE);
  try {
    for (const path of paths) {
      await page.goto(`${base}${path}`);
      await page.getByRole('heading', { level: 1 }).waitFor();
      await page.waitForLoadState('networkidle');
      await assertFitsWidth(page, path);
      await browser.shot(shotName(path));
    }
  } finally {
    await page.setViewportSize(DESKTOP);
  }
}
