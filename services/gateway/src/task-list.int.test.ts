import { randomUUID } from 'node:crypto';
import { busNames, ensureTopology, Relay } from '@baton/bus';
import { handleCommand } from '@baton/event-store';
import { silentLogger } from '@baton/runtime';
import { stackTest as test, waitFor, type NatsFixture, type PgFixture } from '@baton/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import type { FastifyInstance } from 'fastify';
import { describe, expect } from 'vitest';
import type { GatewayLimits } from './deps.ts';
import { testGateway } from './test-gateway.ts';

const log = silentLogger();
const apiKeys = new Map([
  ['key-acme', 'acme'],
  ['key-globex', 'globex'],
]);
const as = (key: string) => ({ authorization: `Bearer ${key}` });

interface Summary {
  id: string;
  status: string;
  team: string;
  version: number;
}

/** A live task-list stream: its frames as they come (`ready` first, then `task` with a summary each). */
async function follow(base: string, key: string, query = '') {
  const ctrl = new AbortController();
  const res = await fetch(`${base}/v1/tasks${query}`, { headers: { accept: 'text/event-stream', ...as(key) }, signal: ctrl.signal });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
  const frames: { event: string; data: unknown }[] = [];
  let heartbeats = 0;
  const reading = (async () => {
    let buf = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += Buffer.from(chunk).toString();
      let i: number;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (frame === ': heartbeat') heartbeats++;
        const event = /^event: (.*)$/m.exec(frame)?.[1];
        const data = /^data: (.*)$/m.exec(frame)?.[1];
        if (event && data) frames.push({ event, data: JSON.parse(data) });
      }
    }
  })().catch(() => {});
  await waitFor(() => frames.some((f) => f.event === 'ready'), { what: 'the stream to be ready' });
  const tasks = (): Summary[] => frames.filter((f) => f.event === 'task').map((f) => f.data as Summary);
  return {
    frames,
    tasks,
    heartbeats: () => heartbeats,
    /** Summaries shown of one task, in order. */
    of: (id: string): Summary[] => tasks().filter((t) => t.id === id),
    close: async () => {
      ctrl.abort();
      await reading;
    },
  };
}

async function live(pg: PgFixture, nats: NatsFixture, o: { relay?: boolean; sseHeartbeatMs?: number; limits?: Partial<GatewayLimits> } = {}) {
  const names = busNames(nats.namespace);
  await ensureTopology(await jetstreamManager(nats.nc), names);
  const relay = o.relay === false ? null : new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log });
  relay?.start();
  const app = await testGateway(pg, nats, { apiKeys, ...(o.sseHeartbeatMs ? { sseHeartbeatMs: o.sseHeartbeatMs } : {}), ...(o.limits ? { limits: o.limits } : {}) });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  // A second gateway (another replica): the tasks submitted there are unknown to the first one's TaskTenants.
  const replica = await testGateway(pg, nats, { apiKeys });
  return { app, replica, base, names, stop: async () => (await relay?.stop(), await app.close(), await replica.close()) };
}

const submit = async (app: FastifyInstance, key: string, team: string): Promise<string> => {
  const res = await app.inject({ method: 'POST', url: '/v1/tasks', headers: as(key), payload: { prompt: `a ${team} task`, team } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().id as string;
};

describe('GET /v1/tasks as a stream (Accept: text/event-stream)', () => {
  test("a tenant's stream shows each change of its tasks once, newest version only, as the list's summary; another tenant's tasks never", async ({ pg, nats }) => {
    // A sweep only every four minutes: what shows within the waits below came by its wake-up.
    const { app, replica, base, stop } = await live(pg, nats, { sseHeartbeatMs: 60_000 });
    const soon = { timeoutMs: 10_000 };
    try {
      const acme = await follow(base, 'key-acme');
      const mine = await submit(app, 'key-acme', 'bench');
      const theirs = await submit(replica, 'key-globex', 'bench'); // its tenant unknown here: the read's `where` keeps it out
      await waitFor(() => acme.of(mine).length >= 1, { what: 'the submitted task on the stream', ...soon });
      const listed = (await app.inject({ method: 'GET', url: '/v1/tasks', headers: as('key-acme') })).json().items;
      expect(acme.of(mine)[0]).toEqual(listed.find((t: Summary) => t.id === mine)); // the JSON list's summary, field for field
      await handleCommand(pg.store, mine, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'bench-lead', configVersion: 'v' });
      await handleCommand(pg.store, theirs, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'bench-lead', configVersion: 'v' });
      await waitFor(() => acme.of(mine).at(-1)?.status === 'running', { what: 'the start on the stream', ...soon });
      await handleCommand(pg.store, mine, { type: 'CancelTask', reason: 'enough', requestedBy: 'test' });
      await waitFor(() => acme.of(mine).at(-1)?.status === 'cancelled', { what: 'the cancellation on the stream', ...soon });
      // Each version at most once, in order (changes that come together may show as their newest only).
      const versions = acme.of(mine).map((t) => t.version);
      expect(versions).toEqual([...new Set(versions)].sort((a, b) => a - b));
      expect(acme.of(mine).map((t) => t.status)).toEqual(['pending', 'running', 'cancelled']);
      // The other tenant's task moved as often (woke this stream, read nothing of it).
      const globex = await follow(base, 'key-globex');
      await handleCommand(pg.store, theirs, { type: 'CancelTask', reason: 'enough', requestedBy: 'test' });
      await waitFor(() => globex.of(theirs).at(-1)?.status === 'cancelled', { what: "globex's cancellation on its stream", ...soon });
      expect(acme.tasks().map((t) => t.id)).not.toContain(theirs);
      expect(globex.of(mine)).toEqual([]);
      await acme.close();
      await globex.close();
    } finally {
      await stop();
    }
  });

  test('?team= shows only that team\'s tasks; a page, a time or a status with a stream is a 400 naming each; the JSON list is unchanged', async ({ pg, nats }) => {
    const { app, base, stop } = await live(pg, nats);
    try {
      const bench = await follow(base, 'key-acme', '?team=bench');
      const research = await submit(app, 'key-acme', 'research');
      const b = await submit(app, 'key-acme', 'bench');
      await waitFor(() => bench.of(b).length >= 1, { what: 'the bench task' });
      // The research task was submitted first: had the stream shown it, it would be there by now.
      expect(bench.of(research)).toEqual([]);
      await bench.close();

      const refused = await fetch(`${base}/v1/tasks?status=running&cursor=x&updatedAfter=2026-11-26T00:00:00Z&stuck=true&search=x&forkedFrom=${b}&limit=5`, { headers: { accept: 'text/event-stream', ...as('key-acme') } });
      expect(refused.status).toBe(400);
      const body = (await refused.json()) as { error: { message: string; details: { field: string }[] } };
      expect(body.error.details.map((x) => x.field)).toEqual(['query.status', 'query.cursor', 'query.updatedAfter', 'query.stuck', 'query.search', 'query.forkedFrom', 'query.limit']);
      expect(body.error.message).toMatch(/query\.status: not with Accept: text\/event-stream/);
      const json = await app.inject({ method: 'GET', url: '/v1/tasks?status=pending&team=bench', headers: as('key-acme') });
      expect(json.json().items.map((t: Summary) => t.id)).toEqual([b]);
    } finally {
      await stop();
    }
  });

  test("a change whose wake-up never comes (no relay) is found by the sweep, however often other tasks' wake-ups come; a list stream takes a stream slot like any", async ({ pg, nats }) => {
    const { app, base, names, stop } = await live(pg, nats, { relay: false, sseHeartbeatMs: 200, limits: { ssePerTenant: 1 } });
    // Other tasks' transitions, more often than the sweep's interval: they wake the stream, and must not put its sweep off.
    const others = setInterval(() => nats.nc.publish(names.signalSubject(randomUUID(), 'TaskStarted')), 20);
    try {
      const acme = await follow(base, 'key-acme');
      const id = await submit(app, 'key-acme', 'bench'); // no relay: no transition of it on the bus, ever
      await waitFor(() => acme.of(id).length === 1, { what: 'the sweep to find the new task' });
      await handleCommand(pg.store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'bench-lead', configVersion: 'v' });
      await waitFor(() => acme.of(id).at(-1)?.status === 'running', { what: 'the sweep to find the change' });
      // Sweeps look back over what they showed: nothing twice.
      const shown = acme.of(id).length;
      const beats = acme.heartbeats();
      await waitFor(() => acme.heartbeats() >= beats + 12, { what: 'twelve more heartbeats (a sweep every fourth)' });
      expect(acme.of(id)).toHaveLength(shown);
      // The tenant's one stream slot is taken: a second stream (of the list or of a task) is a 429.
      const second = await fetch(`${base}/v1/tasks`, { headers: { accept: 'text/event-stream', ...as('key-acme') } });
      expect(second.status).toBe(429);
      expect(second.headers.get('retry-after')).toBe('5');
      await acme.close();
      await waitFor(async () => (await fetch(`${base}/v1/tasks/${id}/events`, { headers: { accept: 'text/event-stream', ...as('key-acme') }, signal: AbortSignal.timeout(500) }).then((r) => (void r.body?.cancel(), r.status)).catch(() => 0)) === 200, { what: 'the slot to be free again' });
    } finally {
      clearInterval(others);
      await stop();
    }
  });
});
