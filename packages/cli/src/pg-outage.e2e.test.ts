import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { deleteNamespace, newNamespace, privatePostgres, testClient, waitFor, withDatabase, type PrivatePostgres } from '@baton/testing';
import type pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { ApiError, BatonClient, type TaskSummary } from '@baton/client';
import { launch, prepareDatabase, SERVICES, type Launched } from './launcher.ts';
import { freePort, waitReady } from './procs.ts';

const TASKS = 40;
const OUTAGES: { mode: 'stop' | 'crash'; downMs: number }[] = [
  { mode: 'stop', downMs: 6000 }, // pg_ctl stop -m fast: sessions get FATAL 57P01, then the socket closes
  { mode: 'crash', downMs: 6000 }, // pg_ctl stop -m immediate: the server vanishes mid-statement
  { mode: 'stop', downMs: 6000 },
];

/**
 * No process dies of a lost connection: the four services run (supervised, as `baton up` runs
 * them) against a Postgres of this test's own, which is taken away three times for six seconds
 * while tasks are being submitted, planned, approved and run. Every service process must live
 * through it (no restart, the same pid), and every task must complete.
 */
describe('Postgres outages', () => {
  let server: PrivatePostgres | undefined;
  let services: Launched | undefined;
  let workspaces = '';
  const namespace = newNamespace();
  const lines: string[] = [];
  afterAll(async () => {
    await services?.stop('SIGTERM');
    await deleteNamespace(inject('natsUrl'), namespace);
    await server?.destroy();
    if (workspaces) await rm(workspaces, { recursive: true, force: true });
  });

  it(`${TASKS} research tasks submitted and approved continuously through ${OUTAGES.length} outages of Postgres: no service process exits, every task completes`, async () => {
    const t0 = Date.now();
    server = await privatePostgres();
    const dbUrl = withDatabase(server.url, 'baton');
    await prepareDatabase(dbUrl, () => {});
    workspaces = await mkdtemp(path.join(tmpdir(), 'baton-pg-outage-'));
    const port = await freePort();
    const { ANTHROPIC_API_KEY: _key, ...env } = process.env; // the offline model
    services = launch({
      env: { ...env, DATABASE_URL: dbUrl, NATS_URL: inject('natsUrl'), BATON_NAMESPACE: namespace, PORT: String(port), WORKSPACE_ROOT: workspaces, LOG_LEVEL: 'warn', PG_POOL_MAX: '8' },
      write: (l) => lines.push(l),
      color: false,
      restart: { initialMs: 200 },
    });
    const api = new BatonClient(`http://127.0.0.1:${port}`);
    await waitReady(api);
    const pids = new Map(SERVICES.map((s) => [s, services?.children.get(s)?.pid]));
    const ids: string[] = [];
    let done = false;
    let decisions = 0;
    const failures = { submit: 0, decide: 0, list: 0 };

    // Someone submitting tasks the whole time: a refused submission (503 while Postgres is away) is tried again.
    const submitter = (async () => {
      while (ids.length < TASKS && !done) {
        try {
          ids.push((await api.request<{ id: string }>('POST', '/v1/tasks', { prompt: `Research the history of consensus algorithms, part ${ids.length}`, approvalTimeoutSeconds: 3600 })).id);
        } catch {
          failures.submit++;
        }
        await sleep(300);
      }
    })();
    // A person approving whatever is open, as soon as it is seen.
    const person = (async () => {
      while (!done) {
        const listed: TaskSummary[] = [];
        try {
          for (const status of ['awaiting_input', 'running']) for await (const t of api.tasks({ status })) listed.push(t);
        } catch {
          failures.list++;
        }
        for (const { id, pendingRequests } of listed) {
          for (const r of pendingRequests) {
            try {
              await api.request('POST', `/v1/tasks/${id}/${r.kind === 'approval' ? `approvals/${r.requestId}` : `answers/${r.requestId}`}`, r.kind === 'approval' ? { decision: 'approve' } : { answers: ['both'] });
              decisions++;
            } catch (err) {
              if (!(err instanceof ApiError && (err.status === 409 || err.status === 404))) failures.decide++;
            }
          }
        }
        await sleep(100);
      }
    })();

    const pg0 = server;
    const outages: { at: number; mode: string; downMs: number; completedBefore: number }[] = [];
    const context = async (): Promise<string> =>
      `${JSON.stringify({ outages, failures, decisions })}\n${lines.filter((l) => /ERROR|FATAL|WARN|exited|supervisor/.test(l)).slice(-150).join('\n')}\n--- postgres log tail ---\n${(await readFile(pg0.logFile, 'utf8').catch(() => '')).slice(-2000)}`;
    try {
      for (const o of OUTAGES) {
        // Each outage lands while work is in flight: a few more tasks submitted since the last one.
        const want = Math.min(TASKS, ids.length + 8);
        await waitFor(() => ids.length >= want, { timeoutMs: 60_000, what: `${want} tasks submitted` });
        outages.push({ at: Date.now() - t0, mode: o.mode, downMs: o.downMs, completedBefore: await completed(dbUrl) });
        // Postgres goes away under statements in flight, not only under idle connections: a lock
        // on the tasks table holds a read of the task list (someone looking at it) mid-query, on
        // a client the gateway checked out of its pool, until then.
        const blocker = await blockTasks(dbUrl, api);
        await (o.mode === 'crash' ? pg0.crash() : pg0.stop());
        await blocker.end().catch(() => {});
        await sleep(o.downMs); // the outage itself: its length is the point, nothing to wait for
        await pg0.start();
      }
      await submitter;
      await waitFor(async () => (await completed(dbUrl)) === TASKS, { timeoutMs: 120_000, intervalMs: 500, what: `all ${TASKS} tasks to complete` }).catch(async (err: Error) => {
        throw new Error(`${err.message}: ${JSON.stringify(await taskStatuses(dbUrl))}\n${await context()}`);
      });
    } finally {
      done = true;
      await submitter;
      await person;
    }

    const why = await context();
    for (const s of SERVICES) {
      expect(services.restarts.get(s) ?? 0, `${s} restarted\n${why}`).toBe(0);
      expect(services.children.get(s)?.pid, `${s} is the same process`).toBe(pids.get(s));
      expect(services.children.get(s)?.exitCode, `${s} still running`).toBeNull();
    }
    expect(lines.filter((l) => /exited/.test(l)), why).toEqual([]);
    expect(ids).toHaveLength(TASKS);
    const statuses = await taskStatuses(dbUrl);
    expect(statuses, why).toEqual({ completed: TASKS });
    // The outages were real: submissions were refused while Postgres was away.
    expect(failures.submit + failures.list, why).toBeGreaterThan(0);
    // Messages given up on during the outages (none expected for outages this short: see docs/operations.md).
    const deadLetters = await countDeadLetters(dbUrl);
    console.log(`pg-outage: ${deadLetters} dead letters; ${TASKS} tasks, ${OUTAGES.length} outages ${JSON.stringify(outages)}, ${decisions} decisions, refused while down ${JSON.stringify(failures)}, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }, 240_000);
});

/**
 * Lock the tasks table in a transaction of our own, ask the gateway for the task list and wait
 * until its read (a kysely query, on a client checked out of the pool) waits on the lock;
 * returns the locking session.
 */
async function blockTasks(dbUrl: string, api: BatonClient): Promise<pg.Client> {
  const c = testClient(dbUrl); // it goes down with the server
  await c.connect();
  try {
    await c.query(`set lock_timeout = '10s'`);
    await c.query('begin');
    await c.query('lock table tasks in access exclusive mode');
    void api.request('GET', '/v1/tasks?status=completed&limit=5').catch(() => {}); // it fails when Postgres goes
    await waitFor(async () => {
      await c.query('select pg_stat_clear_snapshot()'); // else a transaction sees the statistics as first read
      const { rows } = await c.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity where application_name = 'baton-gateway' and wait_event_type = 'Lock' and query like 'select % from "tasks"%'`,
      );
      return (rows[0]?.n ?? 0) > 0;
    }, { timeoutMs: 20_000, intervalMs: 20, what: 'a gateway read of the tasks table to wait on the lock' });
    return c;
  } catch (err) {
    const activity = await c.query(`select application_name, state, wait_event_type, wait_event, left(query, 120) as query from pg_stat_activity where datname = current_database()`).catch(() => ({ rows: [] }));
    await c.end().catch(() => {});
    throw new Error(`${(err as Error).message}\n${activity.rows.map((r) => JSON.stringify(r)).join('\n')}`, { cause: err });
  }
}

async function countDeadLetters(dbUrl: string): Promise<number> {
  const c = testClient(dbUrl);
  await c.connect();
  try {
    return (await c.query<{ n: number }>('select count(*)::int as n from dead_letters')).rows[0]?.n ?? 0;
  } finally {
    await c.end().catch(() => {});
  }
}

async function completed(dbUrl: string): Promise<number> {
  return (await taskStatuses(dbUrl)).completed ?? 0;
}

async function taskStatuses(dbUrl: string): Promise<Record<string, number>> {
  const c = testClient(dbUrl, { connectionTimeoutMillis: 2000 }); // Postgres may go away under it: the query fails, the test polls again
  await c.connect();
  try {
    const { rows } = await c.query<{ status: string; n: number }>('select status, count(*)::int as n from tasks group by status');
    return Object.fromEntries(rows.map((r) => [r.status, r.n]));
  } finally {
    await c.end().catch(() => {});
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

