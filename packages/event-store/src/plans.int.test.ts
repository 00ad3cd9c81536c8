import { randomUUID } from 'node:crypto';
import { taskStreamId, type NewEvent } from '@baton/domain';
import { pgTest as test, testPool, waitFor } from '@baton/testing';
import type { Database } from '@baton/db';
import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import { describe, expect } from 'vitest';
import { appendBatch } from './append.ts';
import { listTasks } from './read-models.ts';
import { EventStore, START } from './store.ts';
import { TaskCache } from './task-cache.ts';

/**
 * The hot statements cost what the task holds, not what the log holds — whichever plan a
 * connection got. A prepared statement keeps its first generic plan for the connection's life:
 * planned while the log was empty, a plan that scans the log grows slower with every event
 * (that is what made appends and SSE reads slower round after round in the benchmark). Each
 * statement here runs through the real code on one connection with `auto_explain` reporting
 * its plan and the pages it touched, once on a log of a few events and again after 60,000 more
 * events of other tasks; and on a new connection that plans them on the grown log.
 */

const submitted = (): NewEvent => ({
  id: randomUUID(),
  type: 'TaskSubmitted',
  data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null, workspace: null, budget: null },
});
const started = (): NewEvent => ({ id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'x', configVersion: 'v' } });
const note = (n: number): NewEvent => ({ id: randomUUID(), type: 'ModelTurnRecorded', data: { agentId: 'lead', turn: n, model: 'm', content: [{ type: 'text', text: `t${n}` }], stopReason: 'end_turn', usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 }, offline: true, durationMs: 0 } });

interface Plan {
  query: string;
  text: string;
  buffers: number;
}

/** One connection that reports every statement's plan (generic, as prepared statements settle on) and the pages it touched. */
async function explainedPool(url: string): Promise<{ pool: pg.Pool; plans: Plan[] }> {
  const plans: Plan[] = [];
  const pool = testPool(url, { max: 1 });
  pool.on('connect', (c) => {
    c.on('notice', (n) => {
      const text = n.message ?? '';
      if (!text.includes('Query Text:')) return;
      const query = /Query Text:\s*([^\n]*)/.exec(text)?.[1] ?? '';
      const buffers = /Buffers: shared (?:hit=(\d+))?(?: read=(\d+))?/.exec(text); // the top node's: the statement's pages
      plans.push({ query, text, buffers: buffers ? Number(buffers[1] ?? 0) + Number(buffers[2] ?? 0) : 0 });
    });
  });
  const c = await pool.connect();
  await c.query(`load 'auto_explain'`);
  await c.query(`set auto_explain.log_min_duration = 0; set auto_explain.log_analyze = on; set auto_explain.log_buffers = on; set auto_explain.log_timing = off; set auto_explain.log_level = notice; set plan_cache_mode = force_generic_plan`);
  c.release();
  plans.length = 0;
  return { pool, plans };
}

/** What the services do on the hot path for one task, each statement once. */
async function hotPath(pool: pg.Pool, taskId: string, version: number): Promise<void> {
  const store = new EventStore(pool);
  await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: version, events: [note(version)] });
  const other = randomUUID();
  await appendBatch(pool, [
    { streamId: taskStreamId(taskId), taskId, expectedVersion: version + 1, events: [note(version + 1)] },
    { streamId: taskStreamId(other), taskId: other, expectedVersion: 0, events: [submitted()] },
  ]);
  await new TaskCache(pool).load(taskId);
  await store.readTask(taskId);
  await store.readTaskAfter(taskId, START, 100);
  await store.readTaskPage(taskId, 0n, 100);
  await store.readStream(taskStreamId(taskId));
}

const grow = (pool: pg.Pool, tasks: number, eventsEach: number): Promise<unknown> =>
  pool.query(
    `insert into events (stream_id, stream_version, task_id, event_id, type, schema_version, data, metadata)
     select 'task-' || t, v, t, gen_random_uuid(), 'ModelTurnRecorded', 1, '{}', '{}'
     from (select gen_random_uuid() as t from generate_series(1, $1::int)) a, generate_series(1, $2::int) v`,
    [tasks, eventsEach],
  );

function expectTaskSized(plans: Plan[]): void {
  expect(plans.length).toBeGreaterThanOrEqual(7);
  for (const p of plans) {
    const what = `${p.query.slice(0, 80)}…\n${p.text}`;
    expect(p.text, what).not.toMatch(/Seq Scan on events/);
    expect(p.text, what).not.toMatch(/events_tx_position_idx/); // the whole log's commit-order index: never for one task
    expect(p.buffers, what).toBeLessThan(120); // the log below is ~1,000 pages and its indexes hundreds
  }
}

describe('statement plans on a growing log', () => {
  test('plans made on an empty log stay task-sized as the log grows, and plans made on a big log are task-sized too', async ({ pg: { url, db } }) => {
    const taskId = randomUUID();
    const seed = new EventStore(db.pool);
    await seed.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [submitted(), started()] });

    const early = await explainedPool(url);
    await hotPath(early.pool, taskId, 2); // plans made now, on a log of a few events
    expectTaskSized(early.plans);

    await grow(db.pool, 6_000, 10);
    early.plans.length = 0;
    await hotPath(early.pool, taskId, 4); // the same plans, on a log of 60,000 more events
    expectTaskSized(early.plans);
    await early.pool.end();

    const late = await explainedPool(url);
    await hotPath(late.pool, taskId, 6); // new plans, made on the grown log
    expectTaskSized(late.plans);
    await late.pool.end();
  });
});

describe('a long task read from its start (SSE)', () => {
  test('each page costs what the page holds, not what the rest of the task holds (whether rows are still hidden is asked once, by one probe)', async ({ pg: { url, db } }) => {
    const taskId = randomUUID();
    await new EventStore(db.pool).append({ streamId: taskStreamId(taskId), taskId, expectedVersion: 0, events: [submitted(), started()] });
    await db.pool.query(
      `insert into events (stream_id, stream_version, task_id, event_id, type, schema_version, data, metadata)
       select 'task-' || $1, v, $1::uuid, gen_random_uuid(), 'ModelTurnRecorded', 1, '{}', '{}' from generate_series(3, 20002) v`,
      [taskId],
    );
    await db.pool.query('analyze events');
    // (A tail shows a commit once no older transaction runs anywhere on the server: other tests' may.)
    await waitFor(async () => (await new EventStore(db.pool).readTaskAfter(taskId, START, 500)).events.length === 500, { what: 'the task visible to a tail' });
    const explained = await explainedPool(url);
    const store = new EventStore(explained.pool);
    for (const limit of [100, 500]) {
      explained.plans.length = 0;
      const page = await store.readTaskAfter(taskId, START, limit);
      expect(page.events).toHaveLength(limit);
      const [plan] = explained.plans;
      // 500 rows of ~70 bytes are a few dozen pages; the per-row exists had walked the task's 20,000 index entries for each row returned.
      expect(plan!.buffers, plan!.text).toBeLessThan(limit === 100 ? 60 : 150);
    }
    await explained.pool.end();
  });
});

describe('the task list search on many tasks', () => {
  test("a word few of a tenant's many tasks contain is found by the trigram index, in a few pages, not by reading every task", async ({ pg: { url, db } }) => {
    // The index as the migrations made it; dropped while the tasks are loaded and built again after (faster than 200,000 inserts into it).
    const made = await db.pool.query<{ indexdef: string }>(`select indexdef from pg_indexes where indexname = 'tasks_title_trgm_idx'`);
    expect(made.rows).toHaveLength(1);
    await db.pool.query('drop index tasks_title_trgm_idx');
    await db.pool.query(
      `insert into tasks (id, tenant_id, status, team, title, created_at, updated_at, version)
       select gen_random_uuid(), 'acme', 'completed', 'research', 'Write a report on topic ' || g || ' ' || md5(g::text), now() - g * interval '1 second', now(), 5
       from generate_series(1, 200000) g`,
    );
    await db.pool.query(`update tasks set title = 'Compare zebrafish studies' where title like 'Write a report on topic 777 %'`);
    await db.pool.query(made.rows[0]!.indexdef);
    await db.pool.query('analyze tasks');
    const explained = await explainedPool(url);
    // The list's statement is unnamed (Kysely): planned each time with the search's own text, not generically.
    await explained.pool.query('set plan_cache_mode = auto');
    const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool: explained.pool }) });
    try {
      const page = await listTasks(kysely, { tenantId: 'acme', search: 'zebrafish', limit: 50 });
      expect(page.items.map((t) => t.prompt)).toEqual(['Compare zebrafish studies']);
      const plan = explained.plans.find((p) => p.query.includes('ilike'));
      expect(plan?.text).toMatch(/tasks_title_trgm_idx/);
      expect(plan?.buffers).toBeLessThan(100); // the tenant's tasks are ~4,300 pages
      // A word in every task still pages newest first, and answers the same either way.
      const common = await listTasks(kysely, { tenantId: 'acme', search: 'REPORT', limit: 3 });
      expect(common.items).toHaveLength(3);
      expect(common.items[0]!.prompt).toMatch(/^Write a report on topic 1 /);
    } finally {
      await kysely.destroy();
    }
  });
});
