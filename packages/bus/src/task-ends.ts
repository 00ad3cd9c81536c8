import { TERMINAL_EVENT_TYPES } from '@baton/domain';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { BusNames } from './subjects.ts';

/** Why work of a task was aborted where it ran: the task ended (cancelled, failed, completed) meanwhile. */
export class TaskEndedError extends Error {
  readonly taskId: string;
  readonly type: string;
  constructor(taskId: string, type: string) {
    super(`task ${taskId} ended (${type}) while this work ran`);
    this.name = new.target.name;
    this.taskId = taskId;
    this.type = type;
  }
}

/**
 * Call `onEnd(taskId, type)` for each task whose final event (TERMINAL_EVENT_TYPES) the relay
 * sends — on `BATON_EVENTS` or as a signal — heard on core NATS, so every replica hears it (a
 * work queue would tell one). What it stops is also stopped at its next step when a message is
 * missed (a reconnect): this makes it sooner, not safe.
 */
export function onTaskEnds(nc: Pick<NatsConnection, 'subscribe'>, names: BusNames, onEnd: (taskId: string, type: string) => void): { stop(): void } {
  const subs: Subscription[] = [];
  for (const type of TERMINAL_EVENT_TYPES) {
    for (const subject of [names.eventSubject('*', type), names.signalSubject('*', type)]) {
      subs.push(
        nc.subscribe(subject, {
          callback: (err, m) => {
            if (err) return;
            const taskId = names.taskOfTransition(m.subject);
            if (taskId) onEnd(taskId, type);
          },
        }),
      );
    }
  }
  return { stop: () => subs.forEach((s) => s.unsubscribe()) };
}
