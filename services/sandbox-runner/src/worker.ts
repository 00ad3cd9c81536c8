import { deadLetterRecorder, RunnerJob, startConsumer, type BusNames, type RunningConsumer } from '@baton/bus';
import { handleCommand, loadTask } from '@baton/event-store';
import type { JetStreamClient } from '@nats-io/jetstream';
import type pg from 'pg';
import { runSubagentJob, type RunnerDeps } from './subagent.ts';

export interface RunnerWorkerDeps extends RunnerDeps {
  pool: pg.Pool;
  js: JetStreamClient;
  names: BusNames;
  concurrency: number;
  maxAttempts: number;
}

/**
 * Competing consumers on the runner work queue. A job whose attempts are exhausted is
 * recorded as a dead letter and the subagent fails visibly (SubagentFailed), never silently.
 */
export async function startRunner(d: RunnerWorkerDeps): Promise<RunningConsumer> {
  const recordDeadLetter = deadLetterRecorder(d.pool);
  return startConsumer({
    js: d.js,
    stream: d.names.jobsStream,
    consumer: d.names.consumers.runner,
    schema: RunnerJob,
    log: d.log.child({ component: 'runner' }),
    concurrency: d.concurrency,
    maxAttempts: d.maxAttempts,
    heartbeatMs: 5000,
    onDeadLetter: async (dl) => {
      await recordDeadLetter(dl);
      const job = RunnerJob.safeParse(safeJson(dl.payload));
      if (!job.success) return;
      const { state } = await loadTask(d.store, job.data.taskId);
      const agent = state.agents[job.data.agentId];
      if (agent && ['dispatched', 'running'].includes(agent.status)) {
        await handleCommand(d.store, job.data.taskId, { type: 'FailSubagent', agentId: job.data.agentId, code: 'job_failed', message: dl.error });
      }
    },
    handle: async (job, ctx) => {
      const outcome = await runSubagentJob(d, job.taskId, job.agentId, ctx.working, ctx.signal);
      d.log.info({ taskId: job.taskId, agentId: job.agentId, outcome, delivery: ctx.deliveryCount }, 'job done');
    },
  });
}

function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return null;
  }
}
