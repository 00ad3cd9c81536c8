import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TaskView } from '@baton/api';
import { deleteNamespace, newNamespace, waitFor } from '@baton/testing';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { BatonClient } from '@baton/client';
import { launch, prepareDatabase, type Launched } from './launcher.ts';
import { dropDatabase, freePort, freshDatabase, waitReady } from './procs.ts';

/**
 * Runners are competing consumers: two runner processes share the subagent jobs, and when one
 * is killed (SIGKILL) in the middle of a job, the other takes the job over from the last
 * recorded turn and every task still completes with its report.
 */
describe('two runner processes', () => {
  const launched: Launched[] = [];
  let dbUrl = '';
  let workspaces = '';
  const namespace = newNamespace();
  afterAll(async () => {
    for (const l of launched) await l.stop('SIGTERM');
    await deleteNamespace(inject('natsUrl'), namespace);
    if (workspaces) await rm(workspaces, { recursive: true, force: true });
    if (dbUrl) await dropDatabase(dbUrl);
  });

  it('share the jobs; killing one mid-job still completes every task', async () => {
    dbUrl = await freshDatabase(inject('databaseUrl'), `baton_t_${inject('runId')}_run${randomBytes(3).toString('hex')}`);
    await prepareDatabase(dbUrl, () => {});
    workspaces = await mkdtemp(path.join(tmpdir(), 'baton-runners-'));
    const port = await freePort();
    // A short ack wait, so the dead runner's job comes back quickly; a slow model, so jobs overlap.
    const env = { ...process.env, DATABASE_URL: dbUrl, NATS_URL: inject('natsUrl'), BATON_NAMESPACE: namespace, PORT: String(port), LOG_LEVEL: 'warn', JOBS_ACK_WAIT_MS: '3000', EVENTS_ACK_WAIT_MS: '3000', OFFLINE_MODEL_LATENCY_MS: '1000', RUNNER_CONCURRENCY: '2' };
    const quiet = { write: () => {}, color: false };
    launched.push(launch({ ...quiet, env, services: ['gateway', 'orchestrator', 'notifier'] }));
    const runnerA = launch({ ...quiet, env: { ...env, RUNNER_ID: 'runner-a', WORKSPACE_ROOT: path.join(workspaces, 'a') }, services: ['sandbox-runner'] });
    const runnerB = launch({ ...quiet, env: { ...env, RUNNER_ID: 'runner-b', WORKSPACE_ROOT: path.join(workspaces, 'b') }, services: ['sandbox-runner'] });
    launched.push(runnerA, runnerB);
    const api = new BatonClient(`http://127.0.0.1:${port}`);
    await waitReady(api);
    const db = new pg.Pool({ connectionString: dbUrl, max: 2 });
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
