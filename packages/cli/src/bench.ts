import { randomUUID } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { taskStreamId, type NewEvent } from '@baton/domain';
import { createDb, EventStore, loadTask, TaskCache } from '@baton/event-store';
import { BatonClient } from './client.ts';
import { launch, prepareDatabase } from './launcher.ts';
import { freePort, freshDatabase, waitReady } from './procs.ts';
import { fmt, summarize } from './stats.ts';

/**
 * ../shared/BENCHMARKS.md, measured against the four services running as separate processes
 * on this machine's Postgres and NATS. Prints one line per metric and writes JSON.
 */
export interface BenchOptions {
  databaseUrl: string;
  natsUrl: string;
  m1Runs: number;
  m3Runs: number;
  rounds: number;
  out: string;
  only?: string[];
}

type Line = { metric: string; round: number; unit: string; n: number; p50: number; p99: number; max: number; value?: number; note?: string };

export async function runBench(o: BenchOptions): Promise<Line[]> {
  const lines: Line[] = [];
  const print = (l: Line): void => {
    lines.push(l);
    const v = l.value !== undefined ? `${l.value.toFixed(1)} ${l.unit}` : `p50 ${fmt(l.p50)} ${l.unit}  p99 ${fmt(l.p99)}  max ${fmt(l.max)}`;
    console.log(`${l.metric.padEnd(4)} round ${l.round}  ${v}  (n=${l.n}${l.note ? `; ${l.note}` : ''})`);
  };
  const want = (m: string): boolean => !o.only || o.only.includes(m);

  if (want('M5')) {
    for (let round = 1; round <= o.rounds; round++) for (const l of await benchM5(o.databaseUrl, round)) print(l);
  }
  if (want('M1') || want('M3')) {
    const dbUrl = await freshDatabase(o.databaseUrl, 'baton_bench');
    await prepareDatabase(dbUrl, () => {});
    const port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: dbUrl, NATS_URL: o.natsUrl, BATON_NAMESPACE: `bench${randomUUID().slice(0, 6)}`, PORT: String(port), LOG_LEVEL: 'warn', PG_POOL_MAX: '20' };
    // e.g. BENCH_SERVICE_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles the services (not the client).
    if (process.env.BENCH_SERVICE_NODE_OPTIONS) env.NODE_OPTIONS = process.env.BENCH_SERVICE_NODE_OPTIONS;
    const services = launch({ env, write: (l) => (/ERROR|FATAL|exited/.test(l) ? console.error(l) : undefined), color: false });
    try {
      const api = new BatonClient(`http://127.0.0.1:${port}`);
      await waitReady(api);
      await runOne(api); // warm-up: connections, JIT, prepared statements
      for (let round = 1; round <= o.rounds; round++) {
        if (want('M1')) print(await benchM1(api, o.m1Runs, round));
        if (want('M3')) print(await benchM3(api, o.m3Runs, round));
      }
    } finally {
      await services.stop('SIGTERM');
    }
  }
  await mkdir(path.dirname(o.out), { recursive: true });
  await writeFile(o.out, JSON.stringify({ at: new Date().toISOString(), node: process.version, lines }, null, 2));
  console.log(`wrote ${o.out}`);
  return lines;
}

/** One bench-team run (10 lead model turns, no approval): submit, then follow SSE to TaskCompleted. */
async function runOne(api: BatonClient): Promise<number> {
  const t0 = performance.now();
  const task = await api.request<{ id: string }>('POST', '/v1/tasks', { prompt: 'bench', team: 'bench', requirePlanApproval: false });
  let done = 0;
  await api.follow(task.id, (e) => {
    if (e.type === 'TaskCompleted') done = performance.now();
    if (e.type === 'TaskFailed' || e.type === 'TaskCancelled') throw new Error(`bench run ended ${e.type}`);
  });
  if (!done) throw new Error('bench run did not complete');
  return done - t0;
}

async function benchM1(api: BatonClient, runs: number, round: number): Promise<Line> {
  const perStep: number[] = [];
  for (let i = 0; i < runs; i++) perStep.push((await runOne(api)) / 10);
  return { metric: 'M1', round, unit: 'ms/step', ...summarize(perStep), note: 'wall time of a 10-turn run ÷ 10, HTTP submit → SSE TaskCompleted' };
}

async function benchM3(api: BatonClient, runs: number, round: number): Promise<Line> {
  const t0 = performance.now();
  const ids = await Promise.all(Array.from({ length: runs }, () => api.request<{ id: string }>('POST', '/v1/tasks', { prompt: 'bench', team: 'bench', requirePlanApproval: false }).then((t) => t.id)));
  const pending = new Set(ids);
  const latencies: number[] = [];
  while (pending.size > 0) {
    const page = await api.request<{ items: { id: string; status: string }[] }>('GET', `/v1/tasks?status=completed&limit=200`);
    const now = performance.now();
    for (const t of page.items) if (pending.delete(t.id)) latencies.push(now - t0);
    if (performance.now() - t0 > 120_000) throw new Error(`M3: ${pending.size} runs not completed after 120 s`);
    if (pending.size > 0) await new Promise((r) => setTimeout(r, 50)); // ±50 ms on a multi-second window; polling harder loads the (2-core) system under test
  }
  const elapsed = (performance.now() - t0) / 1000;
  const s = summarize(latencies);
  return { metric: 'M3', round, unit: 'runs/s', ...s, value: runs / elapsed, note: `${runs} runs submitted at once, all completed in ${elapsed.toFixed(2)} s; run latency p50 ${fmt(s.p50)} ms` };
}

/** M5: a task with 1,000 events; load (one query) + fold, cold (first) and warm (200 repeats). */
async function benchM5(baseUrl: string, round: number): Promise<Line[]> {
  const dbUrl = await freshDatabase(baseUrl, 'baton_bench_m5');
  await prepareDatabase(dbUrl, () => {});
  const db = createDb(dbUrl, { max: 2 });
  const store = new EventStore(db.pool);
  const taskId = randomUUID();
  const usage = { inputTokens: 120, outputTokens: 40, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0.001 };
  const events: NewEvent[] = [
    { id: randomUUID(), type: 'TaskSubmitted', data: { prompt: 'bench', team: 'bench', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'default', requestHash: null, forkedFrom: null } },
    { id: randomUUID(), type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'bench-lead', configVersion: 'v' } },
  ];
  for (let turn = 1; events.length < 1000; turn++) {
    events.push({ id: randomUUID(), type: 'ModelTurnRecorded', data: { agentId: 'lead', turn, model: 'offline', content: [{ type: 'text', text: `step ${turn}` }, { type: 'tool_use', id: `t${turn}`, name: 'bench_step', input: { step: turn } }], stopReason: 'tool_use', usage, offline: true, durationMs: 0 } });
    if (events.length < 1000) events.push({ id: randomUUID(), type: 'ToolResultsRecorded', data: { agentId: 'lead', results: [{ toolUseId: `t${turn}`, toolName: 'bench_step', content: `step ${turn} recorded`, isError: false }] } });
  }
  for (let i = 0; i < events.length; i += 100) await store.append({ streamId: taskStreamId(taskId), taskId, expectedVersion: i, events: events.slice(i, i + 100) });
  const time = async (load: (id: string) => ReturnType<typeof loadTask>): Promise<number> => {
    const t = performance.now();
    const { state, events: read } = await load(taskId);
    const ms = performance.now() - t;
    if (read.length !== 1000 || state.version !== 1000) throw new Error('M5: wrong fold');
    return ms;
  };
  const full = (id: string) => loadTask(store, id);
  const cold = await time(full);
  const warm: number[] = [];
  for (let i = 0; i < 200; i++) warm.push(await time(full));
  // What the services do: a TaskCache folds incrementally; after the first load it reads only new events.
  const cache = new TaskCache(db.pool);
  const cachedCold = await time(cache.load);
  const cached: number[] = [];
  for (let i = 0; i < 200; i++) cached.push(await time(cache.load));
  await db.close();
  return [
    { metric: 'M5', round, unit: 'ms', n: 1, p50: cold, p99: cold, max: cold, note: 'full re-read + fold of 1,000 events, cold (new connection)' },
    { metric: 'M5', round, unit: 'ms', ...summarize(warm), note: 'full re-read + fold of 1,000 events, warm' },
    { metric: 'M5', round, unit: 'ms', n: 1, p50: cachedCold, p99: cachedCold, max: cachedCold, note: 'TaskCache first load (reads + folds all 1,000)' },
    { metric: 'M5', round, unit: 'ms', ...summarize(cached), note: 'TaskCache warm load (reads only new events: one query, no re-fold)' },
  ];
}
