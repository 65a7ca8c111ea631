// Building blocks of the gateway's fuzz test (gateway/fuzz.test.ts): fast-check arbitraries for
// hostile JSON bodies, text, query strings, path ids, multipart bodies and WAV headers; the HTTP
// sender with a per-request deadline; the check every answer must pass (no 5xx but the ones a
// route documents, every error in the envelope with the status its code maps to); and a runner
// that prints the seed, the replay path and a readable counterexample when a property fails.
import fc from 'fast-check';
import { Client } from 'undici';
import { ERROR_TABLE } from '../../gateway/errors.ts';

/** No answer within this is a hang. */
export const REQUEST_TIMEOUT_MS = 10_000;

// ---------------------------------------------------------------------------------------
// Values

/** Strings that have broken parsers, validators and databases before. */
export const ODD_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  '\u202e\u200b\ufeff',
  '💥🇫🇷👩‍👩‍👧',
  'null',
  'true',
  '0',
  '-1',
  '1e309',
  'NaN',
  '__proto__',
  'constructor',
  'toString',
  'hasOwnProperty',
  '../../etc/passwd',
  '%00',
  '%',
  '%zz',
  '\r\n\t',
  '<script>',
  "'; DROP TABLE voice;--",
  'ß',
  'İ',
  '\u212a',
  'en',
  'en-US',
  'x'.repeat(64),
  'a,b,,c',
  '\\',
  '"',
  '{}',
  '[]',
] as const;

const controlChar = fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c));

/** Past every field limit of the API (100, 1000, 5000, 20000 characters), within the 1 MB body cap. */
export const hugeString = fc
  .tuple(fc.constantFrom(101, 1_001, 5_001, 20_001, 100_001), fc.constantFrom('x', 'é', '😀', ' ', '\u0000', 'a '))
  .map(([n, c]) => c.repeat(n));

export const anyString: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 30 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 10 }) },
  { weight: 3, arbitrary: fc.constantFrom(...ODD_STRINGS) },
  { weight: 1, arbitrary: fc.string({ unit: controlChar, minLength: 1, maxLength: 8 }) },
  { weight: 1, arbitrary: hugeString },
);

/** Short strings (path ids, query values, form fields): no huge ones. */
export const shortString: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 20 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  { weight: 3, arbitrary: fc.constantFrom(...ODD_STRINGS) },
  { weight: 1, arbitrary: fc.string({ unit: controlChar, minLength: 1, maxLength: 4 }) },
);

export const anyNumber: fc.Arbitrary<number> = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.constantFrom(0, -0, 1, -1, 0.5, 0.6, 1.5, 2, 2 ** 31, 2 ** 53, -(2 ** 53), 1e308, 5e-324, 8000, 16000, 44100, 48000, 128000),
);

const keyString = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'prototype', '', 'model', 'type', 'id', 'stream', '\u0000', 'ß') },
);

const leaf: fc.Arbitrary<unknown> = fc.oneof(fc.constant(null), fc.boolean(), anyNumber, anyString);

/** Any JSON value: nulls, arrays where objects go, objects where strings go, up to a few levels deep. */
export const anyJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown; array: unknown[]; object: Record<string, unknown> }>((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.dictionary(keyString, tie('value'), { maxKeys: 4 }),
})).value;

// ---------------------------------------------------------------------------------------
// Bodies

/**
 * A request body as a description, rendered to bytes only when sent, so that a failing case
 * prints as `{kind:"deep",depth:100000}` rather than as 200 KB of brackets.
 */
export type Body =
  | { kind: 'none' }
  | { kind: 'json'; value: unknown }
  | { kind: 'raw'; text: string }
  /** A text body of another media type (an SDP offer as `application/sdp`). */
  | { kind: 'text'; text: string; contentType: string }
  /** `depth` nested arrays or objects, as the whole body or as the value of `field` in `base`. */
  | { kind: 'deep'; depth: number; shape: 'array' | 'object'; field: string | null; base: Record<string, unknown> }
  | { kind: 'form'; params: [string, string][] }
  | { kind: 'multipart'; form: Multipart }
  | { kind: 'bytes'; bytes: Uint8Array };

/** Texts that are not JSON objects, or are JSON a careless parser gets wrong. */
const RAW_TEXTS = [
  '',
  ' ',
  '{',
  '}',
  '{"a":',
  '{"a" 1}',
  'null',
  '[]',
  '[{}]',
  '"str"',
  '0',
  'true',
  '1e999',
  '{"model":1e999}',
  '{"a":1,"a":2}',
  '{"__proto__":{"polluted":1}}',
  '{"constructor":{"prototype":{"polluted":1}}}',
  '\ufeff{}',
  '{}\u0000',
  '{} {}',
  '{"x":"\\ud800"}',
  '{"x":"\\u0000"}',
  "{'a':1}",
  'NaN',
  '{"a":NaN}',
  '{"a":-}',
  '{"a":01}',
  '{"a":"\\x41"}',
  '\u0000',
  '{"a":"b"',
  '{"":""}',
] as const;

export const rawText: fc.Arbitrary<Body> = fc
  .oneof(
    fc.constantFrom(...RAW_TEXTS),
    fc.string({ unit: 'binary', maxLength: 50 }),
    // A JSON document cut short.
    fc.json({ maxDepth: 3 }).chain((s) => fc.nat(Math.max(0, s.length - 1)).map((n) => s.slice(0, n))),
  )
  .map((text) => ({ kind: 'raw' as const, text }));

const DROP = Symbol('drop');

/** Which of `keys` a generated value changes: none to three of them (mostly one or two), so most values stay near-valid. */
const someOf = (keys: string[]) => fc.subarray(keys, { maxLength: Math.min(3, keys.length) });

/**
 * An object shaped like `base` with up to three fields changed: each dropped, replaced by a
 * plausible value of its own (`fields`: valid, edge and wrong ones) or by any JSON value;
 * sometimes with unknown fields added.
 */
export function objectLike(base: Record<string, unknown>, fields: Record<string, fc.Arbitrary<unknown>> = {}): fc.Arbitrary<Record<string, unknown>> {
  const keys = [...new Set([...Object.keys(base), ...Object.keys(fields)])];
  const replacement = (key: string): fc.Arbitrary<unknown> =>
    fc.oneof(
      { weight: 1, arbitrary: fc.constant(DROP) },
      { weight: 4, arbitrary: (Object.hasOwn(fields, key) ? fields[key] : undefined) ?? anyJson },
      { weight: 1, arbitrary: anyJson },
    );
  const extras = fc.oneof({ weight: 6, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: fc.dictionary(keyString, anyJson, { maxKeys: 2 }) });
  return fc.record({ changed: someOf(keys), values: fc.tuple(...keys.map(replacement)), extra: extras }).map(({ changed, values, extra }) => {
    const out: Record<string, unknown> = {};
    keys.forEach((k, i) => {
      const v = changed.includes(k) ? values[i] : Object.hasOwn(base, k) ? base[k] : DROP;
      if (v !== DROP) out[k] = v;
    });
    for (const [k, v] of Object.entries(extra))
      if (!Object.hasOwn(out, k)) Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
    return out;
  });
}

/** Bodies for a JSON route: mostly near-valid objects, then any JSON, broken text and deep nesting. */
export function jsonBodies(base: Record<string, unknown>, fields: Record<string, fc.Arbitrary<unknown>> = {}): fc.Arbitrary<Body> {
  const fieldNames = [...new Set([...Object.keys(base), ...Object.keys(fields), 'x'])];
  return fc.oneof(
    { weight: 8, arbitrary: objectLike(base, fields).map((value) => ({ kind: 'json' as const, value })) },
    { weight: 2, arbitrary: anyJson.map((value) => ({ kind: 'json' as const, value })) },
    { weight: 1, arbitrary: rawText },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('deep' as const),
        depth: fc.constantFrom(10, 1_000, 10_000, 100_000),
        shape: fc.constantFrom('array' as const, 'object' as const),
        field: fc.option(fc.constantFrom(...fieldNames), { nil: null }),
        base: fc.constant(base),
      }),
    },
  );
}

function nested(depth: number, shape: 'array' | 'object'): string {
  return shape === 'array' ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

/** The body's bytes and the Content-Type it would naturally go with. */
export function renderBody(body: Body): { bytes: Buffer | undefined; contentType: string | undefined } {
  switch (body.kind) {
    case 'none':
      return { bytes: undefined, contentType: undefined };
    case 'json':
      return { bytes: Buffer.from(JSON.stringify(body.value) ?? 'undefined'), contentType: 'application/json' };
    case 'raw':
      return { bytes: Buffer.from(body.text), contentType: 'application/json' };
    case 'text':
      return { bytes: Buffer.from(body.text), contentType: body.contentType };
    case 'deep': {
      const inner = nested(body.depth, body.shape);
      if (body.field === null) return { bytes: Buffer.from(inner), contentType: 'application/json' };
      const rest = { ...body.base };
      delete rest[body.field];
      const restJson = JSON.stringify(rest);
      const text = `{${JSON.stringify(body.field)}:${inner}${restJson === '{}' ? '}' : `,${restJson.slice(1)}`}`;
      return { bytes: Buffer.from(text), contentType: 'application/json' };
    }
    case 'form':
      return { bytes: Buffer.from(new URLSearchParams(body.params).toString()), contentType: 'application/x-www-form-urlencoded' };
    case 'multipart':
      return renderMultipart(body.form);
    case 'bytes':
      return { bytes: Buffer.from(body.bytes), contentType: 'application/octet-stream' };
  }
}

/** The Content-Type sent: mostly the body's own, sometimes a wrong, odd or missing one. */
export const contentTypeChoice = fc.oneof(
  { weight: 10, arbitrary: fc.constant('natural' as const) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'none',
      'application/json',
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'application/json; charset=latin1',
      'application/vnd.api+json',
      'text/plain',
      'text/html',
      'application/x-www-form-urlencoded',
      'multipart/form-data',
      'multipart/form-data; boundary=zzz',
      'multipart/mixed',
      'application/octet-stream',
      'audio/wav',
      'audio/x-wav',
      'audio/l16',
      'audio/mpeg',
      'garbage',
      ';;;',
      'application/json, text/plain',
      '*/*',
    ),
  },
);

// ---------------------------------------------------------------------------------------
// Query strings and path ids

/** A query string: known parameters with plausible or hostile values, unknown ones, repeats, raw junk. */
export function queryStrings(known: Record<string, fc.Arbitrary<string>> = {}): fc.Arbitrary<string> {
  const names = Object.keys(known);
  const pair: fc.Arbitrary<[string, string]> = fc.oneof(
    ...(names.length
      ? [
          {
            weight: 8,
            arbitrary: fc
              .constantFrom(...names)
              .chain((n) => fc.tuple(fc.constant(n), fc.oneof({ weight: 5, arbitrary: known[n]! }, { weight: 1, arbitrary: shortString }))),
          },
        ]
      : []),
    { weight: 1, arbitrary: fc.tuple(shortString, shortString) },
  );
  const junk = fc.oneof(
    { weight: 6, arbitrary: fc.constant('') },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '&',
        '&&=',
        '=',
        '%',
        '%zz',
        '%FF',
        '?',
        'a[b]=c',
        '[]=1',
        '__proto__=1',
        'a=%00',
        'api_key=%00',
        `x=${'y'.repeat(5000)}`,
        '?'.repeat(2000),
      ),
    },
  );
  return fc.tuple(fc.array(pair, { maxLength: 3 }), junk).map(([pairs, raw]) => {
    const encoded = new URLSearchParams(pairs.map(([k, v]) => [toWellFormed(k), toWellFormed(v)])).toString();
    const q = [encoded, raw].filter(Boolean).join('&');
    return q ? `?${q}` : '';
  });
}

/** URLSearchParams and encodeURIComponent throw on lone surrogates; UTF-8 would carry U+FFFD anyway. */
const toWellFormed = (s: string) => Buffer.from(s, 'utf8').toString('utf8');

/** Percent-encodes every byte of the UTF-8 of `s` (encodeURIComponent throws on lone surrogates). */
export function pct(s: string): string {
  return [...Buffer.from(s, 'utf8')]
    .map((b) => (/[A-Za-z0-9_-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`))
    .join('');
}

/** A path segment: a real id, a random one, an over-long one, or raw percent junk. */
export function pathIds(real: readonly string[]): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...real).map(pct) },
    { weight: 3, arbitrary: shortString.filter((s) => s.length > 0).map(pct) },
    { weight: 1, arbitrary: fc.constantFrom(100, 101, 1000, 5000).map((n) => 'v'.repeat(n)) },
    { weight: 1, arbitrary: fc.constantFrom('%', '%zz', '%FF', '%C0%AF', '%E0%80', '%00', 'a%2Fb', '%2e%2e', ';', 'voice_%00', '%F0%9F%92%A5', '+', '*', '~') },
  );
}

// ---------------------------------------------------------------------------------------
// Multipart

export interface Part {
  name: string;
  /** undefined: a plain field; null: a file part without a filename attribute. */
  filename?: string | null;
  contentType?: string;
  data: Uint8Array;
}

export interface Multipart {
  parts: Part[];
  /** How the body ends: properly, without the closing delimiter, or cut in the middle. */
  ending: 'ok' | 'no-close' | 'cut';
  /** The boundary in the Content-Type: the body's, none, or another one. */
  header: 'same' | 'none' | 'other';
}

const BOUNDARY = '----svcfuzz7MA4YWxkTrZu0gW';

function renderMultipart(form: Multipart): { bytes: Buffer; contentType: string } {
  const chunks: Buffer[] = [];
  for (const p of form.parts) {
    let head = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${p.name}"`;
    if (p.filename !== undefined) head += p.filename === null ? '' : `; filename="${p.filename}"`;
    head += '\r\n';
    if (p.contentType !== undefined) head += `Content-Type: ${p.contentType}\r\n`;
    chunks.push(Buffer.from(`${head}\r\n`), Buffer.from(p.data), Buffer.from('\r\n'));
  }
  if (form.ending !== 'no-close') chunks.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  let bytes = Buffer.concat(chunks);
  if (form.ending === 'cut') bytes = bytes.subarray(0, Math.floor(bytes.length / 2));
  const contentType =
    form.header === 'same'
      ? `multipart/form-data; boundary=${BOUNDARY}`
      : form.header === 'none'
        ? 'multipart/form-data'
        : 'multipart/form-data; boundary=other';
  return { bytes, contentType };
}

/** A WAV file whose header fields are each valid, edge or wrong, over random sample bytes. */
export const wavBytes: fc.Arbitrary<Uint8Array> = fc
  .record({
    riff: fc.constantFrom('RIFF', 'RIFF', 'RF64', 'RIFX'),
    code: fc.constantFrom(1, 1, 3, 6, 7, 0xfffe, 0, 2, 0xffff),
    channels: fc.constantFrom(1, 1, 2, 0, 3, 64, 65, 0xffff),
    rate: fc.constantFrom(8000, 16000, 22050, 24000, 44100, 48000, 0, 1, 11025, 96000, 1_000_001, 0xffffffff),
    bits: fc.constantFrom(16, 16, 8, 24, 32, 64, 0, 7, 0xffff),
    blockAlign: fc.oneof({ weight: 3, arbitrary: fc.constant(-1) }, { weight: 1, arbitrary: fc.nat(0xffff) }),
    fmtSize: fc.constantFrom(16, 16, 18, 40, 15, 0, 0xffffffff),
    dataSize: fc.oneof({ weight: 3, arbitrary: fc.constant(-1) }, { weight: 1, arbitrary: fc.constantFrom(0, 1, 0xffffffff, 0x7fffffff) }),
    data: fc.uint8Array({ maxLength: 8192 }),
    chunkBeforeData: fc.boolean(),
    cut: fc.option(fc.nat(80), { nil: null }),
  })
  .map((w) => {
    const fmtBody = Buffer.alloc(w.fmtSize === 40 || w.code === 0xfffe ? 40 : 16);
    fmtBody.writeUInt16LE(w.code, 0);
    fmtBody.writeUInt16LE(w.channels, 2);
    fmtBody.writeUInt32LE(w.rate, 4);
    const align = w.blockAlign === -1 ? (w.channels * w.bits) / 8 : w.blockAlign;
    fmtBody.writeUInt32LE(Math.min(0xffffffff, Math.max(0, Math.round(w.rate * align) >>> 0)), 8);
    fmtBody.writeUInt16LE(Math.max(0, Math.min(0xffff, Math.floor(align))), 12);
    fmtBody.writeUInt16LE(w.bits, 14);
    if (fmtBody.length === 40) {
      fmtBody.writeUInt16LE(22, 16);
      fmtBody.writeUInt16LE(w.bits, 18);
      fmtBody.writeUInt16LE(w.code === 0xfffe ? 1 : w.code, 24);
      Buffer.from([0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71]).copy(fmtBody, 26);
    }
    const fmtHead = Buffer.alloc(8);
    fmtHead.write('fmt ', 0, 'latin1');
    fmtHead.writeUInt32LE(w.fmtSize, 4);
    const list = w.chunkBeforeData ? Buffer.concat([Buffer.from('LIST'), Buffer.from([3, 0, 0, 0]), Buffer.from('abc\0')]) : Buffer.alloc(0);
    const dataHead = Buffer.alloc(8);
    dataHead.write('data', 0, 'latin1');
    dataHead.writeUInt32LE(w.dataSize === -1 ? w.data.length : w.dataSize, 4);
    const body = Buffer.concat([Buffer.from('WAVE'), fmtHead, fmtBody, list, dataHead, Buffer.from(w.data)]);
    const riff = Buffer.alloc(8);
    riff.write(w.riff, 0, 'latin1');
    riff.writeUInt32LE(body.length, 4);
    const file = Buffer.concat([riff, body]);
    return w.cut === null ? file : file.subarray(0, w.cut);
  });

/** An uploaded file: random bytes, a hostile WAV, compressed-audio magic, empty, or a real clip. */
export function fileBytes(realClips: readonly Uint8Array[]): fc.Arbitrary<Uint8Array> {
  const magic = fc.constantFrom(
    'ID3\u0003\u0000\u0000\u0000\u0000\u0000\u0000',
    'OggS',
    'fLaC',
    '\u0000\u0000\u0000\u0018ftypmp42',
    '\u001aE\u00df\u00a3',
    '\u00ff\u00fb\u0090\u0064',
    'RIFF\u0000\u0000\u0000\u0000WAVE',
  );
  return fc.oneof(
    { weight: 3, arbitrary: fc.uint8Array({ maxLength: 4096 }) },
    { weight: 4, arbitrary: wavBytes },
    {
      weight: 1,
      arbitrary: fc.tuple(magic, fc.uint8Array({ maxLength: 512 })).map(([m, rest]) => Buffer.concat([Buffer.from(m, 'latin1'), Buffer.from(rest)])),
    },
    { weight: 1, arbitrary: fc.constant(new Uint8Array(0)) },
    { weight: 2, arbitrary: fc.constantFrom(...realClips) },
  );
}

const PART_CONTENT_TYPES = [
  'application/octet-stream',
  'audio/mpeg',
  'text/plain',
  'application/json',
  'image/png',
  '',
  'garbage',
  'audio/wav; charset=binary',
];

/**
 * A multipart body for a route whose file goes in `fileField` and whose text fields are `base`
 * (plausible values for each in `fields`): up to three fields missing, changed or hostile, some
 * repeated or unknown; the file missing, in another field, with odd headers or bytes; sometimes
 * any parts at all, a body without its closing delimiter or cut short, a wrong boundary.
 */
export function multipartBodies(
  fileField: string,
  base: Record<string, string>,
  fields: Record<string, fc.Arbitrary<string>>,
  files: fc.Arbitrary<Uint8Array>,
): fc.Arbitrary<Body> {
  const keys = [...new Set([...Object.keys(base), ...Object.keys(fields)])];
  const replacement = (key: string): fc.Arbitrary<string | typeof DROP> =>
    fc.oneof(
      { weight: 1, arbitrary: fc.constant(DROP) },
      { weight: 4, arbitrary: (Object.hasOwn(fields, key) ? fields[key] : undefined) ?? shortString },
      { weight: 1, arbitrary: anyString },
    );
  const fieldParts = fc.record({ changed: someOf(keys), values: fc.tuple(...keys.map(replacement)) }).map(({ changed, values }) => {
    const parts: Part[] = [];
    keys.forEach((k, i) => {
      const v = changed.includes(k) ? values[i] : Object.hasOwn(base, k) ? base[k] : DROP;
      if (v !== DROP) parts.push({ name: k, data: Buffer.from(v as string) });
    });
    return parts;
  });
  const strayPart: fc.Arbitrary<Part> = fc
    .tuple(
      fc.oneof(
        fc.constantFrom(...keys),
        shortString.map((s) => s.replace(/["\r\n]/g, '')),
      ),
      anyString,
    )
    .map(([name, value]) => ({ name, data: Buffer.from(value) }));
  const filePart: fc.Arbitrary<Part> = fc.record({
    name: fc.oneof({ weight: 8, arbitrary: fc.constant(fileField) }, { weight: 1, arbitrary: fc.constantFrom(...keys, 'audio', '') }),
    filename: fc.oneof(
      { weight: 8, arbitrary: fc.constant('clip.wav') },
      { weight: 1, arbitrary: fc.constantFrom(null, '', '../../x.wav', 'ü.wav', 'a'.repeat(300)) },
    ),
    contentType: fc.oneof(
      { weight: 4, arbitrary: fc.constant('audio/wav') },
      { weight: 1, arbitrary: fc.option(fc.constantFrom(...PART_CONTENT_TYPES), { nil: undefined }) },
    ),
    data: files,
  });
  const usual = fc
    .tuple(
      fieldParts,
      fc.oneof({ weight: 6, arbitrary: fc.constant([] as Part[]) }, { weight: 1, arbitrary: fc.array(strayPart, { minLength: 1, maxLength: 3 }) }),
      fc.option(filePart, { freq: 8, nil: null }),
      fc.nat(8),
    )
    .map(([fs, stray, file, at]) => {
      const all = [...fs, ...stray];
      if (file !== null) all.splice(Math.min(at, all.length), 0, file);
      return all;
    });
  const anything = fc.array(fc.oneof(strayPart, filePart), { maxLength: 6 });
  return fc
    .record({
      parts: fc.oneof({ weight: 8, arbitrary: usual }, { weight: 1, arbitrary: anything }),
      ending: fc.oneof({ weight: 10, arbitrary: fc.constant('ok' as const) }, { weight: 1, arbitrary: fc.constantFrom('no-close' as const, 'cut' as const) }),
      header: fc.oneof({ weight: 12, arbitrary: fc.constant('same' as const) }, { weight: 1, arbitrary: fc.constantFrom('none' as const, 'other' as const) }),
    })
    .map((form) => ({ kind: 'multipart' as const, form }));
}

// ---------------------------------------------------------------------------------------
// Keys

export type KeyChoice = 'good' | 'none' | 'garbage' | 'empty-bearer' | 'unknown-key' | 'basic' | 'lowercase';

/** Mostly the funded key (to get past admission), sometimes a wrong or missing one. */
export const keyChoice: fc.Arbitrary<KeyChoice> = fc.oneof(
  { weight: 12, arbitrary: fc.constant('good' as const) },
  {
    weight: 1,
    arbitrary: fc.constantFrom('none' as const, 'garbage' as const, 'empty-bearer' as const, 'unknown-key' as const, 'basic' as const, 'lowercase' as const),
  },
);

export function authorization(choice: KeyChoice, key: string): string | undefined {
  switch (choice) {
    case 'good':
      return `Bearer ${key}`;
    case 'none':
      return undefined;
    case 'garbage':
      return 'Bearer \u00ff\u00fe not a key';
    case 'empty-bearer':
      return 'Bearer ';
    case 'unknown-key':
      return `Bearer sk_svc_${'A'.repeat(43)}`;
    case 'basic':
      return `Basic ${Buffer.from(`${key}:`).toString('base64')}`;
    case 'lowercase':
      return `bearer ${key}`;
  }
}

// ---------------------------------------------------------------------------------------
// Sending and checking

export interface Sent {
  method: string;
  path: string;
  body: Body;
  contentType: string | undefined;
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

/**
 * Sends one request on a connection of its own, then GET /health on the same connection: a
 * request whose unread body stalls the keep-alive connection is caught on that request, not on
 * whichever request happens to reuse the connection later. No complete answer to either within
 * REQUEST_TIMEOUT_MS is a hang; a dropped connection is reported as such.
 */
export async function send(
  base: string,
  method: string,
  path: string,
  body: Body,
  contentTypeChoiceValue: string,
  auth: string | undefined,
): Promise<{ sent: Sent; answer: Answer }> {
  const rendered = renderBody(body);
  const contentType = contentTypeChoiceValue === 'natural' ? rendered.contentType : contentTypeChoiceValue === 'none' ? undefined : contentTypeChoiceValue;
  const headers: Record<string, string> = {};
  if (auth !== undefined) headers.authorization = auth;
  if (contentType !== undefined && rendered.bytes !== undefined) headers['content-type'] = contentType;
  const sent: Sent = { method, path, body, contentType };
  const withBody = rendered.bytes !== undefined && method !== 'GET' && method !== 'HEAD';
  const client = new Client(base, { pipelining: 1, headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS });
  const signal = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  const what = `${method} ${path.slice(0, 200)}`;
  const failure = (e: unknown, during: string) => {
    const err = e as Error & { code?: string; cause?: { code?: string; message?: string } };
    if (err.name === 'TimeoutError' || err.name === 'AbortError' || /Timeout/.test(err.code ?? ''))
      return new Error(`${during}: no complete answer within ${REQUEST_TIMEOUT_MS} ms (hang)`);
    return new Error(`${during}: the connection failed (${err.code ?? err.cause?.code ?? err.message}); the gateway dropped it or crashed`);
  };
  try {
    let answer: Answer;
    try {
      const res = await client.request({ method, path, headers, body: withBody ? rendered.bytes : undefined, signal });
      const text = await res.body.text();
      const h = new Headers();
      for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
      answer = { status: res.statusCode, headers: h, text };
    } catch (e) {
      throw failure(e, what);
    }
    try {
      const probe = await client.request({ method: 'GET', path: '/health', signal });
      const text = await probe.body.text();
      if (probe.statusCode !== 200) throw new Error(`GET /health answered ${probe.statusCode} ${text.slice(0, 200)}`);
    } catch (e) {
      const f = failure(e, `the next request on the same connection after ${what} (answered ${answer.status} ${answer.text.slice(0, 160)})`);
      throw (e as Error).message?.startsWith('GET /health answered') ? e : f;
    }
    return { sent, answer };
  } finally {
    await client.destroy().catch(() => {});
  }
}

/**
 * Findings that do not stop a property (so that they do not hide worse failures of the same
 * route): each distinct one is kept with its first example, and a last test asserts there are none.
 */
export const softFindings = new Map<string, string>();

/** The envelope's code of an error answer's body ('' when it has none). */
export function errorCode(text: string): string {
  try {
    return String((JSON.parse(text) as { error?: { code?: unknown } } | null)?.error?.code ?? '');
  } catch {
    return '(not JSON)';
  }
}

function soft(kind: string, example: string): void {
  if (!softFindings.has(kind)) softFindings.set(kind, example);
}

/**
 * What every answer must be: below 500, or 5xx with a code the route documents (`allowed5xx`);
 * at 400 and over, exactly {"error":{"message","type","code","param"}} as JSON, with the status
 * and type that ERROR_TABLE gives the code (a HEAD answer has no body to check). Every answer
 * should also carry x-request-id (docs/api-conventions.md, "Errors"): a soft finding, see softFindings.
 */
export interface ErrorEnvelope {
  error: { message: string; type: string; code: string; param: string | null };
}

export function checkAnswer(answer: Answer, allowed5xx: readonly string[] = [], sent?: Sent): ErrorEnvelope | null {
  const where = `status ${answer.status}, body ${answer.text.slice(0, 300)}`;
  const request = sent ? `${sent.method} ${sent.path.slice(0, 120)}` : 'WebSocket upgrade';
  if (!answer.headers.get('x-request-id')) soft(`no x-request-id on a ${answer.status} ${errorCode(answer.text)} answer`, `${request} -> ${where}`);
  if (answer.status < 400) return null;
  if (sent?.method === 'HEAD') {
    if (answer.status >= 500) throw new Error(`server error ${answer.status} to HEAD`);
    return null;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.text);
  } catch {
    throw new Error(`an error answer that is not JSON (${where})`);
  }
  if (!(answer.headers.get('content-type') ?? '').startsWith('application/json'))
    throw new Error(`error answer with content-type ${answer.headers.get('content-type')} (${where})`);
  const env = parsed as ErrorEnvelope;
  const e = env?.error;
  const shapeOk =
    parsed !== null &&
    typeof parsed === 'object' &&
    !Array.isArray(parsed) &&
    Object.keys(parsed).join() === 'error' &&
    e !== null &&
    typeof e === 'object' &&
    Object.keys(e).sort().join() === 'code,message,param,type' &&
    typeof e.message === 'string' &&
    e.message.length > 0 &&
    typeof e.type === 'string' &&
    typeof e.code === 'string' &&
    (e.param === null || typeof e.param === 'string');
  if (!shapeOk) throw new Error(`an error answer outside the envelope (${where})`);
  const row = (ERROR_TABLE as Record<string, { status: number; type: string } | undefined>)[e.code];
  if (!row) throw new Error(`error code ${e.code} is not in the error table (${where})`);
  if (row.status !== answer.status || row.type !== e.type)
    throw new Error(`code ${e.code} answered with ${answer.status}/${e.type}, the table says ${row.status}/${row.type} (${where})`);
  if (answer.status >= 500 && !allowed5xx.includes(e.code))
    throw new Error(`server error ${answer.status} ${e.code}: ${e.message} (allowed here: ${allowed5xx.join(', ') || 'none'})`);
  return env;
}

/**
 * An ElevenLabs-compatible route's answer (gateway/vendor-error-shape.ts): at 400 and over, the
 * envelope with ElevenLabs' `detail: {status, message}` beside it, `status` the envelope's code and
 * `message` its message (what ElevenLabs' clients read); otherwise as checkAnswer.
 */
export function checkElevenLabsAnswer(answer: Answer, allowed5xx: readonly string[] = [], sent?: Sent): ErrorEnvelope | null {
  if (answer.status < 400 || sent?.method === 'HEAD') return checkAnswer(answer, allowed5xx, sent);
  let parsed: { detail?: unknown; error?: { code?: unknown; message?: unknown } } | null;
  try {
    parsed = JSON.parse(answer.text) as typeof parsed;
  } catch {
    throw new Error(`an error answer that is not JSON (status ${answer.status}, body ${answer.text.slice(0, 300)})`);
  }
  const { detail, ...rest } = parsed ?? {};
  const expected = { status: rest.error?.code, message: rest.error?.message };
  if (JSON.stringify(detail) !== JSON.stringify(expected))
    throw new Error(`ElevenLabs' detail is not {status: code, message} of the envelope (status ${answer.status}, body ${answer.text.slice(0, 300)})`);
  return checkAnswer({ ...answer, text: JSON.stringify(rest) }, allowed5xx, sent);
}

/** Per route: how many answers of each status (or code), and the slowest request. For tuning and reports. */
export class FuzzStats {
  private rows = new Map<string, { counts: Map<string, number>; slowestMs: number; slowest: string }>();

  record(route: string, outcome: string, ms: number, input: () => string): void {
    let row = this.rows.get(route);
    if (!row) this.rows.set(route, (row = { counts: new Map(), slowestMs: -1, slowest: '' }));
    row.counts.set(outcome, (row.counts.get(outcome) ?? 0) + 1);
    if (ms > row.slowestMs) {
      row.slowestMs = ms;
      row.slowest = input().slice(0, 200);
    }
  }

  table(): string {
    return [...this.rows]
      .map(
        ([route, r]) =>
          `${route.padEnd(36)} ${[...r.counts]
            .sort()
            .map(([k, n]) => `${k}:${n}`)
            .join(' ')}  | slowest ${Math.round(r.slowestMs)} ms: ${r.slowest}`,
      )
      .join('\n');
  }
}

// ---------------------------------------------------------------------------------------
// Running

/** Base seed (FUZZ_SEED) and a multiplier of the number of runs (FUZZ_RUNS_FACTOR, e.g. 10 for a long local run). */
export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 170_417);
export const RUNS_FACTOR = Number(process.env.FUZZ_RUNS_FACTOR ?? 1);

/** A per-property seed: the base seed and the property's name, so properties do not share inputs. */
export function seedFor(name: string): number {
  let h = FUZZ_SEED | 0;
  for (const c of name) h = (Math.imul(h, 31) + c.charCodeAt(0)) | 0;
  return h;
}

/** JSON with long strings cut, for counterexamples a human can read. */
export function summarize(value: unknown): string {
  const seen = new WeakSet<object>();
  return JSON.stringify(value, (_k, v: unknown) => {
    if (typeof v === 'string' && v.length > 120) return `${v.slice(0, 60)}…[${v.length} chars]`;
    // Buffers reach the replacer already turned into {type:"Buffer",data:[...]} by their toJSON.
    const bytes =
      v instanceof Uint8Array
        ? v
        : v !== null && typeof v === 'object' && (v as { type?: unknown }).type === 'Buffer' && Array.isArray((v as { data?: unknown }).data)
          ? Uint8Array.from((v as { data: number[] }).data)
          : null;
    if (bytes) return `<${bytes.length} bytes: ${Buffer.from(bytes.subarray(0, 48)).toString('hex')}${bytes.length > 48 ? '…' : ''}>`;
    if (typeof v === 'number' && !Number.isFinite(v)) return String(v);
    if (v !== null && typeof v === 'object') {
      if (seen.has(v)) return '<cycle>';
      seen.add(v);
    }
    return v;
  });
}

/**
 * Runs a property and, on failure, throws an error naming the route, the seed and path that
 * replay it (fc.assert(property, { seed, path })), the shrunk counterexample and the failure.
 */
export async function runProperty<Ts extends [unknown, ...unknown[]]>(name: string, property: fc.IAsyncProperty<Ts>, numRuns: number): Promise<void> {
  const seed = seedFor(name);
  const out = await fc.check(property, {
    seed,
    numRuns: Math.max(1, Math.round(numRuns * RUNS_FACTOR)),
    interruptAfterTimeLimit: 150_000 * RUNS_FACTOR,
    markInterruptAsFailure: false,
  });
  if (!out.failed) return;
  const err = out.errorInstance as Error | null;
  throw new Error(
    [
      `${name}: property failed after ${out.numRuns} runs (${out.numShrinks} shrinks)`,
      `replay: seed ${out.seed}, path "${out.counterexamplePath}" (FUZZ_SEED=${FUZZ_SEED})`,
      `counterexample: ${summarize(out.counterexample)}`,
      `failure: ${err?.message ?? String(out.errorInstance)}`,
    ].join('\n'),
  );
}
