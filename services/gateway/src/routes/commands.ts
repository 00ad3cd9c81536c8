import type { Command, TaskState } from '@baton/domain';
import { publishWakeUps } from '@baton/bus';
import { handleCommand, type LoadedTask, type WriteResult } from '@baton/event-store';
import { activeSpan, carrierFrom, contextFromCarrier, inSpan, spanContextOf } from '@baton/telemetry';
import type { GatewayDeps } from '../deps.ts';

/**
 * The one way the gateway records a person's command on a task (the API's decisions, answers and
 * cancels, and the mailed links' — docs/email.md): decided on the task just loaded, retried on a
 * version conflict (re-read), then the wake-ups published.
 *
 * Traced, the command joins the task's own trace (the one its submission started, named in the
 * first event's metadata), linked to the request that carried it: what it wakes (the lead, a
 * subagent) then continues that one trace per task, however long a person took.
 */
export async function runTaskCommand(d: GatewayDeps, taskId: string, loaded: LoadedTask, make: (s: TaskState) => Command, actor: string): Promise<WriteResult> {
  const root = carrierFrom(loaded.events[0]?.metadata);
  const request = activeSpan()?.spanContext();
  return inSpan(
    'baton.command',
    { ...(spanContextOf(root) ? { parent: contextFromCarrier(root) } : {}), ...(request ? { links: [{ context: request }] } : {}), attributes: { 'baton.task_id': taskId, 'baton.actor': actor } },
    async () => {
      // The first attempt decides on the state just loaded; a retry after a conflict re-reads.
      let fresh = true;
      const load = (id: string) => (fresh ? ((fresh = false), Promise.resolve(loaded)) : d.load(id));
      const res = await handleCommand(d.store, taskId, make, { metadata: { actor }, now: d.now, load });
      publishWakeUps(d.nats(), d.names, res.events);
      return res;
    },
  );
}
