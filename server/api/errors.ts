// The one table from domain error codes to tRPC codes (and so HTTP statuses) on the dashboard
// edge; the gateway has its own table for the OpenAI envelope.
import { TRPCError } from '@trpc/server';
import type { ErrorCode, ServiceError } from '../services/errors.js';

type TrpcCode = TRPCError['code'];

const TRPC_CODES: Partial<Record<ErrorCode, TrpcCode>> = {
  invalid_request: 'BAD_REQUEST',
  invalid_json: 'BAD_REQUEST',
  invalid_login_hint: 'BAD_REQUEST',
  invalid_grant: 'BAD_REQUEST',
  expired_token: 'BAD_REQUEST',
  forbidden: 'FORBIDDEN',
  voice_read_only: 'FORBIDDEN',
  conflict: 'CONFLICT',
  already_claimed: 'CONFLICT',
  claim_expired: 'NOT_FOUND',
  insufficient_quota: 'PAYMENT_REQUIRED',
  rate_limit_exceeded: 'TOO_MANY_REQUESTS',
  slow_down: 'TOO_MANY_REQUESTS',
  temporarily_unavailable: 'SERVICE_UNAVAILABLE',
  verify_unavailable: 'SERVICE_UNAVAILABLE',
  agent_auth_unavailable: 'SERVICE_UNAVAILABLE',
  mail_unavailable: 'SERVICE_UNAVAILABLE',
};

export function trpcCodeFor(code: ErrorCode): TrpcCode {
  return TRPC_CODES[code] ?? (code.endsWith('not_found') ? 'NOT_FOUND' : 'INTERNAL_SERVER_ERROR');
}

export function toTrpcError(error: ServiceError): TRPCError {
  return new TRPCError({ code: trpcCodeFor(error.code), message: error.message, cause: error });
}
