// The OpenAPI 3.1 document of the gateway, made from operations.ts (zod schemas turned into JSON
// Schema 2020-12 by zod itself), and the route that serves it: GET /openapi.json, public like
// /health (no key, not metered, outside the keys' rate limits).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { COST_HEADER, REMAINING_HEADER } from '../core/gateway-core.ts';
import { ERROR_TABLE } from '../errors.ts';
import type { GatewayContext } from '../context.ts';
import { MP3_BIT_RATES, SAMPLE_RATES } from '../audio/output-format.ts';
import { TtsRequestSchema } from '../tts/tts-request.ts';
import { OPERATIONS, REQUEST_COMPONENTS, RESPONSE_COMPONENTS, TAGS, type Answer, type Operation } from './operations.ts';

type JsonSchema = Record<string, unknown>;
type Io = 'input' | 'output';

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

const ttsFormat = TtsRequestSchema.shape.output_format.shape;

/**
 * JSON Schema that zod cannot derive from a refinement or a preprocess step: the rates the TTS
 * request takes, and its `voice`, which may also come as an id alone or as {id} without a mode.
 */
const INPUT_OVERRIDES = new Map<z.ZodType, JsonSchema>([
  [ttsFormat.sample_rate, { type: 'integer', enum: [...SAMPLE_RATES] }],
  [ttsFormat.bit_rate.unwrap(), { type: 'integer', enum: [...MP3_BIT_RATES], description: 'mp3 only (default 128000).' }],
  [
    TtsRequestSchema.shape.voice,
    {
      anyOf: [
        { type: 'string', minLength: 1, description: 'A voice id.' },
        { type: 'object', properties: { mode: { const: 'id' }, id: { type: 'string', minLength: 1 } }, required: ['id'] },
      ],
    },
  ],
]);

/** zod's conversion as the document wants it (JSON Schema 2020-12, references into components/schemas). */
function conversion(io: Io) {
  return {
    target: 'draft-2020-12' as const,
    io,
    uri: (id: string) => `#/components/schemas/${id}`,
    // Transforms (tags normalized, a language tag canonicalized) are described by their input;
    // no output has one.
    unrepresentable: 'any' as const,
    override: (ctx: { zodSchema: unknown; jsonSchema: JsonSchema }) => {
      // The format says it; zod's equivalent pattern would repeat 500 characters per timestamp.
      if (ctx.jsonSchema.format === 'date-time') delete ctx.jsonSchema.pattern;
      const replacement = io === 'input' ? INPUT_OVERRIDES.get(ctx.zodSchema as z.ZodType) : undefined;
      if (!replacement) return;
      for (const key of Object.keys(ctx.jsonSchema)) delete ctx.jsonSchema[key];
      Object.assign(ctx.jsonSchema, replacement);
    },
  };
}

/** Each component set as JSON Schema, $schema and $id left out (the document's dialect is 2020-12). */
function components(named: Record<string, z.ZodType>, io: Io): { schemas: Record<string, JsonSchema>; names: Map<z.ZodType, string> } {
  const registry = z.registry<{ id: string }>();
  const names = new Map<z.ZodType, string>();
  for (const [name, schema] of Object.entries(named)) {
    registry.add(schema, { id: name });
    names.set(schema, name);
  }
  const { schemas } = z.toJSONSchema(registry, conversion(io)) as { schemas: Record<string, JsonSchema> };
  for (const schema of Object.values(schemas)) {
    delete schema.$schema;
    delete schema.$id;
  }
  return { schemas, names };
}

/** Path or query parameters from a zod object, one per property. */
function parameters(schema: z.ZodObject | undefined, where: 'path' | 'query'): JsonSchema[] {
  if (!schema) return [];
  const json = z.toJSONSchema(schema, conversion('input')) as { properties?: Record<string, JsonSchema>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property;
    return { name, in: where, required: where === 'path' || (json.required ?? []).includes(name), schema: rest, ...(description ? { description } : {}) };
  });
}

const REQUEST_ID_HEADER = { 'x-request-id': { $ref: '#/components/headers/RequestId' } };

/** The codes of a status, from the one table the error handler answers with. */
function codesOf(status: number): string[] {
  return Object.entries(ERROR_TABLE)
    .filter(([, e]) => e.status === status)
    .map(([code]) => code);
}

function errorResponse(status: number, envelope: string): JsonSchema {
  const codes = codesOf(status);
  const headers: Record<string, unknown> = { ...REQUEST_ID_HEADER };
  if (status === 429 || status === 503) headers['retry-after'] = { $ref: '#/components/headers/RetryAfter' };
  if (status === 405) headers.allow = { $ref: '#/components/headers/Allow' };
  return {
    description: `The error envelope; \`code\` is one of ${codes.map((c) => `\`${c}\``).join(', ')}.`,
    headers,
    content: { 'application/json': { schema: ref(envelope) } },
  };
}

function answer(status: number, a: Answer, names: Map<z.ZodType, string>): JsonSchema {
  const content: Record<string, unknown> = {};
  if (a.json) content['application/json'] = { schema: ref(nameOf(a.json, names, 'a response')) };
  if (a.sse) content['text/event-stream'] = { schema: { type: 'string', description: a.sse } };
  for (const [type, description] of Object.entries(a.media ?? {})) {
    content[type] = type.startsWith('text/') ? { schema: { type: 'string', description } } : { schema: { description, contentMediaType: type } };
  }
  // A 101 is written by the WebSocket server, not the HTTP route: no x-request-id on it.
  const headers: Record<string, unknown> = status === 101 ? {} : { ...REQUEST_ID_HEADER };
  if (a.spend) {
    headers[COST_HEADER] = { $ref: '#/components/headers/RequestCost' };
    headers[REMAINING_HEADER] = { $ref: '#/components/headers/CreditsRemaining' };
  }
  return { description: a.description, ...(Object.keys(headers).length ? { headers } : {}), ...(Object.keys(content).length ? { content } : {}) };
}

function nameOf(schema: z.ZodType, names: Map<z.ZodType, string>, what: string): string {
  const name = names.get(schema);
  if (!name) throw new Error(`openapi: ${what} schema is not among the named components (operations.ts)`);
  return name;
}

const SECURITY: Record<Operation['auth'], Record<string, never[]>[]> = {
  key: [{ bearer: [] }, { token: [] }, { apiKeyHeader: [] }],
  socket: [{ bearer: [] }, { token: [] }, { apiKeyHeader: [] }, { apiKeyQuery: [] }, { accessTokenQuery: [] }],
  metrics: [{ metricsToken: [] }],
  // The phone token is a path parameter: no header or query scheme carries it.
  phoneToken: [],
  public: [],
};

function operation(op: Operation, requestNames: Map<z.ZodType, string>, responseNames: Map<z.ZodType, string>): JsonSchema {
  const envelope = op.deepgramErrors ? 'DeepgramErrorEnvelope' : op.elevenLabsErrors ? 'ElevenLabsErrorEnvelope' : 'ErrorEnvelope';
  const statuses = new Set(op.errors);
  if (op.auth === 'key' || op.auth === 'socket' || op.auth === 'phoneToken') [401, 429, 503].forEach((s) => statuses.add(s));
  if (op.metered) statuses.add(402);
  if (op.body) [400, 413, 415].forEach((s) => statuses.add(s));
  const responses: Record<string, unknown> = {};
  for (const [status, a] of Object.entries(op.answers)) responses[status] = answer(Number(status), a, responseNames);
  for (const status of [...statuses].sort((a, b) => a - b)) responses[String(status)] ??= { $ref: `#/components/responses/${envelope}${status}` };
  responses.default = { $ref: `#/components/responses/${envelope}` };

  let requestBody: JsonSchema | undefined;
  if (op.body) {
    const content: Record<string, unknown> = {};
    const body = op.body;
    if (body.json) content['application/json'] = { schema: ref(nameOf(body.json, requestNames, 'a request')) };
    if (body.multipart) content['multipart/form-data'] = { schema: ref(nameOf(body.multipart, requestNames, 'a request')) };
    if (body.form) content['application/x-www-form-urlencoded'] = { schema: ref(nameOf(body.form, requestNames, 'a request')) };
    for (const type of body.raw ?? []) content[type] = { schema: { contentMediaType: type } };
    requestBody = { required: true, content, ...(body.description ? { description: body.description } : {}) };
  }
  return {
    operationId: op.operationId,
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    tags: [op.tag],
    security: SECURITY[op.auth],
    ...(op.websocket
      ? { externalDocs: { description: `The WebSocket protocol: ${op.websocket} in the repository.`, url: op.websocket }, 'x-websocket': true }
      : {}),
    parameters: [...parameters(op.pathParams, 'path'), ...parameters(op.query, 'query')],
    ...(requestBody ? { requestBody } : {}),
    responses,
  };
}

/** The document (without `servers`: openApiDocument adds the gateway's own URL). */
export function buildOpenApiDocument() {
  const requests = components(REQUEST_COMPONENTS, 'input');
  const responses = components(RESPONSE_COMPONENTS, 'output');
  const clash = Object.keys(requests.schemas).filter((name) => name in responses.schemas);
  if (clash.length) throw new Error(`openapi: component names used for both requests and responses: ${clash.join(', ')}`);
  // One error answer per status and envelope, referred to by every operation that may give it.
  const errorResponses: Record<string, JsonSchema> = {};
  for (const status of new Set(Object.values(ERROR_TABLE).map((e) => e.status))) {
    for (const envelope of ['ErrorEnvelope', 'DeepgramErrorEnvelope', 'ElevenLabsErrorEnvelope'])
      errorResponses[`${envelope}${status}`] = errorResponse(status, envelope);
  }
  for (const envelope of ['ErrorEnvelope', 'DeepgramErrorEnvelope', 'ElevenLabsErrorEnvelope']) {
    errorResponses[envelope] = {
      description: 'Any other error (500 internal_error...), in the same envelope.',
      headers: REQUEST_ID_HEADER,
      content: { 'application/json': { schema: ref(envelope) } },
    };
  }
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of OPERATIONS) {
    const item = (paths[op.path] ??= {});
    if (item[op.method]) throw new Error(`openapi: ${op.method.toUpperCase()} ${op.path} is described twice`);
    item[op.method] = operation(op, requests.names, responses.names);
  }
  return {
    openapi: '3.1.1',
    info: {
      title: 'svc gateway',
      version: '1',
      description:
        'The public HTTP and WebSocket edge: speech, transcription, LLM, realtime, voices. Conventions (keys, errors, rate limits, credits): docs/api-conventions.md. ' +
        'Every error is `{"error":{"message","type","code","param"}}`; every answer carries `x-request-id`.',
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    tags: Object.entries(TAGS).map(([name, t]) => ({
      name,
      description: t.description,
      externalDocs: { url: t.doc, description: `${t.doc} in the repository` },
    })),
    security: SECURITY.key,
    paths,
    components: {
      schemas: { ...requests.schemas, ...responses.schemas },
      responses: errorResponses,
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: '`Authorization: Bearer sk_svc_…` (OpenAI and most SDKs).' },
        token: { type: 'apiKey', in: 'header', name: 'Authorization', description: "`Authorization: Token sk_svc_…` (Deepgram's clients)." },
        apiKeyHeader: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: "`X-API-Key: sk_svc_…` (Cartesia's clients)." },
        apiKeyQuery: { type: 'apiKey', in: 'query', name: 'api_key', description: 'WebSocket upgrades only.' },
        accessTokenQuery: { type: 'apiKey', in: 'query', name: 'access_token', description: 'WebSocket upgrades only.' },
        metricsToken: { type: 'http', scheme: 'bearer', description: 'GET /metrics only: the SVC_METRICS_TOKEN, not an API key.' },
      },
      headers: {
        RequestId: { description: 'The request id: yours if you sent a well-formed one, else a new one.', schema: { type: 'string' } },
        RequestCost: {
          description: 'What the request cost, USD with 6 decimals (absent on streams whose cost is known only at their end).',
          schema: { type: 'string' },
        },
        CreditsRemaining: { description: "The org's balance after the request, USD with 6 decimals.", schema: { type: 'string' } },
        RetryAfter: { description: 'Seconds to wait before retrying.', schema: { type: 'string' } },
        Allow: { description: 'The methods the path takes.', schema: { type: 'string' } },
      },
    },
  };
}

export type OpenApiDocument = ReturnType<typeof buildOpenApiDocument> & { servers: { url: string }[] };

let built: ReturnType<typeof buildOpenApiDocument> | undefined;

/** The document with this gateway's public URL; made once per process, at its first request. */
export function openApiDocument(publicBaseUrl: string): OpenApiDocument {
  built ??= buildOpenApiDocument();
  return { ...built, servers: [{ url: publicBaseUrl }] };
}

export function registerOpenApiRoute(app: FastifyInstance, ctx: GatewayContext): void {
  let body: string | undefined;
  app.get('/openapi.json', { config: { public: true } }, async (_request, reply) => {
    body ??= JSON.stringify(openApiDocument(ctx.config.publicBaseUrl));
    return reply.type('application/json; charset=utf-8').send(body);
  });
}
