import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { DomainError, formatBytes, type TextProblem } from '@baton/domain';
import { ConcurrencyError, InvalidCursorError } from '@baton/event-store';
import { WorkspaceArchiveError } from '@baton/storage';
import { hasZodFastifySchemaValidationErrors } from '@fastify/type-provider-zod';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';

/** An HTTP error with an API.md error code. */
export class HttpError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: unknown;
  /** Response headers that go with the error (e.g. Retry-After). */
  readonly headers: Record<string, string>;
  constructor(status: number, code: string, message: string, details?: unknown, headers: Record<string, string> = {}) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.details = details;
    this.headers = headers;
  }
}

/** Every answer's: not to be sniffed into another type, nor framed by another site's page (the console keeps the key and has Approve buttons). */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = { 'x-content-type-options': 'nosniff', 'x-frame-options': 'DENY' };

/** The router's longest path parameter (a task id is 36); a longer one is a 414. */
export const MAX_PATH_PARAM = 100;

/** The text rule (@baton/domain): a 400 naming every field with a NUL or a lone surrogate. */
export function textError(problems: TextProblem[]): HttpError {
  const details = problems.map(({ path, problem }) => ({
    field: path,
    message: problem === 'nul' ? 'contains a NUL character (\\u0000), which cannot be stored' : 'contains a lone UTF-16 surrogate (half of a pair, \\ud800-\\udfff), which is not valid text',
  }));
  return new HttpError(400, 'validation_error', details.map((d) => `${d.field}: ${d.message}`).join('; '), details);
}

export const notFound = (what: string): HttpError => new HttpError(404, 'not_found', `${what} not found`);

/** Domain error codes → HTTP status, in exactly one place. */
export const DOMAIN_STATUS: Record<DomainError['code'], number> = {
  illegal_transition: 422,
  task_final: 409,
  request_not_found: 404,
  request_already_decided: 409,
  invalid_command: 422,
  idempotency_key_reused: 422,
  stale_attempt: 409,
};

/**
 * The one error handler: `{ error: { code, message, details? } }` (API.md). 4xx messages pass
 * through; 5xx answer a generic message and log the full error.
 */
/** How often a 503 for an unavailable Postgres or NATS is logged (the others in between are counted). */
const UNAVAILABLE_LOG_EVERY_MS = 10_000;
let unavailableLoggedAt = 0;
let unavailableSince = 0;

export function errorHandler(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const send = (status: number, code: string, message: string, details?: unknown): void => {
    void reply.headers(SECURITY_HEADERS).status(status).send({ error: { code, message, ...(details !== undefined ? { details } : {}) } });
  };
  if (hasZodFastifySchemaValidationErrors(err)) {
    // Fields are named as everywhere else: params., query., headers., body.
    const context = (err as { validationContext?: string }).validationContext ?? 'request';
    const where = context === 'querystring' ? 'query' : context;
    const field = (instancePath: string, ...more: string[]): string => [where, ...instancePath.split('/').filter(Boolean), ...more].join('.');
    const details = err.validation.flatMap((v) =>
      // A key the schema does not know is named in the field, one detail per key.
      v.keyword === 'unrecognized_keys' && Array.isArray(v.params.keys)
        ? (v.params.keys as string[]).map((k) => ({ field: field(v.instancePath, k), message: where === 'query' ? `unknown query parameter '${k}'` : `unknown field '${k}'` }))
        : [{ field: field(v.instancePath), message: v.message }],
    );
    send(400, 'validation_error', details.map((d) => `${d.field}: ${d.message}`).join('; '), details);
    return;
  }
  if (err instanceof HttpError) {
    void reply.headers(err.headers);
    return send(err.status, err.code, err.message, err.details);
  }
  if (err instanceof DomainError) return send(DOMAIN_STATUS[err.code], err.code, err.message, err.details);
  // A refused workspace names every offending entry in details: [{ entry, message }].
  if (err instanceof WorkspaceArchiveError) return send(err.code === 'workspace_too_large' ? 413 : 400, err.code, err.message, err.problems.length > 0 ? err.problems : undefined);
  if (err instanceof ConcurrencyError) return send(409, 'conflict', 'the task changed concurrently; retry the request');
  if (err instanceof InvalidCursorError) return send(400, 'validation_error', `query.cursor: ${err.message}`);
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return send(414, 'uri_too_long', `a path segment is longer than ${MAX_PATH_PARAM} characters`);
  if (err.code === 'FST_ERR_BAD_URL') return send(400, 'invalid_url', 'the path is not valid percent-encoded UTF-8');
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    // Which limit, and for a task's submit that the workspace's archive travels in it (base64).
    const limit = req.routeOptions.bodyLimit;
    const submit = req.method === 'POST' && req.routeOptions.url === '/v1/tasks';
    const what = submit ? 'a task with its workspace archive (base64) may be' : 'a body here may be';
    return send(413, 'payload_too_large', `the request body is too large: ${what} at most ${formatBytes(limit)}${submit ? ' (the archive itself: WORKSPACE_MAX_ARCHIVE_BYTES, the rest: BODY_LIMIT_BYTES)' : ' (BODY_LIMIT_BYTES)'}`);
  }
  if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    const takes = req.method === 'POST' && req.routeOptions.url === '/v1/tasks' ? 'application/json or multipart/form-data' : 'application/json';
    return send(415, 'unsupported_media_type', `headers.content-type: '${req.headers['content-type'] ?? ''}' is not taken here: send ${takes}`);
  }
  if (err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || err instanceof SyntaxError) {
    return send(400, 'invalid_json', `body: ${err.message}`);
  }
  // Any other 4xx (a plugin's: the static files' 403 for a path that leaves their root): a code that says the same as its status.
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) return send(err.statusCode, CLIENT_ERROR_CODES[err.statusCode] ?? 'bad_request', err.message);
  if (isUnavailable(err)) {
    // Expected while Postgres or NATS is away (the pools log the outage themselves): one line per
    // UNAVAILABLE_LOG_EVERY_MS with how many more were answered 503, not a stack trace per request.
    const now = Date.now();
    if (now - unavailableLoggedAt >= UNAVAILABLE_LOG_EVERY_MS) {
      req.log.warn({ error: err.message, code: err.code, alsoAnswered503: unavailableSince }, 'a backing service is unavailable: answered 503');
      unavailableLoggedAt = now;
      unavailableSince = 0;
    } else unavailableSince++;
    return send(503, 'unavailable', 'a backing service is unavailable; nothing was recorded — retry later');
  }
  req.log.error({ err }, 'unhandled error');
  send(500, 'internal', 'internal error');
}

const CLIENT_ERROR_CODES: Readonly<Record<number, string>> = { 401: 'unauthorized', 403: 'forbidden', 404: 'not_found', 405: 'method_not_allowed', 406: 'not_acceptable', 409: 'conflict', 410: 'gone', 411: 'length_required', 412: 'precondition_failed', 416: 'range_not_satisfiable', 429: 'rate_limited' };

function isUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', '57P01', '57P03', '08006', '08001'].includes(e?.code ?? '') || /timeout exceeded when trying to connect|Connection terminated/i.test(e?.message ?? '');
}

/**
 * Requests node's HTTP parser refuses before Fastify sees them (the server's clientError): request
 * line and headers over node's 16 KiB (431), a request not fully received in time (408), bytes
 * that are not HTTP (400) — answered in the same error shape, then the connection is closed.
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'headers_too_large', 'the request line and headers are larger than 16 KiB']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request_timeout', 'the request was not received in time']
        : [400, 'bad_request', 'not a valid HTTP request'];
  const body = JSON.stringify({ error: { code, message } });
  if (socket.writable) socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${Object.entries(SECURITY_HEADERS).map(([k, v]) => `${k}: ${v}\r\n`).join('')}connection: close\r\n\r\n${body}`);
  socket.destroy(err);
}
