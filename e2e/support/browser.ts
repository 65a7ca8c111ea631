// Debian's Chromium through playwright-core: one page in a throw-away profile at desktop size,
// the page's uncaught errors collected, screenshots into e2e/screenshots/ (gitignored; one is
// taken of the page when a step fails), and the checks every page gets (fits a phone screen).
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { ROOT, type Stack } from './processes.js';
import { assert, onCleanup, onFailure } from './runner.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SCREENSHOTS = join(ROOT, 'e2e/screenshots');

export const DESKTOP = { width: 1280, height: 900 };
export const PHONE = { width: 390, height: 844 };

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Uncaught errors in the page, in order. */
  errors: string[];
  /** A full-page screenshot as e2e/screenshots/<prefix><name>.png */
  shot(name: string): Promise<void>;
}

export interface BrowserOptions {
  /** Put before every screenshot name, e.g. "dict-". */
  screenshotPrefix?: string;
  /** Playwright's default timeout for each action and wait; 15 s unless given. */
  actionTimeoutMs?: number;
  /** Let <audio> play without a click first (tests that check audio in the page). */
  autoplay?: boolean;
}

export async function openBrowser(stack: Pick<Stack, 'tmp'>, options: BrowserOptions = {}): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install it with \`apt-get install -y chromium\` (or set CHROMIUM_PATH)`);
  mkdirSync(SCREENSHOTS, { recursive: true });
  const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
  if (options.autoplay) args.push('--autoplay-policy=no-user-gesture-required');
  const context = await chromium.launchPersistentContext(join(stack.tmp, 'chromium-profile'), { executablePath: CHROMIUM, headless: true, args, viewport: DESKTOP });
  onCleanup(() => context.close());
  context.setDefaultTimeout(options.actionTimeoutMs ?? 15_000);
  const page = context.pages()[0] ?? (await context.newPage());
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const shot = async (name: string) => {
    await page.screenshot({ path: join(SCREENSHOTS, `${options.screenshotPrefix ?? ''}${name}.png`), fullPage: true });
  };
  onFailure((label) => page.screenshot({ path: join(SCREENSHOTS, `${label}.png`), fullPage: true }));
  return { context, page, errors, shot };
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
export async function assertPagesFitPhone(browser: Browser, base: string, paths: string[], shotName: (path: string) => string): Promise<void> {
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
