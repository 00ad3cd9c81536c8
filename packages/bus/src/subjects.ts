/**
 * Every NATS name Baton uses, defined once. Services never concatenate subjects.
 * A namespace (BATON_NAMESPACE) prefixes everything so several systems — or tests — can
 * share one NATS server without their streams' subjects overlapping.
 */
export interface BusNames {
  namespace: string;
  eventsStream: string;
  jobsStream: string;
  /** `baton.events.<taskId>.<EventType>` */
  eventSubject(taskId: string, type: string): string;
  /** `baton.events.<taskId>.>`: every event of one task in `BATON_EVENTS`. */
  taskEvents(taskId: string): string;
  /**
   * `baton.signals.<taskId>.<EventType>`: a transition no durable consumer needs (the notifier
   * serves neither the task nor its tenant), sent on core NATS only (in no stream): it wakes live views.
   */
  signalSubject(taskId: string, type: string): string;
  /** `baton.signals.<taskId>.>`: every signal of one task. */
  taskSignals(taskId: string): string;
  /** `baton.events.>` */
  allEvents: string;
  /** `baton.signals.>`: every task's signals. */
  allSignals: string;
  /** The task a subject of `eventSubject` or `signalSubject` names (null: neither). */
  taskOfTransition(subject: string): string | null;
  /** `baton.live`: live ticks (core NATS, no stream), each the ids of tasks whose steps were committed (`LiveTicksPayload`); they wake live views. */
  liveTicks: string;
  /** `baton.triggers.<taskId>.<EventType>`: the subset of events that can wake the lead (same stream). */
  triggerSubject(taskId: string, type: string): string;
  allTriggers: string;
  /** `baton.jobs.<kind>.<taskId>.<agentId>` */
  jobSubject(kind: JobKind, taskId: string, agentId: string): string;
  allJobs: string;
  consumers: { orchestrator: string; notifier: string; runner: string };
  /** `baton.diag.<service>`: request/reply vital signs of a service (core NATS, not JetStream). */
  diagSubject(service: string): string;
  /** `baton.deployment`: each worker answers with its database's deployment id (core NATS request/reply; `deploymentAnswers`). */
  deploymentSubject: string;
}

export type JobKind = 'run' | 'release';

/**
 * A name as one subject token. Ids that reach subjects are validated where they are made (task
 * ids are UUIDs, agent and subtask ids `[a-z0-9_-]`), so this changes nothing for them; anything
 * else is escaped rather than allowed to make a subject no stream takes (a '.', a space, an empty
 * token), which would hold up the relay's publishing for every task.
 */
export const subjectToken = (name: string): string => (/^[A-Za-z0-9_-]+$/.test(name) ? name : `~${Buffer.from(name).toString('hex')}`);

export function busNames(namespace = ''): BusNames {
  if (namespace && !/^[a-z0-9]{1,20}$/.test(namespace)) throw new Error(`namespace '${namespace}' must be 1-20 lowercase letters or digits`);
  const root = namespace ? `${namespace}.baton` : 'baton';
  const suffix = namespace ? `_${namespace.toUpperCase()}` : '';
  const transitionPrefixes = [`${root}.events.`, `${root}.signals.`];
  return {
    namespace,
    eventsStream: `BATON_EVENTS${suffix}`,
    jobsStream: `BATON_JOBS${suffix}`,
    eventSubject: (taskId, type) => `${root}.events.${taskId}.${type}`,
    taskEvents: (taskId) => `${root}.events.${taskId}.>`,
    signalSubject: (taskId, type) => `${root}.signals.${taskId}.${type}`,
    taskSignals: (taskId) => `${root}.signals.${taskId}.>`,
    allEvents: `${root}.events.>`,
    allSignals: `${root}.signals.>`,
    taskOfTransition: (subject) => {
      const prefix = transitionPrefixes.find((p) => subject.startsWith(p));
      if (!prefix) return null;
      // `<taskId>.<EventType>`, both present.
      const [taskId, type, ...more] = subject.slice(prefix.length).split('.');
      return taskId && type && more.length === 0 ? taskId : null;
    },
    liveTicks: `${root}.live`,
    triggerSubject: (taskId, type) => `${root}.triggers.${taskId}.${type}`,
    allTriggers: `${root}.triggers.>`,
    jobSubject: (kind, taskId, agentId) => `${root}.jobs.${kind}.${subjectToken(taskId)}.${subjectToken(agentId)}`,
    allJobs: `${root}.jobs.>`,
    consumers: { orchestrator: 'orchestrator-task-events', notifier: 'notifier-webhooks', runner: 'runner-jobs' },
    diagSubject: (service) => `${root}.diag.${service}`,
    deploymentSubject: `${root}.deployment`,
  };
}
