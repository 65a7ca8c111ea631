// The {auth_url} routes of agent self-registration (docs/agent-registration.md), served by
// the gateway process: discovery (RFC 8414 authorization-server metadata with the `agent_auth`
// block; RFC 9728 protected-resource metadata for {base_url}/v1), registration, claim
// attempts and the token endpoint (jwt-bearer and claim grants). All public; every request
// counts against a per-IP limit (429 slow_down). Errors use the OpenAI envelope like every
// other route, with the spec's names in `code`.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { clientAddress } from '../../server/config/client-address.ts';
import { ServiceError } from '../../server/services/errors.ts';
import { eraseExpiredRegistrationSecrets } from '../../server/services/registrations/erase-expired-registration-secrets.ts';
import { exchangeAssertion, type IssuedToken } from '../../server/services/registrations/exchange-assertion.ts';
import { pollClaim } from '../../server/services/registrations/poll-claim.ts';
import {
  CODE_TTL_MS,
  GRANT_CLAIM,
  GRANT_JWT_BEARER,
  POLL_INTERVAL_S,
  POST_CLAIM_SCOPES,
  PRE_CLAIM_SCOPES,
  REDELIVERY_MS,
  REGISTRATION_TTL_MS,
  assertEnabled,
  claimUrl,
  registrationSettings,
  tokenUrl,
  verificationUri,
  type RegistrationDeps,
} from '../../server/services/registrations/registration-rules.ts';
import { startClaim, type ClaimAttemptGrant } from '../../server/services/registrations/start-claim.ts';
import { startRegistration, type StartRegistrationInput } from '../../server/services/registrations/start-registration.ts';
import type { GatewayContext } from '../context.ts';

const MAX_CLIENT_NAME = 100;
/** What of the User-Agent header a registration keeps. */
const MAX_USER_AGENT = 200;

/** Registration bodies are a few hundred bytes; nothing legitimate comes near this. */
const AUTH_BODY_LIMIT = 16 * 1024;
const SWEEP_MS = 60_000;
/** A due time already passed (clocks of replicas differ a little) must not spin the sweep. */
const MIN_SWEEP_GAP_MS = 100;
// Names an agent may use for an identity-assertion (ID-JAG) registration: recognised, and
// refused with the spec's identity_assertion_not_enabled rather than "unknown type".
const ASSERTION_TYPES = new Set(['identity_assertion', 'id_jag', 'id-jag', 'urn:ietf:params:oauth:token-type:id-jag', 'jwt_bearer']);

export const IdentityBody = z.object({
  type: z.string().max(200).optional(),
  login_hint: z.unknown().optional(),
  assertion: z.unknown().optional(),
  identity_assertion: z.unknown().optional(),
  // What the agent calls itself (RFC 7591's client_name), shown to the user who claims it.
  client_name: z
    .string()
    .trim()
    .min(1, 'must not be empty')
    .max(MAX_CLIENT_NAME, `at most ${MAX_CLIENT_NAME} characters`)
    .regex(/^[^\p{Cc}\p{Cf}]*$/u, 'must be text without control characters')
    .optional(),
});
export const ClaimBody = z.object({ claim_token: z.unknown(), email: z.unknown().optional() });

export async function registerAgentAuthRoutes(app: FastifyInstance, ctx: GatewayContext): Promise<void> {
  const settings = registrationSettings(ctx.config);
  // ctx.db is read per request (not captured) so that a test can take the store away.
  const deps = (): RegistrationDeps => ({ db: ctx.db, settings, now: () => new Date(ctx.clock.now()) });
  const publicRoute = { config: { public: true }, bodyLimit: AUTH_BODY_LIMIT };

  // RFC 6749 token requests are form-encoded. Parameters must not repeat (RFC 6749 §3.2).
  // A prototype-free object: a parameter named "constructor" or "__proto__" is just a name.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: AUTH_BODY_LIMIT }, (_request, body, done) => {
    const out: Record<string, string> = Object.create(null);
    for (const [name, value] of new URLSearchParams(body as string)) {
      if (Object.hasOwn(out, name))
        return done(new ServiceError('invalid_request', `Parameter ${name.slice(0, 100)} is included more than once.`, name.slice(0, 100)), undefined);
      out[name] = value;
    }
    done(null, out);
  });
  // Any other body type: say what these routes take (the gateway-wide message names JSON only).
  app.addContentTypeParser('*', { bodyLimit: AUTH_BODY_LIMIT }, (request, _payload, done) => {
    done(
      new ServiceError(
        'unsupported_media_type',
        `Content-Type ${String(request.headers['content-type'] ?? '(none)').slice(0, 100)} is not accepted here: send application/json, or application/x-www-form-urlencoded to the token endpoint.`,
      ),
      undefined,
    );
  });

  // Off means off everywhere, discovery included; then the per-IP limit (shared across
  // replicas through the same limiter as API keys). A limiter that is down admits. The
  // address is the TCP peer's unless SVC_TRUSTED_PROXIES says which X-Forwarded-For entry
  // a proxy in front wrote (a client can write any other).
  const addressOf = (request: FastifyRequest) =>
    clientAddress({ socketAddress: request.socket.remoteAddress, forwardedFor: request.headers['x-forwarded-for'], trustedProxies: ctx.config.trustedProxies });
  app.addHook('onRequest', async (request) => {
    assertEnabled(settings);
    const ip = addressOf(request) ?? 'unknown';
    const decision = await ctx.limiter.consume(`agent-auth:ip:${ip}`, settings.ipRpm).catch(() => null);
    if (decision && !decision.allowed) {
      const wait = decision.retryAfterSeconds;
      throw new ServiceError('slow_down', `Too many registration requests from this address (${settings.ipRpm} per minute). Try again in ${wait}s.`, null, {
        retryAfterSeconds: wait,
      });
    }
  });

  // Registration and token responses carry secrets (claim tokens, assertions, codes, keys):
  // never stored by a cache (RFC 6749 §5.1), and neither are errors. Only discovery documents,
  // which set their own header, may be cached.
  app.addHook('onSend', async (_request, reply, payload) => {
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
    return payload;
  });

  const authorizationServer = () => ({
    issuer: settings.authUrl,
    token_endpoint: tokenUrl(settings),
    grant_types_supported: [...(settings.anonymousEnabled ? [GRANT_JWT_BEARER] : []), GRANT_CLAIM],
    // No authorization endpoint: agents register and poll; users confirm on the dashboard.
    response_types_supported: [],
    token_endpoint_auth_methods_supported: ['none'],
    scopes_supported: [...POST_CLAIM_SCOPES, ...(settings.anonymousEnabled ? PRE_CLAIM_SCOPES : [])],
    agent_auth: {
      identity_endpoint: `${settings.authUrl}/agent/identity`,
      claim_endpoint: claimUrl(settings),
      token_endpoint: tokenUrl(settings),
      verification_uri: verificationUri(settings),
      identity_types_supported: [...(settings.anonymousEnabled ? ['anonymous'] : []), 'service_auth'],
      claim_grant_type: GRANT_CLAIM,
      ...(settings.anonymousEnabled ? { assertion_grant_type: GRANT_JWT_BEARER, pre_claim_scopes: [...PRE_CLAIM_SCOPES] } : {}),
      post_claim_scopes: [...POST_CLAIM_SCOPES],
      interval: POLL_INTERVAL_S,
      user_code_expires_in: CODE_TTL_MS / 1000,
      registration_expires_in: REGISTRATION_TTL_MS / 1000,
      key_redelivery_seconds: REDELIVERY_MS / 1000,
      resource: `${ctx.config.publicBaseUrl}/v1`,
    },
  });

  const protectedResource = () => ({
    resource: `${ctx.config.publicBaseUrl}/v1`,
    authorization_servers: [settings.authUrl],
    bearer_methods_supported: ['header'],
    scopes_supported: [...POST_CLAIM_SCOPES],
    resource_name: 'svc inference API',
  });

  const discovery = (body: () => object) => async (_request: FastifyRequest, reply: FastifyReply) =>
    reply.header('cache-control', 'public, max-age=60').send(body());
  app.get('/.well-known/oauth-authorization-server', publicRoute, discovery(authorizationServer));
  app.get('/.well-known/oauth-protected-resource', publicRoute, discovery(protectedResource));
  // RFC 9728 §3.1: the metadata of a resource with a path lives under that path as well.
  app.get('/.well-known/oauth-protected-resource/v1', publicRoute, discovery(protectedResource));

  app.post('/agent/identity', publicRoute, async (request) => {
    const body = parseBody(IdentityBody, request.body);
    // The address is recorded: anonymous registrations are capped per address per hour.
    const started = await startRegistration(deps(), {
      ...identityInput(body),
      clientAddress: addressOf(request),
      clientName: body.client_name ?? null,
      userAgent: userAgentOf(request.headers['user-agent']),
    });
    const common = {
      registration_id: started.registrationId,
      registration_type: started.registrationType,
      claim_url: claimUrl(settings),
      claim_token: started.claimToken,
      claim_token_expires: started.claimTokenExpiresAt.toISOString(),
      token_endpoint: tokenUrl(settings),
      post_claim_scopes: [...POST_CLAIM_SCOPES],
    };
    if (started.registrationType === 'anonymous') {
      return {
        ...common,
        identity_assertion: started.identityAssertion,
        identity_assertion_expires: started.assertionExpiresAt.toISOString(),
        pre_claim_scopes: [...PRE_CLAIM_SCOPES],
      };
    }
    return { ...common, claim: claimBlock(started.claim) };
  });

  app.post('/agent/identity/claim', publicRoute, async (request) => {
    const body = parseBody(ClaimBody, request.body);
    const claimToken = requiredString(body.claim_token, 'claim_token');
    if (body.email != null && typeof body.email !== 'string')
      throw new ServiceError('invalid_login_hint', 'email must be a string: the email address of the account that will claim this agent.', 'email');
    const started = await startClaim(deps(), { claimToken, email: (body.email as string | undefined) ?? null });
    if (started.registrationType === 'anonymous') {
      return {
        registration_id: started.registrationId,
        registration_type: 'anonymous',
        claim_token_expires: started.claimTokenExpiresAt.toISOString(),
        claim_attempt: claimBlock(started.claim),
      };
    }
    // service_auth: the spec's full registration record, with the token the agent just sent.
    return {
      registration_id: started.registrationId,
      registration_type: 'service_auth',
      claim_url: claimUrl(settings),
      claim_token: claimToken,
      claim_token_expires: started.claimTokenExpiresAt.toISOString(),
      post_claim_scopes: [...POST_CLAIM_SCOPES],
      claim: claimBlock(started.claim),
    };
  });

  app.post('/oauth2/token', publicRoute, async (request, reply) => {
    const params = objectBody(request.body);
    const grantType = requiredString(params.grant_type, 'grant_type');
    let issued: IssuedToken;
    if (grantType === GRANT_JWT_BEARER) {
      issued = await exchangeAssertion(deps(), { assertion: requiredString(params.assertion, 'assertion') });
    } else if (grantType === GRANT_CLAIM) {
      issued = await pollClaim(deps(), { claimToken: requiredString(params.claim_token, 'claim_token') });
    } else {
      throw new ServiceError('unsupported_grant_type', `grant_type must be ${GRANT_JWT_BEARER} or ${GRANT_CLAIM}.`, 'grant_type');
    }
    // Cache-Control: no-store comes from the onSend hook above (RFC 6749 §5.1).
    return reply.send({ access_token: issued.accessToken, token_type: 'Bearer', scope: issued.scope });
  });

  // Sealed keys are erased when their window ends even if nobody polls again: each sweep
  // runs the next one when the earliest kept key is due, and at least every minute (a key
  // delivered meanwhile is due ten minutes later, so the next sweep always sees it in time).
  let sweepTimer: NodeJS.Timeout | undefined;
  let closed = false;
  const sweep = async () => {
    let delay = SWEEP_MS;
    if (settings.enabled) {
      try {
        const { nextDueAt } = await eraseExpiredRegistrationSecrets(deps());
        if (nextDueAt) delay = Math.min(SWEEP_MS, Math.max(MIN_SWEEP_GAP_MS, nextDueAt.getTime() - ctx.clock.now()));
      } catch (err) {
        app.log.warn({ err }, 'erasing expired registration secrets failed');
      }
    }
    if (closed) return;
    sweepTimer = setTimeout(() => void sweep(), delay);
    sweepTimer.unref();
  };
  sweepTimer = setTimeout(() => void sweep(), SWEEP_MS);
  sweepTimer.unref();
  app.addHook('onClose', async () => {
    closed = true;
    clearTimeout(sweepTimer);
  });
}

/** The User-Agent as the claim page may show it: printable, at most MAX_USER_AGENT characters; null without one. */
function userAgentOf(header: string | undefined): string | null {
  const text = (header ?? '')
    .replace(/[\p{Cc}\p{Cf}]/gu, '')
    .trim()
    .slice(0, MAX_USER_AGENT);
  return text === '' ? null : text;
}

function identityInput(body: z.infer<typeof IdentityBody>): StartRegistrationInput {
  const type = body.type;
  if ((type && ASSERTION_TYPES.has(type.toLowerCase())) || (!type && (body.assertion !== undefined || body.identity_assertion !== undefined))) {
    return { type: 'identity_assertion' };
  }
  if (type === 'anonymous') return { type: 'anonymous' };
  if (type === 'service_auth') {
    if (typeof body.login_hint !== 'string')
      throw new ServiceError('invalid_login_hint', 'service_auth needs login_hint: the email address of the account that will claim this agent.', 'login_hint');
    return { type: 'service_auth', loginHint: body.login_hint };
  }
  throw new ServiceError('invalid_request', 'type must be "anonymous" or "service_auth".', 'type');
}

function claimBlock(claim: ClaimAttemptGrant) {
  return { user_code: claim.userCode, expires_in: claim.expiresIn, verification_uri: claim.verificationUri, interval: claim.interval };
}

function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(objectBody(body));
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const param = issue.path.map(String).join('.') || null;
  throw new ServiceError('invalid_request', param ? `${param}: ${issue.message}` : issue.message, param);
}

function objectBody(body: unknown): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body) || Buffer.isBuffer(body)) {
    throw new ServiceError('invalid_json', 'The request body must be a JSON object (or, for /oauth2/token, form-encoded parameters).');
  }
  return body as Record<string, unknown>;
}

function requiredString(value: unknown, name: string): string {
  if (typeof value !== 'string' || value.length === 0) throw new ServiceError('invalid_request', `${name} is required.`, name);
  if (value.length > 4096) throw new ServiceError('invalid_request', `${name} is too long.`, name);
  return value;
}
