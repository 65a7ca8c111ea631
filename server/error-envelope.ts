// The HTTP face of the product's error codes: status and OpenAI error `type` per code, and the
// envelope {error:{message,type,code,param}}. Shared by the two HTTP edges that answer in it:
// the gateway (gateway/errors.ts) and the dashboard's gateway proxy (server/api/gateway-proxy.ts).
// Services never read it: they throw a ServiceError with a code.
import { ServiceError, type ErrorCode } from './services/errors.ts';

type ErrorType = 'invalid_request_error' | 'insufficient_quota' | 'rate_limit_error' | 'api_error';

const E = (status: number, type: ErrorType = 'invalid_request_error') => ({ status, type });

export const ERROR_TABLE: Record<ErrorCode, { status: number; type: ErrorType }> = {
  invalid_json: E(400),
  invalid_request: E(400),
  transcript_too_long: E(400),
  invalid_output_format: E(400),
  invalid_generation_config: E(400),
  unsupported_audio_format: E(400),
  invalid_sample_rate: E(400),
  invalid_turn_detection: E(400),
  upgrade_required: E(400),
  invalid_login_hint: E(400),
  anonymous_not_enabled: E(400),
  identity_assertion_not_enabled: E(400),
  already_claimed: E(400),
  authorization_pending: E(400),
  expired_token: E(400),
  invalid_grant: E(400),
  unsupported_grant_type: E(400),
  clip_too_short: E(400),
  invalid_api_key: E(401),
  api_key_disabled: E(401),
  api_key_expired: E(401),
  insufficient_quota: E(402, 'insufficient_quota'),
  key_budget_exceeded: E(402, 'insufficient_quota'),
  voice_read_only: E(403),
  model_not_allowed: E(403),
  forbidden: E(403),
  voice_quota_exceeded: E(403),
  not_found: E(404),
  model_not_found: E(404),
  voice_not_found: E(404),
  dict_not_found: E(404),
  job_not_found: E(404),
  blob_not_found: E(404),
  org_not_found: E(404),
  key_not_found: E(404),
  preview_not_ready: E(404),
  method_not_allowed: E(405),
  voice_profile_missing: E(409),
  conflict: E(409),
  claim_expired: E(410),
  body_too_large: E(413),
  storage_quota_exceeded: E(413),
  unsupported_media_type: E(415),
  request_timeout: E(408),
  request_header_fields_too_large: E(431),
  rate_limit_exceeded: E(429, 'rate_limit_error'),
  slow_down: E(429, 'rate_limit_error'),
  clone_quota_exceeded: E(429, 'rate_limit_error'),
  internal_error: E(500, 'api_error'),
  upstream_unavailable: E(502, 'api_error'),
  upstream_error: E(502, 'api_error'),
  verify_unavailable: E(503, 'api_error'),
  model_offline: E(503, 'api_error'),
  temporarily_unavailable: E(503, 'api_error'),
  agent_auth_unavailable: E(503, 'api_error'),
  upstream_timeout: E(504, 'api_error'),
  mail_unavailable: E(503, 'api_error'),
};

export interface ErrorEnvelope {
  error: { message: string; type: string; code: string; param: string | null };
}

export function envelope(err: ServiceError): { status: number; body: ErrorEnvelope } {
  const { status, type } = ERROR_TABLE[err.code];
  return { status, body: { error: { message: err.message, type, code: err.code, param: err.param } } };
}

/**
 * The ServiceError an answer in the envelope stands for (the dashboard server reading the
 * gateway's answer), with its Retry-After; a body that is not the envelope, or names a code not
 * in the table, is the gateway failing (upstream_error).
 */
export function serviceErrorOf(status: number, body: unknown, retryAfter: string | null): ServiceError {
  const error = (body as { error?: Partial<Record<keyof ErrorEnvelope['error'], unknown>> } | null)?.error;
  const code = typeof error?.code === 'string' && Object.hasOwn(ERROR_TABLE, error.code) ? (error.code as ErrorCode) : null;
  if (!code || typeof error?.message !== 'string') return new ServiceError('upstream_error', `The gateway answered ${status} without an error envelope.`);
  const seconds = retryAfter === null ? NaN : Number(retryAfter);
  return new ServiceError(
    code,
    error.message,
    typeof error.param === 'string' ? error.param : null,
    Number.isFinite(seconds) ? { retryAfterSeconds: seconds } : {},
  );
}

/** The response headers an error carries over HTTP: Retry-After, in whole seconds, when it passes with time. */
export function errorHeaders(err: ServiceError): Record<string, string> {
  return err.retryAfterSeconds === undefined ? {} : { 'retry-after': String(Math.max(0, Math.ceil(err.retryAfterSeconds))) };
}
