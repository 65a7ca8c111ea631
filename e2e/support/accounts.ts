// Getting a signed-in user with what a test needs, through the pages as a user would: sign up,
// an API key, credit (the first user of a fresh stack is platform admin and may grant it).
import assert from 'node:assert/strict';
import type { Page } from '@playwright/test';
import { mainNav } from './browser.ts';
import { usd } from '../../app/_lib/format.ts';

export interface Account {
  /** The optional display name; the personal org is called "<name>'s org". */
  name?: string;
  email: string;
  password: string;
}

export const PASSWORD = 'e2e-password-123';

/** Fills the sign-up form the page shows (name only when the account has one); does not submit. */
export async function fillSignUp(page: Page, account: Account): Promise<void> {
  if (account.name !== undefined) await page.getByLabel('Name (optional)').fill(account.name);
  await page.getByLabel('Email').fill(account.email);
  await page.getByLabel('Password').fill(account.password);
}

export async function submitSignUp(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Create account' }).click();
}

/** Signs up from /signup and waits for the overview. */
export async function signUp(page: Page, dash: string, account: Account): Promise<void> {
  await page.goto(`${dash}/signup`);
  await fillSignUp(page, account);
  await submitSignUp(page);
  await page.waitForURL(`${dash}/`);
}

/**
 * On the API keys page: creates a key and returns the full key the page shows once. With
 * `dismiss` (the default) the "stored it" button is pressed afterwards.
 */
export async function createApiKey(page: Page, name: string, { dismiss = true } = {}): Promise<string> {
  await page.getByLabel('Key name').fill(name);
  await page.getByRole('button', { name: 'Create key' }).click();
  const input = page.getByTestId('new-api-key');
  await input.waitFor();
  const key = await input.inputValue();
  assert(/^sk_svc_[A-Za-z0-9_-]{43}$/.test(key), `not a key: ${key}`);
  if (dismiss) await page.getByRole('button', { name: 'Done, I have stored it' }).click();
  return key;
}

/**
 * As platform admin: grants the signed-in user's new org `amountUsd` (e.g. "5") on the credits
 * page and waits for the balance to read that amount (a new org starts at zero).
 */
export async function grantCredits(page: Page, amountUsd: string): Promise<void> {
  await mainNav(page, 'Credits').click();
  const grant = page.getByRole('region', { name: 'Grant credits' });
  await grant.getByLabel('Amount (USD)').fill(amountUsd);
  await grant.getByRole('button', { name: 'Grant credits' }).click();
  await page
    .getByTestId('credits-balance')
    .getByText(usd(Number(amountUsd).toFixed(6)), { exact: true })
    .waitFor();
}
