// What every registration operation shares: the spec's numbers, the settings and clock the
// operations run with, and the two guards (registration switched off; its store down).
import type { AgentAuthConfig, Config } from '../../config/env.ts';
import type { Database } from '../../db/database.ts';
import { ServiceError, isServiceError } from '../errors.ts';
import { normalizeEmail } from '../users/normalize-email.ts';

// The spec's Limits: code lifetime 600 s, polling interval 5 s, registration lifetime 24 h,
// key redelivery window 10 minutes.
export const CODE_TTL_MS = 600_000;
export const POLL_INTERVAL_S = 5;
export const REGISTRATION_TTL_MS = 24 * 3600_000;
export const REDELIVERY_MS = 600_000;
/** How long an identity assertion can be exchanged (and the trial key re-fetched with it). */
export const ASSERTION_TTL_MS = 600_000;
/** Polls closer together than this are `slow_down`: the interval less 1 s for network jitter. */
export const MIN_POLL_GAP_MS = (POLL_INTERVAL_S - 1) * 1000;
/** Wrong codes entered (by users of the claim's email) before a code stops working. */
export const MAX_FAILED_GUESSES = 5;
/** Expired registrations are deleted this long after they end (their secrets were erased before). */
export const PURGE_AFTER_MS = 7 * 24 * 3600_000;

export const GRANT_JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
export const GRANT_CLAIM = 'urn:vendor:agent-auth:grant-type:claim';
/** Trial keys: the whole API, bounded by the trial org's small budget. */
export const PRE_CLAIM_SCOPES = ['api:trial'] as const;
export const POST_CLAIM_SCOPES = ['api'] as const;

export interface RegistrationSettings extends AgentAuthConfig {
  authUrl: string;
  dashboardUrl: string;
}

export function registrationSettings(config: Config): RegistrationSettings {
  return { ...config.agentAuth, authUrl: config.authUrl, dashboardUrl: config.dashboardUrl };
}

/** Everything an operation needs; `now` is injected so tests walk the state table without waiting. */
export interface RegistrationDeps {
  db: Database;
  settings: RegistrationSettings;
  now: () => Date;
}

export const claimUrl = (s: RegistrationSettings) => `${s.authUrl}/agent/identity/claim`;
export const tokenUrl = (s: RegistrationSettings) => `${s.authUrl}/oauth2/token`;
export const verificationUri = (s: RegistrationSettings) => `${s.dashboardUrl}/claim`;

export function assertEnabled(settings: RegistrationSettings): void {
  if (!settings.enabled) throw unavailable('agent_auth_unavailable');
}

function unavailable(code: 'agent_auth_unavailable' | 'temporarily_unavailable', cause?: unknown): ServiceError {
  const err =
    code === 'agent_auth_unavailable'
      ? new ServiceError('agent_auth_unavailable', 'Agent registration is unavailable right now. Keys can still be created in the dashboard.')
      : new ServiceError('temporarily_unavailable', 'The key service is temporarily unavailable. Retrying the same request is safe.');
  if (cause !== undefined) err.cause = cause;
  return err;
}

/**
 * Runs an operation against the registration store; if the store fails (database down or
 * timing out), answers with the spec's 503 instead of a 500. Programming errors stay 500s.
 */
export async function withStore<T>(code: 'agent_auth_unavailable' | 'temporarily_unavailable', run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (e) {
    if (isServiceError(e) || e instanceof TypeError || e instanceof RangeError || e instanceof ReferenceError) throw e;
    throw unavailable(code, e);
  }
}

// Control characters have no place in an address (and PostgreSQL refuses NUL in text).
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * The email address a claim is for, normalised as account emails are (trimmed, lower case), so
 * that it compares equal to the address the user signs in with. Anything that is not an
 * address is `invalid_login_hint` on `param`.
 */
export function claimEmail(value: string, param: 'login_hint' | 'email'): string {
  try {
    if (CONTROL.test(value)) throw new Error('control character');
    return normalizeEmail(value);
  } catch {
    throw new ServiceError('invalid_login_hint', `${param} must be the email address of the account that will claim this agent.`, param);
  }
}

export const addMs = (date: Date, ms: number) => new Date(date.getTime() + ms);

/** The client inside an interactive transaction. */
export type Tx = Parameters<Parameters<Database['prisma']['$transaction']>[0]>[0];
