import { countDeadLetters, deadLetterGivesUp, deadLetterRecorder, onTaskEnds, publishWakeUps, TaskEndedError, RunnerJob, startConsumer, TopologyWatch, type BusNames, type DeadLetter, type RunningConsumer, type TopologyOptions } from '@baton/bus';
import { isAgentActive, type AgentState } from '@baton/domain';
import { metrics } from '@baton/telemetry';
import { keyedSerial } from '@baton/runtime';
import { handleCommand, loadTask } from '@baton/event-store';
import { jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type pg from 'pg';
import { runSubagentJob, type RunnerDeps } from './subagent.ts';

export interface RunnerWorkerDeps extends RunnerDeps {
  pool: pg.Pool;
  js: JetStreamClient;
  /** For the fast path (wake-ups published right after a commit); the relay covers its absence. */
  nc?: NatsConnection;
  names: BusNames;
  concurrency: number;
  maxAttempts: number;
  /** `working()` interval while a job runs; below the consumer's ack_wait. */
  heartbeatMs?: number;
  /** The longest a job may run before it is aborted and its message handed back. */
  maxJobMs?: number;
  /** How often the bus topology is checked (re-created where missing); needs `nc`. */
  busCheckMs?: number;
  topology?: TopologyOptions;
  /** Drop a task from the process's cache once its end is heard on the bus (`TaskCache.ended`; needs `nc`). */
  ended?: (taskId: string) => void;
}

/**
 * Whether a dead-lettered run job fails its agent (SubagentFailed, `job_failed`): when the agent
 * is still dispatched or running and the dead letter gives the work up (`deadLetterGivesUp`: its
 * handler failed, or it is the agent's UNSETTLED_DEAD_LETTERS_TO_GIVE_UP-th unsettled one,
 * `recorded` counting the agent's dead letters, this one included). An unsettled one before that
 * — its runners killed or stopped under it, perhaps while an outage kept handing it back — leaves
 * the agent to the watchdog, which re-dispatches it (a fresh job) once it has been idle
 * WATCHDOG_GRACE_MS with no live lease. So does an agent in a model outage (its last model call
 * found the API unable to answer): its job's attempts ran out waiting for the model, not on its
 * work, and the agent loop ends it `model_unavailable` once the outage has lasted the model's
 * limit — the same bound however many runners its jobs went to.
 */
export function deadJobFailsAgent(dl: Pick<DeadLetter, 'unsettled'>, agent: Pick<AgentState, 'status' | 'modelOutage'> | undefined, recorded: number): boolean {
  return deadLetterGivesUp(dl, recorded) && agent !== undefined && isAgentActive(agent) && agent.modelOutage === undefined;
}

/**
 * Competing consumers on the runner work queue. A job whose attempts are exhausted is
 * recorded as a dead letter and, when it failed, the subagent fails visibly (SubagentFailed),
 * never silently (`deadJobFailsAgent`).
 */
export async function startRunner(d: RunnerWorkerDeps): Promise<RunningConsumer> {
  const recordDeadLetter = deadLetterRecorder(d.pool);
  const load = d.load ?? ((id: string) => loadTask(d.store, id));
  // One agent's jobs run one at a time in this process. Two deliveries for one agent (a
  // redelivery while the first still runs, or a dispatch and a decision) would otherwise race
  // on the agent's sandbox directory, and the first to finish would ack a message the other
  // still needed: a crash of the other then lost the agent (seen once under chaos).
  const perAgent = keyedSerial();
  const nc = d.nc;
  const topology = nc
    ? new TopologyWatch({ jsm: () => jetstreamManager(nc), names: d.names, ...(d.topology ? { topology: d.topology } : {}), log: d.log.child({ component: 'topology' }), everyMs: d.busCheckMs ?? 5000 })
    : null;
  topology?.start();
  // Run jobs at work here, by task: a task that ends aborts them at once — its model call, its
  // command — instead of at their next step (a cancelled task's command ran for minutes on).
  const running = new Map<string, Set<AbortController>>();
  // Its cached state goes too: the runner's last load of a task is while its lead still works, so
  // nothing here would load the finished task again to drop it.
  const ends = nc
    ? onTaskEnds(nc, d.names, (taskId, type) => {
        running.get(taskId)?.forEach((c) => c.abort(new TaskEndedError(taskId, type)));
        d.ended?.(taskId);
      })
    : null;
  const consumer = await startConsumer({
    js: d.js,
    stream: d.names.jobsStream,
    consumer: d.names.consumers.runner,
    schema: RunnerJob,
    log: d.log.child({ component: 'runner' }),
    concurrency: d.concurrency,
    maxAttempts: d.maxAttempts,
    heartbeatMs: d.heartbeatMs ?? 5000,
    ...(d.maxJobMs ? { maxHandlerMs: d.maxJobMs } : {}),
    onMissing: () => topology?.poke(),
    onDeadLetter: async (dl) => {
      await recordDeadLetter(dl);
      const job = RunnerJob.safeParse(safeJson(dl.payload));
      if (!job.success || job.data.kind !== 'run') return;
      const { taskId, agentId } = job.data;
      const { state } = await loadTask(d.store, taskId);
      const agent = state.agents[agentId];
      const recorded = await countDeadLetters(d.pool, dl.consumer, { subject: dl.subject });
      if (deadJobFailsAgent(dl, agent, recorded)) {
        const message = dl.unsettled ? `${dl.error} (the agent's jobs dead-lettered ${recorded} times: given up)` : dl.error;
        await handleCommand(d.store, taskId, { type: 'FailSubagent', agentId, code: 'job_failed', message });
      } else if (agent && isAgentActive(agent)) {
        d.log.warn({ taskId, agentId, error: dl.error, deadLetters: recorded, modelOutage: agent.modelOutage }, agent.modelOutage ? 'job dead-lettered while the model API could not answer: the watchdog re-dispatches its agent' : 'job dead-lettered unsettled: the watchdog re-dispatches its agent');
        return; // its sandbox stays for the next attempt
      }
      await d.sandboxes.kill(taskId, agentId);
    },
    handle: async (job, ctx) => {
      if (job.kind === 'release' || job.kind === 'release-agent') {
        // The task has ended, or one agent failed: whatever sandboxes they still have go (the log and the artifacts keep what they did).
        const agents = job.kind === 'release-agent' ? [job.agentId] : Object.keys((await load(job.taskId)).state.agents);
        for (const agentId of agents) await d.sandboxes.kill(job.taskId, agentId);
        d.log.info({ taskId: job.taskId, ...(job.kind === 'release-agent' ? { agentId: job.agentId } : {}) }, 'sandboxes released');
        return;
      }
      const started = performance.now();
      ctx.span.setAttributes({ 'gen_ai.agent.id': job.agentId, 'baton.cause_event_id': job.causeEventId });
      let outcome: string = 'error';
      const own = new AbortController();
      const follow = (): void => own.abort(ctx.signal.reason);
      if (ctx.signal.aborted) follow();
      else ctx.signal.addEventListener('abort', follow, { once: true });
      const mine = running.get(job.taskId) ?? new Set<AbortController>();
      running.set(job.taskId, mine.add(own));
      try {
        outcome = await perAgent(`${job.taskId}/${job.agentId}`, () => runSubagentJob({ ...d, load, committed: (events) => publishWakeUps(d.nc ?? null, d.names, events) }, job.taskId, job.agentId, ctx.working, { signal: own.signal, stopping: ctx.stopping, causeEventId: job.causeEventId }));
      } finally {
        ctx.signal.removeEventListener('abort', follow);
        mine.delete(own);
        if (mine.size === 0) running.delete(job.taskId);
        metrics.jobs.inc({ kind: job.kind, outcome });
        metrics.jobSeconds.observe({ kind: job.kind }, (performance.now() - started) / 1000);
      }
      ctx.span.setAttribute('baton.job.outcome', outcome);
      d.log.info({ taskId: job.taskId, agentId: job.agentId, outcome, delivery: ctx.deliveryCount }, 'job done');
    },
  });
  return {
    get inFlight() {
      return consumer.inFlight;
    },
    async stop() {
      ends?.stop();
      await topology?.stop();
      await consumer.stop();
    },
  };
}

function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return null;
  }
}
