import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import type { TaskView } from '@baton/api';
import { deleteNamespace, newNamespace, testPool, waitFor } from '@baton/testing';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { BatonClient } from '@baton/client';
import { launch, prepareDatabase, type Launched } from './launcher.ts';
import { dropDatabase, freePort, freshDatabase, waitReady } from './procs.ts';

/**
 * What each test here has of its own: a migrated database, a NATS namespace, a directory for
 * workspaces and a gateway port, all removed after it with the processes it launched
 * (`stopWith`: SIGTERM, or SIGKILL where runners never finish their jobs).
 */
function ownStack(tag: string, stopWith: NodeJS.Signals) {
  const launched: Launched[] = [];
  const namespace = newNamespace();
  let dbUrl = '';
  let workspaces = '';
  afterAll(async () => {
    for (const l of launched) await l.stop(stopWith);
    await deleteNamespace(inject('natsUrl'), namespace);
    if (workspaces) await rm(workspaces, { recursive: true, force: true });
    if (dbUrl) await dropDatabase(dbUrl);
  });
  return {
    launched,
    /** The environment every process of the test shares. */
    async start(): Promise<{ env: NodeJS.ProcessEnv; port: number; dbUrl: string; workspaces: string }> {
      dbUrl = await freshDatabase(inject('databaseUrl'), `baton_t_${inject('runId')}_${tag}${randomBytes(3).toString('hex')}`);
      await prepareDatabase(dbUrl, () => {});
      workspaces = await mkdtemp(path.join(tmpdir(), `baton-${tag}-`));
      const port = await freePort();
      return { env: { ...process.env, DATABASE_URL: dbUrl, NATS_URL: inject('natsUrl'), BATON_NAMESPACE: namespace, PORT: String(port), LOG_LEVEL: 'warn' }, port, dbUrl, workspaces };
    },
  };
}

/**
 * Runners are competing consumers: two runner processes share the subagent jobs, and when one
 * is killed (SIGKILL) in the middle of a job, the other takes the job over from the last
 * recorded turn and every task still completes with its report.
 */
describe('two runner processes', () => {
  const stack = ownStack('run', 'SIGTERM');
  const launched = stack.launched;

  it('share the jobs; killing one mid-job still completes every task', async () => {
    const { env: base, port, dbUrl, workspaces } = await stack.start();
    // A short ack wait, so the dead runner's job comes back quickly; a slow model, so jobs overlap.
    const env = { ...base, JOBS_ACK_WAIT_MS: '3000', EVENTS_ACK_WAIT_MS: '3000', OFFLINE_MODEL_LATENCY_MS: '1000', RUNNER_CONCURRENCY: '2' };
    const quiet = { write: () => {}, color: false };
    launched.push(launch({ ...quiet, env, services: ['gateway', 'orchestrator', 'notifier'] }));
    const runnerA = launch({ ...quiet, env: { ...env, RUNNER_ID: 'runner-a', WORKSPACE_ROOT: path.join(workspaces, 'a') }, services: ['sandbox-runner'] });
    const runnerB = launch({ ...quiet, env: { ...env, RUNNER_ID: 'runner-b', WORKSPACE_ROOT: path.join(workspaces, 'b') }, services: ['sandbox-runner'] });
    launched.push(runnerA, runnerB);
    const api = new BatonClient(`http://127.0.0.1:${port}`);
    await waitReady(api);
    const db = testPool(dbUrl);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) ids.push((await api.request<TaskView>('POST', '/v1/tasks', { prompt: `Compare event sourcing and CRUD, variant ${i}`, requirePlanApproval: false })).id);
      // Wait until runner A is in the middle of a job (it started an agent that has not finished), then kill it.
      // (Each model turn takes a second, so a job seen unfinished is still unfinished when the kill lands.)
      const unfinishedOfA = async () =>
        (await db.query(`select s.task_id, s.data->>'agentId' as agent from events s where s.type = 'SubagentStarted' and s.data->>'runnerId' = 'runner-a' and s.stream_id like 'task-%'
                           and not exists (select 1 from events c where c.task_id = s.task_id and c.type in ('SubagentCompleted', 'SubagentFailed') and c.data->>'agentId' = s.data->>'agentId')`)).rows as { task_id: string; agent: string }[];
      await waitFor(async () => (await unfinishedOfA()).length > 0, { timeoutMs: 30_000, what: 'runner A to be in the middle of a job' });
      runnerA.children.get('sandbox-runner')?.kill('SIGKILL');
      await runnerA.exited;
      const orphans = await unfinishedOfA(); // fixed now: runner A is dead
      expect(orphans.length).toBeGreaterThan(0);

      await waitFor(async () => {
        for (const id of ids) if ((await api.request<TaskView>('GET', `/v1/tasks/${id}`)).status !== 'completed') return false;
        return true;
      }, { timeoutMs: 90_000, what: 'every task to complete' });

      const starts = (await db.query(`select task_id, data->>'agentId' as agent, data->>'runnerId' as runner, (data->>'attempt')::int as attempt from events where type = 'SubagentStarted' and stream_id like 'task-%'`)).rows;
      // Both runners took jobs.
      expect(new Set(starts.map((s) => s.runner))).toEqual(new Set(['runner-a', 'runner-b']));
      // Every job runner A died in was taken over by runner B with a newer attempt.
      for (const o of orphans) {
        expect(starts.some((s) => s.task_id === o.task_id && s.agent === o.agent && s.runner === 'runner-b' && s.attempt > 1), `${o.task_id}/${o.agent} taken over`).toBe(true);
      }
      for (const id of ids) {
        const t = await api.request<TaskView>('GET', `/v1/tasks/${id}`);
        expect(t.agents.every((a) => a.status === 'completed')).toBe(true);
        expect(t.result?.reportPath).toBe('report.md');
        expect(await api.artifact(id, 'report.md')).toMatch(/# Report/);
      }
    } finally {
      await db.end();
    }
  });
});

/**
 * A runner that dies and is restarted on its host (the supervisor, a container restart) hands its
 * predecessor's agents back at once: they are running again within the watchdog's interval, not
 * after the lease's TTL (here ten minutes, far beyond this test). And an agent whose runner dies
 * every time, before the agent records anything, is not started forever: after
 * WATCHDOG_MAX_STALLED_ATTEMPTS such attempts it fails visibly (`agent_lost`), and its lead goes on.
 */
describe('a runner restarted after a crash', () => {
  const stack = ownStack('rst', 'SIGKILL');
  const launched = stack.launched;

  it("hands its predecessor's agents back at once; an agent lost three times in a row without a turn fails", async () => {
    const { env: base, port, dbUrl, workspaces } = await stack.start();
    const env = {
      ...base,
      // Neither the lease nor the job's ack wait runs out during the test: only the hand-back can bring the agent back.
      LEASE_TTL_MS: '600000',
      JOBS_ACK_WAIT_MS: '600000',
      WATCHDOG_INTERVAL_MS: '200',
      WATCHDOG_GRACE_MS: '500',
      WATCHDOG_MAX_STALLED_ATTEMPTS: '3',
      // Giving up on a job no runner has claimed yet (a runner on a loaded machine may hold a job it
      // pulled a while before it claims, and this grace looks every half second): not this test's subject.
      WATCHDOG_MAX_REDISPATCHES: '100',
      WORKSPACE_ROOT: workspaces,
    };
    const quiet = { write: () => {}, color: false };
    launched.push(launch({ ...quiet, env, services: ['gateway', 'orchestrator', 'notifier'] }));
    // The researcher's model never answers on these runners: every attempt dies before its first turn.
    const startRunner = () => {
      const l = launch({ ...quiet, env: { ...env, OFFLINE_MODEL_LATENCY_MS: '3600000' }, services: ['sandbox-runner'] });
      launched.push(l);
      return l;
    };
    const api = new BatonClient(`http://127.0.0.1:${port}`);
    await waitReady(api);
    const db = testPool(dbUrl);
    try {
      // One subject: one researcher (researcher-1).
      const id = (await api.request<TaskView>('POST', '/v1/tasks', { prompt: 'Summarise event sourcing', requirePlanApproval: false })).id;
      const claims = async () =>
        (await db.query<{ agent: string; runner: string; attempt: number }>(`select data->>'agentId' as agent, data->>'runnerId' as runner, (data->>'attempt')::int as attempt from events where task_id = $1 and type = 'SubagentStarted' and stream_id like 'task-%' order by global_position`, [id])).rows;
      const runnerIds: string[] = [];
      let runner = startRunner();
      for (let attempt = 1; attempt <= 3; attempt++) {
        const pid = runner.children.get('sandbox-runner')?.pid;
        // The default id, host-pid: the restart below finds its predecessor by a pid that is gone.
        const runnerId = `${hostname()}-${pid}`;
        await waitFor(async () => (await claims()).some((c) => c.agent === 'researcher-1' && c.attempt === attempt && c.runner === runnerId), { timeoutMs: 60_000, what: `attempt ${attempt} claimed by ${runnerId}` });
        runnerIds.push(runnerId);
        runner.children.get('sandbox-runner')?.kill('SIGKILL');
        await runner.exited;
        runner = startRunner();
      }
      const failed = await waitFor(
        async () => (await db.query<{ code: string; message: string; at: string }>(`select data->>'code' as code, data->>'message' as message, global_position as at from events where task_id = $1 and type = 'SubagentFailed' and data->>'agentId' = 'researcher-1'`, [id])).rows[0],
        { timeoutMs: 30_000, what: 'the agent to fail' },
      );
      expect(failed.code).toBe('agent_lost');
      expect(failed.message).toMatch(/lost 3 attempts in a row \(the last: attempt 3\), each ended before it recorded a turn/);
      expect(failed.message).toContain(`Last error: runner ${runnerIds[2]} stopped while running this agent`);
      // Three attempts, each by a new process, and no fourth.
      const agentId = 'researcher-1';
      expect((await claims()).filter((c) => c.agent === agentId).map((c) => c.runner)).toEqual(runnerIds);
      const t = await api.request<TaskView>('GET', `/v1/tasks/${id}`);
      expect(t.agents.find((a) => a.id === agentId)).toMatchObject({ status: 'failed' });
      // Its lead takes the failure as the tool's result and takes its next turn.
      await waitFor(async () => (await db.query(`select 1 from events where task_id = $1 and type = 'ModelTurnRecorded' and data->>'agentId' <> $2 and global_position > $3`, [id, agentId, failed.at])).rowCount, { timeoutMs: 30_000, what: 'the lead to go on' });
    } finally {
      await db.end();
    }
  }, 300_000);
});
