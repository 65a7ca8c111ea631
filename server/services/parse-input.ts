// One way to turn a zod failure into the envelope's invalid_request: the first issue, with
// `param` naming the field as clients write it (`entries[3].alias`, `tags[0]`).
import type { z } from 'zod';
import { ServiceError } from './errors.ts';

/** `entries[3].alias` from ['entries', 3, 'alias']. */
export function paramOf(path: readonly PropertyKey[]): string | null {
  let out = '';
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : `${out ? '.' : ''}${String(part)}`;
  return out || null;
}

export function invalidInput(error: z.ZodError): ServiceError {
  const issue = error.issues[0]!;
  const path: PropertyKey[] = [...issue.path];
  let message = issue.message;
  if (issue.code === 'unrecognized_keys') {
    path.push(issue.keys[0]!);
    message = 'unknown field';
  } else if (issue.code === 'invalid_type' && issue.input === undefined) {
    message = 'is required';
  } else if (issue.code === 'invalid_type') {
    message = `must be ${issue.expected === 'object' ? 'an object' : issue.expected === 'array' ? 'an array' : `a ${issue.expected}`}`;
  }
  const param = paramOf(path);
  return new ServiceError('invalid_request', param ? `${param}: ${message}` : `${message[0]!.toUpperCase()}${message.slice(1)}.`, param);
}

/**
 * NUL (U+0000) is refused in every input string and key: no field needs one, and PostgreSQL's
 * text cannot store it (a 500 there, where SQLite would have kept it). Walked without recursion:
 * bodies may nest deeply. The walk that names the field runs only once a NUL is found: inputs
 * are checked on every request and every socket message, and nearly all have none.
 */
export function refuseNul(raw: unknown): void {
  if (holdsNul(raw)) throw nulError(raw);
}

function holdsNul(raw: unknown): boolean {
  const stack: unknown[] = [raw];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return true;
    } else if (Array.isArray(value)) {
      for (const v of value) stack.push(v);
    } else if (value !== null && typeof value === 'object') {
      for (const k in value) {
        if (!Object.hasOwn(value, k)) continue;
        if (k.includes('\u0000')) return true;
        stack.push((value as Record<string, unknown>)[k]);
      }
    }
  }
  return false;
}

/** The error naming the first string or key with a NUL (each entry knows its parent, so a path is built only for that one). */
function nulError(raw: unknown): ServiceError {
  interface At {
    value: unknown;
    key: PropertyKey | null;
    parent: At | null;
  }
  const stack: At[] = [{ value: raw, key: null, parent: null }];
  while (stack.length > 0) {
    const at = stack.pop()!;
    const value = at.value;
    if (typeof value === 'string') {
      if (!value.includes('\u0000')) continue;
      const path: PropertyKey[] = [];
      for (let p: At | null = at; p; p = p.parent) if (p.key !== null) path.unshift(p.key);
      const param = paramOf(path);
      return new ServiceError('invalid_request', `${param ?? 'The input'}: must not contain NUL (U+0000) characters`, param);
    }
    if (Array.isArray(value)) value.forEach((v, i) => stack.push({ value: v, key: i, parent: at }));
    else if (value !== null && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) stack.push({ value: k, key: null, parent: at }, { value: v, key: k, parent: at });
    }
  }
  throw new Error('nulError: no NUL in the input');
}

/** Validates a JSON body (which must be an object) or a query/form record. */
export function parseInput<S extends z.ZodType>(schema: S, raw: unknown, options: { body?: boolean } = { body: true }): z.output<S> {
  if (options.body !== false && (raw === null || typeof raw !== 'object' || Array.isArray(raw))) {
    throw new ServiceError('invalid_json', 'The request body must be a JSON object.');
  }
  refuseNul(raw);
  // reportInput: zod 4 leaves `input` out of issues otherwise, and invalidInput needs it to
  // tell a missing field ("is required") from one of the wrong type.
  const parsed = schema.safeParse(raw, { reportInput: true });
  if (!parsed.success) throw invalidInput(parsed.error);
  return parsed.data;
}
