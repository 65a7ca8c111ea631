import { ServiceError } from '../server/services/errors.ts';

export type JsonObject = Record<string, unknown>;

/** Parses a request body that must be a JSON object; anything else is 400 invalid_json. */
export function parseJsonObject(raw: Buffer | string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(typeof raw === 'string' ? raw : raw.toString('utf8'));
  } catch {
    throw new ServiceError('invalid_json', 'The request body is not valid JSON.');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ServiceError('invalid_json', 'The request body must be a JSON object.');
  }
  return value as JsonObject;
}
