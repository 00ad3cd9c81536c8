import { recorded, stateOf, TASK_ID } from '@baton/testing';
import { describe, expect, it } from 'vitest';
import type { DecidedEvent } from './commands.ts';
import { IllegalTransitionError, InvalidCommandError } from './errors.ts';
import { agentStreamId, recordAs, type RecordedEvent } from './events.ts';
import { emailIdFor } from './email.ts';
import { forkableVersions, forkEvents, forkFiles, forkRefusal, isCopied, notifiesAnyone } from './fork.ts';

const NEW = '00000000-0000-4000-8000-00000000f0f0';
const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
const task: DecidedEvent[] = [
  { type: 'TaskSubmitted', data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 60, webhook: null, metadata: {}, tenantId: 't', requestHash: 'h', forkedFrom: null, workspace: null, budget: null } },
  { type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' } },
  { type: 'ModelTurnRecorded', data: { agentId: 'lead', turn: 1, model: 'm', content: [{ type: 'tool_use', id: 'tu1', name: 'Task', input: { agent: 'researcher', prompt: 'p' } }], stopReason: 'tool_use', usage, offline: true, durationMs: 0 } },
  { type: 'SubagentDispatched', data: { agentId: 'researcher-1', agentType: 'researcher', toolUseId: 'tu1', prompt: 'p' } },
  { type: 'SubagentStarted', data: { agentId: 'researcher-1', attempt: 1, runnerId: 'r' } },
  { type: 'ClarificationRequested', data: { requestId: 'clr-a', agentId: 'researcher-1', toolUseId: 'a1', questions: ['q'], context: '', deadline: '2020-01-01T00:00:00.000Z' } },
  { type: 'ClarificationAnswered', data: { requestId: 'clr-a', answers: ['x'], answeredBy: 'u', agentId: 'researcher-1' } },
];

/** Task-stream events 1..5, then two agent-stream events, then task-stream 6 and 7 (positions in log order). */
function history(): RecordedEvent[] {
  const t = recorded(task);
  const agent = recorded([
    { type: 'SubagentStarted', data: { agentId: 'researcher-1', attempt: 1, runnerId: 'r' } },
    { type: 'ModelTurnRecorded', data: { agentId: 'researcher-1', turn: 1, model: 'm', content: [{ type: 'tool_use', id: 'a1', name: 'ask_user', input: { questions: ['q'] } }], stopReason: 'tool_use', usage, offline: true, durationMs: 0 } },
  ], { streamId: agentStreamId(TASK_ID, 'researcher-1') }).map((e, i) => ({ ...e, id: `00000000-0000-4000-9000-00000000000${i}`, position: BigInt(50 + i) }));
  return [...t.slice(0, 5).map((e) => ({ ...e, position: BigInt(e.version * 10) })), ...agent.map((e, i) => ({ ...e, position: BigInt(51 + i) })), ...t.slice(5).map((e) => ({ ...e, position: BigInt(60 + e.version) }))];
}

describe('forkEvents', () => {
  it('copies everything up to the task version (agent streams included) onto the new streams, with new ids and a renewed deadline for open requests', () => {
    const now = new Date('2026-06-01T00:00:00.000Z');
    const out = forkEvents(history(), 6, NEW, { now, requestedBy: 'u2' });
    expect(out.map((e) => [e.streamId, e.version, e.event.type])).toEqual([
      [`task-${NEW}`, 1, 'TaskSubmitted'],
      [`task-${NEW}`, 2, 'TaskStarted'],
      [`task-${NEW}`, 3, 'ModelTurnRecorded'],
      [`task-${NEW}`, 4, 'SubagentDispatched'],
      [`task-${NEW}`, 5, 'SubagentStarted'],
      [`agent-${NEW}-researcher-1`, 1, 'SubagentStarted'],
      [`agent-${NEW}-researcher-1`, 2, 'ModelTurnRecorded'],
      [`task-${NEW}`, 6, 'ClarificationRequested'],
    ]);
    expect(out[0]?.event.data).toMatchObject({ forkedFrom: { taskId: TASK_ID, atVersion: 6 }, requestHash: null });
    expect(out.at(-1)?.event.data).toMatchObject({ deadline: '2026-06-01T00:01:00.000Z' });
    // The open request is the fork's own now: it notifies its person; the rest of the copy notifies nobody.
    expect(out.filter((e) => notifiesAnyone(e.event)).map((e) => e.event.type)).toEqual(['ClarificationRequested']);
    expect(out.every((e) => isCopied(e.event))).toBe(true);
    expect(new Set(out.map((e) => e.event.id)).size).toBe(out.length);
    expect(forkEvents(history(), 6, NEW, { now, requestedBy: 'u2' }).map((e) => e.event.id)).toEqual(out.map((e) => e.event.id)); // deterministic
    const s = stateOf(out.map((e, i) => recordAs({ ...e.event, metadata: {} }, { taskId: NEW, streamId: e.streamId, version: e.version, position: BigInt(i + 1), recordedAt: now })));
    expect(s).toMatchObject({ status: 'awaiting_input', id: NEW, agents: { 'researcher-1': { status: 'paused', turns: 1, streamVersion: 2 } } });
  });
  it("the copies carry the fork request's trace, not the source's (a fork's work is traced from its own request), when the source recorded each event, and no Idempotency-Key of the source's submission", () => {
    const now = new Date('2026-06-01T00:00:00.000Z');
    const sourceTrace = { traceparent: '00-11111111111111111111111111111111-2222222222222222-01', tracestate: 'k=source' };
    const src = history().map((e) => ({ ...e, metadata: { ...e.metadata, ...sourceTrace, ...(e.type === 'TaskSubmitted' ? { idempotencyKey: 'source-key', actor: 'u1' } : {}) } }) as RecordedEvent);
    const forkTrace = { traceparent: '00-33333333333333333333333333333333-4444444444444444-01' };
    const out = forkEvents(src, 6, NEW, { now, requestedBy: 'u2', trace: forkTrace });
    for (const [i, e] of out.entries()) {
      expect(e.event.metadata).toMatchObject({ traceparent: forkTrace.traceparent, copiedRecordedAt: src.find((x) => e.event.metadata?.copiedFrom === x.id)?.recordedAt.toISOString() });
      expect(e.event.metadata?.tracestate, `copy ${i}`).toBeUndefined();
    }
    expect(out[0]?.event.metadata).toMatchObject({ actor: 'u2' });
    expect(out[0]?.event.metadata).not.toHaveProperty('idempotencyKey');
    // Untraced (tracing off): no trace at all, not the source's.
    expect(forkEvents(src, 6, NEW, { now, requestedBy: 'u2' }).some((e) => e.event.metadata?.traceparent !== undefined)).toBe(false);
  });
  it("a fork of a fork reopens only what is open at its own fork point (not what the first fork reopened and decided since), and keeps when each event first happened", () => {
    const now = new Date('2026-06-01T00:00:00.000Z');
    // The first fork, at the open question (v6): its copy of the question is reopened.
    const first = forkEvents(history(), 6, NEW, { now, requestedBy: 'u2' });
    expect(first.at(-1)?.event.metadata).toMatchObject({ reopened: true });
    // That fork's history as recorded, then the question answered in it (v7).
    const firstRecorded = first.map((e, i) => recordAs(e.event, { taskId: NEW, streamId: e.streamId, version: e.version, position: BigInt(100 + i), recordedAt: now }));
    const answered = recordAs({ id: '00000000-0000-4000-8000-0000000a0a0a', type: 'ClarificationAnswered', data: { requestId: 'clr-a', answers: ['x'], answeredBy: 'u', agentId: 'researcher-1' } }, { taskId: NEW, streamId: `task-${NEW}`, version: 7, position: 200n, recordedAt: now });
    const second = forkEvents([...firstRecorded, answered], 7, '00000000-0000-4000-8000-00000000f1f1', { now: new Date('2026-07-01T00:00:00.000Z'), requestedBy: 'u3' });
    expect(second.filter((e) => e.event.metadata?.reopened === true)).toEqual([]);
    expect(second.filter((e) => notifiesAnyone(e.event))).toEqual([]);
    // When each first happened: the source's time, through both forks.
    expect(second[0]?.event.metadata?.copiedRecordedAt).toBe(history()[0]!.recordedAt.toISOString());
  });
  it('a budget stop open at the fork point gets a fresh deadline too (else the fork would be stopped at once)', () => {
    const now = new Date('2026-06-01T00:00:00.000Z');
    const src = recorded([
      { ...task[0]!, data: { ...(task[0]!.data as object), budget: { usd: 1, tokens: null } } } as DecidedEvent,
      task[1]!,
      { type: 'BudgetExceeded', data: { requestId: 'budget-1', agentId: 'lead', spent: { usd: 1.2, tokens: 10 }, limit: { usd: 1, tokens: null }, deadline: '2020-01-01T00:00:00.000Z', onTimeout: 'stop' } },
    ]);
    const out = forkEvents(src, 3, NEW, { now, requestedBy: 'u2' });
    expect(out.at(-1)?.event).toMatchObject({ type: 'BudgetExceeded', data: { requestId: 'budget-1', deadline: '2026-06-01T00:01:00.000Z' } });
    const s = stateOf(out.map((e, i) => recordAs({ ...e.event, metadata: {} }, { taskId: NEW, streamId: e.streamId, version: e.version, position: BigInt(i + 1), recordedAt: now })));
    expect(s.pendingRequests['budget-1']?.deadline).toBe('2026-06-01T00:01:00.000Z');
  });

  it('a version the task never reached is refused', () => {
    expect(() => forkEvents(history(), 42, NEW, { now: new Date(), requestedBy: 'u' })).toThrow(InvalidCommandError);
  });
});

describe('forkFiles', () => {
  const sha = (c: string) => c.repeat(64);
  const stored = (path: string, c: string) => ({ type: 'ArtifactStored' as const, data: { agentId: 'researcher-1', path, bytes: 1, sha256: sha(c), mediaType: 'text/plain' } });
  const withFiles = (): RecordedEvent[] => recorded([...task.slice(0, 5), stored('notes.md', 'a'), stored('notes.md', 'b'), stored('notes.md', 'c'), ...task.slice(5)]);

  it("each artifact as the copied history names it last, every version it names, and not what came after", () => {
    const source = withFiles();
    const files = forkFiles(source, forkEvents(source, 7, NEW, { now: new Date(), requestedBy: 'u' }));
    expect(files.artifacts.map((a) => [a.path, a.sha256])).toEqual([['notes.md', sha('b')]]);
    expect(files.versions).toEqual([sha('a'), sha('b')]);
  });

  it('an artifact deleted in the copied history (FileDeleted) is not among the fork\'s files; its versions stay named', () => {
    const deleted = { type: 'FileDeleted' as const, data: { agentId: 'researcher-1', path: 'notes.md' } };
    const source = recorded([...task.slice(0, 5), stored('notes.md', 'a'), deleted, stored('other.md', 'b'), ...task.slice(5)]);
    const files = forkFiles(source, forkEvents(source, 8, NEW, { now: new Date(), requestedBy: 'u' }));
    expect(files.artifacts.map((a) => a.path)).toEqual(['other.md']);
    expect(files.versions).toEqual([sha('a'), sha('b')]);
  });

  it('names the agents that recorded anything after the fork point (their live workspaces are ahead of the fork): on their own streams or on the task\'s', () => {
    const source = history();
    expect(forkFiles(source, forkEvents(source, 5, NEW, { now: new Date(), requestedBy: 'u' })).movedOn).toEqual(['researcher-1']);
    expect(forkFiles(source, forkEvents(source, 6, NEW, { now: new Date(), requestedBy: 'u' })).movedOn).toEqual(['researcher-1']); // its answer came after
    expect(forkFiles(source, forkEvents(source, 7, NEW, { now: new Date(), requestedBy: 'u' })).movedOn).toEqual([]);
  });
});

describe('where a task can be forked (forkableVersions, forkRefusal)', () => {
  const budgetStop: DecidedEvent[] = [
    task[0]!,
    task[1]!,
    { type: 'BudgetExceeded', data: { requestId: 'budget-1', agentId: 'lead', spent: { usd: 1.2, tokens: 10 }, limit: { usd: 1, tokens: null }, deadline: '2020-01-01T00:00:00.000Z', onTimeout: 'stop' } },
    { type: 'BudgetRefused', data: { requestId: 'budget-1', reason: 'too dear', decidedBy: 'ann', timedOut: false } },
    { type: 'TaskFailed', data: { code: 'budget_exceeded', message: 'stopped at the budget' } },
  ];
  // Versions 4 and 5 were recorded by one commit (a person stopped the run at its budget).
  const commits = new Map([[1, 'a'], [2, 'b'], [3, 'c'], [4, 'd'], [5, 'd']]);

  it('only at the end of a commit and before the end of the task: never between a budget stop and the failure it recorded with it', () => {
    const source = recorded(budgetStop);
    expect(forkableVersions(source, commits)).toEqual([1, 2, 3]);
    expect(forkRefusal([1, 2, 3], 3, 5)).toBeNull();
    expect(forkRefusal([1, 2, 3], 4, 5)).toBe('version 4 ends the task, comes after its end, or was recorded in one commit with its end; fork at a version up to 3');
    expect(forkRefusal([1, 2, 3], 5, 5)).toBe('version 5 is the end of the task; fork at a version up to 3');
    expect(forkRefusal([1, 2, 3], 9, 5)).toBe('the task is at version 5; fork at a version up to 3');
    expect(forkRefusal([1, 3, 7], 5, 8)).toBe('version 5 was recorded in one commit with the version after it: a fork starts between commits; fork at 3 or 7');
    expect(() => forkEvents(source, 4, NEW, { now: new Date(), requestedBy: 'u', commits })).toThrow(/version 4 ends the task, comes after its end, or was recorded in one commit with its end/);
    expect(() => forkEvents(source, 5, NEW, { now: new Date(), requestedBy: 'u', commits })).toThrow(IllegalTransitionError);
    // Without a map each event is its own commit (logs recorded before commits were read).
    expect(forkableVersions(source, new Map())).toEqual([1, 2, 3, 4]);
  });

  it('a mid-commit version of a live task is refused naming the nearest, and events after the end (a mail settled late) do not move the end', () => {
    const source = recorded([...task.slice(0, 5), { type: 'TaskCompleted', data: { summary: 's', reportPath: null } }, { type: 'EmailFailed', data: { emailId: emailIdFor(TASK_ID, 'lead', 'x'), code: 'mail_off', message: 'm' } }]);
    expect(forkableVersions(source, new Map([[3, 'c'], [4, 'c']]))).toEqual([1, 2, 4, 5]);
    expect(() => forkEvents(source, 3, NEW, { now: new Date(), requestedBy: 'u', commits: new Map([[3, 'c'], [4, 'c']]) })).toThrow(/fork at 2 or 4/);
  });

  it('a copy keeps its commits (copiedCommit), so a fork of the fork is refused where its source was', () => {
    const source = recorded(budgetStop.slice(0, 3));
    const out = forkEvents(source, 3, NEW, { now: new Date(), requestedBy: 'u', commits: new Map([[1, '901'], [2, '902'], [3, '902']])  });
    expect(out.map((c) => c.event.metadata?.copiedCommit)).toEqual(['901', '902', '902']);
  });
});

describe('a fork and its mails', () => {
  const mail = (emailId: string, toolUseId: string): DecidedEvent => ({ type: 'EmailRequested', data: { emailId, agentId: 'researcher-1', toolUseId, to: ['ann@example.com'], subject: 's', body: 'b', attachments: [] } });
  const sentId = emailIdFor(TASK_ID, 'researcher-1', 'm1');
  const queuedId = emailIdFor(TASK_ID, 'researcher-1', 'm2');
  const source = recorded([...task.slice(0, 5), mail(sentId, 'm1'), { type: 'EmailSent', data: { emailId: sentId, messageId: '<a@x>', accepted: ['ann@example.com'], rejected: [] } }, mail(queuedId, 'm2')]);

  it("are the fork's own: their ids derived from the fork (a fork's agent running the same send_email again records nothing new)", () => {
    const out = forkEvents(source, 8, NEW, { now: new Date('2026-06-01T00:00:00.000Z'), requestedBy: 'u' });
    expect(out.filter((c) => c.event.type.startsWith('Email')).map((c) => (c.event.data as { emailId: string }).emailId)).toEqual([
      emailIdFor(NEW, 'researcher-1', 'm1'),
      emailIdFor(NEW, 'researcher-1', 'm1'),
      emailIdFor(NEW, 'researcher-1', 'm2'),
      emailIdFor(NEW, 'researcher-1', 'm2'),
    ]);
  });

  it('one queued and not settled at the fork point is settled as not sent by the fork (its source sends it): never "queued" for ever, never mailed twice', () => {
    const out = forkEvents(source, 8, NEW, { now: new Date('2026-06-01T00:00:00.000Z'), requestedBy: 'u' });
    expect(out.at(-1)).toMatchObject({ streamId: `task-${NEW}`, version: 9, event: { type: 'EmailFailed', data: { emailId: emailIdFor(NEW, 'researcher-1', 'm2'), code: 'not_sent_by_fork' }, metadata: { actor: 'baton:fork' } } });
    expect(notifiesAnyone(out.at(-1)!.event)).toBe(true);
    const s = stateOf(out.map((e, i) => recordAs({ ...e.event, metadata: {} }, { taskId: NEW, streamId: e.streamId, version: e.version, position: BigInt(i + 1), recordedAt: new Date() })));
    expect(Object.values(s.emails).map((m) => [m.toolUseId, m.status])).toEqual([['m1', 'sent'], ['m2', 'failed']]);
    expect(forkFiles(source, out).movedOn).toEqual([]); // the fork's own events are not the source's
  });
});
