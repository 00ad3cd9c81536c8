import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { handleCommand } from '@baton/event-store';
import { recordDelivery } from '@baton/storage';
import { pgTest, stackTest as test, waitFor, type PgFixture } from '@baton/testing';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { describe, expect } from 'vitest';
import { REQUEST_TIMEOUT_MS } from './app.ts';
import { testGateway as gateway } from './test-gateway.ts';

// The HTTP edge: what any request may bring and what every refusal looks like.

/** The API's error shape, exactly: `{ error: { code, message, details? } }`. */
function expectError(res: { statusCode: number; json: () => unknown } | LightMyRequestResponse, status: number, code: string, message?: RegExp): void {
  expect(res.statusCode).toBe(status);
  const body = res.json() as { error: Record<string, unknown> };
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).filter((k) => !['code', 'message', 'details'].includes(k))).toEqual([]);
  expect(body.error).toMatchObject({ code, message: expect.any(String) });
  if (message) expect(body.error.message).toMatch(message);
}

const json = { 'content-type': 'application/json' };
const count = async (pg: PgFixture): Promise<number> => (await pg.db.pool.query('select count(*)::int as n from events')).rows[0].n;

/** A task whose lead waits for approval of a Task delegation (apr-1) and an answer (clr-1). */
async function waitingTask(app: FastifyInstance, pg: PgFixture): Promise<string> {
  const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x' } })).json().id as string;
  const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
  await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' });
  await handleCommand(pg.store, id, {
    type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', usage, offline: true, durationMs: 0,
    content: [{ type: 'tool_use', id: 'tu-ask', name: 'ask_user', input: { questions: ['What?'] } }, { type: 'tool_use', id: 'tu1', name: 'Task', input: { agent: 'researcher', prompt: 'p' } }],
  });
  await handleCommand(pg.store, id, { type: 'RequestClarification', requestId: 'clr-1', agentId: 'lead', toolUseId: 'tu-ask', questions: ['What?'], context: 'c', deadline: new Date(Date.now() + 60_000).toISOString() });
  await handleCommand(pg.store, id, { type: 'RequestApproval', requestId: 'apr-1', agentId: 'lead', toolUseId: 'tu1', toolName: 'Task', input: { agent: 'researcher', prompt: 'p' }, inputDigest: 'd', plan: 'plan', deadline: new Date(Date.now() + 60_000).toISOString(), onTimeout: 'reject' });
  return id;
}

/** Raw bytes to a listening app; the whole answer back (node's parser answers some requests before Fastify). */
function raw(app: FastifyInstance, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect((app.server.address() as { port: number }).port, '127.0.0.1', () => socket.end(request));
    let text = '';
    socket.on('data', (c) => (text += c.toString()));
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });
}

describe('the text rule: no NUL, no lone surrogate in anything a request brings', () => {
  pgTest('400 naming the field, for a task, an edited decision, an answer, a query and a path; nothing recorded', async ({ pg }) => {
    const app = await gateway(pg, null);
    const post = (url: string, body: string) => app.inject({ method: 'POST', url, headers: json, payload: body });
    // Sent as JSON text with the escape sequences, as a client would.
    expectError(await post('/v1/tasks', String.raw`{"prompt":"a\u0000b"}`), 400, 'validation_error', /^body\.prompt: contains a NUL character \(\\u0000\), which cannot be stored$/);
    expectError(await post('/v1/tasks', String.raw`{"prompt":"\ud800"}`), 400, 'validation_error', /^body\.prompt: contains a lone UTF-16 surrogate/);
    const key = await post('/v1/tasks', String.raw`{"prompt":"ok","metadata":{"a":{"b\u0000":1}}}`);
    expectError(key, 400, 'validation_error', /^body\.metadata\.a\.b␀: contains a NUL/);
    expect(key.json().error.details).toEqual([{ field: 'body.metadata.a.b␀', message: expect.stringMatching(/NUL/) }]);
    expect(await count(pg)).toBe(0);
    // A pair is text: accepted.
    expect((await post('/v1/tasks', String.raw`{"prompt":"\ud83d\ude00 fine"}`)).statusCode).toBe(201);

    const id = await waitingTask(app, pg);
    const before = await count(pg);
    const edit = await post(`/v1/tasks/${id}/approvals/apr-1`, String.raw`{"decision":"approve","input":{"agent":"researcher","prompt":"narrower\udc00"}}`);
    expectError(edit, 400, 'validation_error', /^body\.input\.prompt: contains a lone UTF-16 surrogate/);
    expectError(await post(`/v1/tasks/${id}/answers/clr-1`, String.raw`{"answers":["fine","no\u0000"]}`), 400, 'validation_error', /^body\.answers\.1: contains a NUL/);
    expectError(await post(`/v1/tasks/${id}/cancel`, String.raw`{"reason":"\u0000\ud800"}`), 400, 'validation_error', /^body\.reason: contains a NUL.*; body\.reason: contains a lone/);
    expectError(await app.inject({ method: 'GET', url: '/v1/tasks?cursor=%00' }), 400, 'validation_error', /^query\.cursor: contains a NUL/);
    expectError(await app.inject({ method: 'POST', url: `/v1/tasks/${id}/answers/a%00b`, headers: json, payload: '{"answers":"x"}' }), 400, 'validation_error', /^params\.requestId: contains a NUL/);
    expect(await count(pg)).toBe(before);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}` })).json().pendingRequests).toHaveLength(2);
  });

  pgTest('a multipart form: the task field is checked the same way', async ({ pg }) => {
    const app = await gateway(pg, null);
    const form = new FormData();
    form.append('task', String.raw`{"prompt":"a\u0000"}`);
    const req = new Request('http://x/', { method: 'POST', body: form });
    const res = await app.inject({ method: 'POST', url: '/v1/tasks', headers: Object.fromEntries(req.headers), payload: Buffer.from(await req.arrayBuffer()) });
    expectError(res, 400, 'validation_error', /^task\.prompt: contains a NUL/);
  });
});

describe('nesting: a JSON body nested deeper than JSON.stringify can take is a 400, not a 500', () => {
  pgTest('a body, an approval\'s edited input and a multipart task field over 64 levels name where; 64 are fine', async ({ pg }) => {
    const app = await gateway(pg, null);
    const nest = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const post = (url: string, body: string) => app.inject({ method: 'POST', url, headers: json, payload: body });
    expectError(await post('/v1/tasks', `{"prompt":"x","metadata":${nest(10_000)}}`), 400, 'validation_error', /^body\.metadata(\.a){63}: nested more than 64 levels deep$/);
    expect((await post('/v1/tasks', `{"prompt":"x","metadata":${nest(63)}}`)).statusCode).toBe(201);
    const id = await waitingTask(app, pg);
    expectError(await post(`/v1/tasks/${id}/approvals/apr-1`, `{"decision":"approve","input":{"agent":"researcher","prompt":"p","x":${nest(10_000)}}}`), 400, 'validation_error', /^body\.input\.x(\.a){62}: nested more than 64/);
    // The prototype-poisoning guard of Fastify's JSON parser is kept.
    expectError(await post('/v1/tasks', '{"prompt":"x","metadata":{"__proto__":{"admin":true}}}'), 400, 'invalid_json');
    const form = new FormData();
    form.append('task', `{"prompt":"x","metadata":${nest(10_000)}}`);
    const req = new Request('http://x/', { method: 'POST', body: form });
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks', headers: Object.fromEntries(req.headers), payload: Buffer.from(await req.arrayBuffer()) }), 400, 'validation_error', /^task\.metadata(\.a){63}: nested more than 64/);
  });
});

describe('every refusal has the API error shape, the framework\'s own too', () => {
  pgTest('404, 414, 400 bad URL, 415, 413, invalid and empty JSON (inject)', async ({ pg }) => {
    const app = await gateway(pg, null);
    expectError(await app.inject({ method: 'GET', url: '/v1/nothing' }), 404, 'not_found', /no route GET \/v1\/nothing/);
    // A long path is not echoed whole.
    const long = await app.inject({ method: 'GET', url: `/v1/${'x'.repeat(9000)}` });
    expect([long.statusCode, long.json().error.message]).toEqual([404, `no route GET /v1/${'x'.repeat(196)}… (9004 characters)`]);
    expectError(await app.inject({ method: 'DELETE', url: '/v1/tasks' }), 404, 'not_found');
    // A path segment over the router's limit (a 10,000-character task id).
    expectError(await app.inject({ method: 'GET', url: `/v1/tasks/${'a'.repeat(10_000)}` }), 414, 'uri_too_long', /longer than 100 characters/);
    expectError(await app.inject({ method: 'GET', url: '/v1/tasks/%E0%A4%A' }), 400, 'invalid_url');
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks', headers: { 'content-type': 'application/xml' }, payload: '<task/>' }), 415, 'unsupported_media_type');
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks', headers: { 'content-type': 'text/plain' }, payload: 'Research X' }), 415, 'unsupported_media_type', /^headers\.content-type: 'text\/plain' is not taken here: send application\/json or multipart\/form-data$/);
    expectError(await app.inject({ method: 'POST', url: '/v1/webhooks', headers: { 'content-type': 'text/plain' }, payload: 'x' }), 415, 'unsupported_media_type', /send application\/json$/);
    // What the JSON parser would misread, or misname: named for what it is.
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks', headers: { ...json, 'content-encoding': 'gzip' }, payload: gzipSync('{"prompt":"x"}') }), 415, 'unsupported_media_type', /content-encoding: 'gzip' is not taken: send the body uncompressed/);
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks', headers: { 'content-type': 'application/json; charset=utf-16' }, payload: '{"prompt":"x"}' }), 415, 'unsupported_media_type', /charset 'utf-16' is not taken: JSON bodies are UTF-8/);
    expect((await app.inject({ method: 'POST', url: '/v1/tasks', headers: { 'content-type': 'application/json; charset=UTF-8' }, payload: '{"prompt":"x"}' })).statusCode).toBe(201);
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks', headers: json, payload: Buffer.concat([Buffer.from('{"prompt":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]) }), 400, 'invalid_json', /^body: not valid UTF-8$/);
    expect((await app.inject({ method: 'POST', url: '/v1/tasks', headers: json, payload: Buffer.from('{"prompt":"naïve café 日本 🚀"}') })).json().prompt).toBe('naïve café 日本 🚀');
    for (const poisoned of ['{"prompt":"x","__proto__":{"a":1}}', '{"prompt":"x","constructor":{"prototype":{"a":1}}}'])
      expectError(await app.inject({ method: 'POST', url: '/v1/tasks', headers: json, payload: poisoned }), 400, 'invalid_json', /a key named __proto__, or constructor holding prototype, is refused/);
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks/00000000-0000-4000-8000-000000000000/cancel', headers: json, payload: JSON.stringify({ reason: 'x'.repeat(70_000) }) }), 413, 'payload_too_large', /^the request body is too large: a body here may be at most 64 KiB \(BODY_LIMIT_BYTES\)$/);
    // A submit says its limit counts the workspace's archive (before: "Request body is too large", no limit, no cause).
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks', headers: json, payload: JSON.stringify({ prompt: 'x', workspace: { archiveBase64: 'A'.repeat(400_000) } }) }), 413, 'payload_too_large', /^the request body is too large: a task with its workspace archive \(base64\) may be at most [\d.]+ [KM]iB \(the archive itself: WORKSPACE_MAX_ARCHIVE_BYTES, the rest: BODY_LIMIT_BYTES\)$/);
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks', headers: json, payload: '{"prompt": ' }), 400, 'invalid_json');
    // The header and no body (clients set it on every request): no body — a 400 naming the body where one is needed, nothing where none is.
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks', headers: json, payload: '' }), 400, 'validation_error', /^body/);
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks/00000000-0000-4000-8000-000000000000/cancel', headers: json, payload: '' }), 404, 'not_found');
    expectError(await app.inject({ method: 'DELETE', url: '/v1/webhooks/00000000-0000-4000-8000-000000000000', headers: json, payload: '' }), 404, 'not_found');
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks/00000000-0000-4000-8000-000000000000/deliveries/1/redeliver', headers: json, payload: '' }), 404, 'not_found');
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 7 } }), 400, 'validation_error', /body\.prompt/);
  });

  pgTest('over real HTTP: an over-long URL (431 from node\'s parser), a 10,000-character path (414), bytes that are not HTTP (400); requests must arrive in time', async ({ pg }) => {
    const app = await gateway(pg, null);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const long = await fetch(`${base}/v1/tasks/${'a'.repeat(10_000)}`);
    const longBody = await long.json();
    expectError({ statusCode: long.status, json: () => longBody }, 414, 'uri_too_long');
    const huge = await fetch(`${base}/v1/tasks?cursor=${'a'.repeat(20_000)}`);
    expect(huge.status).toBe(431);
    expect(await huge.json()).toEqual({ error: { code: 'headers_too_large', message: expect.stringMatching(/16 KiB/) } });
    // A plugin's refusal (the static files' 403 for a path that leaves their root) keeps a code that says what its status says.
    const up = await raw(app, 'GET /assets/../../package.json HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
    expect(up).toMatch(/^HTTP\/1\.1 (403 Forbidden\r\n[\s\S]*"code":"forbidden"|404 Not Found\r\n[\s\S]*"code":"not_found")/);
    expect(up).not.toMatch(/"name"|"version"/); // no file from outside the console's directory
    const garbage = await raw(app, 'NOT HTTP AT ALL\r\n\r\n');
    expect(garbage).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n[\s\S]*x-content-type-options: nosniff\r\nx-frame-options: DENY\r\n/);
    // The framework's own refusals and a stream's head carry them too.
    for (const url of [`/v1/tasks/${'a'.repeat(200)}`, '/v1/tasks/%E0%A4%A']) {
      const res = await fetch(`${base}${url}`);
      expect([url, res.status, res.headers.get('x-content-type-options'), res.headers.get('x-frame-options')]).toEqual([url, res.status, 'nosniff', 'DENY']);
    }
    const stream = await fetch(`${base}/v1/tasks`, { headers: { accept: 'text/event-stream' } });
    expect([stream.headers.get('content-type'), stream.headers.get('x-content-type-options'), stream.headers.get('x-frame-options')]).toEqual(['text/event-stream; charset=utf-8', 'nosniff', 'DENY']);
    await stream.body?.cancel();
    expect(JSON.parse(garbage.slice(garbage.indexOf('\r\n\r\n') + 4))).toEqual({ error: { code: 'bad_request', message: 'not a valid HTTP request' } });
    // A NUL in a header value: node's parser refuses it (no header reaches a route with one).
    expect(await raw(app, 'GET /v1/tasks HTTP/1.1\r\nhost: x\r\nidempotency-key: a\0b\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 .*\r\n[\s\S]*"code":"bad_request"/);
    expect(app.server.requestTimeout).toBe(REQUEST_TIMEOUT_MS);
    await app.close();
  });
});

describe('resuming events: Last-Event-ID and ?after= are positions, digits only', () => {
  pgTest('garbage, -1, 1e3, empty, 1.5 → 400 naming the header or parameter; a valid id still resumes', async ({ pg }) => {
    const app = await gateway(pg, null);
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x' } })).json().id as string;
    await app.inject({ method: 'POST', url: `/v1/tasks/${id}/cancel` });
    const sse = (lastEventId: string) => app.inject({ method: 'GET', url: `/v1/tasks/${id}/events`, headers: { accept: 'text/event-stream', 'last-event-id': lastEventId } });
    expectError(await sse('9'.repeat(19)), 400, 'validation_error', /^headers\.last-event-id: must be a non-negative integer of at most 15 digits/);
    for (const bad of ['garbage', '-1', '1e3', '', '1.5', ' 1', '0x10', '9'.repeat(16)]) {
      expectError(await sse(bad), 400, 'validation_error', /^headers\.last-event-id: must be a non-negative integer/);
      expectError(await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?after=${encodeURIComponent(bad)}` }), 400, 'validation_error', /^query\.after: must be a non-negative integer/);
    }
    expectError(await app.inject({ method: 'GET', url: `/v1/tasks/${id}/state?at=1e0` }), 400, 'validation_error', /^query\.at/);
    expectError(await app.inject({ method: 'GET', url: '/v1/tasks?limit=1e1' }), 400, 'validation_error', /^query\.limit/);
    expectError(await sse('999999'), 400, 'validation_error', /^headers\.last-event-id: no event at position 999999/);
    expectError(await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?after=999999` }), 400, 'validation_error', /^query\.after: no event at position 999999/); // named as the schema names it
    // The task has ended: a stream resumed after its first event sends the rest, then ends.
    const [first, second] = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?after=0&limit=10` })).json().items as { position: number }[];
    const resumed = await sse(String(first?.position));
    expect(resumed.statusCode).toBe(200);
    expect([...resumed.body.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))).toEqual([second?.position]);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?after=${first?.position}` })).json().items).toHaveLength(1);
    // A full page says where the next starts (the list stopped short at 1000 without saying so); the last says null.
    const page = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?limit=1` })).json();
    expect(page).toEqual({ items: [expect.objectContaining({ position: first?.position })], next: first?.position });
    const rest = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?after=${page.next}&limit=10` })).json();
    expect(rest).toEqual({ items: [expect.objectContaining({ position: second?.position })], next: null });
  });
});

describe('writes are rate limited per tenant', () => {
  pgTest('over the bucket: 429 rate_limited with Retry-After; reads and other tenants go on; 0 turns it off', async ({ pg }) => {
    const keys = new Map([['key-of-tenant-a-0001', 'a'], ['key-of-tenant-b-0001', 'b']]);
    const app = await gateway(pg, null, { apiKeys: keys, limits: { writesPerS: 0.01, burst: 2 } });
    const as = (tenant: 'a' | 'b') => ({ authorization: `Bearer key-of-tenant-${tenant}-0001` });
    const submit = (tenant: 'a' | 'b') => app.inject({ method: 'POST', url: '/v1/tasks', headers: as(tenant), payload: { prompt: 'x' } });
    expect((await submit('a')).statusCode).toBe(201);
    expect((await submit('a')).statusCode).toBe(201);
    const limited = await submit('a');
    expectError(limited, 429, 'rate_limited', /more than 0\.01 writes per second \(bursts of 2\) for this tenant/);
    expect(limited.headers['retry-after']).toBe('100'); // one token at 0.01/s
    // Every write counts, whatever the route or the outcome.
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks/00000000-0000-4000-8000-000000000000/cancel', headers: as('a') }), 429, 'rate_limited');
    // However the route is spelled (a letter percent-encoded).
    expectError(await app.inject({ method: 'POST', url: '/%761/tasks', headers: as('a'), payload: { prompt: 'x' } }), 429, 'rate_limited');
    expect((await app.inject({ method: 'GET', url: '/v1/tasks', headers: as('a') })).statusCode).toBe(200);
    expect((await submit('b')).statusCode).toBe(201);
    expect(await count(pg)).toBe(3);

    const open = await gateway(pg, null, { limits: { writesPerS: 0, burst: 1 } });
    for (let i = 0; i < 5; i++) expect((await open.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x' } })).statusCode).toBe(201);
  });
});

describe("another site's pages", () => {
  pgTest("a request a browser marks cross-site is refused (a form could start or cancel tasks); without keys the API answers only at localhost, an IP address or OPEN_API_HOSTS (DNS rebinding); every answer is neither sniffed nor framed", async ({ pg }) => {
    const app = await gateway(pg, null, { openApiHosts: ['baton.internal'] });
    const before = await count(pg);
    // A post from another site's page (a multipart form needs no preflight), and a bare POST.
    const crossSite = { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' };
    expectError(await app.inject({ method: 'POST', url: '/v1/tasks', headers: crossSite, payload: { prompt: 'x' } }), 403, 'cross_site_request', /Sec-Fetch-Site: cross-site/);
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'mine' } })).json().id as string;
    expectError(await app.inject({ method: 'POST', url: `/v1/tasks/${id}/cancel`, headers: crossSite }), 403, 'cross_site_request');
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}` })).json().status).not.toBe('cancelled');
    // The console's own requests (same-origin), a CLI's (no such header) and a navigation to the page go on.
    expect((await app.inject({ method: 'GET', url: '/v1/tasks', headers: { 'sec-fetch-site': 'same-origin' } })).statusCode).toBe(200);
    expect((await app.inject({ method: 'GET', url: '/healthz', headers: crossSite })).statusCode).toBe(200);
    // Open (no keys): a name a page could rebind to this gateway is refused; localhost, addresses and configured names are not.
    expectError(await app.inject({ method: 'GET', url: '/v1/tasks', headers: { host: 'attacker-rebind.example:8080' } }), 403, 'host_not_allowed', /not at 'attacker-rebind\.example' .*set BATON_API_KEYS, or name the host in OPEN_API_HOSTS/);
    for (const host of ['localhost:8080', 'app.localhost', '127.0.0.1:8080', '[::1]:8080', '10.0.0.5', 'BATON.internal:443']) expect([host, (await app.inject({ method: 'GET', url: '/v1/tasks', headers: { host } })).statusCode]).toEqual([host, 200]);
    expect(await count(pg)).toBe(before + 1);
    // With keys, the Host is the key's business, not the gateway's.
    const keyed = await gateway(pg, null, { apiKeys: new Map([['key-of-tenant-a-0001', 'a']]) });
    expect((await keyed.inject({ method: 'GET', url: '/v1/tasks', headers: { host: 'baton.example.com', authorization: 'Bearer key-of-tenant-a-0001' } })).statusCode).toBe(200);
    for (const url of ['/v1/tasks', '/', '/healthz', '/v1/nothing']) {
      const res = await app.inject({ method: 'GET', url });
      expect([url, res.headers['x-content-type-options'], res.headers['x-frame-options']]).toEqual([url, 'nosniff', 'DENY']);
    }
  });
});

describe('SSE connection caps', () => {
  test('per tenant and per gateway: 429 too_many_streams with Retry-After before the stream starts; a closed stream frees its slot', async ({ pg, nats }) => {
    const keys = new Map([['key-of-tenant-a-0001', 'a'], ['key-of-tenant-b-0001', 'b'], ['key-of-tenant-c-0001', 'c']]);
    const app = await gateway(pg, nats, { apiKeys: keys, limits: { ssePerTenant: 1, sseConnections: 2 } });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const as = (tenant: string) => ({ authorization: `Bearer key-of-tenant-${tenant}-0001` });
    const task = async (tenant: string) => (await app.inject({ method: 'POST', url: '/v1/tasks', headers: as(tenant), payload: { prompt: 'x' } })).json().id as string;
    const ids = { a: await task('a'), b: await task('b'), c: await task('c') };
    // Each open stream's Response is held here with its controller: fetch cancels the body of a
    // Response that is garbage collected unread (undici's FinalizationRegistry), which closed a
    // stream the test counted open whenever a GC ran between two requests (seen under load).
    const streams: { abort(): void; res: Response }[] = [];
    const open = async (tenant: keyof typeof ids) => {
      const ctrl = new AbortController();
      const res = await fetch(`${base}/v1/tasks/${ids[tenant]}/events`, { headers: { accept: 'text/event-stream', ...as(tenant) }, signal: ctrl.signal });
      if (res.ok) streams.push({ abort: () => ctrl.abort(), res });
      return { status: res.status, retryAfter: res.headers.get('retry-after'), type: res.headers.get('content-type'), body: res.ok ? null : ((await res.json()) as { error: { code: string; message: string } }) };
    };
    const sse = async () => Number(/^baton_sse_connections (\d+)$/m.exec((await app.inject({ method: 'GET', url: '/metrics' })).body)?.[1]);

    expect((await open('a')).status).toBe(200);
    const tenantCap = await open('a');
    expect(tenantCap).toMatchObject({ status: 429, retryAfter: '5', type: expect.stringMatching(/application\/json/) });
    expect(tenantCap.body).toEqual({ error: { code: 'too_many_streams', message: expect.stringMatching(/at most 1 open event streams per tenant/) } });
    expect((await open('b')).status).toBe(200);
    const gatewayCap = await open('c');
    expect(gatewayCap).toMatchObject({ status: 429, retryAfter: '5' });
    expect(gatewayCap.body?.error.message).toMatch(/this gateway serves at most 2 event streams/);
    // The JSON list is not a stream: not counted.
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${ids.c}/events`, headers: as('c') })).statusCode).toBe(200);

    streams[0]?.abort(); // tenant a's stream closes…
    await waitFor(async () => (await sse()) === 1, { what: 'the closed stream to free its slot' });
    expect((await open('c')).status).toBe(200); // …and its slot is free
    expect((await open('a')).status).toBe(429); // the gateway is full again
    for (const s of streams) s.abort();
    await waitFor(async () => (await sse()) === 0, { what: 'every stream closed' });
    expect((await open('a')).status).toBe(200);
    for (const s of streams) s.abort();
    await app.close();
  });
});

describe('SSE backpressure', () => {
  test('a client that reads nothing: its stream waits for it to take what was written, and is cut after sseStallMs, freeing its slot; one that reads gets every event, one that reads slowly too (a long history goes in pieces, each taken in time)', async ({ pg, nats }) => {
    // (Long enough that a reader pausing 15 ms at a time on a loaded machine is never taken for a stalled one.)
    const app = await gateway(pg, nats, { limits: { sseStallMs: 2000 } });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as { port: number }).port;
    const sse = async () => Number(/^baton_sse_connections (\d+)$/m.exec((await app.inject({ method: 'GET', url: '/metrics' })).body)?.[1]);
    try {
      const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', team: 'bench' } })).json().id as string;
      // A long history: 100 turns of 200 KB each (20 MB: more than a socket's buffers hold).
      const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
      const text = 'x'.repeat(200_000);
      for (let i = 0; i < 100; i += 10) {
        await pg.store.append({ streamId: `task-${id}`, taskId: id, expectedVersion: 1 + i, events: Array.from({ length: 10 }, (_, j) => ({ id: crypto.randomUUID(), type: 'ModelTurnRecorded', data: { agentId: 'lead', turn: i + j + 1, model: 'm', content: [{ type: 'text', text }], stopReason: 'end_turn', usage, offline: true, durationMs: 0 } })) });
      }
      // A client that asks for the stream and reads nothing of it.
      const stuck = connect(port, '127.0.0.1');
      stuck.write(`GET /v1/tasks/${id}/events HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n\r\n`);
      stuck.pause();
      let closed = false;
      stuck.on('close', () => (closed = true)).on('error', () => {});
      await waitFor(async () => (await sse()) === 1, { what: 'the stream open' });
      await waitFor(async () => (await sse()) === 0, { timeoutMs: 15_000, what: 'the stalled client cut and its slot free' });
      stuck.resume(); // what it had received, then the end of a connection the gateway closed
      await waitFor(() => closed, { what: 'the connection closed by the gateway' });
      // One that reads takes the whole history.
      const res = await fetch(`http://127.0.0.1:${port}/v1/tasks/${id}/events`, { headers: { accept: 'text/event-stream' } });
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      let turns = 0;
      let tail = '';
      while (turns < 100) {
        const { value, done } = await reader.read();
        if (done) break;
        const chunk = tail + Buffer.from(value).toString();
        turns += (chunk.match(/^event: ModelTurnRecorded$/gm) ?? []).length;
        tail = chunk.slice(-40);
        turns -= (tail.match(/^event: ModelTurnRecorded$/gm) ?? []).length; // counted again with the next chunk
      }
      await reader.cancel();
      expect(turns).toBe(100);

      // One that reads slowly but on and on (a slow link): waited for, however long the history takes to go — not cut.
      const slow = connect(port, '127.0.0.1');
      slow.write(`GET /v1/tasks/${id}/events HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n\r\n`);
      let got = '';
      let cut = false;
      slow.on('data', (b: Buffer) => (got = (got + b.toString('latin1')).slice(-200_000), undefined)).on('close', () => (cut = true)).on('error', () => {});
      let seen = 0;
      slow.on('data', (b: Buffer) => (seen += (b.toString('latin1').match(/event: ModelTurnRecorded/g) ?? []).length));
      const pace = setInterval(() => (slow.isPaused() ? slow.resume() : slow.pause()), 15); // half the time reading: MBs a second, far below loopback
      try {
        await waitFor(() => seen >= 95 || cut, { timeoutMs: 60_000, what: 'the slow reader through the history' });
        expect(cut).toBe(false);
      } finally {
        clearInterval(pace);
        slow.destroy();
      }
    } finally {
      await app.close();
    }
  });
});

describe('webhook URLs at registration', () => {
  pgTest('what can never be delivered is a 400 naming body.webhook.url; the private-network escape hatch applies the same way', async ({ pg }) => {
    const app = await gateway(pg, null);
    const submit = (url: string, a = app) => a.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', webhook: { url } } });
    for (const url of ['http://127.0.0.1:9/hook', 'http://2130706433/', 'http://0x7f.1/', 'http://0177.0.0.1/', 'http://127.1/', 'http://[::1]/', 'http://[::ffff:127.0.0.1]/', 'http://[fe80::1]/', 'http://[fc00::]/', 'http://localhost:3000/', 'http://hooks.localhost/', 'http://169.254.169.254/', 'http://0.0.0.0/', 'http://224.0.0.1/']) {
      expectError(await submit(url), 400, 'validation_error', /^body\.webhook\.url: names .*which a webhook may not reach/);
    }
    expectError(await submit('http://user:pass@hooks.example.com/x'), 400, 'validation_error', /^body\.webhook\.url: must not carry credentials/);
    expectError(await submit('ftp://hooks.example.com/x'), 400, 'validation_error', /^body\.webhook\.url/);
    expect(await count(pg)).toBe(0);
    expect((await submit('https://hooks.example.com/x')).statusCode).toBe(201);

    const dev = await gateway(pg, null, { allowPrivateWebhooks: true });
    expect((await submit('http://127.0.0.1:9/hook', dev)).statusCode).toBe(201);
    expectError(await submit('http://user:pass@127.0.0.1:9/hook', dev), 400, 'validation_error', /credentials/);
  });

  test('credentials stored before they were refused are never shown: deliveries and events (JSON and SSE)', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const id = crypto.randomUUID();
    await handleCommand(pg.store, id, {
      type: 'SubmitTask', prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: { url: 'https://user:s3cret@hooks.example.com/x', events: ['task.cancelled'] },
      metadata: {}, tenantId: 'default', requestHash: null, forkedFrom: null, workspace: null, budget: null,
    });
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    const eventId = crypto.randomUUID();
    await recordDelivery(pg.db.pool, { taskId: id, eventId, webhookId: `msg_${eventId}`, type: 'task.cancelled', url: 'https://user:s3cret@hooks.example.com/x', attempt: 1, statusCode: null, ok: false, error: 'Request cannot be constructed from a URL that includes credentials: https://user:s3cret@hooks.example.com/x', durationMs: 0 });
    const deliveries = await app.inject({ method: 'GET', url: `/v1/tasks/${id}/deliveries` });
    expect(deliveries.json().items).toEqual([expect.objectContaining({ url: 'https://hooks.example.com/x', error: expect.stringMatching(/credentials: https:\/\/hooks\.example\.com\/x$/) })]);
    const events = await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events` });
    expect(events.json().items[0].data.webhook).toEqual({ url: 'https://hooks.example.com/x', events: ['task.cancelled'] });
    const stream = await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events`, headers: { accept: 'text/event-stream' } });
    expect(stream.body).toMatch(/hooks\.example\.com/);
    for (const body of [deliveries.body, events.body, stream.body]) expect(body).not.toMatch(/s3cret/);
  });
});
