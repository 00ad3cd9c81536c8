import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { taskStreamId, type NewEvent } from '@baton/domain';
import { createDb } from '@baton/db';
import { EventStore, loadTask, TaskCache } from '@baton/event-store';
import { busNames, requestDiagnostics, type BusNames, type Diagnostics } from '@baton/bus';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { DEFAULT_LIMITS, findBwrap, LocalSandboxProvider } from '@baton/sandbox';
import { recordedStreams } from '@baton/storage';
import { BatonClient } from '@baton/client';
import { launch, prepareDatabase, SERVICES } from './launcher.ts';
import { dropDatabase, freePort, freshDatabase, waitReady } from './procs.ts';
import pg from 'pg';
import { fmt, summarize } from './stats.ts';
import { formatBreakdown, measureSteps, waitForDiagnostics } from './breakdown.ts';
import { otlpReceiver, type OtlpReceiver } from '@baton/telemetry';
import { approvalHops, formatHops, type Approval } from './hops.ts';
import { pollUntil } from './poll.ts';

/**
 * docs/benchmarks.md, measured against the four services running as separate processes
 * on this machine's Postgres and NATS. Prints one line per metric and writes JSON.
 */
export interface BenchOptions {
  databaseUrl: string;
  natsUrl: string;
  m1Runs: number;
  m2Runs: number;
  m3Runs: number;
  m4Runs: number;
  m4IdleSeconds: number;
  rounds: number;
  out: string;
  only?: string[];
  /** Trace the services (OTLP/JSON to a receiver in this process) and break M2 down by hop. */
  hops?: boolean;
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
  if (want('S1')) {
    for (let round = 1; round <= o.rounds; round++) for (const l of await benchS1(o.databaseUrl, round)) print(l);
  }
  if (want('M1') || want('M2') || want('M3') || want('M4') || want('R1') || want('E1')) {
    const dbUrl = await freshDatabase(o.databaseUrl, 'baton_bench');
    await prepareDatabase(dbUrl, () => {});
    const port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: dbUrl, NATS_URL: o.natsUrl, BATON_NAMESPACE: `bench${randomUUID().slice(0, 6)}`, PORT: String(port), LOG_LEVEL: 'warn', RATE_LIMIT_WRITES_PER_S: '0', OPS_PORT: '0' }; // the bench measures the runtime, not the write limit; the pools are the default size (PG_POOL_MAX from the caller's environment, if set)
    // --hops: every service traces to a receiver here (tracing's own cost is in every figure then).
    const receiver: OtlpReceiver | null = o.hops ? await otlpReceiver() : null;
    if (receiver) Object.assign(env, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '200', OTEL_BSP_MAX_QUEUE_SIZE: '100000' });
    // e.g. BENCH_SERVICE_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles the services (not the client).
    // --expose-gc lets M4 collect garbage before reading each service's heap (what is retained).
    env.NODE_OPTIONS = process.env.BENCH_SERVICE_NODE_OPTIONS ?? '--expose-gc';
    const services = launch({ env, write: (l) => (/ERROR|FATAL|exited/.test(l) ? console.error(l) : undefined), color: false });
    try {
      const api = new BatonClient(`http://127.0.0.1:${port}`);
      await waitReady(api);
      await runOne(api); // warm-up: connections, JIT, prepared statements
      const nc = await connect({ servers: o.natsUrl });
      const names = busNames(env.BATON_NAMESPACE);
      // /readyz is the gateway's; the other services may still be starting (the runner indexes its corpus).
      await waitForDiagnostics(nc, names);
      await waitForWatchdog(dbUrl);
      // Each metric that runs bench steps also says where a step's CPU, statements and messages went.
      const measured = async (metric: string, round: number, steps: number, work: () => Promise<Line>, unit = 'step'): Promise<void> => {
        const { result, breakdown } = await measureSteps(nc, names, steps, work);
        print(result);
        const cpu = [...breakdown.services, ...breakdown.servers].reduce((a, x) => a + x.cpuMs, 0);
        print({ metric: `${metric}cpu`, round, unit: `ms cpu/${unit}`, n: steps, p50: cpu, p99: cpu, max: cpu, value: cpu, note: formatBreakdown(breakdown, unit) });
      };
      try {
        for (let round = 1; round <= o.rounds; round++) {
          if (want('M1')) await measured('M1', round, o.m1Runs * 10, () => benchM1(api, o.m1Runs, round));
          if (want('M2')) {
            const approvals: Approval[] = [];
            print(await benchM2(api, o.m2Runs, round, approvals));
            if (receiver) print(await m2Hops(receiver, approvals, round));
          }
          if (want('M3')) await measured('M3', round, M3_BURSTS * o.m3Runs * 10, () => benchM3(api, o.m3Runs, round));
          if (want('R1')) print(await benchR1(api, 20, round));
          if (want('E1')) print(await benchE1(api, 10, round));
        }
        if (want('M4')) {
          for (let round = 1; round <= o.rounds; round++) {
            const { lines: m4, ids } = await benchM4(api, nc, names, o.m4Runs, o.m4IdleSeconds, round);
            for (const l of m4) print(l);
            await measured('M4b', round, ids.length, () => benchM4b(api, ids, round), 'resumed run');
          }
        }
      } finally {
        await nc.close();
      }
    } finally {
      await services.stop('SIGTERM');
      await receiver?.close();
    }
  }
  await mkdir(path.dirname(o.out), { recursive: true });
  await writeFile(o.out, JSON.stringify({ at: new Date().toISOString(), node: process.version, lines }, null, 2));
  console.log(`wrote ${o.out}`);
  return lines;
}

/**
 * One bench-team run (10 lead model turns, no approval): submit, then follow the task's
 * transitions over SSE (`steps=false`: a status watcher, like the peers' clients awaiting a
 * result) to TaskCompleted.
 */
async function runOne(api: BatonClient): Promise<number> {
  const t0 = performance.now();
  const task = await api.request<{ id: string }>('POST', '/v1/tasks', { prompt: 'bench', team: 'bench', requirePlanApproval: false });
  let done = 0;
  await api.follow(task.id, (e) => {
    if (e.type === 'TaskCompleted') done = performance.now();
    if (e.type === 'TaskFailed' || e.type === 'TaskCancelled') throw new Error(`bench run ended ${e.type}`);
  }, { steps: false });
  if (!done) throw new Error('bench run did not complete');
  return done - t0;
}

async function benchM1(api: BatonClient, runs: number, round: number): Promise<Line> {
  const perStep: number[] = [];
  for (let i = 0; i < runs; i++) perStep.push((await runOne(api)) / 10);
  return { metric: 'M1', round, unit: 'ms/step', ...summarize(perStep), note: 'wall time of a 10-turn run ÷ 10, HTTP submit → SSE (transitions) TaskCompleted' };
}

/** Epoch milliseconds with a fractional part; the orchestrator stamps `startedAtMs` the same way. */
const hrNow = (): number => performance.timeOrigin + performance.now();

/**
 * M2: bench-team runs with plan approval; the lead parks at turn 3 (bench_gate). The client
 * approves as soon as SSE shows the request; the sample is approve-sent → turn 4's start.
 */
async function benchM2(api: BatonClient, runs: number, round: number, approvals: Approval[]): Promise<Line> {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const task = await api.request<{ id: string }>('POST', '/v1/tasks', { prompt: 'bench', team: 'bench', requirePlanApproval: true });
    let sentAt = 0;
    let approving: Promise<unknown> = Promise.resolve();
    await api.follow(task.id, (e) => {
      if (e.type === 'ApprovalRequested') {
        sentAt = hrNow();
        approvals.push({ taskId: task.id, sentAtMs: sentAt });
        approving = api.request('POST', `/v1/tasks/${task.id}/approvals/${String(e.data.requestId)}`, { decision: 'approve' });
      }
      if (e.type === 'ModelTurnRecorded' && e.data.turn === 4) samples.push((e.metadata.startedAtMs as number) - sentAt);
    });
    await approving;
  }
  if (samples.length !== runs) throw new Error(`M2: ${samples.length} samples from ${runs} runs`);
  return { metric: 'M2', round, unit: 'ms', ...summarize(samples), note: 'approve request sent (client) → turn 4 starts (orchestrator metadata); HTTP → gateway → PG → relay → NATS → orchestrator' };
}

/**
 * M2 by hop, from the services' spans of each approval (the run traced end to end): the median
 * of each hop over the round's approvals. Waits for the spans of the last approval to arrive.
 */
async function m2Hops(receiver: OtlpReceiver, approvals: Approval[], round: number): Promise<Line> {
  const last = approvals.at(-1);
  if (last) await pollUntil(() => approvalHops(receiver.spans, last), { timeoutMs: 30_000, intervalMs: 100, onTimeout: () => new Error('M2 hops: the spans of the last approval did not arrive within 30 s') });
  const hops = approvals.map((a) => approvalHops(receiver.spans, a)).filter((h) => h !== null);
  receiver.spans.length = 0; // the next round's only
  const total = hops.map((h) => h.total);
  return { metric: 'M2hops', round, unit: 'ms', ...summarize(total), note: formatHops(hops, approvals.length) };
}

/**
 * M4: park `runs` bench runs at their approval, stay idle, and read each service's RSS and
 * active handles (over NATS) and the database's transactions per second meanwhile. M4b:
 * approve them all at once; completed runs per second.
 */
async function benchM4(api: BatonClient, nc: NatsConnection, names: BusNames, runs: number, idleSeconds: number, round: number): Promise<{ lines: Line[]; ids: string[] }> {
  const before = await Promise.all(SERVICES.map((s) => requestDiagnostics(nc, names, s, { gc: true })));
  const ids: string[] = [];
  for (let i = 0; i < runs; i += 50) {
    const batch = Math.min(50, runs - i);
    ids.push(...(await Promise.all(Array.from({ length: batch }, () => api.request<{ id: string }>('POST', '/v1/tasks', { prompt: 'bench', team: 'bench', requirePlanApproval: true }).then((t) => t.id)))));
  }
  const idSet = new Set(ids);
  const parked = async (): Promise<number> => {
    let n = 0;
    for await (const t of api.tasks({ status: 'awaiting_input' })) if (idSet.has(t.id)) n++;
    return n;
  };
  const parkDeadline = Date.now() + 300_000;
  while ((await parked()) < runs) {
    if (Date.now() > parkDeadline) throw new Error('M4: runs did not all park within 300 s');
    await new Promise((r) => setTimeout(r, 500));
  }
  // Wait until every consumer has drained its backlog (the notifier's too: with the outbox mails and any task a relay did not know, it may see events), then
  // let checkpoints and pool connections settle, and watch an idle window.
  const jsm = await jetstreamManager(nc);
  const quietDeadline = Date.now() + 300_000;
  for (;;) {
    const infos = await Promise.all([
      jsm.consumers.info(names.eventsStream, names.consumers.orchestrator),
      jsm.consumers.info(names.eventsStream, names.consumers.notifier),
      jsm.consumers.info(names.jobsStream, names.consumers.runner),
    ]);
    if (infos.every((i) => i.num_pending === 0 && i.num_ack_pending === 0)) break;
    if (Date.now() > quietDeadline) throw new Error('M4: consumers did not drain within 300 s');
    await new Promise((r) => setTimeout(r, 500));
  }
  await new Promise((r) => setTimeout(r, 2000));
  const sumQueries = (ds: Diagnostics[]): number => ds.reduce((n, d) => n + (d.pgQueries ?? 0), 0);
  const idleStart = await Promise.all(SERVICES.map((s) => requestDiagnostics(nc, names, s)));
  const q0 = sumQueries(idleStart);
  await new Promise((r) => setTimeout(r, idleSeconds * 1000));
  const after = await Promise.all(SERVICES.map((s) => requestDiagnostics(nc, names, s, { gc: true })));
  const idleQps = (sumQueries(after) - q0) / idleSeconds;
  const lines: Line[] = after.map((d, i) => {
    const b = before[i] as Diagnostics;
    const timers = d.activeResources.Timeout ?? 0;
    const sockets = (d.activeResources.TCPSocketWrap ?? 0) + (d.activeResources.TCPServerWrap ?? 0);
    const total = Object.values(d.activeResources).reduce((a, n) => a + n, 0);
    return {
      metric: 'M4',
      round,
      unit: 'MiB RSS',
      n: runs,
      p50: d.rssBytes / 2 ** 20,
      p99: d.rssBytes / 2 ** 20,
      max: d.rssBytes / 2 ** 20,
      value: d.rssBytes / 2 ** 20,
      note: `${d.service}: ${runs} runs parked; active resources ${total} (timers ${timers}, sockets ${sockets}) vs ${Object.values(b.activeResources).reduce((a, n) => a + n, 0)} before parking; RSS was ${(b.rssBytes / 2 ** 20).toFixed(1)} MiB; heap used after GC ${(d.heapUsedBytes / 2 ** 20).toFixed(1)} MiB (was ${(b.heapUsedBytes / 2 ** 20).toFixed(1)})${d.cachedTasks !== undefined ? `; tasks cached ${d.cachedTasks}` : ''}`,
    };
  });
  lines.push({ metric: 'M4', round, unit: 'queries/s', n: idleSeconds, p50: idleQps, p99: idleQps, max: idleQps, value: idleQps, note: `statements sent to Postgres by the four services over a ${idleSeconds} s idle window with ${runs} runs parked (${after.map((d, i) => `${d.service} ${(d.pgQueries ?? 0) - (idleStart[i]?.pgQueries ?? 0)}`).join(', ')})` });

  return { lines, ids };
}

/**
 * M4b: approve every parked run at once (32 requests in flight), then wait for completion. The
 * client finds the open requests as a person's inbox would, in the parked list (pages of 200:
 * the list serves each task's open requests), not by reading each task.
 */
async function benchM4b(api: BatonClient, ids: readonly string[], round: number): Promise<Line> {
  const runs = ids.length;
  const t0 = performance.now();
  const mine = new Set(ids);
  const queue: [string, string][] = [];
  for await (const t of api.tasks({ status: 'awaiting_input' })) {
    if (!mine.delete(t.id)) continue;
    for (const r of t.pendingRequests) queue.push([t.id, r.requestId]);
  }
  if (mine.size > 0) throw new Error(`M4b: ${mine.size} of ${runs} runs are not in the parked list, e.g. ${[...mine].slice(0, 3).join(', ')}`);
  await Promise.all(Array.from({ length: 32 }, async () => {
    for (let next = queue.shift(); next; next = queue.shift()) await api.approve(next[0], next[1]);
  }));
  const approvedIn = performance.now() - t0;
  const pending = new Set(ids);
  while (pending.size > 0) {
    for await (const t of api.tasks({ status: 'completed' })) if (pending.delete(t.id) && pending.size === 0) break;
    if (performance.now() - t0 > 300_000) throw new Error(`M4b: ${pending.size} runs not completed after 300 s`);
    if (pending.size > 0) await new Promise((r) => setTimeout(r, 100));
  }
  const elapsed = (performance.now() - t0) / 1000;
  return { metric: 'M4b', round, unit: 'runs/s', n: runs, p50: elapsed, p99: elapsed, max: elapsed, value: runs / elapsed, note: `${runs} parked runs approved (all sent in ${(approvedIn / 1000).toFixed(2)} s) and completed in ${elapsed.toFixed(2)} s` };
}

/** M3's bursts per round: as in the peers' harness, which runs three and reports their median (the first is the coldest). */
const M3_BURSTS = 3;

/**
 * M3: `runs` bench runs submitted at once, each with its approval (BENCHMARKS.md: "approval sent
 * as soon as each parks"): the client polls the parked runs, approves each as soon as it sees it,
 * and counts completed runs per second, end to end. Three bursts, one after another; the figure
 * is their median, as the peers' harness reports its three rounds.
 */
async function benchM3(api: BatonClient, runs: number, round: number): Promise<Line> {
  const bursts: { runsPerS: number; elapsed: number; latencies: number[] }[] = [];
  for (let i = 0; i < M3_BURSTS; i++) bursts.push(await m3Burst(api, runs));
  const median = [...bursts].sort((x, y) => x.runsPerS - y.runsPerS)[Math.floor((M3_BURSTS - 1) / 2)]!;
  const s = summarize(median.latencies);
  const each = bursts.map((x) => `${x.runsPerS.toFixed(1)} (${x.elapsed.toFixed(2)} s)`).join(', ');
  return { metric: 'M3', round, unit: 'runs/s', ...s, value: median.runsPerS, note: `median of ${M3_BURSTS} bursts of ${runs} runs submitted at once, each approved as soon as it parked: ${each} runs/s; the median burst's run latency p50 ${fmt(s.p50)} ms` };
}

async function m3Burst(api: BatonClient, runs: number): Promise<{ runsPerS: number; elapsed: number; latencies: number[] }> {
  const t0 = performance.now();
  const ids = await Promise.all(Array.from({ length: runs }, () => api.request<{ id: string }>('POST', '/v1/tasks', { prompt: 'bench', team: 'bench', requirePlanApproval: true }).then((t) => t.id)));
  const pending = new Set(ids);
  const toApprove = new Set(ids);
  const approvals: Promise<unknown>[] = [];
  const latencies: number[] = [];
  while (pending.size > 0) {
    if (toApprove.size > 0) {
      const parked = await api.request<{ items: { id: string; pendingRequests: { requestId: string }[] }[] }>('GET', `/v1/tasks?status=awaiting_input&limit=200`);
      for (const t of parked.items) {
        const req = t.pendingRequests[0];
        if (!req || !toApprove.delete(t.id)) continue;
        approvals.push(api.request('POST', `/v1/tasks/${t.id}/approvals/${req.requestId}`, { decision: 'approve' }));
      }
    }
    const page = await api.request<{ items: { id: string; status: string }[] }>('GET', `/v1/tasks?status=completed&limit=200`);
    const now = performance.now();
    for (const t of page.items) if (pending.delete(t.id)) latencies.push(now - t0);
    if (performance.now() - t0 > 120_000) throw new Error(`M3: ${pending.size} runs not completed after 120 s`);
    if (pending.size > 0) await new Promise((r) => setTimeout(r, 20)); // polling harder loads the (2-core) system under test
  }
  await Promise.all(approvals);
  const elapsed = (performance.now() - t0) / 1000;
  return { runsPerS: runs / elapsed, elapsed, latencies };
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
    { id: randomUUID(), type: 'TaskSubmitted', data: { prompt: 'bench', team: 'bench', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'default', requestHash: null, forkedFrom: null, workspace: null, budget: null } },
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

/**
 * R1: the research flow end to end (offline model, no approval): lead → researcher (web_search
 * over the corpus, notes in its sandbox) → report writer (glob, read, write) → report artifact.
 * Shows what sandboxes, workspace sync and artifacts add per run (about 15 model turns).
 */
async function benchR1(api: BatonClient, runs: number, round: number): Promise<Line> {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const task = await api.request<{ id: string }>('POST', '/v1/tasks', { prompt: `Research durable execution for agents, run ${i}`, requirePlanApproval: false });
    let done = 0;
    await api.follow(task.id, (e) => {
      if (e.type === 'TaskCompleted') done = performance.now();
      if (e.type === 'TaskFailed' || e.type === 'TaskCancelled') throw new Error(`research run ended ${e.type}`);
    });
    if (!done) throw new Error('research run did not complete');
    samples.push(done - t0);
  }
  return { metric: 'R1', round, unit: 'ms', ...summarize(samples), note: 'research run (lead + researcher + writer, 12 turns, 2 sandboxes, 2 artifacts), submit → TaskCompleted' };
}

/**
 * E1: the example engineering run end to end with the offline model — plan (no approval), two
 * engineers in parallel test-first (vitest in the sandbox), the review's round of changes and
 * the approving review — submit → TaskCompleted.
 */
async function benchE1(api: BatonClient, runs: number, round: number): Promise<Line> {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const task = await api.request<{ id: string }>('POST', '/v1/tasks', { prompt: `Add a low-stock report to the inventory app (run ${i})`, team: 'engineering', requirePlanApproval: false, workspace: { example: 'inventory' } });
    let done = 0;
    await api.follow(task.id, (e) => {
      if (e.type === 'TaskCompleted') done = performance.now();
      if (e.type === 'TaskFailed' || e.type === 'TaskCancelled') throw new Error(`engineering run ended ${e.type}: ${JSON.stringify(e.data)}`);
    }, { steps: false });
    if (!done) throw new Error('engineering run did not complete');
    samples.push(done - t0);
  }
  return { metric: 'E1', round, unit: 'ms', ...summarize(samples), note: 'engineering run on examples/inventory (plan, 2 engineers in parallel test-first, review, 1 round of changes, re-review; 7 agents, 6 vitest runs), submit → TaskCompleted' };
}

/**
 * S1: the local sandbox's own costs — a confined command (setpriv + prlimit + bwrap start),
 * syncing a 200-file workspace after one change, and pause → resume on another replica.
 */
async function benchS1(baseUrl: string, round: number): Promise<Line[]> {
    const dbUrl = await freshDatabase(baseUrl, 'baton_bench_s1');
  await prepareDatabase(dbUrl, () => {});
  const pool = new pg.Pool({ connectionString: dbUrl, max: 4 });
  const root = await mkdtemp(path.join(tmpdir(), 'baton-bench-s1-'));
  try {
    const a = new LocalSandboxProvider({ root: path.join(root, 'a'), pool });
    const b = new LocalSandboxProvider({ root: path.join(root, 'b'), pool });
    const lines: Line[] = [];
    const spec = { taskId: randomUUID(), agentId: 'bench-1', network: false, env: {}, limits: DEFAULT_LIMITS, attempt: 1 };
    const sbx = await a.open(spec);
    for (let i = 0; i < 200; i++) await sbx.files.write(`src/f${i}.ts`, `export const v${i} = ${i};\n`.repeat(20));
    await sbx.sync();
    if (findBwrap()) {
      const runs: number[] = [];
      for (let i = 0; i < 50; i++) {
        const t = performance.now();
        await sbx.run('true', { timeoutMs: 10_000 });
        runs.push(performance.now() - t);
      }
      lines.push({ metric: 'S1', round, unit: 'ms', ...summarize(runs), note: 'confined command `true` (setpriv + prlimit + bwrap, new namespaces)' });
    }
    const syncs: number[] = [];
    for (let i = 0; i < 50; i++) {
      await sbx.files.write('src/f0.ts', `export const v0 = ${i};\n`);
      const t = performance.now();
      await sbx.sync();
      syncs.push(performance.now() - t);
    }
    lines.push({ metric: 'S1', round, unit: 'ms', ...summarize(syncs), note: 'sync after one changed file in a 200-file workspace (walk + one upsert)' });
    const moves: number[] = [];
    let current = sbx;
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      await (i % 2 === 0 ? a : b).pause(current);
      current = await (i % 2 === 0 ? b : a).open({ ...spec, attempt: i + 2 });
      moves.push(performance.now() - t);
    }
    lines.push({ metric: 'S1', round, unit: 'ms', ...summarize(moves), note: 'pause on one replica → resume on another (200 files restored from Postgres)' });
    return lines;
  } finally {
    await pool.end();
    await rm(root, { recursive: true, force: true });
    await dropDatabase(dbUrl);
  }
}

/**
 * The watchdog's first look on a new bus records its streams after waking every unfinished task
 * (a first start: the log may predate the streams). Wait for it, so that it does not land in a
 * measured window (M4's idle window when M4 runs alone).
 */
async function waitForWatchdog(dbUrl: string): Promise<void> {
  const c = new pg.Client({ connectionString: dbUrl });
  await c.connect();
  try {
    await pollUntil(async () => (await recordedStreams(c)).size > 0, { timeoutMs: 60_000, intervalMs: 100, retryErrors: false, onTimeout: () => new Error("bench: the orchestrator's watchdog did not record the bus streams within 60 s") });
  } finally {
    await c.end();
  }
}
