import { IllegalTransitionError, InvalidCommandError } from './errors.ts';
import { emailIdFor } from './email.ts';
import { agentOfStream, agentStreamId, isTaskStream, REQUEST_EVENT_TYPES, TERMINAL_EVENT_TYPES, taskStreamId, type EventData, type NewEvent, type RecordedEvent } from './events.ts';
import { uuidV5 } from './ids.ts';
import { stateAt } from './replay.ts';
import { isFinal } from './state.ts';

/** Was this event copied from another task by a fork (its history, not something that happened in this task)? */
export const isCopied = (e: { metadata?: unknown }): boolean => typeof (e.metadata as { copiedFrom?: unknown } | null | undefined)?.copiedFrom === 'string';

/**
 * Does this event tell anyone (mail, webhook)? What a fork copied does not — the source's
 * history, already told — except a request still open at the fork point: the fork reopened it
 * (`reopened`, with a fresh deadline), and unless someone hears of it, it times out unanswered.
 */
export const notifiesAnyone = (e: { metadata?: unknown }): boolean => !isCopied(e) || (e.metadata as { reopened?: unknown }).reopened === true;

export interface ForkedEvent {
  streamId: string;
  version: number;
  event: NewEvent;
}

/**
 * Which commit recorded each event of a task's stream: task-stream version → a key its commit's
 * events share (the transaction that wrote them; for an event a fork copied, the key its source
 * had, `metadata.copiedCommit`). A version it does not name is taken as a commit of its own.
 */
export type TaskCommits = ReadonlyMap<number, string>;

/**
 * The versions a task can be forked at, ascending: each one that ends its commit, before the
 * task's end (a fork cannot continue from an end). A fork continues from a state the runtime
 * itself stood at: never between two events recorded together — a budget stop's BudgetRefused and
 * its TaskFailed, a review and its reviewer's completion, a file and the completion that stored
 * it — a state no run was ever in, and which the runtime cannot go on from (a paused agent with no
 * request left to answer, a reviewer whose review is recorded already).
 */
export function forkableVersions(events: readonly RecordedEvent[], commits: TaskCommits): number[] {
  const task = events.filter((e) => isTaskStream(e.streamId));
  const end = task.find((e) => TERMINAL_EVENT_TYPES.has(e.type))?.version ?? Number.POSITIVE_INFINITY;
  const commitOf = (v: number): string => commits.get(v) ?? `v${v}`;
  return task.filter((e, i) => e.version < end && (i + 1 >= task.length || commitOf(task[i + 1]!.version) !== commitOf(e.version))).map((e) => e.version);
}

/**
 * Why a task cannot be forked at `atVersion`, in words (null: it can), given its forkable
 * versions (`forkableVersions`) and its current version.
 */
export function forkRefusal(forkable: readonly number[], atVersion: number, version: number): string | null {
  if (forkable.includes(atVersion)) return null;
  const last = forkable.at(-1);
  if (last === undefined) return `the task has no version it can be forked at yet`;
  if (atVersion > version) return `the task is at version ${version}; fork at a version up to ${last}`;
  if (atVersion > last) return `version ${atVersion} ${atVersion === version ? 'is the end of the task' : 'ends the task, comes after its end, or was recorded in one commit with its end'}; fork at a version up to ${last}`;
  const before = forkable.filter((v) => v < atVersion).at(-1);
  const after = forkable.find((v) => v > atVersion);
  const near = [before, after].filter((v) => v !== undefined).join(' or ');
  return `version ${atVersion} was recorded in one commit with the version after it: a fork starts between commits; fork at ${near}`;
}

/**
 * The history of a fork: every event of the source task up to version `atVersion` of its task
 * stream (agent-stream events recorded before that point included), copied onto the new
 * task's streams with new, deterministic ids. The copy of TaskSubmitted names its origin;
 * requests still open at the fork point get a fresh deadline, counted from `now`, so the
 * fork can be answered differently rather than time out at once. Each copied task-stream event
 * keeps its commit (`copiedCommit`), so a fork of the fork is refused where the source would be.
 * A mail is the fork's own: its id is derived from the fork (`emailIdFor`), so a fork's agent
 * running the same send_email call again records nothing new; and one the source had queued but
 * not settled at the fork point is settled in the fork as not sent by it (`not_sent_by_fork`:
 * the source sends it — a fork never mails an outside recipient a second time). Pure.
 */
export function forkEvents(source: readonly RecordedEvent[], atVersion: number, newTaskId: string, opts: { now: Date; requestedBy: string; commits?: TaskCommits; /** The fork request's trace context: the fork's trace starts there (the source's is not carried over). */ trace?: { traceparent?: string; tracestate?: string } }): ForkedEvent[] {
  const at = stateAt(source, atVersion);
  if (!at) throw new InvalidCommandError(`the task has no version ${atVersion}`, { atVersion });
  const commits = opts.commits ?? new Map<number, string>();
  const refusal = forkRefusal(forkableVersions(source, commits), atVersion, source.findLast((e) => isTaskStream(e.streamId))?.version ?? 0);
  if (refusal && isFinal(at)) throw new IllegalTransitionError('ForkTask', at.status, refusal);
  if (refusal) throw new InvalidCommandError(refusal, { atVersion });
  const sourceId = at.id;
  const deadline = new Date(opts.now.getTime() + at.approvalTimeoutSeconds * 1000).toISOString();
  const emailIds = new Map<string, string>();
  const out: ForkedEvent[] = [];
  for (const e of source) {
    const onTask = isTaskStream(e.streamId);
    const streamId = onTask ? taskStreamId(newTaskId) : agentStreamId(newTaskId, agentOfStream(sourceId, e.streamId) ?? '');
    let data: unknown = e.data;
    if (e.type === 'TaskSubmitted') data = { ...e.data, requestHash: null, forkedFrom: { taskId: sourceId, atVersion } };
    if (e.type === 'EmailRequested') {
      const emailId = emailIdFor(newTaskId, e.data.agentId, e.data.toolUseId);
      emailIds.set(e.data.emailId, emailId);
      data = { ...e.data, emailId };
    }
    if (e.type === 'EmailSent' || e.type === 'EmailFailed') data = { ...e.data, emailId: emailIds.get(e.data.emailId) ?? e.data.emailId };
    // Every kind of open request: an approval, a question, a budget stop (which would otherwise stop the fork at once).
    const reopened = REQUEST_EVENT_TYPES.has(e.type) && at.pendingRequests[(e.data as { requestId: string }).requestId] !== undefined;
    if (reopened) data = { ...(e.data as object), deadline };
    const copiedCommit = onTask ? { copiedCommit: commits.get(e.version) ?? `${sourceId}:v${e.version}` } : {};
    // Not carried over: the source's trace (the fork's work is traced from the fork request), a
    // reopening the source was itself forked with (a request reopened there may be decided by
    // this fork point: this fork reopens only what is open at its own), and, on the submission,
    // the source's Idempotency-Key and submitter (the fork has its own).
    const { traceparent: _tp, tracestate: _ts, reopened: _ro, ...kept } = e.metadata as Record<string, unknown>;
    const metadata = e.type === 'TaskSubmitted' ? withoutKey(kept, 'idempotencyKey') : kept;
    out.push({
      streamId,
      version: e.version,
      event: {
        id: uuidV5(`${newTaskId}:${e.id}`),
        type: e.type,
        data,
        // `copiedRecordedAt`: when the source recorded it (the copy is recorded at the fork's time).
        metadata: { ...metadata, ...opts.trace, copiedFrom: e.id, copiedRecordedAt: typeof kept.copiedRecordedAt === 'string' ? kept.copiedRecordedAt : e.recordedAt.toISOString(), ...copiedCommit, ...(reopened ? { reopened: true } : {}), ...(e.type === 'TaskSubmitted' ? { actor: opts.requestedBy } : {}) },
      } as NewEvent,
    });
    if (onTask && e.version === atVersion) break;
  }
  // Mails the source had queued and not settled at the fork point: the source sends them, not the fork.
  let version = atVersion;
  for (const email of Object.values(at.emails)) {
    if (email.status !== 'queued') continue;
    const emailId = emailIds.get(email.emailId) ?? email.emailId;
    version++;
    out.push({
      streamId: taskStreamId(newTaskId),
      version,
      event: { id: uuidV5(`${newTaskId}:not-sent:${emailId}`), type: 'EmailFailed', data: { emailId, code: 'not_sent_by_fork', message: `queued in task ${sourceId} before the fork point (version ${atVersion}): that task sends it; this fork does not` }, metadata: { actor: 'baton:fork' } } as NewEvent,
    });
  }
  return out;
}

const withoutKey = (m: Record<string, unknown>, key: string): Record<string, unknown> => Object.fromEntries(Object.entries(m).filter(([k]) => k !== key));

/** What a fork takes from its source's storage (forkFiles). */
export interface ForkFiles {
  /** Each artifact the copied history names, as it names it last (its version at the fork point): the fork's files. */
  artifacts: EventData<'ArtifactStored'>[];
  /** Every artifact version the copied history names (sha256), so the fork's `?at=` reads and a rebuilt workspace find each. */
  versions: string[];
  /**
   * Agents that recorded something after the fork point: their live workspaces hold what the
   * fork's history does not (a file written twice once the fork's agent does its turns again),
   * so they are not copied — the fork's agent rebuilds its workspace from the log.
   */
  movedOn: string[];
}

/** What a fork copies of its source's files, given the source's events and the fork's copied history (a prefix of them). Pure. */
export function forkFiles(source: readonly RecordedEvent[], copied: readonly ForkedEvent[]): ForkFiles {
  const last = new Map<string, EventData<'ArtifactStored'>>();
  const versions = new Set<string>();
  for (const c of copied) {
    if (c.event.type === 'FileDeleted') last.delete(c.event.data.path);
    if (c.event.type !== 'ArtifactStored') continue;
    last.set(c.event.data.path, c.event.data);
    versions.add(c.event.data.sha256);
  }
  const movedOn = new Set<string>();
  for (const e of source.slice(copied.filter((c) => isCopied(c.event)).length)) {
    const agent = agentOfStream(e.taskId, e.streamId) ?? (e.data as { agentId?: unknown }).agentId;
    if (typeof agent === 'string') movedOn.add(agent);
  }
  return { artifacts: [...last.values()], versions: [...versions], movedOn: [...movedOn] };
}
