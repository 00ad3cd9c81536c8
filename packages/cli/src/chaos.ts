import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { agentStreamId } from '@baton/domain';
import type { TaskView } from '@baton/api';
import pg from 'pg';
import { ApiError, BatonClient, type TaskSummary } from '@baton/client';
import { launch, prepareDatabase, type Launched, type ServiceName } from './launcher.ts';
import { dropDatabase, freePort, freshDatabase, waitReady } from './procs.ts';
import { pollUntil } from './poll.ts';

/**
 * The crash test of the human-in-the-loop issue, as a script: N research tasks go through plan
 * approvals, clarifications (vague prompts; parallel researchers that each ask) while the
 * orchestrator and the runner are killed with SIGKILL at random moments and restarted. Then the
 * log is checked: every task completed, no stream has a version gap, no step was recorded
 * twice, every tool_use has exactly one tool_result, and no tool ran again after its result was
 * recorded (from the runner's audit file, written before each tool runs).
 */
export interface ChaosOptions {
  databaseUrl: string;
  natsUrl: string;
  tasks: number;
  kills: number;
  seed: number;
  timeoutMs: number;
  log: (line: string) => void;
  /** Service log lines (default: dropped, except errors). */
  serviceLog?: (line: string) => void;
  /**
   * Faults besides the kills, spread among them at random: the bus's streams deleted, NATS
   * killed -9 and restarted (every other time with an empty store), Postgres crash-restarted.
   * NATS restarts and Postgres crashes run against private servers this run starts (never the
   * ones given in natsUrl / databaseUrl).
   */
  faults?: { busWipes: number; natsRestarts: number; postgresRestarts: number };
}

export type Fault = 'kill-orchestrator' | 'kill-sandbox-runner' | 'bus-wipe' | 'nats-restart' | 'postgres-restart';

export interface ChaosReport {
  seed: number;
  tasks: number;
  completed: number;
  kills: { orchestrator: number; 'sandbox-runner': number };
  /** Other faults injected (bus wipes, NATS restarts, Postgres crash-restarts). */
  faults: { busWipes: number; natsRestarts: number; postgresRestarts: number };
  /** Times the private NATS exited on its own (not a fault of this run): restarted at once, like an orchestrator restarting it. */
  natsDied: number;
  events: number;
  toolExecutions: number;
  /** Tool executions repeated before their result was recorded (a crash between run and record). */
  reexecutedBeforeRecord: number;
  decisions: number;
  seconds: number;
  violations: string[];
}

const PROMPTS = [
  (i: number) => `Research the history of consensus algorithms, part ${i}`,
  () => 'AI stuff',
  (i: number) => `Compare Kafka and NATS for workload ${i}; ask me which sources to use`,
  (i: number) => `Research write-ahead logging in databases, case ${i}`,
];

/** Deterministic random numbers (mulberry32), so a failing run can be repeated with its seed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The run's faults in a random order (the kills pick their victim at random). */
export function faultPlan(random: () => number, kills: number, f: { busWipes: number; natsRestarts: number; postgresRestarts: number }): Fault[] {
  const plan: Fault[] = [
    ...Array.from({ length: kills }, (): Fault => (random() < 0.5 ? 'kill-orchestrator' : 'kill-sandbox-runner')),
    ...Array.from({ length: f.busWipes }, (): Fault => 'bus-wipe'),
    ...Array.from({ length: f.natsRestarts }, (): Fault => 'nats-restart'),
    ...Array.from({ length: f.postgresRestarts }, (): Fault => 'postgres-restart'),
  ];
  for (let i = plan.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [plan[i], plan[j]] = [plan[j] as Fault, plan[i] as Fault];
  }
  return plan;
}

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  const random = rng(o.seed);
  const t0 = performance.now();
  const wanted = o.faults ?? { busWipes: 0, natsRestarts: 0, postgresRestarts: 0 };
  // Private servers come from the test kit, loaded only when such faults are asked for (the CLI itself does not need it).
  const servers = wanted.natsRestarts > 0 || wanted.postgresRestarts > 0 ? await import('@baton/testing/servers') : null;
  const ownNats = servers && wanted.natsRestarts > 0 ? await servers.privateNats() : null;
  const ownPg = servers && wanted.postgresRestarts > 0 ? await servers.privatePostgres() : null;
  const natsUrl = ownNats?.url ?? o.natsUrl;
  const dbUrl = await freshDatabase(ownPg?.url ?? o.databaseUrl, `baton_chaos_${randomBytes(3).toString('hex')}`);
  await prepareDatabase(dbUrl, () => {});
  const dir = await mkdtemp(path.join(tmpdir(), 'baton-chaos-'));
  const auditFile = path.join(dir, 'tool-audit.jsonl');
  const port = await freePort();
  const namespace = `chaos${randomBytes(3).toString('hex')}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: dbUrl,
    NATS_URL: natsUrl,
    BATON_NAMESPACE: namespace,
    PORT: String(port),
    LOG_LEVEL: process.env.CHAOS_LOG_LEVEL ?? 'warn',
    WORKSPACE_ROOT: path.join(dir, 'workspaces'),
    BATON_TOOL_AUDIT_FILE: auditFile,
    // A killed process's in-flight messages come back after this; short, so the run is quick.
    EVENTS_ACK_WAIT_MS: '3000',
    JOBS_ACK_WAIT_MS: '3000',
    // Healing at a test's pace: the bus checked twice a second, leases that expire in 3 s, the
    // watchdog looking twice a second at tasks idle for 5 s.
    BUS_CHECK_INTERVAL_MS: '500',
    // Submits 200 tasks at once: the write limit is not what this run tests.
    RATE_LIMIT_WRITES_PER_S: '0',
    // Free ops ports: a killed service's replacement may start before the old port is released.
    OPS_PORT: '0',
    LEASE_TTL_MS: '3000',
    WATCHDOG_INTERVAL_MS: '500',
    WATCHDOG_GRACE_MS: '5000',
  };
  const write = o.serviceLog ?? ((l: string) => (/ERROR|FATAL/.test(l) ? o.log(l) : undefined));
  const stable = launch({ env, services: ['gateway', 'notifier'], write, color: false });
  const victims = new Map<ServiceName, Launched>();
  const start = (name: ServiceName) => victims.set(name, launch({ env, services: [name], write, color: false }));
  start('orchestrator');
  start('sandbox-runner');
  const api = new BatonClient(`http://127.0.0.1:${port}`);
  const kills = { orchestrator: 0, 'sandbox-runner': 0 };
  const faults = { busWipes: 0, natsRestarts: 0, postgresRestarts: 0 };
  const plan = faultPlan(random, o.kills, wanted);
  let decisions = 0;
  let done = false;
  let ok = false;
  try {
    await waitReady(api);
    const ids: string[] = [];
    for (let i = 0; i < o.tasks; i++) {
      const prompt = (PROMPTS[i % PROMPTS.length] as (i: number) => string)(i);
      ids.push((await api.request<TaskView>('POST', '/v1/tasks', { prompt, approvalTimeoutSeconds: 3600 })).id);
    }
    o.log(`chaos: ${o.tasks} tasks submitted; killing the orchestrator and the runner ${o.kills} times (seed ${o.seed})`);

    // The person: decides whatever is open, as soon as it is seen (a task with a request open
    // may still be running: another of its agents works meanwhile).
    const person = (async () => {
      while (!done) {
        for (const status of ['awaiting_input', 'running']) {
          const listed: TaskSummary[] = [];
          try {
            for await (const t of api.tasks({ status })) listed.push(t);
          } catch {
            // A listing that fails (a service restarting) is simply tried again on the next round.
          }
          for (const { id, pendingRequests } of listed) {
            for (const r of pendingRequests) {
              const body =
                r.kind === 'approval'
                  ? { path: `approvals/${r.requestId}`, body: { decision: 'approve' } }
                  : { path: `answers/${r.requestId}`, body: { answers: r.agentId === 'lead' ? ['Consensus protocols for a platform team, two pages'] : ['both'] } };
              try {
                await api.request('POST', `/v1/tasks/${id}/${body.path}`, body.body);
                decisions++;
              } catch (err) {
                // Decided already, or a dependency down for a moment (the next round tries again).
                if (err instanceof ApiError && (err.status === 409 || err.status === 404 || err.status >= 500)) continue;
                if (!(err instanceof ApiError)) continue; // the gateway restarting or unreachable
                throw err;
              }
            }
          }
        }
        await sleep(50);
      }
    })();

    // The keeper: a private NATS that exits on its own (seen rarely with NATS 2.9 after kill -9
    // restarts) is started again at once, as a process supervisor would — and reported.
    let natsBusy = false;
    let natsDied = 0;
    const keeper = (async () => {
      while (!done && ownNats) {
        if (!natsBusy && !ownNats.running()) {
          const exit = ownNats.unexpectedExits.at(-1);
          o.log(`chaos: the private nats-server exited on its own (code ${String(exit?.code)}, signal ${String(exit?.signal)}); starting it again. Its last stderr:\n${exit?.stderr ?? ''}`);
          natsDied++;
          await ownNats.start();
        }
        await sleep(250);
      }
    })();

    // The killer: at random moments, SIGKILL the orchestrator or the runner (restarted after a
    // random pause), delete the bus's streams, restart NATS, or crash-restart Postgres.
    let natsRestarts = 0;
    const killer = (async () => {
      for (const fault of plan) {
        if (done) break;
        await sleep(200 + random() * 900);
        if (fault === 'kill-orchestrator' || fault === 'kill-sandbox-runner') {
          const name: ServiceName = fault === 'kill-orchestrator' ? 'orchestrator' : 'sandbox-runner';
          await (victims.get(name) as Launched).stop('SIGKILL', 0);
          kills[name as keyof typeof kills]++;
          await sleep(random() * 400);
          start(name);
        } else if (fault === 'bus-wipe') {
          // (NATS may be down for a moment — restarting, or restarted by the keeper: wipe once it answers.)
          for (let attempt = 0; ; attempt++) {
            try {
              await deleteNamespaceStreams(natsUrl, namespace);
              break;
            } catch (err) {
              if (attempt >= 40) throw err;
              await sleep(250);
            }
          }
          faults.busWipes++;
        } else if (fault === 'nats-restart') {
          // kill -9 and start again on the same port; every other time with its store deleted (an empty NATS).
          const nats = ownNats as NonNullable<typeof ownNats>;
          natsBusy = true;
          try {
            await nats.stop();
            if (natsRestarts++ % 2 === 0) await rm(nats.dir, { recursive: true, force: true });
            await nats.start();
          } finally {
            natsBusy = false;
          }
          faults.natsRestarts++;
        } else {
          // A crash (no shutdown checkpoint), down for a moment, then recovery.
          const pgServer = ownPg as NonNullable<typeof ownPg>;
          await pgServer.crash();
          await sleep(500 + random() * 2000);
          await pgServer.start();
          faults.postgresRestarts++;
        }
      }
    })();

    let last: Awaited<ReturnType<typeof countByStatus>> | null = null;
    await pollUntil(
      async () => {
        last = await countByStatus(dbUrl, ids); // throws while Postgres is down for a moment: not yet
        return last.final === ids.length;
      },
      { timeoutMs: o.timeoutMs, intervalMs: 250, onTimeout: async () => new Error(`chaos: ${ids.length - (last?.final ?? 0)} of ${ids.length} tasks not final after ${o.timeoutMs} ms (${JSON.stringify(last?.byStatus ?? {})})\n${await describeStuck(dbUrl, ids).catch((e: unknown) => `(could not describe the stuck tasks: ${(e as Error).message})`)}`) },
    );
    done = true;
    await killer;
    await keeper;
    await person;
    const killed = kills.orchestrator + kills['sandbox-runner'];
    if (killed < o.kills) o.log(`chaos: the tasks finished after ${killed} of the ${o.kills} kills asked for (more tasks give the killer more time)`);
    const report = await verify(dbUrl, ids, auditFile);
    ok = report.violations.length === 0;
    return { seed: o.seed, tasks: ids.length, kills, faults, natsDied, decisions, seconds: (performance.now() - t0) / 1000, ...report };
  } finally {
    done = true;
    await Promise.all([stable.stop('SIGTERM'), ...[...victims.values()].map((v) => v.stop('SIGTERM'))]);
    await rm(dir, { recursive: true, force: true });
    if (!ownNats) await deleteNamespaceStreams(natsUrl, namespace).catch(() => {});
    await ownNats?.destroy();
    if (ownPg) await ownPg.destroy();
    else if (ok) await dropDatabase(dbUrl);
    else o.log(`chaos: the database is kept for inspection: ${dbUrl}`);
  }
}

/** Delete the run's streams (a bus wipe; and the clean-up at the end): the test kit's one way, loaded when needed. */
async function deleteNamespaceStreams(url: string, namespace: string): Promise<void> {
  const { deleteNamespace } = await import('@baton/testing/nats');
  await deleteNamespace(url, namespace);
}

/** For a failure message: each task not final, with its agents' last recorded events. */
async function describeStuck(dbUrl: string, ids: string[]): Promise<string> {
  return withClient(dbUrl, async (c) => {
    const { rows } = await c.query(
      `select t.id, t.status, e.stream_id, string_agg(e.type || coalesce(' ' || (e.data->>'attempt'), '') || coalesce(' by ' || (e.data->>'runnerId'), ''), ' → ' order by e.stream_version) as events
         from tasks t join events e on e.task_id = t.id
        where t.id = any($1::uuid[]) and t.status not in ('completed', 'failed', 'cancelled')
        group by t.id, t.status, e.stream_id order by t.id, e.stream_id`,
      [ids],
    );
    return rows.map((r) => `  ${r.id} (${r.status}) ${r.stream_id}: ${r.events}`).join('\n');
  });
}

/**
 * One short-lived session. Postgres may be crash-restarted by the killer at any moment: a lost
 * connection rejects the statement (the caller looks again) and must not also crash this process
 * as an unhandled 'error' event of the client.
 */
async function withClient<T>(dbUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: dbUrl });
  c.on('error', () => {});
  try {
    await c.connect();
    return await fn(c);
  } finally {
    await c.end().catch(() => {});
  }
}

async function countByStatus(dbUrl: string, ids: string[]): Promise<{ final: number; byStatus: Record<string, number> }> {
  return withClient(dbUrl, async (c) => {
    const r = await c.query<{ status: string; n: number }>('select status, count(*)::int as n from tasks where id = any($1::uuid[]) group by status', [ids]);
    const byStatus = Object.fromEntries(r.rows.map((x) => [x.status, x.n]));
    return { final: (byStatus.completed ?? 0) + (byStatus.failed ?? 0) + (byStatus.cancelled ?? 0), byStatus };
  });
}

interface Row {
  task_id: string;
  stream_id: string;
  stream_version: number;
  type: string;
  data: Record<string, unknown>;
}

/** Check the log against the crash-safety promises; every broken promise is one line. */
export async function verify(dbUrl: string, ids: string[], auditFile: string): Promise<Omit<ChaosReport, 'seed' | 'tasks' | 'kills' | 'faults' | 'natsDied' | 'decisions' | 'seconds'>> {
  const c = new pg.Client({ connectionString: dbUrl });
  await c.connect();
  const violations: string[] = [];
  try {
    const statuses = await c.query<{ id: string; status: string }>('select id, status from tasks where id = any($1::uuid[])', [ids]);
    const completed = statuses.rows.filter((r) => r.status === 'completed').length;
    for (const r of statuses.rows) if (r.status !== 'completed') violations.push(`task ${r.id} ended ${r.status}`);
    const gaps = await c.query<{ stream_id: string; n: number; max: number }>(
      'select stream_id, count(*)::int as n, max(stream_version) as max from events where task_id = any($1::uuid[]) group by stream_id having count(*) <> max(stream_version) or min(stream_version) <> 1',
      [ids],
    );
    for (const g of gaps.rows) violations.push(`stream ${g.stream_id}: ${g.n} events but versions up to ${g.max} (a gap)`);
    const rows = (await c.query<Row>('select task_id, stream_id, stream_version, type, data from events where task_id = any($1::uuid[]) order by global_position', [ids])).rows;

    // Logical duplicates and pairing, per stream.
    const resultVersion = new Map<string, number>(); // `${stream}|${toolUseId}` → version where its result was recorded
    const byStream = new Map<string, Row[]>();
    for (const r of rows) byStream.set(r.stream_id, [...(byStream.get(r.stream_id) ?? []), r]);
    for (const [stream, evs] of byStream) {
      const seen = new Set<string>();
      const once = (key: string, what: string) => {
        if (seen.has(key)) violations.push(`${stream}: ${what} recorded twice`);
        seen.add(key);
      };
      const uses = new Set<string>();
      for (const e of evs) {
        const d = e.data;
        if (e.type === 'ModelTurnRecorded') {
          once(`turn:${String(d.agentId)}:${String(d.turn)}`, `turn ${String(d.turn)} of ${String(d.agentId)}`);
          for (const b of d.content as { type: string; id?: string }[]) if (b.type === 'tool_use' && b.id) uses.add(b.id);
        }
        if (e.type === 'ToolResultsRecorded') {
          for (const r of d.results as { toolUseId: string }[]) {
            once(`result:${r.toolUseId}`, `the result of ${r.toolUseId}`);
            resultVersion.set(`${stream}|${r.toolUseId}`, e.stream_version);
          }
        }
        if (e.type === 'SubagentDispatched') once(`dispatch:${String(d.toolUseId)}`, `the dispatch for ${String(d.toolUseId)}`);
        if (['ApprovalRequested', 'ClarificationRequested'].includes(e.type)) once(`open:${String(d.requestId)}`, `request ${String(d.requestId)}`);
        if (['ApprovalGranted', 'ApprovalRejected', 'ApprovalTimedOut', 'ClarificationAnswered', 'ClarificationTimedOut'].includes(e.type)) once(`decide:${String(d.requestId)}`, `a decision on ${String(d.requestId)}`);
        if (['TaskCompleted', 'TaskFailed', 'TaskCancelled'].includes(e.type)) once('final', 'a final event');
        if (e.type === 'SubagentCompleted') once(`completed:${String(d.agentId)}`, `the completion of ${String(d.agentId)}`);
      }
      // Every tool_use of this stream's agent(s) has its result (the tasks are all complete).
      for (const id of uses) if (!resultVersion.has(`${stream}|${id}`)) violations.push(`${stream}: tool_use ${id} has no tool_result`);
    }

    // No tool ran after its result was recorded.
    const audit = (await readFile(auditFile, 'utf8').catch(() => '')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as { taskId: string; agentId: string; toolUseId: string; seenVersion: number });
    const runs = new Map<string, number>();
    let reexecutedBeforeRecord = 0;
    for (const a of audit) {
      const stream = agentStreamId(a.taskId, a.agentId);
      const recordedAt = resultVersion.get(`${stream}|${a.toolUseId}`);
      if (recordedAt !== undefined && a.seenVersion >= recordedAt) violations.push(`${stream}: tool ${a.toolUseId} ran again after its result was recorded (at v${recordedAt}; the runner had seen v${a.seenVersion})`);
      const key = `${stream}|${a.toolUseId}`;
      runs.set(key, (runs.get(key) ?? 0) + 1);
    }
    for (const n of runs.values()) if (n > 1) reexecutedBeforeRecord += n - 1;
    return { completed, events: rows.length, toolExecutions: audit.length, reexecutedBeforeRecord, violations };
  } finally {
    await c.end();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
