import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { toAgentViews, toEventView, toTaskView } from '@baton/api';
import { fold, recordAs } from '@baton/domain';
import { recordDelivery } from '@baton/storage';
import { stackTest } from '@baton/testing';
import { describe, expect } from 'vitest';
import { renderApiReference, type OpenApiDocument, type ResponseShape } from './api-reference.ts';
import { testGateway } from './test-gateway.ts';

const DOC = path.resolve(import.meta.dirname, '../../../docs/api.md');
/** Real runs recorded from the four services (verify's corpus): the answers' shapes are read off them. */
const RUNS = path.resolve(import.meta.dirname, '../../../packages/agents/src/fixtures/runs');

type Recorded = Parameters<typeof recordAs>[0] & { taskId: string; streamId: string; version: number; position: number; recordedAt: string };
const runs = readdirSync(RUNS)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => (JSON.parse(readFileSync(path.join(RUNS, f), 'utf8')) as Recorded[]).map((e) => recordAs(e, { taskId: e.taskId, streamId: e.streamId, version: e.version, position: BigInt(e.position), recordedAt: new Date(e.recordedAt) })));

describe('docs/api.md', () => {
  stackTest('is the reference generated from the OpenAPI document the gateway serves (UPDATE_API_DOCS=1 writes it)', async ({ pg, nats }) => {
    const app = await testGateway(pg, nats);
    const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json() as OpenApiDocument;
    // The answers' shapes: tasks, agents and events of the recorded runs, as the gateway makes them;
    // the pages and a delivery as this gateway answers them.
    // (Each run at every request it opened, and at its end.)
    const states = runs.flatMap((events) => [...events.flatMap((e, i) => (/Requested$|BudgetExceeded/.test(e.type) ? [fold(events.slice(0, i + 1))] : [])), fold(events)]);
    const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', team: 'bench' } })).json().id as string;
    const fork = (await app.inject({ method: 'POST', url: `/v1/tasks/${id}/fork`, payload: { atVersion: 1 } })).json() as unknown;
    await recordDelivery(pg.db.pool, { taskId: id, eventId: randomUUID(), webhookId: `msg_${randomUUID()}`, type: 'task.running', url: 'https://hooks.example.com/x', attempt: 1, statusCode: 500, ok: false, error: 'HTTP 500', durationMs: 12 });
    // One that never got an answer (no status), and one delivered (no error).
    await recordDelivery(pg.db.pool, { taskId: id, eventId: randomUUID(), webhookId: `msg_${randomUUID()}`, type: 'task.running', url: 'https://hooks.example.com/x', attempt: 1, statusCode: null, ok: false, error: 'fetch failed: connect ECONNREFUSED', durationMs: 3 });
    await recordDelivery(pg.db.pool, { taskId: id, eventId: randomUUID(), webhookId: `msg_${randomUUID()}`, type: 'task.completed', url: 'https://hooks.example.com/x', attempt: 1, statusCode: 204, ok: true, error: null, durationMs: 9 });
    const get = async (url: string) => (await app.inject({ method: 'GET', url })).json() as unknown;
    const shapes: ResponseShape[] = [
      { title: 'A task — `GET /v1/tasks/:id`, `/state?at=N`, and the answer of a submit, fork, decision or cancel', samples: [...states.map(toTaskView), fork] },
      { title: 'An agent — `GET /v1/tasks/:id/agents` (`{ items }`), `/agents/:agentId`', samples: states.flatMap(toAgentViews) },
      { title: 'An event — the items of `GET /v1/tasks/:id/events`, the data of its SSE frames', samples: runs.flat().map(toEventView) },
      { title: 'A page of the task list — `GET /v1/tasks` (its items are also the task-list stream\'s `event: task` data)', samples: [await get('/v1/tasks?limit=1'), await get('/v1/tasks')] },
      { title: 'A page of events — `GET /v1/tasks/:id/events`', samples: [await get(`/v1/tasks/${id}/events?limit=1`), await get(`/v1/tasks/${id}/events`)] },
      { title: 'A delivery attempt — `GET /v1/tasks/:id/deliveries` (`{ items }`)', samples: ((await get(`/v1/tasks/${id}/deliveries`)) as { items: unknown[] }).items },
    ];
    const rendered = renderApiReference(doc, shapes);
    if (process.env.UPDATE_API_DOCS === '1') writeFileSync(DOC, rendered);
    expect(rendered).toMatch(/### `POST \/v1\/tasks`/);
    expect(rendered).toMatch(/\| `body.prompt` \| string \| yes \|/);
    // What a client needs that the routes' tables do not say: the key's header, the pages' cursors, the answers' fields.
    expect(rendered).toMatch(/`Authorization: Bearer <api key>`/);
    expect(rendered).toMatch(/\| `nextCursor` \| string \\\| null \|/);
    expect(rendered).toMatch(/\| `statusCode` \| number \\\| null \|/);
    expect(rendered).toMatch(/\| `pendingRequests\[\]\.requestId` \| string \|/);
    expect(rendered).toMatch(/\| `plan\.subtasks\[\]\.fileLocks` \| array \|/);
    expect(rendered).toMatch(/\| `streamId` \| string \|/);
    expect((doc as { security?: unknown }).security).toEqual([{ bearer: [] }]);
    // Each route's success status as it answers it (not 200 for all).
    const answered = (method: string, route: string) => Object.keys((doc.paths as Record<string, Record<string, { responses?: object }>>)[route]?.[method]?.responses ?? {});
    expect(answered('post', '/v1/tasks')).toEqual(['201']);
    expect(answered('post', '/v1/tasks/{id}/fork')).toEqual(['201']);
    expect(answered('post', '/v1/chats/{id}/task')).toEqual(['201']);
    expect(answered('post', '/v1/webhooks')).toEqual(['201']);
    expect(answered('delete', '/v1/webhooks/{webhookId}')).toEqual(['204']);
    expect(answered('post', '/v1/tasks/{id}/deliveries/{deliveryId}/redeliver')).toEqual(['202']);
    expect(answered('get', '/v1/tasks/{id}')).toEqual(['200']);
    expect(readFileSync(DOC, 'utf8'), 'docs/api.md is out of date: run UPDATE_API_DOCS=1 pnpm exec vitest run services/gateway/src/api-reference.int.test.ts').toBe(rendered);
  });
});
