import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { agentStreamId } from '@baton/domain';
import pg from 'pg';
import { ApiError, BatonClient, type TaskSummary } from '@baton/client';
import { launch, prepareDatabase, type Launched, type ServiceName } from './launcher.ts';
import { dropDatabase, freePort, freshDatabase, waitReady } from './procs.ts';
import { pollUntil } from './poll.ts';

/**
 * The crash test of the human-in-the-loop issue, as a script: N research tasks go through plan
 * approvals, clarifications (vague prompts; parallel researchers that each ask) while the
 * orchestrator and the runner are killed with SIGKILL at random moments and restarted (and, as
 * faults asked for, the notifier and the gateway). Each task has a webhook and mail, to a
 * receiver and an SMTP server in this process; a few are followed over SSE. Then the log is
 * checked: every task completed, recorded once however often its submit was sent again, no
 * stream has a version gap, no step was recorded twice, every tool_use has exactly one
 * tool_result, no tool ran again after its result was recorded (from the runner's audit file,
 * written before each tool runs); every follower saw every event; every task's completion
 * webhook arrived (at least once) and no webhook was given up; no mail was left unsettled, sent
 * twice, or recorded sent without arriving.
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
  faults?: ChaosFaults;
}

/** Faults besides the orchestrator's and the runner's kills: how many of each. */
export interface ChaosFaults {
  busWipes: number;
  natsRestarts: number;
  postgresRestarts: number;
  /** SIGKILLs of the notifier (restarted after a random pause), while it sends webhooks and mail. */
  notifierKills: number;
  /** SIGKILLs of the gateway (restarted after a random pause), while tasks are submitted, decided and followed. */
  gatewayKills: number;
}

export const NO_FAULTS: ChaosFaults = { busWipes: 0, natsRestarts: 0, postgresRestarts: 0, notifierKills: 0, gatewayKills: 0 };

const FAULT_NAMES: Record<string, keyof ChaosFaults> = {
  'bus-wipes': 'busWipes',
  'nats-restarts': 'natsRestarts',
  'postgres-restarts': 'postgresRestarts',
  'notifier-kills': 'notifierKills',
  'gateway-kills': 'gatewayKills',
};

/** `--faults`: `bus-wipes=2,nats-restarts=1,notifier-kills=5` (each optional, each at most once). */
export function parseFaults(spec: string): ChaosFaults {
  const out = { ...NO_FAULTS };
  const given = new Set<string>();
  for (const part of spec.split(',').map((p) => p.trim()).filter(Boolean)) {
    const [k = '', v, ...rest] = part.split('=');
    const key = FAULT_NAMES[k];
    const n = Number(v);
    if (!key || v === undefined || v.trim() === '' || rest.length > 0 || !Number.isInteger(n) || n < 0) throw new Error(`--faults: '${part}' is not one of ${Object.keys(FAULT_NAMES).map((f) => `${f}=N`).join(', ')} (N a whole number)`);
    if (given.has(k)) throw new Error(`--faults: ${k} is given twice`);
    given.add(k);
    out[key] = n;
  }
  return out;
}

export type Fault = 'kill-orchestrator' | 'kill-sandbox-runner' | 'kill-notifier' | 'kill-gateway' | 'bus-wipe' | 'nats-restart' | 'postgres-restart';

/** The service a kill fault kills. */
const KILLED: Partial<Record<Fault, ServiceName>> = { 'kill-orchestrator': 'orchestrator', 'kill-sandbox-runner': 'sandbox-runner', 'kill-notifier': 'notifier', 'kill-gateway': 'gateway' };

export interface ChaosReport {
  seed: number;
  tasks: number;
  completed: number;
  kills: { orchestrator: number; 'sandbox-runner': number };
  /** Other faults injected (bus wipes, NATS restarts, Postgres crash-restarts, notifier and gateway kills). */
  faults: ChaosFaults;
  /** Submits answered as a replay of an earlier one with the same Idempotency-Key (sent again after a gateway kill). */
  submitsReplayed: number;
  /** Tasks followed over SSE from their submit to their end (through gateway kills). */
  followed: number;
  deliveries: DeliveryFigures;
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
export function faultPlan(random: () => number, kills: number, f: ChaosFaults): Fault[] {
  const plan: Fault[] = [
    ...Array.from({ length: kills }, (): Fault => (random() < 0.5 ? 'kill-orchestrator' : 'kill-sandbox-runner')),
    ...Array.from({ length: f.busWipes }, (): Fault => 'bus-wipe'),
    ...Array.from({ length: f.natsRestarts }, (): Fault => 'nats-restart'),
    ...Array.from({ length: f.postgresRestarts }, (): Fault => 'postgres-restart'),
    ...Array.from({ length: f.notifierKills }, (): Fault => 'kill-notifier'),
    ...Array.from({ length: f.gatewayKills }, (): Fault => 'kill-gateway'),
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
  const wanted = o.faults ?? NO_FAULTS;
  // Private servers, the SMTP server and the webhook receiver come from the test kit, loaded when a run starts (the CLI itself does not need it).
  const servers = wanted.natsRestarts > 0 || wanted.postgresRestarts > 0 ? await import('@baton/testing/servers') : null;
  const ownNats = servers && wanted.natsRestarts > 0 ? await servers.privateNats() : null;
  const ownPg = servers && wanted.postgresRestarts > 0 ? await servers.privatePostgres() : null;
  const smtp = await (await import('@baton/testing/smtp')).smtpCatcher();
  const receiver = await (await import('@baton/testing/webhook-receiver')).webhookReceiver();
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
    // Mail to the SMTP server in this process (a claim's lease, three times the timeout, ends 15 s after a killed notifier took it).
    SMTP_URL: smtp.url,
    MAIL_FROM: 'Baton chaos <chaos@example.com>',
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    MAIL_LINK_SECRET: randomBytes(32).toString('hex'),
    MAIL_TIMEOUT_MS: '5000',
    // Webhooks to the receiver in this process, on loopback.
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  };
  // Each service's last lines, whatever their level (a crash's stack trace is not a log line): said with a service that exits on its own.
  const tails = new Map<string, string[]>();
  const keep = (l: string): void => {
    const name = l.slice(0, 14).trim();
    const tail = tails.get(name) ?? [];
    tail.push(l);
    if (tail.length > 15) tail.shift();
    tails.set(name, tail);
  };
  const shown = o.serviceLog ?? ((l: string) => (/ERROR|FATAL/.test(l) ? o.log(l) : undefined));
  const write = (l: string): void => {
    keep(l);
    shown(l);
  };
  const running = new Map<ServiceName, Launched>();
  // A service that exits on its own (not killed by this run) is a finding, not a fault: said, and
  // started again at once as a supervisor would (else the run would wait for it until it times out).
  const killing = new Set<ServiceName>();
  const crashed: string[] = [];
  let done = false;
  const start = (name: ServiceName): void => {
    const launched = launch({
      env, services: [name], write, color: false,
      onExit: (e) => {
        if (done || killing.has(name) || running.get(name) !== launched) return;
        crashed.push(`${name} exited on its own (${e.signal ?? `code ${String(e.code)}`}) after ${Math.round(e.uptimeMs / 1000)} s`);
        o.log(`chaos: ${crashed.at(-1) ?? ''}; starting it again. Its last lines:\n${(tails.get(name) ?? []).join('\n')}`);
        start(name);
      },
    });
    running.set(name, launched);
  };
  for (const name of ['gateway', 'notifier', 'orchestrator', 'sandbox-runner'] as const) start(name);
  const api = new BatonClient(`http://127.0.0.1:${port}`);
  const kills = { orchestrator: 0, 'sandbox-runner': 0 };
  const faults = { ...NO_FAULTS };
  const plan = faultPlan(random, o.kills, wanted);
  const ids: string[] = [];
  const followers: Follower[] = [];
  const stopFollowing = new AbortController();
  let submitsReplayed = 0;
  let decisions = 0;
  let ok = false;
  try {
    await waitReady(api);

    // The submitter, before the faults begin (faults while the services still start up are not
    // what this run measures): each task under an Idempotency-Key of its own, sent again (the
    // same key) until the gateway answers.
    const submitBy = Date.now() + o.timeoutMs;
    for (let i = 0; i < o.tasks; i++) {
      const prompt = (PROMPTS[i % PROMPTS.length] as (i: number) => string)(i);
      const task = { prompt, approvalTimeoutSeconds: 3600, webhook: { url: receiver.url() }, notify: { email: { to: [MAIL_TO] } } };
      const submitted = await submitSurely(api, task, `chaos-${namespace}-${i}`, submitBy);
      if (submitted.replayed) submitsReplayed++;
      ids.push(submitted.id);
      if (followers.length < FOLLOWED) followers.push(follow(api, submitted.id, stopFollowing.signal));
    }
    o.log(`chaos: ${o.tasks} tasks submitted; ${plan.length} faults (${o.kills} kills of the orchestrator and the runner), seed ${o.seed}`);

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

    // The killer: at random moments, SIGKILL a service (restarted after a random pause), delete
    // the bus's streams, restart NATS, or crash-restart Postgres.
    let natsRestarts = 0;
    const killer = (async () => {
      for (const fault of plan) {
        if (done) break;
        await sleep(200 + random() * 900);
        const victim = KILLED[fault];
        if (victim) {
          killing.add(victim);
          await (running.get(victim) as Launched).stop('SIGKILL', 0);
          killing.delete(victim);
          if (victim === 'orchestrator' || victim === 'sandbox-runner') kills[victim]++;
          else faults[victim === 'notifier' ? 'notifierKills' : 'gatewayKills']++;
          await sleep(random() * 400);
          start(victim);
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
      { timeoutMs: Math.max(0, submitBy - Date.now()), intervalMs: 250, onTimeout: async () => new Error(`chaos: ${ids.length - (last?.final ?? 0)} of ${ids.length} tasks not final after ${o.timeoutMs} ms (${JSON.stringify(last?.byStatus ?? {})})\n${await describeStuck(dbUrl, ids).catch((e: unknown) => `(could not describe the stuck tasks: ${(e as Error).message})`)}`) },
    );
    done = true;
    await killer;
    await keeper;
    await person;
    const killed = kills.orchestrator + kills['sandbox-runner'];
    if (killed < o.kills) o.log(`chaos: the tasks finished after ${killed} of the ${o.kills} kills asked for (more tasks give the killer more time)`);
    // Every service is up again now: what the notifiers owe is settled soon after the tasks end.
    const settled = await settleDeliveries(dbUrl, ids, receiver, DELIVERIES_SETTLE_MS);
    const followerViolations = await checkFollowers(dbUrl, followers, stopFollowing);
    const report = await verify(dbUrl, ids, auditFile);
    const delivered = await verifyDeliveries(dbUrl, ids, receiver, smtp.mails);
    const recorded = await withClient(dbUrl, async (c) => (await c.query<{ n: number }>('select count(*)::int as n from tasks')).rows[0]?.n ?? 0);
    const violations = [
      ...crashed,
      ...report.violations,
      ...(recorded !== ids.length || new Set(ids).size !== ids.length ? [`${recorded} tasks recorded for ${ids.length} submits (${new Set(ids).size} distinct ids answered)`] : []),
      ...followerViolations,
      ...(settled ? [] : [`deliveries not settled ${DELIVERIES_SETTLE_MS / 1000} s after the last task ended`]),
      ...delivered.violations,
    ];
    ok = violations.length === 0;
    return { seed: o.seed, tasks: ids.length, kills, faults, natsDied, decisions, submitsReplayed, followed: followers.length, seconds: (performance.now() - t0) / 1000, ...report, deliveries: delivered.figures, violations };
  } finally {
    done = true;
    stopFollowing.abort();
    await Promise.all([...running.values()].map((v) => v.stop('SIGTERM')));
    await Promise.all(followers.map((f) => f.ended));
    await Promise.all([smtp.close(), receiver.close()]);
    await rm(dir, { recursive: true, force: true });
    if (!ownNats) await deleteNamespaceStreams(natsUrl, namespace).catch(() => {});
    await ownNats?.destroy();
    if (ownPg) await ownPg.destroy();
    else if (ok) await dropDatabase(dbUrl);
    else o.log(`chaos: the database is kept for inspection: ${dbUrl}`);
  }
}

/** Where the tasks' mail goes (the SMTP server in this process takes any address). */
const MAIL_TO = 'person@chaos.example';
/** How many tasks are followed over SSE, the first submitted. */
const FOLLOWED = 10;
/** How long, after the last task ended, the notifiers have to settle every webhook and mail. */
const DELIVERIES_SETTLE_MS = 120_000;

/** Submit under `key` until the gateway answers (unreachable, 429 or 5xx: the same request again a moment later). */
async function submitSurely(api: BatonClient, task: Parameters<BatonClient['submit']>[0], key: string, by: number): Promise<{ id: string; replayed: boolean }> {
  for (;;) {
    try {
      const t = await api.submit(task, { idempotencyKey: key });
      return { id: t.id, replayed: t.replayed };
    } catch (err) {
      if (err instanceof ApiError && err.status < 500 && err.status !== 429) throw err;
      if (Date.now() > by) throw new Error(`chaos: the submit ${key} was not answered in time`, { cause: err });
      await sleep(100);
    }
  }
}

interface Follower {
  taskId: string;
  /** Event ids in the order the follower received them. */
  seen: string[];
  /** Settles when the follow ends: at the task's final event, or stopped; `error` if it ended refused. */
  ended: Promise<void>;
  error: Error | null;
}

/** Follow a task over SSE (the client reconnects with Last-Event-ID across gateway kills) and keep what it saw. */
function follow(api: BatonClient, taskId: string, signal: AbortSignal): Follower {
  const f: Follower = { taskId, seen: [], ended: Promise.resolve(), error: null };
  f.ended = api.follow(taskId, (e) => void f.seen.push(e.id), { signal }).catch((err: unknown) => {
    if (!signal.aborted) f.error = err instanceof Error ? err : new Error(String(err));
  });
  return f;
}

/** Each follower, given a little time to reach its task's end, saw every event of its task up to the final one. */
async function checkFollowers(dbUrl: string, followers: Follower[], stop: AbortController): Promise<string[]> {
  await Promise.race([Promise.all(followers.map((f) => f.ended)), sleep(30_000)]);
  stop.abort();
  await Promise.all(followers.map((f) => f.ended));
  const violations: string[] = [];
  await withClient(dbUrl, async (c) => {
    for (const f of followers) {
      if (f.error) violations.push(`the SSE follower of task ${f.taskId} ended refused: ${f.error.message}`);
      // Every event recorded up to the task's final one (events after it, if any, are not followed).
      const { rows } = await c.query<{ id: string }>(
        `select event_id as id from events where task_id = $1 and global_position <= (select max(global_position) from events where task_id = $1 and type in ('TaskCompleted', 'TaskFailed', 'TaskCancelled')) order by global_position`,
        [f.taskId],
      );
      const seen = new Set(f.seen);
      const missed = rows.filter((r) => !seen.has(r.id)).length;
      if (missed > 0) violations.push(`the SSE follower of task ${f.taskId} missed ${missed} of its ${rows.length} events`);
    }
  });
  return violations;
}

export interface DeliveryFigures {
  /** Webhook requests the receiver took, and how many messages (webhook-ids) came more than once (webhooks are at least once). */
  webhooks: number;
  webhooksRepeated: number;
  /** Mails the SMTP server took, and mails whose outcome the ledger could not know (a notifier killed while handing it over). */
  mails: number;
  mailsUnknown: number;
}

/** Wait (up to `ms`) until no mail is claimed or due again and every task's completion webhook and mail came. */
async function settleDeliveries(dbUrl: string, ids: string[], receiver: { bodies: unknown[] }, ms: number): Promise<boolean> {
  const by = Date.now() + ms;
  for (;;) {
    const arrived = completedHooks(receiver.bodies);
    const open = await withClient(dbUrl, async (c) => {
      const r = await c.query<{ pending: number; completed: number }>(
        `select count(*) filter (where state in ('sending', 'retry'))::int as pending, count(*) filter (where mail_key = 'completed' and state in ('sent', 'failed', 'unknown'))::int as completed
           from mail_sends where task_id = any($1::uuid[])`,
        [ids],
      );
      return r.rows[0] ?? { pending: 0, completed: 0 };
    }).catch(() => null);
    if (open && open.pending === 0 && open.completed === ids.length && ids.every((id) => arrived.has(id))) return true;
    if (Date.now() > by) return false;
    await sleep(250);
  }
}

/**
 * The notifiers' promises, from what arrived and what the ledger says: every task's completion
 * webhook arrived, no webhook message was left failing or given up (the receiver took every
 * request), each one the ledger calls delivered arrived; no mail was left claimed or due again,
 * none arrived twice, each one recorded sent arrived, and every task's completion mail went.
 */
export async function verifyDeliveries(dbUrl: string, ids: string[], receiver: { bodies: unknown[]; ids: string[] }, mails: { messageId: string }[]): Promise<{ figures: DeliveryFigures; violations: string[] }> {
  const violations: string[] = [];
  const received = new Map<string, number>();
  for (const id of receiver.ids) received.set(id, (received.get(id) ?? 0) + 1);
  const arrived = completedHooks(receiver.bodies);
  for (const id of ids) if (!arrived.has(id)) violations.push(`task ${id}: its task.completed webhook never arrived`);
  const mailed = new Map<string, number>();
  for (const m of mails) mailed.set(bare(m.messageId), (mailed.get(bare(m.messageId)) ?? 0) + 1);
  for (const [id, n] of mailed) if (n > 1) violations.push(`mail ${id} arrived ${n} times`);
  let mailsUnknown = 0;
  await withClient(dbUrl, async (c) => {
    const hooks = await c.query<{ task_id: string; webhook_id: string; type: string; ok: boolean; given_up: boolean; error: string | null }>(
      `select task_id, webhook_id, min(type) as type, bool_or(ok) as ok, bool_or(given_up) as given_up, (array_agg(error order by id desc))[1] as error
         from webhook_deliveries where channel = 'webhook' and task_id = any($1::uuid[]) group by task_id, webhook_id`,
      [ids],
    );
    for (const h of hooks.rows) {
      const what = `task ${h.task_id}: webhook ${h.webhook_id} (${h.type})`;
      if (h.ok && !received.has(h.webhook_id)) violations.push(`${what} is recorded delivered but never arrived`);
      else if (!h.ok && h.given_up) violations.push(`${what} was given up though the receiver took every request (last error: ${h.error ?? 'none'})`);
      else if (!h.ok) violations.push(`${what} was left failed, never delivered nor given up (last error: ${h.error ?? 'none'})`);
    }
    const sends = await c.query<{ task_id: string; mail_key: string; message_id: string; state: string; last_error: string | null }>(
      'select task_id, mail_key, message_id, state, last_error from mail_sends where task_id = any($1::uuid[])',
      [ids],
    );
    const completionMails = new Set<string>();
    for (const m of sends.rows) {
      const what = `task ${m.task_id}: mail ${m.mail_key}`;
      if (m.state === 'sending' || m.state === 'retry') violations.push(`${what} was left ${m.state}`);
      if (m.state === 'sent' && !mailed.has(bare(m.message_id))) violations.push(`${what} is recorded sent but never arrived`);
      if (m.state === 'unknown') mailsUnknown++;
      if (m.mail_key === 'completed') {
        if (m.state === 'failed') violations.push(`${what} failed: ${m.last_error ?? 'no reason recorded'}`);
        completionMails.add(m.task_id);
      }
    }
    for (const id of ids) if (!completionMails.has(id)) violations.push(`task ${id}: no completion mail`);
  });
  const figures = { webhooks: receiver.ids.length, webhooksRepeated: [...received.values()].filter((n) => n > 1).length, mails: mails.length, mailsUnknown };
  return { figures, violations };
}

/** The tasks whose task.completed webhook arrived (its data is the task, as GET /v1/tasks/:id shows it). */
const completedHooks = (bodies: unknown[]): Set<string | undefined> =>
  new Set(bodies.map((b) => b as { type?: string; data?: { task?: { id?: string } } }).filter((b) => b.type === 'task.completed').map((b) => b.data?.task?.id));

/** A Message-ID without its angle brackets. */
const bare = (id: string): string => id.replace(/^<|>$/g, '');

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
export async function verify(dbUrl: string, ids: string[], auditFile: string): Promise<Omit<ChaosReport, 'seed' | 'tasks' | 'kills' | 'faults' | 'natsDied' | 'decisions' | 'seconds' | 'submitsReplayed' | 'followed' | 'deliveries'>> {
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
