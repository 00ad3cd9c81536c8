import { isUtf8 } from 'node:buffer';
import { isIP } from 'node:net';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { jsonSchemaTransform, serializerCompiler, validatorCompiler } from '@fastify/type-provider-zod';
import { textProblems } from '@baton/domain';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import { contextFromCarrier, failSpan, runInContext, SpanKind, tracer, tracingOn, withSpan, withTaskId } from '@baton/telemetry';
import { keyFingerprint, keyIndex } from './api-keys.ts';
import type { GatewayDeps } from './deps.ts';
import { jsonDepthError } from './json-depth.ts';
import { takeToken, type Bucket } from './rate-limit.ts';
import { clientErrorHandler, errorHandler, HttpError, MAX_PATH_PARAM, SECURITY_HEADERS, textError } from './errors.ts';
import { chatRoutes } from './routes/chat.ts';
import { eventRoutes } from './routes/events.ts';
import { mailRoutes } from './routes/mail.ts';
import { consoleRoutes } from './routes/console.ts';
import { systemRoutes } from './routes/system.ts';
import { taskRoutes } from './routes/tasks.ts';
import { NoQuery } from './routes/schemas.ts';
import { webhookRoutes } from './routes/webhooks.ts';
import { workspaceRoutes } from './routes/workspaces.ts';

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Routes that make no trace: Prometheus' scrapes and the probes of Kubernetes or a load balancer (still counted and timed). */
const UNTRACED_ROUTES: ReadonlySet<string> = new Set(['/metrics', '/healthz', '/readyz']);

/** How long a request's headers and body may take to arrive (node checks every 30 s): 408 after. */
export const REQUEST_TIMEOUT_MS = 120_000;

/** Whether `text` is JSON at all (to tell a poisoned body from a malformed one). */
function wellFormedJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * A URL as logged: the value of each parameter named `token` (a mailed link's credential)
 * replaced — its name as the server reads it (`%74oken`, `TOKEN`), between `&` or `;`.
 */
export function withoutTokens(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const redact = (part: string): string => {
    const name = part.split('=', 1)[0] ?? '';
    let decoded = name;
    try {
      decoded = decodeURIComponent(name.replace(/\+/g, ' '));
    } catch {
      // not percent-encoding: the name as written
    }
    return decoded.trim().toLowerCase() === 'token' ? `${name}=[redacted]` : part;
  };
  return url.slice(0, q + 1) + url.slice(q + 1).split(/([&;])/).map((p) => (p === '&' || p === ';' ? p : redact(p))).join('');
}

/** Build the gateway's Fastify app from its dependencies (tests call this directly). */
export async function buildApp(deps: GatewayDeps): Promise<FastifyInstance> {
  // Per-request access logs are off (they would dominate at load); /metrics counts requests.
  // Request logs at warn and above unless the service logs more (debug, trace) or less (error, fatal, silent).
  const level = ['debug', 'trace', 'error', 'fatal', 'silent'].includes(deps.log.level) ? deps.log.level : 'warn';
  // A mailed link's token is its credential: never in a request log (debug logs the URL).
  const req = (r: { method?: string; url?: string; ip?: string }) => ({ method: r.method, url: withoutTokens(r.url ?? ''), remoteAddress: r.ip });
  const httpLog = deps.log.child({ component: 'http' }, { level, serializers: { req } });
  const app = Fastify({
    loggerInstance: httpLog as FastifyBaseLogger,
    bodyLimit: deps.bodyLimit,
    return503OnClosing: true,
    // A request (its headers and body; not an SSE stream's response) must arrive within this.
    requestTimeout: REQUEST_TIMEOUT_MS,
    routerOptions: { maxParamLength: MAX_PATH_PARAM },
    // What the router and node's HTTP parser refuse answers the API's error shape too.
    frameworkErrors: errorHandler,
    clientErrorHandler,
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.setErrorHandler(errorHandler);
  // Bodies are JSON (and multipart on POST /v1/tasks): text/plain is a 415 like any other type.
  // JSON is Fastify's own parser (prototype poisoning refused), then a nesting limit.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser(['text/plain', 'application/json']);
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, raw, done) => {
    // Only what the parser would misread or misname is refused before it: a compressed body, another charset.
    const encoding = req.headers['content-encoding']?.trim().toLowerCase();
    if (encoding && encoding !== 'identity') return done(new HttpError(415, 'unsupported_media_type', `headers.content-encoding: '${encoding}' is not taken: send the body uncompressed`), undefined);
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(req.headers['content-type'] ?? '')?.[1]?.toLowerCase();
    if (charset && charset !== 'utf-8' && charset !== 'utf8') return done(new HttpError(415, 'unsupported_media_type', `headers.content-type: charset '${charset}' is not taken: JSON bodies are UTF-8`), undefined);
    // Bytes that are not UTF-8 would be stored as U+FFFD, the text silently changed: refused.
    if (!isUtf8(raw as Buffer)) return done(new HttpError(400, 'invalid_json', 'body: not valid UTF-8'), undefined);
    const body = (raw as Buffer).toString('utf8');
    // No body at all, only the header (many clients set it on every request): no body — a route
    // that takes none goes on, one that needs one says which field is missing.
    if (body.trim() === '') return done(null, undefined);
    parseJson(req, body, (err, value) => {
      if (!err) return done(jsonDepthError(value, 'body'), value);
      // Valid JSON refused all the same: a key that could rewrite how every object behaves.
      if (wellFormedJson(body)) return done(new HttpError(400, 'invalid_json', 'body: a key named __proto__, or constructor holding prototype, is refused (prototype poisoning)'), undefined);
      done(err, undefined);
    });
  });
  app.setNotFoundHandler((req, reply) => {
    // The path as asked, cut short: an answer is not an echo of whatever was sent.
    const p = req.url.split('?')[0] ?? '';
    void reply.status(404).send({ error: { code: 'not_found', message: `no route ${req.method} ${p.length > 200 ? `${p.slice(0, 200)}… (${p.length} characters)` : p}` } });
  });

  await app.register(swagger, {
    openapi: {
      info: { title: 'Baton API', version: '1.0.0', description: 'Durable, human-in-the-loop runtime for multi-agent tasks. The reference in words: docs/api.md (generated from this document) and the README.' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An API key of BATON_API_KEYS (when the gateway has keys): it names the tenant' } } },
      // Every route takes the key (a generated client sends it); a gateway without keys ignores it.
      security: [{ bearer: [] }],
    },
    transform: jsonSchemaTransform,
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });

  // Each request (but scrapes and probes, which would make a trace every few seconds about nothing): a server span (continuing the caller's W3C trace context, when it sends one),
  // made the active context once the body is parsed, so what the handler appends carries it;
  // counted and timed by route when the response is sent. A task's routes put its id in the logs.
  app.decorateRequest('trace', null as unknown as FastifyRequest['trace']);
  app.addHook('onRequest', async (req) => {
    const route = req.routeOptions.url ?? 'unknown';
    req.trace = { span: null, context: null, startedAt: performance.now() };
    if (!tracingOn() || UNTRACED_ROUTES.has(route)) return;
    const h = req.headers;
    const parent = contextFromCarrier({ traceparent: typeof h.traceparent === 'string' ? h.traceparent : undefined, tracestate: typeof h.tracestate === 'string' ? h.tracestate : undefined });
    const span = tracer().startSpan(`${req.method} ${route}`, { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method, 'http.route': route, 'url.path': req.url.split('?')[0] ?? '/' } }, parent);
    req.trace = { span, context: withSpan(parent, span), startedAt: req.trace.startedAt };
  });
  app.addHook('preHandler', (req, _reply, done) => {
    const taskId = req.routeOptions.url?.startsWith('/v1/tasks/:id') ? (req.params as { id?: unknown }).id : undefined;
    const run = (): void => (typeof taskId === 'string' ? withTaskId(taskId, done) : done());
    if (typeof taskId === 'string') req.trace.span?.setAttribute('baton.task_id', taskId);
    if (req.trace.context) runInContext(req.trace.context, run);
    else run();
  });
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unknown';
    deps.metrics.httpRequests.inc({ method: req.method, route, status: String(reply.statusCode) });
    deps.metrics.httpSeconds.observe({ method: req.method, route }, (performance.now() - (req.trace?.startedAt ?? performance.now())) / 1000);
    const span = req.trace?.span;
    if (!span) return;
    span.setAttribute('http.response.status_code', reply.statusCode);
    if (reply.statusCode >= 500) failSpan(span, new Error(`HTTP ${reply.statusCode}`));
    span.end();
    req.trace.span = null;
  });
  // A request that never got a response (the client went away): its span ends too.
  app.addHook('onRequestAbort', async (req) => {
    const span = req.trace?.span;
    if (!span) return;
    span.setAttribute('http.request.aborted', true);
    span.end();
    req.trace.span = null;
  });

  // Who did it, as the log records it: the key's fingerprint (never any of the key itself), and its tenant.
  // Made again when the keys change (a keys file read again).
  const currentKeys = keyIndex(deps.apiKeys);
  // A key refused is logged by its fingerprint (a revoked key still tried shows), at most once a
  // minute per key and for at most REFUSED_KEYS_LOGGED keys at a time: a flood of made-up keys fills no log.
  const refusedLogged = new Map<string, number>();
  const refusedKey = (key: string, ip: string): void => {
    const fingerprint = keyFingerprint(key);
    const now = Date.now();
    if ((refusedLogged.get(fingerprint) ?? -Infinity) > now - 60_000) return;
    if (refusedLogged.size >= REFUSED_KEYS_LOGGED) refusedLogged.clear();
    refusedLogged.set(fingerprint, now);
    deps.log.warn({ key: `key:${fingerprint}`, ip }, 'a request with an API key this gateway does not have was refused (401); logged once a minute per key');
  };
  app.decorateRequest('tenant', '');
  app.decorateRequest('actor', '');
  app.decorateRequest('workspaceUpload', null);
  // Every answer (SECURITY_HEADERS): here for routes, in errorHandler for the framework's errors, in the SSE heads and the raw parser answers.
  app.addHook('onSend', async (_req, reply) => {
    void reply.headers(SECURITY_HEADERS);
  });
  const openHosts = new Set(deps.openApiHosts ?? []);
  app.addHook('onRequest', async (req) => {
    if (!isApiRoute(req)) return;
    // A browser says when another site's page sent a request: the API is not for such pages (without a key a form could start or cancel tasks).
    if (req.headers['sec-fetch-site'] === 'cross-site') throw new HttpError(403, 'cross_site_request', "a request from another site's page is refused (Sec-Fetch-Site: cross-site): call the API from your own code, the CLI or the console");
    const keys = currentKeys();
    if (keys.size === 0 && !deps.apiKeys.required) {
      // Open: only at names no page can rebind to this gateway (DNS rebinding), or the ones configured.
      const host = hostName(req.headers.host);
      if (!(host === null || isIP(host) !== 0 || host === 'localhost' || host.endsWith('.localhost') || openHosts.has(host))) {
        throw new HttpError(403, 'host_not_allowed', `this gateway runs without API keys, so its API answers at localhost or an IP address, not at '${host}' (a page could rebind that name to it): set BATON_API_KEYS, or name the host in OPEN_API_HOSTS`);
      }
      req.tenant = 'default';
      req.actor = 'anonymous';
      return;
    }
    const header = req.headers.authorization ?? '';
    const m = /^Bearer\s+(.+)$/i.exec(header);
    // RFC 9110: a 401 says how to authenticate.
    if (!m) throw new HttpError(401, 'unauthorized', 'missing Authorization: Bearer <api key>', undefined, { 'www-authenticate': 'Bearer realm="baton"' });
    const given = Buffer.from((m[1] as string).trim());
    const match = keys.find(given);
    if (!match) {
      refusedKey(given.toString(), req.ip);
      throw new HttpError(401, 'unauthorized', 'invalid API key', undefined, { 'www-authenticate': 'Bearer realm="baton", error="invalid_token"' });
    }
    req.tenant = match.tenant;
    req.actor = match.actor;
  });

  // Writes per tenant: a token bucket each, in this process (so the limit is per replica).
  // Counted before the body is read; tenants are the configured keys' (or `default`), so few.
  const buckets = new Map<string, Bucket>();
  const { writesPerS, burst } = deps.limits;
  app.addHook('onRequest', async (req) => {
    if (writesPerS === 0 || !isApiRoute(req) || !WRITES.has(req.method)) return;
    const { bucket, retryAfterS } = takeToken(buckets.get(req.tenant), performance.now(), writesPerS, burst);
    buckets.set(req.tenant, bucket);
    if (retryAfterS !== null) {
      throw new HttpError(429, 'rate_limited', `more than ${writesPerS} writes per second (bursts of ${burst}) for this tenant; retry in ${retryAfterS} s`, undefined, { 'retry-after': String(retryAfterS) });
    }
  });

  // The text rule (@baton/domain): nothing a request brings may hold a NUL or a lone surrogate.
  // Checked once for every route, on what validation passed (a multipart form's task field too).
  app.addHook('preHandler', async (req) => {
    const body = (req.headers['content-type'] ?? '').startsWith('multipart/') ? 'task' : 'body';
    const problems = [...textProblems(req.params, 'params'), ...textProblems(req.query, 'query'), ...textProblems(req.body, body)];
    if (problems.length > 0) throw textError(problems);
  });

  // An API route that takes no query parameters refuses any (NoQuery): `GET /v1/tasks/:id?at=5`
  // must not answer the task as it is now to someone who asked for it as it was.
  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/v1/') && !route.schema?.querystring) route.schema = { ...route.schema, querystring: NoQuery };
  });
  await app.register(systemRoutes(deps));
  await app.register(consoleRoutes(deps));
  await app.register(taskRoutes(deps));
  await app.register(eventRoutes(deps));
  await app.register(workspaceRoutes(deps));
  await app.register(chatRoutes(deps));
  await app.register(mailRoutes(deps));
  await app.register(webhookRoutes(deps));
  return app;
}

/**
 * Whether a request is for the API (`/v1/…`): the key and the write limit apply. Judged by the
 * route the router matched, never by the raw request target — `/%761/tasks` (an encoded letter)
 * and `http://host/v1/tasks` (absolute form) reach the same routes as `/v1/tasks`. A request no
 * route matches is a 404 either way.
 */
function isApiRoute(req: FastifyRequest): boolean {
  return req.routeOptions.url?.startsWith('/v1/') === true;
}

/** At most this many refused keys are remembered for the once-a-minute log line. */
const REFUSED_KEYS_LOGGED = 1000;

/** The host name a Host header names (no port, brackets off an IPv6 address, lower case); null when there is none. */
export function hostName(header: string | undefined): string | null {
  if (!header) return null;
  const h = header.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']') > 0 ? h.indexOf(']') : undefined);
  const colon = h.lastIndexOf(':');
  return colon > 0 && /^\d*$/.test(h.slice(colon + 1)) ? h.slice(0, colon) : h;
}
