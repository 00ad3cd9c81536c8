import type { Command, TaskState } from '@baton/domain';
import { publishWakeUps } from '@baton/bus';
import { handleCommand, type LoadedTask, type WriteResult } from '@baton/event-store';
import type { GatewayDeps } from '../deps.ts';

/**
 * The one way the gateway records a person's command on a task (the API's decisions, answers and
 * cancels, and the mailed links' — docs/email.md): decided on the task just loaded, retried on a
 * version conflict (re-read), then the wake-ups published.
 */
export async function runTaskCommand(d: GatewayDeps, taskId: string, loaded: LoadedTask, make: (s: TaskState) => Command, actor: string): Promise<WriteResult> {
  // The first attempt decides on the state just loaded; a retry after a conflict re-reads.
  let fresh = true;
  const load = (id: string) => (fresh ? ((fresh = false), Promise.resolve(loaded)) : d.load(id));
  const res = await handleCommand(d.store, taskId, make, { metadata: { actor }, now: d.now, load });
  publishWakeUps(d.nats(), d.names, res.events);
  return res;
}
