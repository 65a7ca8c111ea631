// The one table from domain error codes to tRPC codes (and so HTTP statuses) on the dashboard
// edge; the gateway has its own table for the OpenAI envelope.
import { TRPCError } from '@trpc/server';
import type { ErrorCode, ServiceError } from '../services/errors.ts';

type TrpcCode = TRPCError['code'];

// Complete, so that a new code cannot fall through to a 500 unnoticed (the compiler asks for
// it here). Statuses follow the gateway's (server/error-envelope.ts) where tRPC has the code;
// tRPC has no 410 or 431, and the dashboard answers a claim already made with a conflict.
const TRPC_CODES: Record<ErrorCode, TrpcCode> = {
  invalid_json: 'BAD_REQUEST',
  invalid_request: 'BAD_REQUEST',
  transcript_too_long: 'BAD_REQUEST',
  invalid_output_format: 'BAD_REQUEST',
  invalid_generation_config: 'BAD_REQUEST',
  unsupported_audio_format: 'BAD_REQUEST',
  invalid_sample_rate: 'BAD_REQUEST',
  invalid_turn_detection: 'BAD_REQUEST',
  upgrade_required: 'BAD_REQUEST',
  invalid_login_hint: 'BAD_REQUEST',
  anonymous_not_enabled: 'BAD_REQUEST',
  identity_assertion_not_enabled: 'BAD_REQUEST',
  already_claimed: 'CONFLICT',
  authorization_pending: 'BAD_REQUEST',
  expired_token: 'BAD_REQUEST',
  invalid_grant: 'BAD_REQUEST',
  unsupported_grant_type: 'BAD_REQUEST',
  clip_too_short: 'BAD_REQUEST',
  invalid_api_key: 'UNAUTHORIZED',
  api_key_disabled: 'UNAUTHORIZED',
  api_key_expired: 'UNAUTHORIZED',
  insufficient_quota: 'PAYMENT_REQUIRED',
  key_budget_exceeded: 'PAYMENT_REQUIRED',
  voice_read_only: 'FORBIDDEN',
  model_not_allowed: 'FORBIDDEN',
  forbidden: 'FORBIDDEN',
  voice_quota_exceeded: 'FORBIDDEN',
  not_found: 'NOT_FOUND',
  model_not_found: 'NOT_FOUND',
  voice_not_found: 'NOT_FOUND',
  dict_not_found: 'NOT_FOUND',
  job_not_found: 'NOT_FOUND',
  blob_not_found: 'NOT_FOUND',
  org_not_found: 'NOT_FOUND',
  key_not_found: 'NOT_FOUND',
  preview_not_ready: 'NOT_FOUND',
  method_not_allowed: 'METHOD_NOT_SUPPORTED',
  voice_profile_missing: 'CONFLICT',
  conflict: 'CONFLICT',
  claim_expired: 'NOT_FOUND',
  body_too_large: 'PAYLOAD_TOO_LARGE',
  storage_quota_exceeded: 'PAYLOAD_TOO_LARGE',
  unsupported_media_type: 'UNSUPPORTED_MEDIA_TYPE',
  request_timeout: 'TIMEOUT',
  request_header_fields_too_large: 'BAD_REQUEST',
  rate_limit_exceeded: 'TOO_MANY_REQUESTS',
  clone_quota_exceeded: 'TOO_MANY_REQUESTS',
  slow_down: 'TOO_MANY_REQUESTS',
  internal_error: 'INTERNAL_SERVER_ERROR',
  upstream_unavailable: 'BAD_GATEWAY',
  upstream_error: 'BAD_GATEWAY',
  verify_unavailable: 'SERVICE_UNAVAILABLE',
  model_offline: 'SERVICE_UNAVAILABLE',
  temporarily_unavailable: 'SERVICE_UNAVAILABLE',
  agent_auth_unavailable: 'SERVICE_UNAVAILABLE',
  upstream_timeout: 'GATEWAY_TIMEOUT',
  mail_unavailable: 'SERVICE_UNAVAILABLE',
};

export function trpcCodeFor(code: ErrorCode): TrpcCode {
  return TRPC_CODES[code];
}

export function toTrpcError(error: ServiceError): TRPCError {
  return new TRPCError({ code: trpcCodeFor(error.code), message: error.message, cause: error });
}
