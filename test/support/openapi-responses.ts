// Checks answers against the gateway's OpenAPI document (GET /openapi.json): the status must be
// documented for the route (or be an error of an undocumented path or method), the content type
// among the documented ones, and a JSON body must validate against the documented schema (Ajv,
// JSON Schema 2020-12, the dialect of OpenAPI 3.1). Used by the black-box test on every answer it
// receives, and by gateway/openapi/openapi.test.ts.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS: its default export arrives as the module object under some loaders.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as typeof addFormatsModule;

type Json = Record<string, any>;

export interface Answer {
  method: string;
  /** As requested: a query string is ignored. */
  path: string;
  status: number;
  contentType: string | null;
  /** The parsed body when it is JSON. */
  json: unknown;
}

const DOC_ID = 'https://svc.invalid/openapi.json';

/** '#/components/...' made absolute, so that a schema compiled on its own finds the document's components. */
function absoluteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(absoluteRefs);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' && v.startsWith('#') ? `${DOC_ID}${v}` : absoluteRefs(v)]),
  );
}

export function openApiResponseChecker(doc: Json) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ $id: DOC_ID, components: doc.components });
  const compiled = new Map<string, ValidateFunction>();
  const compile = (key: string, schema: unknown) => {
    let v = compiled.get(key);
    if (!v) compiled.set(key, (v = ajv.compile(absoluteRefs(schema) as object)));
    return v;
  };

  // Static paths before templated ones (/voices/clone before /voices/{id}); fewer parameters first.
  const templates = Object.keys(doc.paths as Json)
    .map((template) => ({
      template,
      params: (template.match(/\{/g) ?? []).length,
      re: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
    }))
    .sort((a, b) => a.params - b.params);

  function operationOf(method: string, path: string): { template: string; op: Json } | undefined {
    for (const t of templates) {
      const op = (doc.paths[t.template] as Json)[method.toLowerCase()];
      if (op && t.re.test(path)) return { template: t.template, op };
    }
    return undefined;
  }

  /** A response object, or the one its $ref names (#/components/responses/...). */
  const resolve = (object: Json): Json =>
    typeof object.$ref === 'string'
      ? (object.$ref as string)
          .slice(2)
          .split('/')
          .reduce((at: Json, part) => at[part.replace(/~1/g, '/').replace(/~0/g, '~')], doc)
      : object;

  const envelope = compile('ErrorEnvelope', { $ref: '#/components/schemas/ErrorEnvelope' });
  const explain = (v: ValidateFunction) => ajv.errorsText(v.errors, { separator: '; ' });

  /** The problems of an answer ([] when it is as documented). */
  function problems(a: Answer): string[] {
    const path = a.path.split('?')[0]!;
    const what = `${a.method} ${path} -> ${a.status}`;
    const found = operationOf(a.method, path);
    if (!found) {
      // An unknown path or a method the path does not take: an error, in the envelope.
      if (a.status < 400) return [`${what}: the route is not in the document`];
      return envelope(a.json) ? [] : [`${what}: not the error envelope: ${explain(envelope)}`];
    }
    const responses = found.op.responses as Json;
    const status = String(a.status);
    const key =
      status in responses ? status : `${status[0]}XX` in responses ? `${status[0]}XX` : 'default' in responses && a.status >= 400 ? 'default' : undefined;
    if (!key) return [`${what}: status ${status} is not documented for ${a.method} ${found.template}`];
    const content = resolve(responses[key] as Json).content as Json | undefined;
    const type = (a.contentType ?? '').split(';')[0]!.trim().toLowerCase();
    if (!content) return type ? [`${what}: documented without a body, answered ${type}`] : [];
    if (!type) return [`${what}: answered without a Content-Type`];
    if (!(type in content) && !Object.keys(content).some((range) => range.endsWith('/*') && type.startsWith(range.slice(0, -1)))) {
      return [`${what}: Content-Type ${type} is not among the documented ${Object.keys(content).join(', ')}`];
    }
    if (type !== 'application/json') return [];
    const validate = compile(`${found.template} ${a.method} ${key}`, (content['application/json'] as Json).schema);
    return validate(a.json) ? [] : [`${what}: the body does not match the document: ${explain(validate)}`];
  }

  return { problems, operationOf };
}

export type OpenApiResponseChecker = ReturnType<typeof openApiResponseChecker>;
