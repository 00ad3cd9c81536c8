import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { builtinTeams, type ModelClient, type TeamDefinition } from '@baton/agents';
import { busNames, ensureTopology } from '@baton/bus';
import { handleCommand, loadTask, servicesCachePolicy, TaskCache } from '@baton/event-store';
import { silentLogger } from '@baton/runtime';
import { DEFAULT_LIMITS, LocalSandboxProvider } from '@baton/sandbox';
import { dispatchedTask, stackTest as test, waitFor } from '@baton/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { afterEach, beforeEach, describe, expect } from 'vitest';
import { artifactStore } from './wiring.ts';
import { startRunner } from './worker.ts';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'baton-task-ends-'));
});
afterEach(async () => rm(root, { recursive: true, force: true }));

const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
// A researcher that may run commands: its first turn runs one that would take minutes.
const research = builtinTeams.research as TeamDefinition;
const teams = { research: { ...research, agents: { ...research.agents, researcher: { ...research.agents.researcher!, tools: [...research.agents.researcher!.tools, 'run_command'] } } } };
const MARK = `${1000 + Math.floor(Math.random() * 1000)}.123`;
const sleeping = (): boolean => {
  try {
    return execFileSync('pgrep', ['-f', `sleep ${MARK}`]).toString().trim() !== '';
  } catch {
    return false;
  }
};

describe('a task that ends while its agent works', () => {
  test('cancelled: the runner aborts the agent at once, where it is — a command (killed, not run to its end), a model call (aborted) — and its job ends', async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const js = jetstream(nats.nc);
    const { pool } = pg.db;
    let calls = 0;
    let aborted = 0;
    const model: ModelClient = {
      name: 'scripted',
      complete: async (r) => {
        calls++;
        if (calls === 1) return { content: [{ type: 'tool_use', id: 'c1', name: 'run_command', input: { command: `sleep ${MARK}`, timeout_seconds: 600 } }], stopReason: 'tool_use', usage, model: 'm', offline: false };
        // The second agent's call never answers by itself.
        return new Promise((_, reject) => r.signal?.addEventListener('abort', () => (aborted++, reject(r.signal?.reason as Error)), { once: true }));
      },
    };
    const runner = await startRunner({
      store: pg.store, pool, js, nc: nats.nc, names, log: silentLogger(), runnerId: 'runner-a', now: () => new Date(), model, teams,
      sandboxes: new LocalSandboxProvider({ root, pool }), artifacts: artifactStore(pool), lease: { db: pool, ttlMs: 30_000 }, concurrency: 2, maxAttempts: 3, heartbeatMs: 200,
    });
    const cancel = async (id: string) => {
      await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'enough', requestedBy: 'ann' });
      nats.nc.publish(names.eventSubject(id, 'TaskCancelled'), '{}'); // as the relay sends it
    };
    try {
      const run = async (id: string) => {
        const dispatch = (await loadTask(pg.store, id)).events.find((e) => e.type === 'SubagentDispatched');
        await js.publish(names.jobSubject('run', id, 'researcher-1'), JSON.stringify({ kind: 'run', taskId: id, agentId: 'researcher-1', causeEventId: dispatch?.id }));
      };
      const first = await dispatchedTask(pg.store);
      await run(first);
      await waitFor(async () => sleeping(), { what: 'the command runs' });
      await cancel(first);
      await waitFor(async () => !sleeping() && runner.inFlight === 0, { what: 'the command killed and the job ended' });

      const second = await dispatchedTask(pg.store);
      await run(second);
      await waitFor(async () => calls === 2, { what: 'the model call begins' });
      await cancel(second);
      await waitFor(async () => aborted === 1 && runner.inFlight === 0, { what: 'the model call aborted and the job ended' });
      expect((await loadTask(pg.store, second)).state.agents['researcher-1']?.status).toBe('cancelled');
    } finally {
      await runner.stop();
    }
  });

  test("completed: its end, heard on the bus, drops it from the runner's cache (the runner's last load of it was while its lead still worked: it held every such task)", async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const js = jetstream(nats.nc);
    const { pool } = pg.db;
    const cache = new TaskCache(pool, servicesCachePolicy);
    const model: ModelClient = { name: 'scripted', complete: async () => ({ content: [{ type: 'text', text: 'found it' }], stopReason: 'end_turn', usage, model: 'm', offline: false }) };
    const runner = await startRunner({
      store: pg.store, load: cache.load, ended: (id) => cache.ended(id), pool, js, nc: nats.nc, names, log: silentLogger(), runnerId: 'runner-a', now: () => new Date(), model, teams,
      sandboxes: new LocalSandboxProvider({ root, pool }), artifacts: artifactStore(pool), lease: { db: pool, ttlMs: 30_000 }, concurrency: 2, maxAttempts: 3, heartbeatMs: 200,
    });
    try {
      const id = await dispatchedTask(pg.store);
      const dispatch = (await loadTask(pg.store, id)).events.find((e) => e.type === 'SubagentDispatched');
      await js.publish(names.jobSubject('run', id, 'researcher-1'), JSON.stringify({ kind: 'run', taskId: id, agentId: 'researcher-1', causeEventId: dispatch?.id }));
      await waitFor(async () => (await loadTask(pg.store, id)).state.agents['researcher-1']?.status === 'completed' && runner.inFlight === 0, { what: "the researcher's job done" });
      expect(cache.size).toBe(1); // the task goes on (its lead is next): kept
      nats.nc.publish(names.eventSubject(id, 'TaskCompleted'), '{}'); // as the relay sends the task's end
      await waitFor(() => cache.size === 0, { what: 'the finished task dropped from the cache' });
    } finally {
      await runner.stop();
    }
  });

  test("one agent failed while its task goes on (the watchdog gave it up): the relay's release job for it kills its sandbox only — it had waited for the task's end", async ({ pg, nats }) => {
    const names = busNames(nats.namespace);
    await ensureTopology(await jetstreamManager(nats.nc), names);
    const js = jetstream(nats.nc);
    const { pool } = pg.db;
    const sandboxes = new LocalSandboxProvider({ root, pool });
    const runner = await startRunner({
      store: pg.store, pool, js, nc: nats.nc, names, log: silentLogger(), runnerId: 'runner-a', now: () => new Date(), model: { name: 'unused', complete: () => Promise.reject(new Error('no model here')) }, teams,
      sandboxes, artifacts: artifactStore(pool), lease: { db: pool, ttlMs: 30_000 }, concurrency: 2, maxAttempts: 3, heartbeatMs: 200,
    });
    try {
      const id = await dispatchedTask(pg.store);
      const spec = (agentId: string) => ({ taskId: id, agentId, network: false, env: {}, limits: DEFAULT_LIMITS, attempt: 1 });
      await sandboxes.open(spec('researcher-1'));
      await sandboxes.open(spec('writer-1'));
      const failed = (await handleCommand(pg.store, id, { type: 'FailSubagent', agentId: 'researcher-1', code: 'agent_lost', message: 'gone' })).events[0]!;
      await js.publish(names.jobSubject('release', id, 'researcher-1'), JSON.stringify({ kind: 'release-agent', taskId: id, agentId: 'researcher-1', causeEventId: failed.id }));
      const state = async () => Object.fromEntries((await pool.query<{ agent_id: string; state: string }>('select agent_id, state from sandboxes where task_id = $1', [id])).rows.map((r) => [r.agent_id, r.state]));
      await waitFor(async () => (await state())['researcher-1'] === 'killed', { what: "the failed agent's sandbox killed" });
      expect((await state())['writer-1']).not.toBe('killed');
    } finally {
      await runner.stop();
    }
  });
});
