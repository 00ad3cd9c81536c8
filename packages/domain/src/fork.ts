import { IllegalTransitionError, InvalidCommandError } from './errors.ts';
import { agentOfStream, agentStreamId, isTaskStream, REQUEST_EVENT_TYPES, taskStreamId, type EventData, type NewEvent, type RecordedEvent } from './events.ts';
import { uuidV5 } from './ids.ts';
import { stateAt } from './replay.ts';
import { isFinal, type TaskState } from './state.ts';

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

/** The last version a task can be forked at: its current one, or the one before a finished task's end (a fork cannot continue from an end). */
export const lastForkableVersion = (s: TaskState): number => (isFinal(s) ? s.version - 1 : s.version);

/**
 * The history of a fork: every event of the source task up to version `atVersion` of its task
 * stream (agent-stream events recorded before that point included), copied onto the new
 * task's streams with new, deterministic ids. The copy of TaskSubmitted names its origin;
 * requests still open at the fork point get a fresh deadline, counted from `now`, so the
 * fork can be answered differently rather than time out at once. Pure.
 */
export function forkEvents(source: readonly RecordedEvent[], atVersion: number, newTaskId: string, opts: { now: Date; requestedBy: string }): ForkedEvent[] {
  const at = stateAt(source, atVersion);
  if (!at) throw new InvalidCommandError(`the task has no version ${atVersion}`, { atVersion });
  if (isFinal(at)) throw new IllegalTransitionError('ForkTask', at.status, `version ${atVersion} is the end of the task; fork at an earlier version (1..${lastForkableVersion(at)})`);
  const sourceId = at.id;
  const deadline = new Date(opts.now.getTime() + at.approvalTimeoutSeconds * 1000).toISOString();
  const out: ForkedEvent[] = [];
  for (const e of source) {
    const streamId = isTaskStream(e.streamId) ? taskStreamId(newTaskId) : agentStreamId(newTaskId, agentOfStream(sourceId, e.streamId) ?? '');
    let data: unknown = e.data;
    if (e.type === 'TaskSubmitted') data = { ...e.data, requestHash: null, forkedFrom: { taskId: sourceId, atVersion } };
    // Every kind of open request: an approval, a question, a budget stop (which would otherwise stop the fork at once).
    const reopened = REQUEST_EVENT_TYPES.has(e.type) && at.pendingRequests[(e.data as { requestId: string }).requestId] !== undefined;
    if (reopened) data = { ...(e.data as object), deadline };
    out.push({
      streamId,
      version: e.version,
      event: { id: uuidV5(`${newTaskId}:${e.id}`), type: e.type, data, metadata: { ...e.metadata, copiedFrom: e.id, ...(reopened ? { reopened: true } : {}), ...(e.type === 'TaskSubmitted' ? { actor: opts.requestedBy } : {}) } } as NewEvent,
    });
    if (isTaskStream(e.streamId) && e.version === atVersion) break;
  }
  return out;
}

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
  for (const e of source.slice(copied.length)) {
    const agent = agentOfStream(e.taskId, e.streamId) ?? (e.data as { agentId?: unknown }).agentId;
    if (typeof agent === 'string') movedOn.add(agent);
  }
  return { artifacts: [...last.values()], versions: [...versions], movedOn: [...movedOn] };
}
