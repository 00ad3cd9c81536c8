import { createHash, randomUUID } from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { builtinTeams, configVersion, TeamCatalog, type TeamDefinition } from '@baton/agents';
import { busNames, deadLetterRecorder, ensureTopology, publishWakeUps, Relay, RELAYED_CURSOR_HEADER, RELAYED_PREV_HEADER } from '@baton/bus';
import { headers } from '@nats-io/nats-core';
import { handleCommand, TaskCache } from '@baton/event-store';
import { DEFAULT_WORKSPACE_LIMITS, saveTeamConfigs, storeArtifact } from '@baton/storage';
import { createLogger, limiter, silentLogger } from '@baton/runtime';
import { stackTest, testClient, waitFor, type NatsFixture, type PgFixture } from '@baton/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { FastifyInstance } from 'fastify';
import { describe, expect } from 'vitest';
import { fixedApiKeys, keyFingerprint } from './api-keys.ts';
import { buildApp } from './app.ts';
import { DEFAULT_LIMITS } from './deps.ts';
import { createGatewayMetrics } from '@baton/telemetry';
import { SseHub } from './sse-hub.ts';
import { TaskTenants } from './task-tenants.ts';
import { defaultTeamOf } from './routes/submit.ts';
import { testGateway } from './test-gateway.ts';

const log = silentLogger();

/** The app under test (one set-up for every gateway test). */
const gateway = testGateway;

const test = stackTest;

/** A listening gateway with a relay, and a bench task submitted through it: for tests that follow SSE. */
async function liveGateway(pg: PgFixture, nats: NatsFixture) {
  const names = busNames(nats.namespace);
  await ensureTopology(await jetstreamManager(nats.nc), names);
  const relay = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log });
  relay.start();
  const app = await gateway(pg, nats);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', team: 'bench' } })).json().id as string;
  return { names, relay, app, base, id };
}

/** A research task (submitted through `app`) whose lead's first turn delegates, waiting on approval `requestId`. */
async function leadAsksApproval(pg: PgFixture, app: FastifyInstance, requestId: string) {
  const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x' } })).json().id as string;
  await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' });
  return { id, ...(await leadTurnAsksApproval(pg, id, requestId)) };
}

/** The started research task's lead turn delegates, waiting on approval `requestId`. */
async function leadTurnAsksApproval(pg: PgFixture, id: string, requestId: string) {
  const input = { agent: 'researcher', prompt: 'p' };
  await handleCommand(pg.store, id, {
    type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', content: [{ type: 'tool_use', id: 'tu1', name: 'Task', input }], stopReason: 'tool_use',
    usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 }, offline: true, durationMs: 0,
  });
  await handleCommand(pg.store, id, { type: 'RequestApproval', requestId, agentId: 'lead', toolUseId: 'tu1', toolName: 'Task', input, inputDigest: 'd', plan: 'the plan', deadline: new Date(Date.now() + 60_000).toISOString(), onTimeout: 'reject' });
  return { input };
}

describe('POST /v1/tasks', () => {
  test('creates a pending task with defaults', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const res = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'Research X' } });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ status: 'pending', prompt: 'Research X', team: 'research', requirePlanApproval: true, approvalTimeoutSeconds: 600, version: 1, pendingRequests: [], agents: [], result: null, error: null });
    const got = await app.inject({ method: 'GET', url: `/v1/tasks/${res.json().id}` });
    expect(got.json()).toMatchObject({ id: res.json().id, status: 'pending' });
    const list = await app.inject({ method: 'GET', url: '/v1/tasks?status=pending' });
    expect(list.json().items.map((t: { id: string }) => t.id)).toEqual([res.json().id]);
    // One time of creation wherever it is read: the answer, the task, the list, its first event.
    const { createdAt } = res.json();
    expect([got.json().createdAt, list.json().items[0].createdAt]).toEqual([createdAt, createdAt]);
    const events = await app.inject({ method: 'GET', url: `/v1/tasks/${res.json().id}/events`, headers: { accept: 'application/json' } });
    expect(events.json().items[0]).toMatchObject({ type: 'TaskSubmitted', recordedAt: createdAt });
  });

  test("a prompt whose emoji falls where the list cuts it (character 199/200) is taken, listed whole-charactered (it was a 500: half an emoji cannot be stored)", async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const prompt = `${'a'.repeat(198)}😀${'b'.repeat(10)}`;
    const res = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt } });
    expect(res.statusCode).toBe(201);
    expect(res.json().prompt).toBe(prompt);
    const listed = (await app.inject({ method: 'GET', url: '/v1/tasks' })).json().items[0];
    expect(listed.prompt).toBe(`${'a'.repeat(198)}…`);
  });

  test('bad input is rejected with 400 naming the field, and nothing is recorded', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const cases: [unknown, RegExp][] = [
      [{}, /body\.prompt/],
      [{ prompt: '' }, /body\.prompt/],
      [{ prompt: 'x'.repeat(20_001) }, /body\.prompt: must be at most 20000/],
      [{ prompt: 'x', requirePlanApproval: 'yes' }, /body\.requirePlanApproval/],
      [{ prompt: 'x', approvalTimeoutSeconds: -1 }, /body\.approvalTimeoutSeconds/],
      [{ prompt: 'x', webhook: { url: 'ftp://x' } }, /body\.webhook\.url/],
      [{ prompt: 'x', webhook: { url: 'http://x', events: ['task.exploded'] } }, /body\.webhook\.events\.0/],
      [{ prompt: 'x', team: 'nope' }, /body\.team: unknown team 'nope'/],
      // Names every object inherits are not teams (they reached the lead, which failed on them).
      [{ prompt: 'x', team: 'constructor' }, /body\.team: unknown team 'constructor'/],
      [{ prompt: 'x', team: 'toString' }, /body\.team: unknown team 'toString'/],
      [{ prompt: 'x', team: '__proto__' }, /body\.team: unknown team '__proto__'/],
      [{ prompt: 'x', surprise: 1 }, /^body\.surprise: unknown field 'surprise'$/],
      [{ prompt: 'x', webhook: { url: 'http://x', secret: 's' } }, /^body\.webhook\.secret: unknown field 'secret'$/],
      [{ prompt: 'x', budget: {} }, /body\.budget: name usd and\/or tokens/],
      [{ prompt: 'x', budget: { usd: 0 } }, /body\.budget\.usd: must be above 0/],
      [{ prompt: 'x', budget: { tokens: 1.5 } }, /body\.budget\.tokens: must be a whole number/],
      [{ prompt: 'x', budget: { usd: 1, dollars: 2 } }, /dollars/],
    ];
    for (const [payload, message] of cases) {
      const res = await app.inject({ method: 'POST', url: '/v1/tasks', payload: payload as object });
      expect(res.statusCode, JSON.stringify(payload).slice(0, 80)).toBe(400);
      expect(res.json().error.code).toBe('validation_error');
      expect(res.json().error.message).toMatch(message);
    }
    const malformed = await app.inject({ method: 'POST', url: '/v1/tasks', headers: { 'content-type': 'application/json' }, payload: '{"prompt": ' });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().error.code).toBe('invalid_json');
    // Over the submit route's limit: the body limit plus room for a base64 workspace archive.
    const huge = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', metadata: { blob: 'y'.repeat(160_000) } } });
    expect(huge.statusCode).toBe(413);
    expect((await pg.db.pool.query('select count(*)::int as n from events')).rows[0].n).toBe(0);
  });

  test("the default team: BATON_DEFAULT_TEAM's, else research, else a single team's; none: a task or chat naming no team is told to name one, and what is configured", async ({ pg, nats }) => {
    const { bench, engineering } = builtinTeams as Record<string, TeamDefinition>;
    const submit = (app: FastifyInstance, payload: object) => app.inject({ method: 'POST', url: '/v1/tasks', payload });
    // A default set: written into the task (the log, the list and the request hash name it).
    const set = await gateway(pg, nats, { defaultTeam: 'engineering' });
    expect((await set.inject({ method: 'GET', url: '/v1/teams' })).json().default).toBe('engineering');
    const t = await submit(set, { prompt: 'x' });
    expect(t.statusCode).toBe(201);
    expect(t.json().team).toBe('engineering');
    expect((await submit(set, { prompt: 'x', team: 'bench' })).json().team).toBe('bench');
    // Unset: research, if configured (as before).
    const unset = await gateway(pg, nats);
    expect((await unset.inject({ method: 'GET', url: '/v1/teams' })).json().default).toBe('research');
    // A request repeated under its key that named no team is the task it made, though the default changed since (it was a 422).
    const keyed = { method: 'POST' as const, url: '/v1/tasks', headers: { 'idempotency-key': `k-${randomUUID()}` }, payload: { prompt: 'x' } };
    const madeFirst = await unset.inject(keyed);
    const again = await set.inject(keyed);
    expect([again.statusCode, again.headers['idempotent-replayed'], again.json().id, again.json().team]).toEqual([201, 'true', madeFirst.json().id, 'research']);
    // Unset, no research, one team: that one.
    const single = await gateway(pg, nats, { teams: { bench: bench as TeamDefinition } });
    expect((await submit(single, { prompt: 'x' })).json().team).toBe('bench');
    // Unset, no research, several: none — named, with what is configured (it had said "unknown team 'research'").
    const none = await gateway(pg, nats, { teams: { bench: bench as TeamDefinition, engineering: engineering as TeamDefinition } });
    expect((await none.inject({ method: 'GET', url: '/v1/teams' })).json().default).toBeNull();
    const refused = await submit(none, { prompt: 'x' });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toMatchObject({ code: 'validation_error', message: 'body.team: name a team: this gateway has no default team (BATON_DEFAULT_TEAM); configured: bench, engineering', details: [{ field: 'body.team', message: 'required' }] });
    const chat = await none.inject({ method: 'POST', url: '/v1/chat', payload: { message: 'x' } });
    expect(chat.json().error).toMatchObject({ code: 'validation_error', message: 'body.team: name a team: this gateway has no default team (BATON_DEFAULT_TEAM); configured: bench, engineering' });
    expect((await submit(none, { prompt: 'x', team: 'research' })).json().error.message).toBe("body.team: unknown team 'research'; configured: bench, engineering");
    // The setting itself: a team not configured stops the gateway at start (exit 78), naming what is.
    expect(defaultTeamOf({ bench, engineering }, 'reserch')).toEqual({ problem: "BATON_DEFAULT_TEAM: 'reserch' is not a configured team (configured: bench, engineering)" });
    expect(defaultTeamOf({ bench, engineering }, 'bench')).toEqual({ team: 'bench' });
  });

  test('budgets: the task\'s own, else its tenant\'s default, else "*"; shown with what was spent', async ({ pg, nats }) => {
    const keys = new Map([['key-acme-0123456789', 'acme'], ['key-other-012345678', 'other']]);
    const app = await testGateway(pg, nats, { apiKeys: keys, budgets: { acme: { usd: 5 }, '*': { tokens: 1000 } } });
    const submit = async (key: string, payload: object) => (await app.inject({ method: 'POST', url: '/v1/tasks', headers: { authorization: `Bearer ${key}` }, payload: { prompt: 'x', ...payload } })).json();
    expect((await submit('key-acme-0123456789', {})).budget).toEqual({ limit: { usd: 5, tokens: null }, spent: { usd: 0, tokens: 0 } });
    expect((await submit('key-other-012345678', {})).budget).toEqual({ limit: { usd: null, tokens: 1000 }, spent: { usd: 0, tokens: 0 } });
    const own = await submit('key-acme-0123456789', { budget: { tokens: 50, usd: 0.5 } });
    expect(own.budget.limit).toEqual({ usd: 0.5, tokens: 50 });
    const events = (await pg.db.pool.query(`select data->'budget' as b from events where type = 'TaskSubmitted' and task_id = $1`, [own.id])).rows;
    expect(events).toEqual([{ b: { usd: 0.5, tokens: 50 } }]);
    // No budget configured, none asked: none.
    expect((await (await gateway(pg, nats)).inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x' } })).json().budget).toBeNull();
  });

  test('the list filters by team and marks forks', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const research = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'r' } })).json().id as string;
    const bench = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'b', team: 'bench' } })).json().id as string;
    const fork = await app.inject({ method: 'POST', url: `/v1/tasks/${research}/fork`, payload: { atVersion: 1 } });
    expect(fork.statusCode).toBe(201);
    const list = (q: string) => app.inject({ method: 'GET', url: `/v1/tasks${q}` }).then((r) => r.json().items as { id: string; forkedFrom: { taskId: string; atVersion: number } | null }[]);
    expect((await list('?team=bench')).map((t) => t.id)).toEqual([bench]);
    const all = await list('?team=research');
    expect(all.map((t) => [t.id, t.forkedFrom])).toEqual([[fork.json().id, { taskId: research, atVersion: 1 }], [research, null]]);
    expect((await app.inject({ method: 'GET', url: '/v1/tasks?team=' })).statusCode).toBe(400);
  });

  test("?forkedFrom= lists a task's forks, newest first, each with the version it was copied at — the tenant's own only; not a task id is a 400 naming it", async ({ pg, nats }) => {
    const keys = new Map([['key-acme-0123456789', 'acme'], ['key-other-012345678', 'other']]);
    const app = await testGateway(pg, nats, { apiKeys: keys });
    const as = (key: string) => ({ authorization: `Bearer ${key}` });
    const acme = as('key-acme-0123456789');
    const source = (await app.inject({ method: 'POST', url: '/v1/tasks', headers: acme, payload: { prompt: 'source', team: 'bench' } })).json().id as string;
    const other = (await app.inject({ method: 'POST', url: '/v1/tasks', headers: acme, payload: { prompt: 'other', team: 'bench' } })).json().id as string;
    await handleCommand(pg.store, source, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'bench-lead', configVersion: 'v' });
    await handleCommand(pg.store, source, { type: 'CancelTask', reason: 'r', requestedBy: 'u' }); // v3: forkable at 1 and 2
    const fork = async (id: string, atVersion: number) => (await app.inject({ method: 'POST', url: `/v1/tasks/${id}/fork`, headers: acme, payload: { atVersion } })).json().id as string;
    const first = await fork(source, 1);
    const second = await fork(source, 2);
    await fork(other, 1); // another task's fork: not listed
    const forksOf = async (id: string, headers = acme, q = '') => {
      const r = await app.inject({ method: 'GET', url: `/v1/tasks?forkedFrom=${id}${q}`, headers });
      return { status: r.statusCode, items: (r.json().items ?? []).map((t: { id: string; forkedFrom: unknown }) => [t.id, t.forkedFrom]), next: r.json().nextCursor as string | null };
    };
    expect(await forksOf(source)).toEqual({ status: 200, items: [[second, { taskId: source, atVersion: 2 }], [first, { taskId: source, atVersion: 1 }]], next: null });
    expect((await forksOf(source.toUpperCase())).items).toHaveLength(2); // an id in capitals is the same id
    // Pages, with the other filters.
    const page = await forksOf(source, acme, '&limit=1');
    expect([page.items.length, page.next !== null]).toEqual([1, true]);
    expect((await forksOf(source, acme, `&limit=1&cursor=${page.next}`)).items).toEqual([[first, { taskId: source, atVersion: 1 }]]);
    expect((await forksOf(source, acme, '&status=completed')).items).toEqual([]);
    expect((await forksOf(first)).items).toEqual([]); // a fork with no forks of its own
    // A fork written by the release before (a rolling update: its gateway did not know the version's column) is listed with its version all the same, read from its first event and kept.
    await pg.db.pool.query('update tasks set forked_at_version = null where id = $1', [first]);
    expect((await forksOf(source)).items).toEqual([[second, { taskId: source, atVersion: 2 }], [first, { taskId: source, atVersion: 1 }]]);
    expect((await pg.db.pool.query('select forked_at_version from tasks where id = $1', [first])).rows).toEqual([{ forked_at_version: 1 }]);
    // Another tenant sees none of them (the forks are acme's).
    expect(await forksOf(source, as('key-other-012345678'))).toEqual({ status: 200, items: [], next: null });
    const bad = await app.inject({ method: 'GET', url: '/v1/tasks?forkedFrom=not-a-task', headers: acme });
    expect([bad.statusCode, bad.json().error.message]).toEqual([400, 'query.forkedFrom: must be a task id (UUID)']);
  });

  test('updatedAfter: only the tasks that changed after it (a poller asks for what moved); a time without a zone is a 400 naming it', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const submit = async (prompt: string) => (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt, team: 'bench' } })).json() as { id: string; updatedAt: string };
    const list = (after: string) => app.inject({ method: 'GET', url: `/v1/tasks?updatedAfter=${encodeURIComponent(after)}` }).then((r) => (r.json().items as { id: string }[]).map((t) => t.id));
    // The clock moves past a time before the next change (times are milliseconds).
    const past = (iso: string) => waitFor(() => Date.now() > Date.parse(iso) + 1, { what: `the clock past ${iso}` });
    const a = await submit('a');
    await past(a.updatedAt);
    const b = await submit('b');
    expect(await list(a.updatedAt)).toEqual([b.id]);
    await past(b.updatedAt);
    await app.inject({ method: 'POST', url: `/v1/tasks/${a.id}/cancel`, payload: {} });
    expect(await list(b.updatedAt)).toEqual([a.id]);
    expect(await list('2000-01-01T00:00:00+01:00')).toEqual([b.id, a.id]);
    const bad = await app.inject({ method: 'GET', url: '/v1/tasks?updatedAfter=2026-11-26T12:00:00' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.message).toBe("query.updatedAfter: must be an ISO 8601 time with a zone, e.g. 2026-11-26T12:00:00.000Z; got '2026-11-26T12:00:00'");
    // A zone's '+' sent unencoded arrives as a space: what arrived, and why, are said.
    const plus = await app.inject({ method: 'GET', url: '/v1/tasks?updatedAfter=2026-11-26T12:00:00+01:00' });
    expect(plus.json().error.message).toBe("query.updatedAfter: must be an ISO 8601 time with a zone, e.g. 2026-11-26T12:00:00.000Z; got '2026-11-26T12:00:00 01:00' (a '+' in a query string is sent as %2B: unencoded it arrives as a space)");
    expect(await list('2026-11-26T12:00:00+01:00')).toEqual([b.id, a.id]); // (list() encodes it)
  });

  test('search: only tasks whose listed prompt contains the text, ignoring case, % and _ as plain characters, page by page; a blank one is a 400 naming it', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const submit = async (prompt: string) => (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt, team: 'bench' } })).json().id as string;
    const vectors = await submit('A report on Vector databases');
    const pgvector = await submit('Compare pgvector and Qdrant for VECTOR search');
    const percent = await submit('Why 100% of snake_case names matter');
    await submit('Something else entirely');
    const list = async (q: string) => (await app.inject({ method: 'GET', url: `/v1/tasks?${q}` })).json() as { items: { id: string }[]; nextCursor: string | null };
    const ids = async (search: string) => (await list(`search=${encodeURIComponent(search)}`)).items.map((t) => t.id);
    expect(await ids('vector')).toEqual([pgvector, vectors]);
    expect(await ids('  VECTOR DATA ')).toEqual([vectors]); // trimmed, any case
    expect(await ids('100%')).toEqual([percent]);
    expect(await ids('%')).toEqual([percent]); // a plain character, not "anything"
    expect(await ids('e_c')).toEqual([percent]); // '_' is not "any one character": 'snake_case' has it, 'Something else' has no 'e_c'
    expect(await ids('nothing like this')).toEqual([]);
    // Page by page, with the other filters.
    const first = await list('search=vector&limit=1');
    expect(first.items.map((t) => t.id)).toEqual([pgvector]);
    expect((await list(`search=vector&limit=1&cursor=${first.nextCursor}`)).items.map((t) => t.id)).toEqual([vectors]);
    expect((await list('search=vector&team=research')).items).toEqual([]);
    const blank = await app.inject({ method: 'GET', url: '/v1/tasks?search=%20%20' });
    expect(blank.statusCode).toBe(400);
    expect(blank.json().error.message).toMatch(/^query\.search: must not be blank/);
  });

  test('a query parameter no route takes is a 400 naming it (a misspelt filter is not ignored)', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x' } })).json().id as string;
    for (const [url, field] of [['/v1/tasks?state=running', 'state'], [`/v1/tasks/${id}/events?since=3`, 'since'], [`/v1/tasks/${id}/state?version=1`, 'version'], [`/v1/tasks/${id}/artifacts?at=1&x=2`, 'x'], ['/v1/chats?limit=5&page=2', 'page']] as const) {
      const res = await app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error).toMatchObject({ code: 'validation_error', message: `query.${field}: unknown query parameter '${field}'` });
    }
    expect((await app.inject({ method: 'GET', url: '/v1/tasks?status=pending&limit=5' })).statusCode).toBe(200);
    // Routes that take no query at all refuse one too; ?at= there says where the task as it was is read.
    for (const [method, url, field] of [['GET', `/v1/tasks/${id}/agents?x=1`, 'x'], ['GET', `/v1/tasks/${id}/deliveries?foo=1`, 'foo'], ['POST', `/v1/tasks/${id}/cancel?force=1`, 'force']] as const) {
      const res = await app.inject({ method, url });
      expect([res.statusCode, res.json().error.message], url).toEqual([400, `query.${field}: unknown query parameter '${field}'`]);
    }
    const at = await app.inject({ method: 'GET', url: `/v1/tasks/${id}?at=1` });
    expect([at.statusCode, at.json().error.message]).toEqual([400, 'query.at: this route has no ?at=: the task as it was after a version is GET /v1/tasks/:id/state?at=N (its files: /artifacts?at=N, /diff?at=N, /archive?at=N)']);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}` })).statusCode).toBe(200);
  });

  test('Idempotency-Key: same key and body → the same task; a different body → 422', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const send = (prompt: string) => app.inject({ method: 'POST', url: '/v1/tasks', headers: { 'idempotency-key': 'k-123' }, payload: { prompt } });
    const [a, b] = await Promise.all([send('Research X'), send('Research X')]);
    expect(a.statusCode).toBe(201);
    expect(b.statusCode).toBe(201);
    expect(a.json().id).toBe(b.json().id);
    const c = await send('Research X');
    expect(c.json().id).toBe(a.json().id);
    expect(c.headers['idempotent-replayed']).toBe('true');
    const d = await send('Something else');
    expect(d.statusCode).toBe(422);
    expect(d.json().error.code).toBe('idempotency_key_reused');
    expect((await pg.db.pool.query(`select count(*)::int as n from events where type = 'TaskSubmitted'`)).rows[0].n).toBe(1);
    // At once, with two bodies: one task, made from one of them; the other request is refused — it
    // had been answered 201 with a task made from the other body. At once with one body: the
    // second is the first's replay, and says so.
    for (let round = 0; round < 5; round++) {
      const key = { 'idempotency-key': `race-${round}` };
      const [x, y] = await Promise.all([app.inject({ method: 'POST', url: '/v1/tasks', headers: key, payload: { prompt: 'body A' } }), app.inject({ method: 'POST', url: '/v1/tasks', headers: key, payload: { prompt: 'body B' } })]);
      const made = [x, y].filter((r) => r.statusCode === 201);
      expect(made).toHaveLength(1);
      expect([x, y].find((r) => r.statusCode !== 201)?.json().error.code).toBe('idempotency_key_reused');
      expect(made[0]?.json().prompt).toBe(made[0] === x ? 'body A' : 'body B');
      const same = { 'idempotency-key': `same-${round}` };
      const [p, q] = await Promise.all([app.inject({ method: 'POST', url: '/v1/tasks', headers: same, payload: { prompt: 'one body' } }), app.inject({ method: 'POST', url: '/v1/tasks', headers: same, payload: { prompt: 'one body' } })]);
      expect([p.statusCode, q.statusCode]).toEqual([201, 201]);
      expect(p.json().id).toBe(q.json().id);
      expect([p.headers['idempotent-replayed'], q.headers['idempotent-replayed']].filter(Boolean)).toEqual(['true']);
    }
  });
});

describe('reads, tenancy, errors', () => {
  test('unknown task → 404; malformed id → 400 naming id; unknown route → 404', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const r404 = await app.inject({ method: 'GET', url: `/v1/tasks/${randomUUID()}` });
    expect(r404.statusCode).toBe(404);
    expect(r404.json().error.code).toBe('not_found');
    const r400 = await app.inject({ method: 'GET', url: '/v1/tasks/not-a-uuid' });
    expect(r400.statusCode).toBe(400);
    expect(r400.json().error.message).toMatch(/params\.id/);
    expect((await app.inject({ method: 'GET', url: '/v1/nothing' })).statusCode).toBe(404);
    const badCursor = await app.inject({ method: 'GET', url: '/v1/tasks?cursor=garbage' });
    expect(badCursor.statusCode).toBe(400);
  });

  test('API keys: 401 without a key; a tenant never sees another tenant\'s task; a refused key is logged by its fingerprint, once a minute', async ({ pg, nats }) => {
    const lines: { msg: string; key?: string }[] = [];
    const log = createLogger('gateway', { destination: { write: (l: string) => void lines.push(JSON.parse(l) as { msg: string; key?: string }) } });
    const app = await gateway(pg, nats, { apiKeys: new Map([['key-of-tenant-a-0001', 'a'], ['key-of-tenant-b-0001', 'b']]), log });
    const missing = await app.inject({ method: 'GET', url: '/v1/tasks' });
    expect([missing.statusCode, missing.headers['www-authenticate']]).toEqual([401, 'Bearer realm="baton"']);
    const wrong = await app.inject({ method: 'GET', url: '/v1/tasks', headers: { authorization: 'Bearer wrong-key-wrong-key' } });
    expect([wrong.statusCode, wrong.headers['www-authenticate']]).toEqual([401, 'Bearer realm="baton", error="invalid_token"']);
    await app.inject({ method: 'GET', url: '/v1/tasks', headers: { authorization: 'Bearer wrong-key-wrong-key' } });
    // A revoked key still tried shows in the log — by its fingerprint, never the key — and once a minute, not per request.
    const refused = lines.filter((l) => /API key this gateway does not have was refused/.test(l.msg));
    expect(refused.map((l) => l.key)).toEqual([`key:${createHash('sha256').update('wrong-key-wrong-key').digest('hex').slice(0, 8)}`]);
    expect(JSON.stringify(lines)).not.toContain('wrong-key-wrong-key');
    const a = { authorization: 'Bearer key-of-tenant-a-0001' };
    const b = { authorization: 'Bearer key-of-tenant-b-0001' };
    const created = await app.inject({ method: 'POST', url: '/v1/tasks', headers: a, payload: { prompt: 'mine' } });
    const id = created.json().id;
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}`, headers: a })).statusCode).toBe(200);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}`, headers: b })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events`, headers: b })).statusCode).toBe(404);
    expect((await app.inject({ method: 'POST', url: `/v1/tasks/${id}/cancel`, headers: b })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: '/v1/tasks', headers: b })).json().items).toEqual([]);
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    // The same routes spelled otherwise need the key too: a letter percent-encoded, or the absolute
    // form of the request target (both reach /v1/tasks) — and over real HTTP, nothing gets through.
    for (const url of ['/%761/tasks', '/v%31/tasks', `/v1/tasks/${id}`.replace('tasks', 'task%73'), '/v1%2Ftasks']) {
      const res = await app.inject({ method: 'GET', url });
      expect([url, res.statusCode]).toEqual([url, url === '/v1%2Ftasks' ? 404 : 401]);
      expect((await app.inject({ method: 'POST', url: url.replace(/\/[^/]+$/, '/tasks'), payload: { prompt: 'sneaked in' } })).statusCode).not.toBe(201);
    }
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    const raw = (target: string, method = 'GET') =>
      new Promise<number>((resolve, reject) => {
        const r = request({ host: '127.0.0.1', port, method, path: target, headers: { 'content-type': 'application/json' } }, (res) => (res.resume(), resolve(res.statusCode ?? 0)));
        r.on('error', reject);
        r.end(method === 'POST' ? JSON.stringify({ prompt: 'sneaked in' }) : undefined);
      });
    expect(await raw(`http://127.0.0.1:${port}/v1/tasks`)).toBe(401);
    expect(await raw(`http://127.0.0.1:${port}/v1/tasks`, 'POST')).toBe(401);
    expect(await raw('/%761/tasks', 'POST')).toBe(401);
    expect(await raw(`http://127.0.0.1:${port}/%761/tasks/${id}`)).toBe(401);
    expect(Number((await pg.db.pool.query("select count(*)::int as n from events where type = 'TaskSubmitted'")).rows[0].n)).toBe(1);
    // Who did it: the key's fingerprint (sha256, 8 hex digits) and tenant — none of the key itself.
    const cancelled = (await app.inject({ method: 'POST', url: `/v1/tasks/${id}/cancel`, headers: a, payload: { reason: 'done' } })).json();
    const fingerprint = createHash('sha256').update('key-of-tenant-a-0001').digest('hex').slice(0, 8);
    expect(cancelled.cancellation.requestedBy).toBe(`key:${fingerprint}@a`);
    expect(keyFingerprint('key-of-tenant-a-0001')).toBe(fingerprint);
    expect(JSON.stringify((await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events`, headers: a })).json())).not.toContain('key-of');
  });

  test('cancel → cancelled; cancelling again → 409', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x' } })).json().id;
    const c1 = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/cancel`, payload: { reason: 'changed my mind' } });
    expect(c1.statusCode).toBe(200);
    expect(c1.json().status).toBe('cancelled');
    // Who and why, in the task itself (not only in the log's TaskCancelled).
    expect(c1.json().cancellation).toEqual({ reason: 'changed my mind', requestedBy: 'anonymous', at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}` })).json().cancellation).toMatchObject({ reason: 'changed my mind' });
    const c2 = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/cancel` });
    expect(c2.statusCode).toBe(409);
    expect(c2.json().error).toMatchObject({ code: 'task_final', message: expect.stringMatching(/already cancelled/) });
    // The range a fork is offered is one it takes: a finished task's last version is its end.
    const beyond = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/fork`, payload: { atVersion: 9 } });
    expect(beyond.json().error).toMatchObject({ code: 'invalid_version', message: 'body.atVersion: the task is at version 2; fork at a version up to 1' });
    const end = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/fork`, payload: { atVersion: 2 } });
    expect([end.statusCode, end.json().error]).toEqual([422, { code: 'invalid_version', message: 'body.atVersion: version 2 is the end of the task; fork at a version up to 1', details: [{ field: 'body.atVersion', message: 'version 2 is the end of the task; fork at a version up to 1' }] }]); // the same code as past the end
  });

  test('approvals: invalid edit → 400 naming the field (request stays open); approve once → 200, twice → 409', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const { id, input } = await leadAsksApproval(pg, app, 'apr-1');
    const task = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}` })).json();
    expect(task.status).toBe('awaiting_input');
    expect(task.pendingRequests).toEqual([expect.objectContaining({ kind: 'approval', requestId: 'apr-1', toolName: 'Task', input, plan: 'the plan' })]);
    const bad = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-1`, payload: { decision: 'approve', input: { agent: 'researcher', prompt: '' } } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.message).toMatch(/body\.input\.prompt/);
    // Valid in shape, wrong in meaning: an agent this lead cannot delegate to.
    const nobody = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-1`, payload: { decision: 'approve', input: { agent: 'nobody', prompt: 'p' } } });
    expect(nobody.statusCode).toBe(400);
    expect(nobody.json().error.message).toMatch(/body\.input\.agent: unknown agent 'nobody'; this team delegates to: researcher, report-writer/);
    // A field the tool does not take is named, not dropped.
    const extra = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-1`, payload: { decision: 'approve', input: { agent: 'researcher', prompt: 'p', priority: 'high' } } });
    expect(extra.statusCode).toBe(400);
    expect(extra.json().error).toMatchObject({ message: "body.input.priority: unknown field 'priority'", details: [{ field: 'body.input.priority', message: "unknown field 'priority'" }] });
    // What the decision would drop is refused by name, not accepted and lost.
    for (const [payload, message] of [
      [{ decision: 'reject', input: { agent: 'researcher', prompt: 'p' } }, "body.input: an edited input goes with decision 'approve' (a rejection runs nothing)"],
      [{ decision: 'approve', reason: 'because' }, "body.reason: a reason goes with decision 'reject' (the agent re-plans with it); an approval records none"],
      [{ decision: 'reject', budget: { tokens: 10 } }, "body.budget: a new limit goes with decision 'approve' (a rejection stops the run at its budget)"],
    ] as const) {
      const res = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-1`, payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error.message).toBe(message);
    }
    // A route that takes no body names a field sent to it; none, or {}, is fine.
    const verifyJunk = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/verify`, payload: { junk: 1 } });
    expect(verifyJunk.statusCode).toBe(400);
    expect(verifyJunk.json().error.message).toMatch(/body\.junk/);
    expect((await app.inject({ method: 'POST', url: `/v1/tasks/${id}/verify`, payload: {} })).statusCode).toBe(200);
    expect((await app.inject({ method: 'POST', url: `/v1/tasks/${id}/verify` })).statusCode).toBe(200);
    const ok = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-1`, headers: { 'idempotency-key': 'decision-1' }, payload: { decision: 'approve', input: { agent: 'researcher', prompt: 'narrower' } } });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'running', pendingRequests: [] });
    const again = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-1`, payload: { decision: 'reject' } });
    expect(again.statusCode).toBe(409);
    expect(again.json().error.message).toMatch(/already decided: approved with edits \(by \S+ at \d{4}-/);
    expect(again.json().error.details).toEqual({ requestId: 'apr-1', decision: 'approved with edits', decidedBy: expect.any(String), decidedAt: expect.any(String) });
    // The decision sent again under its Idempotency-Key (a client that never saw its answer): answered as made, nothing recorded.
    const version = ok.json().version as number;
    const decideAgain = (key: string | null, input: Record<string, unknown>) =>
      app.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-1`, headers: key ? { 'idempotency-key': key } : {}, payload: { decision: 'approve', input } });
    const repeat = await decideAgain('decision-1', { prompt: 'narrower', agent: 'researcher' });
    expect([repeat.statusCode, repeat.headers['idempotent-replayed'], repeat.json().version]).toEqual([200, 'true', version]);
    // The same click without the key (another person, or another page): decided already, by whom; the key with another decision: 422.
    expect((await decideAgain(null, { agent: 'researcher', prompt: 'narrower' })).json().error.code).toBe('request_already_decided');
    const reused = await decideAgain('decision-1', { agent: 'researcher', prompt: 'wider' });
    expect([reused.statusCode, reused.json().error.code]).toEqual([422, 'idempotency_key_reused']);
    const unknown = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/answers/nope`, payload: { answers: 'x' } });
    expect(unknown.statusCode).toBe(404);
    const at1 = await app.inject({ method: 'GET', url: `/v1/tasks/${id}/state?at=1` });
    expect(at1.json()).toMatchObject({ status: 'pending', version: 1 });
    const at4 = await app.inject({ method: 'GET', url: `/v1/tasks/${id}/state?at=4` });
    expect(at4.json()).toMatchObject({ status: 'awaiting_input', version: 4 });
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}/state?at=99` })).statusCode).toBe(404);
  });

  test('GET /v1/tasks?stuck=true lists tasks with work no person holds, idle past STUCK_AFTER_MS and no live lease; the gauge counts them', async ({ pg, nats }) => {
    const app = await gateway(pg, nats, { limits: { stuckAfterMs: 1000 } });
    const submit = async () => (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'bench', team: 'bench' } })).json().id as string;
    const idle = await submit();
    const leased = await submit();
    // No orchestrator runs: both sit pending. Make them old, and let a runner hold a live lease on one.
    await pg.db.pool.query(`update tasks set watch_since = now() - interval '1 minute'`);
    await pg.db.pool.query(`insert into agent_leases (task_id, agent_id, attempt, holder, expires_at) values ($1, 'a', 1, 'r', now() + interval '1 minute')`, [leased]);
    const listed = (await app.inject({ method: 'GET', url: '/v1/tasks?stuck=true' })).json();
    expect(listed.items.map((t: { id: string }) => t.id)).toEqual([idle]);
    expect((await app.inject({ method: 'GET', url: '/v1/tasks?stuck=maybe' })).json().error.message).toMatch(/query.stuck/);
    expect((await app.inject({ method: 'GET', url: '/metrics' })).body).toMatch(/^baton_stuck_tasks 1$/m);
  });

  test('the dead letters every process recorded are gauges of the gateway, by consumer (a counter in each process would reset with it)', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const record = deadLetterRecorder(pg.db.pool);
    for (const seq of [1, 2]) await record({ consumer: 'notifier-webhooks', subject: 's', streamSequence: seq, storedAtNanos: BigInt(seq), deliveries: 12, payload: '{}', error: 'gave up after 12 attempts: HTTP 503', unsettled: false });
    const body = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(body).toMatch(/^baton_dead_letters\{consumer="notifier-webhooks"\} 2$/m);
    // The others at 0: a dashboard shows 0, not "No data".
    expect(body).toMatch(/^baton_dead_letters\{consumer="runner-jobs"\} 0$/m);
    expect(body).toMatch(/^baton_dead_letters\{consumer="orchestrator-task-events"\} 0$/m);
    expect(body).toMatch(/^baton_dead_letter_last_timestamp_seconds\{consumer="notifier-webhooks"\} \d+(\.\d+)?$/m);
  });

  test("the relay's lag is on the gateway's /metrics too: with no orchestrator running (nothing else to scrape), it shows transitions waiting and no relay leading", async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'bench', team: 'bench' } });
    const body = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(body).toMatch(/^baton_relay_leading 0$/m);
    expect(body).toMatch(/^baton_relay_lag_events 1$/m);
    expect(body).toMatch(/^baton_relay_lag_seconds \d/m);
  });

  test("every consumer's backlog is on the gateway's /metrics too: a runner job waiting with no runner running shows", async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const app = await gateway(pg, nats);
    await jetstream(nats.nc).publish(names.jobSubject('run', randomUUID(), 'researcher-1'), '{}');
    const body = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(body).toMatch(/^baton_consumer_pending_messages\{consumer="runner-jobs"\} 1$/m);
    expect(body).toMatch(/^baton_consumer_pending_messages\{consumer="orchestrator-task-events"\} 0$/m);
  });

  test("readyz is 503 on a database its migrations have not reached, naming what is missing (not 'ready' while every request would fail)", async ({ pg, nats }) => {
    const last = (await pg.db.pool.query<{ name: string }>('select name from kysely_migration order by name desc limit 1')).rows[0]!.name;
    await pg.db.pool.query('delete from kysely_migration where name = $1', [last]);
    const app = await gateway(pg, nats);
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(503);
    expect(res.json().checks.postgres).toMatch(new RegExp(`^1 migration not applied \\(${last}\\): run the migrations first`));
  });

  test('readyz is 200 with Postgres and NATS up, 503 without NATS; degraded (200) with the bus streams gone, naming them; it says when no relay leads', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const up = await (await gateway(pg, nats)).inject({ method: 'GET', url: '/readyz' });
    expect(up.statusCode).toBe(200);
    // No orchestrator runs in this test: the gateway still serves, and says so.
    expect(up.json()).toMatchObject({ status: 'degraded', checks: { postgres: 'ok', nats: 'ok', bus: 'ok', relay: expect.stringMatching(/no relay is leading/) } });
    await (await jetstreamManager(nats.nc)).streams.delete(names.jobsStream);
    // The bus lost with no worker up to re-create it: the gateway still takes work (recorded, it waits), and says so — it stays behind the load balancer.
    const lost = await (await gateway(pg, nats)).inject({ method: 'GET', url: '/readyz' });
    expect(lost.statusCode).toBe(200);
    expect(lost.json()).toMatchObject({ status: 'degraded', checks: { bus: expect.stringMatching(new RegExp(`stream ${names.jobsStream} is missing.*\\(the workers re-create them: is one running\\?\\)$`)) } });
    // Streams another database made (another deployment on this namespace): named, with what the workers do about it.
    await ensureTopology(await jetstreamManager(nats.nc), names, { deployment: 'their-deployment' });
    const foreign = await (await testGateway(pg, nats, { deployment: 'our-deployment' })).inject({ method: 'GET', url: '/readyz' });
    expect(foreign.statusCode).toBe(200);
    expect(foreign.json().checks.bus).toBe(
      `stream ${names.eventsStream} was made for another deployment (database their-deployment); stream ${names.jobsStream} was made for another deployment (database their-deployment): another database is on this BATON_NAMESPACE (the workers refuse to start while its services run, and take the streams over once none does)`,
    );
    const noNats = await (await gateway(pg, null, { namespace: nats.namespace })).inject({ method: 'GET', url: '/readyz' });
    expect(noNats.statusCode).toBe(503);
    expect(noNats.json().checks.nats).toBe('unreachable');
    const app = await gateway(pg, nats);
    expect((await app.inject({ method: 'GET', url: '/docs/json' })).json().paths).toHaveProperty('/v1/tasks');
    const teams = (await app.inject({ method: 'GET', url: '/v1/teams' })).json();
    expect(teams.items.map((t: { id: string }) => t.id)).toEqual(['bench', 'engineering', 'research']);
    expect(teams.items[2].agents.map((a: { id: string }) => a.id)).toEqual(['researcher', 'report-writer', 'email-agent']);
    // What a person configured can be checked: the rules, each agent's turns and scope.
    expect(teams.items[0].approvals).toEqual([{ tool: 'bench_gate', require: 'when_plan_approval', onTimeout: 'reject' }]);
    expect(teams.items[2].lead).toMatchObject({ id: 'research-lead', tools: ['Task', 'ask_user'], maxTurns: expect.any(Number) });
    const page = await app.inject({ method: 'GET', url: '/' });
    expect(page.headers['content-type']).toMatch(/text\/html/);
    expect(page.body).toMatch(/<title>Baton<\/title>/);
    // The built console (packages/console): index.html names its content-hashed assets, served with their types.
    expect(page.body).toContain('<div id="root"></div>');
    expect(page.headers['cache-control']).toBe('no-cache');
    const script = /<script type="module" crossorigin src="(\/assets\/[^"]+\.js)"/.exec(page.body)?.[1];
    const asset = await app.inject({ method: 'GET', url: script ?? '/assets/missing.js' });
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['content-type']).toMatch(/javascript/);
    expect(asset.headers['cache-control']).toMatch(/immutable/);
    expect((await app.inject({ method: 'GET', url: '/nothing-here' })).json().error.code).toBe('not_found');
    await app.inject({ method: 'GET', url: '/v1/tasks' });
    expect((await app.inject({ method: 'GET', url: '/metrics' })).body).toMatch(/baton_http_requests_total\{method="GET",route="\/v1\/tasks",status="200"\} 1/);
  });
});

describe('SSE', () => {
  test('reconnecting with Last-Event-ID: every event once, no gap, no duplicate; the stream ends after the final event', async ({ pg, nats }) => {
    const { names, relay, app, base, id } = await liveGateway(pg, nats);
    try {
      // Produce events while the client reads: start, 30 model turns, completion. Like the
      // services' writers, each commit sends its wake-ups (the steps' live tick; the relay carries the rest).
      const write = async (...args: Parameters<typeof handleCommand>): Promise<void> => publishWakeUps(nats.nc, names, (await handleCommand(...args)).events);
      const produce = (async () => {
        await write(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'bench-lead', configVersion: 'v' });
        for (let turn = 1; turn <= 30; turn++) {
          await write(pg.store, id, (s) => {
            if (s.lead?.phase === 'tools') return { type: 'RecordToolResults', agentId: 'lead', results: [{ toolUseId: `t${turn - 1}`, toolName: 'bench_step', content: 'ok', isError: false }] };
            return null;
          });
          await write(pg.store, id, {
            type: 'RecordModelTurn', agentId: 'lead', turn, model: 'm', stopReason: turn < 30 ? 'tool_use' : 'end_turn',
            content: turn < 30 ? [{ type: 'tool_use', id: `t${turn}`, name: 'bench_step', input: { step: turn } }] : [{ type: 'text', text: 'done' }],
            usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 }, offline: true, durationMs: 0,
          });
        }
        await write(pg.store, id, { type: 'CompleteTask', summary: 'done', reportPath: null });
      })();

      const seen: number[] = [];
      const types: string[] = [];
      let lastId: string | undefined;
      let connections = 0;
      for (;;) {
        connections++;
        const ctrl = new AbortController();
        const res = await fetch(`${base}/v1/tasks/${id}/events`, { headers: { accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) }, signal: ctrl.signal });
        expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
        let buf = '';
        let ended = true;
        try {
          read: for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
            buf += Buffer.from(chunk).toString();
            let i: number;
            while ((i = buf.indexOf('\n\n')) >= 0) {
              const frame = buf.slice(0, i);
              buf = buf.slice(i + 2);
              const idLine = /^id: (\d+)$/m.exec(frame);
              const data = /^data: (.*)$/m.exec(frame);
              if (!idLine || !data) continue;
              lastId = idLine[1];
              const ev = JSON.parse(data[1] as string);
              seen.push(ev.position);
              types.push(ev.type);
              // Drop the connection every 7 events, discarding whatever else was already buffered
              // (as a real disconnect would): those events must come again after Last-Event-ID.
              if (seen.length % 7 === 0) {
                ended = false;
                ctrl.abort();
                break read;
              }
            }
          }
        } catch (err) {
          if (!ctrl.signal.aborted) throw err;
        }
        if (ended) break;
      }
      await produce;
      const all = (await pg.store.readTask(id)).map((e) => Number(e.position));
      expect(connections).toBeGreaterThan(3);
      expect(seen).toEqual(all); // every event, in order, exactly once
      expect(types[types.length - 1]).toBe('TaskCompleted');

      // Reconnecting with the final event's id: the stream ends at once with nothing new, saying so (`end`: a client stops there).
      const again = await fetch(`${base}/v1/tasks/${id}/events`, { headers: { accept: 'text/event-stream', 'last-event-id': String(all[all.length - 1]) }, signal: AbortSignal.timeout(10_000) });
      const rest = await again.text();
      expect(rest).not.toMatch(/^id:/m);
      expect(rest).toMatch(/^event: end\ndata: \{"reason":"final"\}$/m);
    } finally {
      // Also when an expectation fails: a relay left running holds a pool client, and the fixtures would wait for it.
      await relay.stop();
      await app.close();
    }
  });

  test('a wake-up that comes while the new rows are still hidden (an older transaction is open) is not lost: the stream looks again', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    const app = await gateway(pg, nats); // the safety poll is 15 s: only the stream's own retry can deliver in time
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', team: 'bench' } })).json().id as string;
    const ctrl = new AbortController();
    const res = await fetch(`${base}/v1/tasks/${id}/events`, { headers: { accept: 'text/event-stream' }, signal: ctrl.signal });
    const types: string[] = [];
    const reading = (async () => {
      let buf = '';
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buf += Buffer.from(chunk).toString();
        for (const m of buf.matchAll(/^event: (\w+)$/gm)) if (!types.includes(m[1] as string)) types.push(m[1] as string);
      }
    })().catch(() => {});
    await waitFor(async () => types.includes('TaskSubmitted'), { what: 'the first event' });
    // An older transaction holds the horizon while a writer commits a step and sends its tick.
    const blocker = testClient(pg.url);
    await blocker.connect();
    await blocker.query('begin');
    await blocker.query('select pg_current_xact_id()');
    const w = await handleCommand(pg.store, id, [
      { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'bench-lead', configVersion: 'v' },
      { type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', content: [{ type: 'text', text: 'hi' }], stopReason: 'end_turn', usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 }, offline: true, durationMs: 0 },
    ]);
    publishWakeUps(nats.nc, names, w.events);
    // The stream woke and read while the rows were hidden…
    await waitFor(async () => /^baton_sse_hidden_reads_total [1-9]/m.test((await app.inject({ method: 'GET', url: '/metrics' })).body), { what: 'a read that found hidden rows' });
    expect(types).not.toContain('ModelTurnRecorded');
    // …and once the older transaction ends, it delivers them without another wake-up.
    await blocker.query('commit');
    await blocker.end();
    await waitFor(async () => types.includes('ModelTurnRecorded'), { what: 'the step, without another wake-up', timeoutMs: 5000 });
    ctrl.abort();
    await reading;
    await app.close();
  });

  test('steps=false: only transitions, in SSE and in the JSON list; a stream of transitions is not woken by steps; a bad value is a 400 naming it; ?type=A,B: only those types in the JSON list', async ({ pg, nats }) => {
    const { names, relay, app, base, id } = await liveGateway(pg, nats);
    try {
      const res = await fetch(`${base}/v1/tasks/${id}/events?steps=false`, { headers: { accept: 'text/event-stream' } });
      const text = (async () => {
        let buf = '';
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) buf += Buffer.from(chunk).toString();
        return buf;
      })();
      const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
      const write = async (...args: Parameters<typeof handleCommand>): Promise<void> => publishWakeUps(nats.nc, names, (await handleCommand(...args)).events);
      await write(pg.store, id, [
        { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'bench-lead', configVersion: 'v' },
        { type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', content: [{ type: 'text', text: 'done' }], stopReason: 'end_turn', usage, offline: true, durationMs: 0 },
      ]);
      await write(pg.store, id, { type: 'CompleteTask', summary: 'done', reportPath: null });
      const types = [...(await text).matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
      expect(types).toEqual(['TaskSubmitted', 'TaskStarted', 'TaskCompleted', 'end']); // the stream ended after the final event, saying so
      const page = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?steps=false` })).json() as { items: { type: string }[] };
      expect(page.items.map((e) => e.type)).toEqual(['TaskSubmitted', 'TaskStarted', 'TaskCompleted']);
      expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events` })).json().items).toHaveLength(4);
      const bad = await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?steps=maybe` });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().error.message).toMatch(/steps/);
      // ?type=A,B: only those types (with steps=false, never a step); an unknown type is named; a stream refuses it.
      const only = async (q: string) => ((await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?${q}` })).json() as { items: { type: string }[] }).items.map((e) => e.type);
      expect(await only('type=TaskCompleted,ModelTurnRecorded')).toEqual(['ModelTurnRecorded', 'TaskCompleted']);
      expect(await only('type=TaskCompleted,ModelTurnRecorded&steps=false')).toEqual(['TaskCompleted']);
      const contradiction = await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?type=ModelTurnRecorded&steps=false` });
      expect([contradiction.statusCode, contradiction.json().error.message]).toEqual([400, 'query.type: ModelTurnRecorded is a step, which steps=false leaves out: ask for it without steps=false']);
      expect(await only('type=%20TaskSubmitted%20,,TaskSubmitted')).toEqual(['TaskSubmitted']);
      expect(await only('type=ApprovalRequested')).toEqual([]);
      const paged = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?type=TaskStarted,TaskCompleted&limit=1` })).json() as { items: { type: string; position: number }[]; next: number | null };
      expect([paged.items.map((e) => e.type), paged.next]).toEqual([['TaskStarted'], paged.items[0]!.position]);
      expect(await only(`type=TaskStarted,TaskCompleted&after=${paged.next}`)).toEqual(['TaskCompleted']);
      const unknown = await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?type=TaskCompleted,TaskDone` });
      expect([unknown.statusCode, unknown.json().error.message]).toEqual([400, expect.stringMatching(/^query\.type: unknown event type 'TaskDone'; known: TaskSubmitted, /)]);
      expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?type=,` })).json().error.message).toBe('query.type: name at least one event type (comma-separated)');
      const streamed = await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?type=TaskCompleted`, headers: { accept: 'text/event-stream' } });
      expect([streamed.statusCode, streamed.json().error.message]).toEqual([400, 'query.type: filters the JSON list only; a stream takes steps=false (transitions only)']);
    } finally {
      // Also when an expectation fails: a relay left running holds a pool client, and the fixtures would wait for it.
      await relay.stop();
      await app.close();
    }
  });

  test('a stream of transitions reads Postgres once: a relayed event that continues it is shown as it came, the same bytes a read shows; one the relay cannot link (a new leader\'s first) is read; a task submitted here needs no visibility query', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    let reads = 0;
    let visibilityQueries = 0;
    const store = new Proxy(pg.store, {
      get(target, prop) {
        const v = Reflect.get(target, prop, target) as unknown;
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => ((prop === 'readTaskAfter' && reads++), (v as (...a: unknown[]) => unknown).apply(target, args));
      },
    });
    const kysely = new Proxy(pg.db.kysely, {
      get(target, prop) {
        const v = Reflect.get(target, prop, target) as unknown;
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => ((prop === 'selectFrom' && args[0] === 'tasks' && visibilityQueries++), (v as (...a: unknown[]) => unknown).apply(target, args));
      },
    });
    let relay = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log });
    relay.start();
    const app = await gateway({ db: { pool: pg.db.pool, kysely }, store }, nats, { sseHeartbeatMs: 60_000 });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x' } })).json().id as string;
    const stream = await openStream(`${base}/v1/tasks/${id}/events?steps=false`);
    try {
      await waitFor(() => /^event: TaskSubmitted$/m.test(stream.text), { what: 'TaskSubmitted on the stream' });
      expect(visibilityQueries).toBe(0);
      // Once (more only if the cluster's horizon hid TaskSubmitted for a while: other tests' open
      // transactions); from here on nothing of the task is hidden, so the stream reads only when woken.
      const opened = reads;
      await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' });
      await waitFor(() => /^event: TaskStarted$/m.test(stream.text), { timeoutMs: 10_000, what: 'TaskStarted on the stream (the backstop poll is 60 s away)' });
      expect(reads).toBe(opened); // shown as the relay sent it
      // A message linked to where the stream stands but carrying another task's event: not shown, read instead.
      const [started] = (await pg.db.pool.query<{ tx: string; gp: string }>(`select transaction_id::text as tx, global_position::text as gp from events where task_id = $1 and type = 'TaskStarted'`, [id])).rows;
      const stray = { id: randomUUID(), type: 'TaskCompleted', taskId: randomUUID(), streamId: 'task-x', version: 3, position: Number(started?.gp) + 1000, recordedAt: new Date().toISOString(), data: { summary: 's', reportPath: null }, metadata: {} };
      const h = headers();
      h.set(RELAYED_CURSOR_HEADER, `${started?.tx}:${stray.position}`);
      h.set(RELAYED_PREV_HEADER, `${started?.tx}:${started?.gp}`);
      nats.nc.publish(names.signalSubject(id, 'TaskCompleted'), JSON.stringify(stray), { headers: h });
      await waitFor(() => reads === opened + 1, { what: 'the stream reading instead' });
      // A new relay vouches for nothing before its own tail: its first event of the task is read.
      await relay.stop();
      await leadTurnAsksApproval(pg, id, 'r1');
      relay = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log });
      relay.start();
      await waitFor(() => /^event: ApprovalRequested$/m.test(stream.text), { timeoutMs: 10_000, what: 'ApprovalRequested on the stream' });
      expect(reads).toBe(opened + 2);
      await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
      await stream.ended; // after the final event
      expect(reads).toBe(opened + 2);
      expect([...stream.text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1])).toEqual(['TaskSubmitted', 'TaskStarted', 'ApprovalRequested', 'TaskCancelled', 'end']);
      // What a stream read from Postgres alone shows, byte for byte.
      const again = await openStream(`${base}/v1/tasks/${id}/events?steps=false`);
      await again.ended;
      expect(stream.text).toBe(again.text);
      expect(visibilityQueries).toBe(0); // its tenant known since it was submitted here
    } finally {
      stream.stop(); // a failed expectation leaves nothing behind that would hold the fixtures
      await relay.stop();
      await app.close();
    }
  });

  test('a stream that shows steps is not handed a relayed event: its link says nothing of the steps before it, which the stream reads', async ({ pg, nats }) => {
    const { relay, app, base, id } = await liveGateway(pg, nats);
    const stream = await openStream(`${base}/v1/tasks/${id}/events`);
    try {
      await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' });
      await waitFor(() => /^event: TaskStarted$/m.test(stream.text), { timeoutMs: 10_000, what: 'TaskStarted on the stream' });
      // A step with no live tick (written here, not by a service), then a transition linked to TaskStarted.
      await leadTurnAsksApproval(pg, id, 'r1');
      await waitFor(() => /^event: ApprovalRequested$/m.test(stream.text), { timeoutMs: 10_000, what: 'ApprovalRequested on the stream' });
      expect([...stream.text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1])).toEqual(['TaskSubmitted', 'TaskStarted', 'ModelTurnRecorded', 'ApprovalRequested']);
    } finally {
      stream.stop();
      await relay.stop();
      await app.close();
    }
  });

  /** An SSE stream read in the background: what came so far, its end, and a way to stop it. */
  async function openStream(url: string) {
    const ctrl = new AbortController();
    const res = await fetch(url, { headers: { accept: 'text/event-stream' }, signal: ctrl.signal });
    const stream = { text: '', ended: Promise.resolve(), stop: () => ctrl.abort() };
    stream.ended = (async () => {
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) stream.text += Buffer.from(chunk).toString();
      } catch (err) {
        if (!ctrl.signal.aborted) throw err;
      }
    })();
    return stream;
  }

  /**
   * The store a stream reads through: its final-event checks counted (`finalChecks`), and every
   * call of `method` held open (`entered` once the first arrives) until `release()`.
   */
  function heldStore(store: PgFixture['store'], method: 'readTaskAfter' | 'finalEventSent') {
    let enter!: () => void;
    const entered = new Promise<void>((r) => (enter = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const held = {
      finalChecks: 0,
      entered,
      release: () => release(),
      store: new Proxy(store, {
        get(target, prop) {
          const v = Reflect.get(target, prop, target) as unknown;
          if (typeof v !== 'function') return v;
          if (prop !== method && prop !== 'finalEventSent') return v.bind(target);
          return async (...args: unknown[]) => {
            if (prop === 'finalEventSent') held.finalChecks++;
            if (prop === method) {
              enter();
              await gate;
            }
            return (v as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      }),
    };
    return held;
  }

  test('a wake-up that arrives while the stream is busy between reads (its first look for a final event) is not lost: the event comes at once, not at the backstop poll', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    const held = heldStore(pg.store, 'finalEventSent');
    const app = await gateway({ db: pg.db, store: held.store }, nats, { sseHeartbeatMs: 60_000 });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', team: 'bench' } })).json().id as string;
    const [submitted] = await pg.store.readTask(id);
    // Resumed after TaskSubmitted: it finds nothing new, so it looks whether the final event is behind it.
    const stream = await openStream(`http://127.0.0.1:${(app.server.address() as { port: number }).port}/v1/tasks/${id}/events?after=${submitted?.position}`);
    await held.entered; // the stream has read past TaskSubmitted and is in its final-event check
    await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'bench-lead', configVersion: 'v' });
    nats.nc.publish(names.eventSubject(id, 'TaskStarted')); // the relay's message: wakes the stream
    await nats.nc.flush(); // delivered to the hub (same connection) while the check is still held
    held.release();
    await waitFor(() => /^event: TaskStarted$/m.test(stream.text), { timeoutMs: 10_000, what: 'TaskStarted on the stream (the backstop poll is 60 s away)' });
    expect(stream.text).not.toMatch(/^event: TaskSubmitted$/m);
    stream.stop();
    await stream.ended;
    await app.close();
  });

  test('a stream opened with the task id in capitals is woken by the task\'s messages (the bus spells ids in lowercase)', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    const app = await gateway(pg, nats, { sseHeartbeatMs: 60_000 });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', team: 'bench' } })).json().id as string;
    const stream = await openStream(`http://127.0.0.1:${(app.server.address() as { port: number }).port}/v1/tasks/${id.toUpperCase()}/events`);
    await waitFor(() => /^event: TaskSubmitted$/m.test(stream.text), { what: 'TaskSubmitted on the stream' });
    await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'bench-lead', configVersion: 'v' });
    nats.nc.publish(names.eventSubject(id, 'TaskStarted')); // the relay's message
    await waitFor(() => /^event: TaskStarted$/m.test(stream.text), { timeoutMs: 10_000, what: 'TaskStarted on the stream (the backstop poll is 60 s away)' });
    stream.stop();
    await stream.ended;
    await app.close();
  });

  test('a stream read from the start makes no final-event check (its reads would show the final event); one resumed after it ends at once', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    const held = heldStore(pg.store, 'finalEventSent');
    held.release();
    const app = await gateway({ db: pg.db, store: held.store }, nats, { sseHeartbeatMs: 60_000 });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', team: 'bench' } })).json().id as string;
    const stream = await openStream(`${base}/v1/tasks/${id}/events`);
    await waitFor(() => /^event: TaskSubmitted$/m.test(stream.text), { what: 'TaskSubmitted on the stream' });
    // Woken twice more (a transition, then the final event): it went round its loop each time.
    await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'bench-lead', configVersion: 'v' });
    nats.nc.publish(names.eventSubject(id, 'TaskStarted'));
    await waitFor(() => /^event: TaskStarted$/m.test(stream.text), { timeoutMs: 10_000, what: 'TaskStarted on the stream' });
    const done = await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    nats.nc.publish(names.eventSubject(id, 'TaskCancelled'));
    await stream.ended; // the stream ended after the final event
    expect(stream.text).toMatch(/^event: TaskCancelled$/m);
    expect(held.finalChecks).toBe(0);
    // Resumed after the final event: nothing more to read, and the check ends the stream.
    const after = await fetch(`${base}/v1/tasks/${id}/events?after=${done.events.find((e) => e.type === 'TaskCancelled')?.position}`, { headers: { accept: 'text/event-stream' } });
    expect((await after.text()).match(/^event: \w+$/gm)).toEqual(['event: end']); // no event, and the end
    expect(held.finalChecks).toBe(1);
    await app.close();
  });

  test('a read\'s events go out in one socket write: a finished task\'s stream is one write per read that found events (the first with the head, the last with the end), whatever the number of events', async ({ pg, nats }) => {
    // Reads that found events: usually one, more when another transaction in the cluster hid the
    // later rows for a moment. The head goes out with the first read, whatever it found: when
    // that one was hidden and empty, it is a write of its own.
    let reads = 0;
    let first = true;
    const store = new Proxy(pg.store, {
      get(target, prop) {
        const v = Reflect.get(target, prop, target) as unknown;
        if (typeof v !== 'function') return v;
        if (prop !== 'readTaskAfter') return v.bind(target);
        return async (...args: Parameters<PgFixture['store']['readTaskAfter']>) => {
          const read = await target.readTaskAfter(...args);
          if (read.events.length > 0 || first) reads++;
          first = false;
          return read;
        };
      },
    });
    const app = await gateway({ db: pg.db, store }, nats, { sseHeartbeatMs: 60_000 });
    let writes = 0;
    app.server.on('connection', (socket: Socket) => {
      // What the socket hands the kernel: one call per system call (a corked socket's chunks go in one `_writev`).
      const write = socket._write.bind(socket);
      const writev = socket._writev?.bind(socket);
      socket._write = (...a: Parameters<Socket['_write']>) => { writes++; write(...a); };
      if (writev) socket._writev = (...a: Parameters<NonNullable<Socket['_writev']>>) => { writes++; writev(...a); };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', team: 'bench' } })).json().id as string;
    await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'bench-lead', configVersion: 'v' });
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    const res = await fetch(`${base}/v1/tasks/${id}/events`, { headers: { accept: 'text/event-stream' } });
    const text = await res.text();
    expect(text.match(/^event: \w+$/gm)).toEqual(['event: TaskSubmitted', 'event: TaskStarted', 'event: TaskCancelled', 'event: end']);
    expect(reads).toBeGreaterThanOrEqual(1);
    expect(writes).toBe(reads);
    await app.close();
  });

  test('a stream closed while it reads ends there: no final-event check after the read, and its slot is freed', async ({ pg, nats }) => {
    const held = heldStore(pg.store, 'readTaskAfter');
    const app = await gateway({ db: pg.db, store: held.store }, nats, { sseHeartbeatMs: 60_000 });
    // The request's own 'close', heard before the route's listener (this hook runs first); a
    // microtask later the route has marked its stream closed.
    let requestClosed!: () => void;
    const closedOnServer = new Promise<void>((r) => (requestClosed = r));
    app.addHook('onRequest', async (req) => {
      if (req.url.includes('/events')) req.raw.on('close', () => queueMicrotask(requestClosed));
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', team: 'bench' } })).json().id as string;
    const [submitted] = await pg.store.readTask(id);
    // Resumed after TaskSubmitted, its read finds nothing: were it to go on, it would look for a final event.
    const stream = await openStream(`http://127.0.0.1:${(app.server.address() as { port: number }).port}/v1/tasks/${id}/events?after=${submitted?.position}`);
    await held.entered;
    stream.stop();
    await stream.ended;
    await closedOnServer;
    held.release();
    await waitFor(async () => /^baton_sse_connections 0$/m.test((await app.inject({ method: 'GET', url: '/metrics' })).body), { what: 'the stream slot freed' });
    expect(held.finalChecks).toBe(0);
    await app.close();
  });

  test('an idle stream sends comment heartbeats', async ({ pg, nats }) => {
    const app = await gateway(pg, nats, { sseHeartbeatMs: 50 });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x' } })).json().id;
    const ctrl = new AbortController();
    const timeout = setTimeout(() => ctrl.abort(), 15_000);
    const res = await fetch(`http://127.0.0.1:${(app.server.address() as { port: number }).port}/v1/tasks/${id}/events`, { headers: { accept: 'text/event-stream' }, signal: ctrl.signal });
    let text = '';
    const done = () => /^event: TaskSubmitted$/m.test(text) && (text.match(/^: heartbeat$/gm) ?? []).length >= 2;
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        text += Buffer.from(chunk).toString();
        if (done()) break;
      }
    } catch (err) {
      if (!ctrl.signal.aborted) throw err;
    } finally {
      clearTimeout(timeout);
      ctrl.abort();
    }
    expect(text).toMatch(/^id: \d+\nevent: TaskSubmitted\n/m);
    expect((text.match(/^: heartbeat$/gm) ?? []).length).toBeGreaterThanOrEqual(2);
    await app.close();
  });

  test('JSON event list pages with after=', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x' } })).json().id;
    await app.inject({ method: 'POST', url: `/v1/tasks/${id}/cancel` });
    const all = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events` })).json().items;
    expect(all.map((e: { type: string }) => e.type)).toEqual(['TaskSubmitted', 'TaskCancelled']);
    expect(all[0]).toMatchObject({ taskId: id, streamId: `task-${id}`, version: 1, data: { prompt: 'x' } });
    const after = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?after=${all[0].position}` })).json().items;
    expect(after.map((e: { type: string }) => e.type)).toEqual(['TaskCancelled']);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events?after=999999` })).statusCode).toBe(400);
    await waitFor(() => true);
  });
});

describe('faults', () => {
  stackTest('Postgres unreachable: writes answer 503 and record nothing; /readyz is 503; the gateway stays up', async ({ pg, nats }) => {
    const { createDb } = await import('@baton/db');
    const { EventStore } = await import('@baton/event-store');
    const dead = createDb('postgres://postgres@127.0.0.1:1/nowhere', { max: 1 });
    const names = busNames(nats.namespace);
    const app = await buildApp({
      pool: dead.pool, kysely: dead.kysely, store: new EventStore(dead.pool), load: new TaskCache(dead.pool).load, names, nats: () => nats.nc, hub: new SseHub(names, log), tenants: new TaskTenants(),
      teams: builtinTeams, defaultTeam: 'research', catalog: new TeamCatalog(builtinTeams), teamsRecorded: () => dead.pool.query('select 1').then(() => {}), apiKeys: fixedApiKeys(new Map()), log, metrics: createGatewayMetrics(), now: () => new Date(), newId: randomUUID, sseHeartbeatMs: 15_000, bodyLimit: 65_536,
      examplesDir: path.join(tmpdir(), 'baton-no-examples'), workspaceLimits: DEFAULT_WORKSPACE_LIMITS, limits: DEFAULT_LIMITS, allowPrivateWebhooks: false, bulk: limiter(1),
    });
    const post = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x' } });
    expect(post.statusCode).toBe(503);
    expect(post.json().error).toEqual({ code: 'unavailable', message: expect.stringMatching(/nothing was recorded/) });
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json().checks.postgres).toMatch(/unreachable/);
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    await app.close();
    await dead.close();
    expect((await pg.db.pool.query('select count(*)::int as n from events')).rows[0].n).toBe(0);
  });
});

describe('human in the loop over HTTP', () => {
  const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
  /** A task whose lead asked a question (clr-1) and whose delegation waits for approval (apr-1). */
  async function waitingTask(app: FastifyInstance, pg: PgFixture): Promise<string> {
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'AI stuff', approvalTimeoutSeconds: 60 } })).json().id as string;
    await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' });
    await handleCommand(pg.store, id, {
      type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', usage, offline: true, durationMs: 0,
      content: [{ type: 'tool_use', id: 'tu-ask', name: 'ask_user', input: { questions: ['What?'] } }, { type: 'tool_use', id: 'tu-plan', name: 'Task', input: { agent: 'researcher', prompt: 'p' } }],
    });
    await handleCommand(pg.store, id, { type: 'RequestClarification', requestId: 'clr-1', agentId: 'lead', toolUseId: 'tu-ask', questions: ['What?'], context: 'vague', deadline: new Date(Date.now() - 1000).toISOString() });
    await handleCommand(pg.store, id, { type: 'RequestApproval', requestId: 'apr-1', agentId: 'lead', toolUseId: 'tu-plan', toolName: 'Task', input: { agent: 'researcher', prompt: 'p' }, inputDigest: 'd', plan: 'plan', deadline: new Date(Date.now() + 60_000).toISOString(), onTimeout: 'reject' });
    return id;
  }

  test("an edited file tool's input is checked against the path rules the run applies to the agent that asked (its file scope; out of the workspace): refused now, the request still open — before, recorded and failing in the sandbox", async ({ pg, nats }) => {
    const research = builtinTeams.research as TeamDefinition;
    const writer = research.agents['report-writer'] as NonNullable<TeamDefinition['agents'][string]>;
    const team: TeamDefinition = { ...research, agents: { ...research.agents, 'report-writer': { ...writer, fileScope: { allowed: ['report.md'], blocked: ['secrets/**'] } } } };
    await saveTeamConfigs(pg.db.pool, [{ version: configVersion(team), teamId: 'research', definition: team }]);
    const app = await gateway(pg, nats, { teams: { ...builtinTeams, research: team } });
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'AI stuff', requirePlanApproval: false } })).json().id as string;
    await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: configVersion(team) });
    await handleCommand(pg.store, id, { type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', usage, offline: true, durationMs: 0, content: [{ type: 'tool_use', id: 'tu1', name: 'Task', input: { agent: 'report-writer', prompt: 'write it' } }] });
    await handleCommand(pg.store, id, { type: 'DispatchSubagent', agentId: 'report-writer-1', agentType: 'report-writer', toolUseId: 'tu1', prompt: 'write it' });
    await handleCommand(pg.store, id, { type: 'StartSubagent', agentId: 'report-writer-1', attempt: 1, runnerId: 'r' });
    const input = { path: 'report.md', content: '# R' };
    await handleCommand(pg.store, id, { type: 'RecordModelTurn', agentId: 'report-writer-1', turn: 1, model: 'm', stopReason: 'tool_use', usage, offline: true, durationMs: 0, content: [{ type: 'tool_use', id: 'w1', name: 'write_file', input }] });
    await handleCommand(pg.store, id, { type: 'RequestApproval', requestId: 'apr-w', agentId: 'report-writer-1', toolUseId: 'w1', toolName: 'write_file', input, inputDigest: 'd', plan: 'wants write_file', deadline: new Date(Date.now() + 60_000).toISOString(), onTimeout: 'reject' });
    for (const [path, message] of [
      ['../etc/x', "body.input.path: '../etc/x' is not in the workspace (a path relative to it, without '..')"],
      ['other.md', "body.input.path: 'other.md' is outside this agent's file scope (writes allowed: report.md)"],
      ['secrets/key.md', "body.input.path: 'secrets/key.md' is outside this agent's file scope (blocked: secrets/**)"],
      ['.git/hooks/pre-commit', "body.input.path: '.git/hooks/pre-commit' is inside .git (version control's own state, not the project): no agent's file tools change it"],
    ]) {
      const refused = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-w`, payload: { decision: 'approve', input: { path, content: 'x' } } });
      expect([refused.statusCode, refused.json().error.message]).toEqual([400, message]);
    }
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}` })).json().pendingRequests.map((r: { requestId: string }) => r.requestId)).toEqual(['apr-w']); // still open
    const ok = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-w`, payload: { decision: 'approve', input: { path: './report.md', content: '# Edited' } } });
    expect(ok.statusCode).toBe(200);
  });

  test("an edited approval is checked against the configuration the run is pinned to, not the gateway's current one (an agent added since passed here and failed in the run, the approval used up)", async ({ pg, nats }) => {
    const research = builtinTeams.research as TeamDefinition;
    const researcher = research.agents.researcher as NonNullable<TeamDefinition['agents'][string]>;
    // The run's configuration (recorded by the services that loaded it) …
    await saveTeamConfigs(pg.db.pool, [{ version: configVersion(research), teamId: 'research', definition: research }]);
    // … and this gateway's, rolled out since: a fact-checker the lead may delegate to.
    const rolled: TeamDefinition = { ...research, lead: { ...research.lead, delegatesTo: [...(research.lead.delegatesTo ?? []), 'fact-checker'] }, agents: { ...research.agents, 'fact-checker': { ...researcher, id: 'fact-checker', name: 'Fact checker' } } };
    const app = await gateway(pg, nats, { teams: { ...builtinTeams, research: rolled } });
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'AI stuff', approvalTimeoutSeconds: 60 } })).json().id as string;
    await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: configVersion(research) });
    await handleCommand(pg.store, id, { type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', usage, offline: true, durationMs: 0, content: [{ type: 'tool_use', id: 'tu-plan', name: 'Task', input: { agent: 'researcher', prompt: 'p' } }] });
    await handleCommand(pg.store, id, { type: 'RequestApproval', requestId: 'apr-1', agentId: 'lead', toolUseId: 'tu-plan', toolName: 'Task', input: { agent: 'researcher', prompt: 'p' }, inputDigest: 'd', plan: 'plan', deadline: new Date(Date.now() + 60_000).toISOString(), onTimeout: 'reject' });
    const refused = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-1`, payload: { decision: 'approve', input: { agent: 'fact-checker', prompt: 'check it' } } });
    expect([refused.statusCode, refused.json().error.message]).toEqual([400, expect.stringMatching(/^body\.input\.agent: unknown agent 'fact-checker'/)]);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}` })).json().pendingRequests.map((r: { requestId: string }) => r.requestId)).toEqual(['apr-1']); // still open
    const ok = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-1`, payload: { decision: 'approve', input: { agent: 'researcher', prompt: 'narrower' } } });
    expect(ok.statusCode).toBe(200);
    // The task records the configuration it was accepted with, recorded before it was accepted: its lead starts on it, wherever it runs.
    const submitted = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}/events` })).json().items[0];
    expect(submitted.data.configVersion).toBe(configVersion(rolled));
    expect((await pg.db.pool.query('select team_id from team_configs where version = $1', [configVersion(rolled)])).rows).toEqual([{ team_id: 'research' }]);
  });

  test('artifacts: listed from the log, downloaded with their media type; unknown or unrecorded paths are 404; a fork carries them', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const id = await waitingTask(app, pg);
    const stored = await storeArtifact(pg.db.pool, { taskId: id, path: 'out/report.md', agentId: null, content: Buffer.from('# Report\n') });
    await handleCommand(pg.store, id, { type: 'StoreArtifact', agentId: null, path: stored.path, bytes: stored.bytes, sha256: stored.sha256, mediaType: stored.mediaType });
    await storeArtifact(pg.db.pool, { taskId: id, path: 'unrecorded.txt', agentId: null, content: Buffer.from('not in the log') });
    const list = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}/artifacts` })).json();
    expect(list).toEqual({ items: [{ path: 'out/report.md', bytes: 9, sha256: stored.sha256, mediaType: 'text/markdown; charset=utf-8', agentId: null }] });
    const file = await app.inject({ method: 'GET', url: `/v1/tasks/${id}/artifacts/out/report.md` });
    expect(file.statusCode).toBe(200);
    expect(file.headers['content-type']).toBe('text/markdown; charset=utf-8');
    expect(file.headers.etag).toBe(`"${stored.sha256}"`);
    expect(file.body).toBe('# Report\n');
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}/artifacts/nope.md` })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}/artifacts/unrecorded.txt` })).statusCode).toBe(404); // the log decides what exists
    // A name stored decomposed (a Mac's `café`) is found when asked composed, and the other way round (it was a 404).
    const nfd = await storeArtifact(pg.db.pool, { taskId: id, path: 'notes/cafe\u0301.md', agentId: null, content: Buffer.from('menu\n') });
    await handleCommand(pg.store, id, { type: 'StoreArtifact', agentId: null, path: nfd.path, bytes: nfd.bytes, sha256: nfd.sha256, mediaType: nfd.mediaType });
    for (const asked of ['notes/caf\u00e9.md', 'notes/cafe\u0301.md']) expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}/artifacts/${encodeURIComponent(asked).replace('%2F', '/')}` })).body, asked).toBe('menu\n');
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${randomUUID()}/artifacts` })).statusCode).toBe(404);
    const version = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}` })).json().version as number;
    const fork = (await app.inject({ method: 'POST', url: `/v1/tasks/${id}/fork`, payload: { atVersion: version } })).json();
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${fork.id}/artifacts/out/report.md` })).body).toBe('# Report\n');
  });

  test('two gateway replicas decide one request at once: exactly one decision is recorded, the other gets 409 naming it', async ({ pg, nats }) => {
    const a = await gateway(pg, nats);
    const b = await gateway(pg, nats);
    const id = await waitingTask(a, pg);
    const [r1, r2] = await Promise.all([
      a.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-1`, payload: { decision: 'approve' } }),
      b.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-1`, payload: { decision: 'reject', reason: 'no' } }),
    ]);
    const codes = [r1.statusCode, r2.statusCode].sort();
    expect(codes).toEqual([200, 409]);
    const loser = r1.statusCode === 409 ? r1 : r2;
    expect(loser.json().error).toMatchObject({ code: 'request_already_decided', message: expect.stringMatching(/already decided: (approved|rejected: no)/) });
    const events = (await a.inject({ method: 'GET', url: `/v1/tasks/${id}/events` })).json().items as { type: string }[];
    expect(events.filter((e) => e.type === 'ApprovalGranted' || e.type === 'ApprovalRejected')).toHaveLength(1);
  });

  test('verify: identical when the code decides as recorded; the first divergence otherwise; 404 for another tenant', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const run = async (requestId: string) => (await leadAsksApproval(pg, app, requestId)).id;
    const same = await app.inject({ method: 'POST', url: `/v1/tasks/${await run('apr-lead-tu1')}/verify` });
    expect(same.statusCode).toBe(200);
    // Its pinned configuration ('v') was never recorded: checked with the current one, and said so.
    const current = configVersion(builtinTeams.research!);
    expect(same.json()).toEqual({ identical: true, checked: 2, events: 4, ended: false, config: { version: current, pinnedVersion: 'v', note: "the run's configuration (v) is not recorded here: checked with the current one" } });
    const other = (await app.inject({ method: 'POST', url: `/v1/tasks/${await run('apr-1')}/verify` })).json();
    expect(other).toMatchObject({ identical: false, checked: 2, at: { type: 'ApprovalRequested', version: 4 }, recorded: expect.stringMatching(/^ApprovalRequested apr-1:/), decided: [expect.stringMatching(/^ApprovalRequested apr-lead-tu1: lead asks to call Task/)] });
    expect((await app.inject({ method: 'POST', url: `/v1/tasks/00000000-0000-4000-8000-000000000000/verify` })).statusCode).toBe(404);

    // A run made under a configuration since changed (its delegations needed no approval then), recorded
    // as the services record theirs: checked with its own, it is identical (the code did not change);
    // with the current one, the change of configuration shows.
    const then: TeamDefinition = { ...builtinTeams.research!, approvals: [{ tool: 'Task', require: 'never', onTimeout: 'reject' }] };
    await saveTeamConfigs(pg.db.pool, [{ version: configVersion(then), teamId: 'research', definition: then }]);
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x' } })).json().id as string;
    await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: configVersion(then) });
    await handleCommand(pg.store, id, { type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', content: [{ type: 'tool_use', id: 'tu1', name: 'Task', input: { agent: 'researcher', prompt: 'p' } }], stopReason: 'tool_use', usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 }, offline: true, durationMs: 0 });
    await handleCommand(pg.store, id, { type: 'DispatchSubagent', agentId: 'researcher-1', agentType: 'researcher', toolUseId: 'tu1', prompt: 'p' });
    const own = (await app.inject({ method: 'POST', url: `/v1/tasks/${id}/verify` })).json();
    expect(own).toMatchObject({ identical: true, config: { version: configVersion(then), pinnedVersion: configVersion(then) } });
    expect(own.config.note).toBeUndefined();
    const now = (await app.inject({ method: 'POST', url: `/v1/tasks/${id}/verify?config=current` })).json();
    expect(now).toMatchObject({ identical: false, at: { type: 'SubagentDispatched' }, decided: [expect.stringMatching(/^ApprovalRequested apr-lead-tu1/)], config: { version: current, pinnedVersion: configVersion(then) } });
    expect((await app.inject({ method: 'POST', url: `/v1/tasks/${id}/verify?config=then` })).json().error.message).toMatch(/^query\.config: must be 'pinned' or 'current'/);
  });

  test('answers: each request on its own; an empty answer is 400; twice is 409; a final task is 409', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const id = await waitingTask(app, pg);
    const view = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}` })).json();
    expect(view.status).toBe('awaiting_input');
    expect(view.pendingRequests).toEqual([
      expect.objectContaining({ kind: 'clarification', requestId: 'clr-1', toolUseId: 'tu-ask', questions: ['What?'], context: 'vague', openedAt: expect.any(String) }),
      expect.objectContaining({ kind: 'approval', requestId: 'apr-1', toolName: 'Task', inputDigest: 'd', onTimeout: 'reject', deadline: expect.any(String) }),
    ]);
    const empty = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/answers/clr-1`, payload: { answers: ['  '] } });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().error.message).toMatch(/body\.answers/);
    for (const answers of [5, [1], null, Array(51).fill('a')]) {
      const res = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/answers/clr-1`, payload: { answers } });
      expect(res.json().error.message, JSON.stringify(answers)).toBe('body.answers: must be an answer (a string of 1–20000 characters) or a list of 1–50 of them, one per question');
    }
    const tooMany = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/answers/clr-1`, payload: { answers: ['a', 'b'] } });
    expect(tooMany.statusCode).toBe(422);
    expect(tooMany.json().error.message).toMatch(/asks 1 question: give one answer per question, in order, or one answer for all \(2 were given\)/);
    const ok = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/answers/clr-1`, payload: { answers: 'LLM evaluation' } });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().pendingRequests.map((r: { requestId: string }) => r.requestId)).toEqual(['apr-1']); // the other request is untouched
    const twice = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/answers/clr-1`, payload: { answers: 'again' } });
    expect(twice.statusCode).toBe(409);
    expect(twice.json().error.message).toMatch(/already decided: answered/);
    const asApproval = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/answers/apr-1`, payload: { answers: 'x' } });
    expect(asApproval.statusCode).toBe(422);
    expect((await app.inject({ method: 'POST', url: `/v1/tasks/${id}/cancel`, payload: { reason: 'done here' } })).json()).toMatchObject({ status: 'cancelled', pendingRequests: [] });
    const afterCancel = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/approvals/apr-1`, payload: { decision: 'approve' } });
    expect(afterCancel.statusCode).toBe(409);
    expect(afterCancel.json().error.message).toMatch(/closed: task cancelled/);
  });

  test('fork at a version: a new task with the history up to there (open requests get a fresh deadline), answered differently; the source is untouched', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const id = await waitingTask(app, pg);
    await app.inject({ method: 'POST', url: `/v1/tasks/${id}/answers/clr-1`, payload: { answers: 'first answer' } });
    const source = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}` })).json();
    const forkAt = source.version - 1; // just before the answer
    const res = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/fork`, payload: { atVersion: forkAt } });
    expect(res.statusCode).toBe(201);
    const fork = res.json();
    expect(fork).toMatchObject({ status: 'awaiting_input', version: forkAt, forkedFrom: { taskId: id, atVersion: forkAt }, prompt: 'AI stuff' });
    expect(fork.id).not.toBe(id);
    const clr = fork.pendingRequests.find((r: { requestId: string }) => r.requestId === 'clr-1');
    expect(Date.parse(clr.deadline)).toBeGreaterThan(Date.now()); // it had passed on the source
    const answered = await app.inject({ method: 'POST', url: `/v1/tasks/${fork.id}/answers/clr-1`, payload: { answers: 'a different answer' } });
    expect(answered.statusCode).toBe(200);
    const forkEventsList = (await app.inject({ method: 'GET', url: `/v1/tasks/${fork.id}/events` })).json().items as { streamId: string; version: number; type: string; data: { answers?: string[] } }[];
    expect(forkEventsList.map((e) => e.version)).toEqual(forkEventsList.map((_, i) => i + 1));
    expect(forkEventsList.every((e) => e.streamId === `task-${fork.id}`)).toBe(true);
    expect(forkEventsList.at(-1)).toMatchObject({ type: 'ClarificationAnswered', data: { answers: ['a different answer'] } });
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}` })).json()).toMatchObject({ version: source.version, status: source.status });
    const list = (await app.inject({ method: 'GET', url: '/v1/tasks?status=awaiting_input' })).json().items.map((t: { id: string }) => t.id);
    expect(list).toContain(fork.id);

    expect((await app.inject({ method: 'POST', url: `/v1/tasks/${id}/fork`, payload: { atVersion: 99 } })).json().error.message).toMatch(/body\.atVersion: the task is at version/);
    expect((await app.inject({ method: 'POST', url: `/v1/tasks/${id}/fork`, payload: { atVersion: 0 } })).statusCode).toBe(400);
    expect((await app.inject({ method: 'POST', url: `/v1/tasks/${randomUUID()}/fork`, payload: { atVersion: 1 } })).statusCode).toBe(404);
    await app.inject({ method: 'POST', url: `/v1/tasks/${id}/cancel` });
    const ended = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}` })).json().version as number;
    const atEnd = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/fork`, payload: { atVersion: ended } });
    expect(atEnd.statusCode).toBe(422);
    expect(atEnd.json().error).toMatchObject({ code: 'invalid_version', message: `body.atVersion: version ${ended} is the end of the task; fork at a version up to ${ended - 1}` });
  });

  test('a fork starts between commits: a version recorded in one commit with the next is refused naming where it can start (a fork of the fork too)', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'AI stuff' } })).json().id as string;
    // Versions 2 and 3 in one commit (the lead's start and its first turn, as the offline model records them).
    await handleCommand(pg.store, id, [
      { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' },
      { type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', usage, offline: true, durationMs: 0, content: [{ type: 'tool_use', id: 'tu-ask', name: 'ask_user', input: { questions: ['What?'] } }] },
    ]);
    await handleCommand(pg.store, id, { type: 'RequestClarification', requestId: 'clr-1', agentId: 'lead', toolUseId: 'tu-ask', questions: ['What?'], context: 'vague', deadline: new Date(Date.now() + 60_000).toISOString() });
    const mid = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/fork`, payload: { atVersion: 2 } });
    expect([mid.statusCode, mid.json().error.code, mid.json().error.message]).toEqual([422, 'invalid_version', 'body.atVersion: version 2 was recorded in one commit with the version after it: a fork starts between commits; fork at 1 or 3']);
    const fork = await app.inject({ method: 'POST', url: `/v1/tasks/${id}/fork`, payload: { atVersion: 4 } });
    expect(fork.statusCode).toBe(201);
    // The fork's copy was written in one statement, but keeps its source's commits.
    const again = await app.inject({ method: 'POST', url: `/v1/tasks/${fork.json().id}/fork`, payload: { atVersion: 2 } });
    expect([again.statusCode, again.json().error.message]).toEqual([422, 'body.atVersion: version 2 was recorded in one commit with the version after it: a fork starts between commits; fork at 1 or 3']);
    expect((await app.inject({ method: 'POST', url: `/v1/tasks/${fork.json().id}/fork`, payload: { atVersion: 3 } })).statusCode).toBe(201);
  });

  test('two forks with one Idempotency-Key at once: one fork is made; the other request is the same fork replayed, or a 422 if it asked for another version (never a fork at a version it did not ask for)', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const id = await waitingTask(app, pg);
    const stored = await storeArtifact(pg.db.pool, { taskId: id, path: 'late.md', agentId: null, content: Buffer.from('after version 2') });
    await handleCommand(pg.store, id, { type: 'StoreArtifact', agentId: null, path: stored.path, bytes: stored.bytes, sha256: stored.sha256, mediaType: stored.mediaType });
    const version = (await app.inject({ method: 'GET', url: `/v1/tasks/${id}` })).json().version as number;
    for (let round = 0; round < 3; round++) {
      const fork = (atVersion: number) => app.inject({ method: 'POST', url: `/v1/tasks/${id}/fork`, headers: { 'idempotency-key': `race-${round}` }, payload: { atVersion } });
      const [early, late] = await Promise.all([fork(2), fork(version)]);
      const made = [early, late].find((r) => r.statusCode === 201)!;
      const refused = [early, late].find((r) => r.statusCode !== 201)!;
      expect(refused).toBeDefined();
      expect([refused.statusCode, refused.json().error.code]).toEqual([422, 'idempotency_key_reused']);
      const asked = made === early ? 2 : version;
      expect(made.json().forkedFrom).toEqual({ taskId: id, atVersion: asked });
      // Only the files of the fork that was made (the refused request copied none into it).
      const rows = (await pg.db.pool.query(`select path from artifacts where task_id = $1`, [made.json().id])).rows.map((r) => r.path);
      expect(rows).toEqual(asked === 2 ? [] : ['late.md']);
    }
  });

  test('a fork with an Idempotency-Key, retried: the same fork (idempotent-replayed); the key for another fork is a 422', async ({ pg, nats }) => {
    const app = await gateway(pg, nats);
    const id = await waitingTask(app, pg);
    const fork = (atVersion: number, key = 'fork-key-1') => app.inject({ method: 'POST', url: `/v1/tasks/${id}/fork`, headers: { 'idempotency-key': key }, payload: { atVersion } });
    const first = await fork(2);
    expect(first.statusCode).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await fork(2);
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json().id).toBe(first.json().id);
    const other = await fork(1);
    expect(other.statusCode).toBe(422);
    expect(other.json().error).toMatchObject({ code: 'idempotency_key_reused', message: `this Idempotency-Key was already used for another fork (of task ${id} at version 2)` });
    expect((await fork(1, 'fork-key-2')).json().id).not.toBe(first.json().id);
    const forks = (await app.inject({ method: 'GET', url: '/v1/tasks?limit=50' })).json().items.filter((t: { forkedFrom: { taskId: string } | null }) => t.forkedFrom?.taskId === id);
    expect(forks).toHaveLength(2);
  });
});
