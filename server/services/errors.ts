// The one list of error codes the product speaks. Services throw ServiceError with a code;
// the edges (gateway error handler, tRPC) map codes to transport statuses in one table each.
export const ERROR_CODES = [
  // 400
  'invalid_json',
  'invalid_request',
  'transcript_too_long',
  'invalid_output_format',
  'invalid_generation_config',
  'unsupported_audio_format',
  'invalid_sample_rate',
  'invalid_turn_detection',
  'upgrade_required',
  'invalid_login_hint',
  'anonymous_not_enabled',
  'identity_assertion_not_enabled',
  'already_claimed',
  'authorization_pending',
  'expired_token',
  'invalid_grant',
  'unsupported_grant_type',
  'clip_too_short',
  // 401
  'invalid_api_key',
  'api_key_disabled',
  'api_key_expired',
  // 402
  'insufficient_quota',
  'key_budget_exceeded',
  // 403
  'voice_read_only',
  'model_not_allowed',
  'forbidden',
  'voice_quota_exceeded',
  // 404
  'not_found',
  'model_not_found',
  'voice_not_found',
  'dict_not_found',
  'job_not_found',
  'blob_not_found',
  'org_not_found',
  'key_not_found',
  'preview_not_ready',
  // 405, 409, 410, 413, 415
  'method_not_allowed',
  'voice_profile_missing',
  'conflict',
  'claim_expired',
  'body_too_large',
  'storage_quota_exceeded',
  'unsupported_media_type',
  // 408, 431 (requests Node's HTTP parser refuses)
  'request_timeout',
  'request_header_fields_too_large',
  // 429
  'rate_limit_exceeded',
  'slow_down',
  'clone_quota_exceeded',
  // 5xx
  'internal_error',
  'upstream_unavailable',
  'upstream_error',
  'verify_unavailable',
  'model_offline',
  'temporarily_unavailable',
  'agent_auth_unavailable',
  'upstream_timeout',
  'mail_unavailable',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export class ServiceError extends Error {
  /** Seconds after which a refusal that passes with time (a rate window, a full queue) may be retried; each edge says it its own way (HTTP: Retry-After). */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly param: string | null = null,
    details: { retryAfterSeconds?: number } = {},
  ) {
    super(message);
    this.name = 'ServiceError';
    this.retryAfterSeconds = details.retryAfterSeconds;
  }
}

export const isServiceError = (e: unknown): e is ServiceError => e instanceof ServiceError;
