import { given } from '@baton/testing';
import type { DecidedEvent } from '@baton/domain';
import { describe, expect, it } from 'vitest';
import { mailIds, plannedMails } from './plan.ts';

const submitted = (on: string[]): DecidedEvent => ({ type: 'TaskSubmitted', data: { prompt: 'p', team: 'research', requirePlanApproval: true, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 't', requestHash: null, forkedFrom: null, workspace: null, budget: null, notify: { email: { to: ['ann@example.com', 'bob@example.com'], on: on as never } } } });
const started: DecidedEvent = { type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' } };
const turn: DecidedEvent = { type: 'ModelTurnRecorded', data: { agentId: 'lead', turn: 1, model: 'm', content: [{ type: 'tool_use', id: 'tu1', name: 'Task', input: {} }], stopReason: 'tool_use', usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 }, offline: true, durationMs: 1 } };
const asked: DecidedEvent = { type: 'ClarificationRequested', data: { requestId: 'clr-1', agentId: 'lead', toolUseId: 'tu1', questions: ['What?'], context: '' } };

describe('which mails an event makes', () => {
  it('a request still open: one per recipient, keyed by the request, if awaiting_input was asked for', () => {
    const s = given([submitted(['awaiting_input']), started, turn, asked]).state;
    expect(plannedMails(asked, s).map((m) => `${m.key} ${m.recipient}`)).toEqual(['request:clr-1 ann@example.com', 'request:clr-1 bob@example.com']);
    expect(plannedMails(asked, given([submitted(['completed']), started, turn, asked]).state)).toEqual([]);
    const answered = given([submitted(['awaiting_input']), started, turn, asked, { type: 'ClarificationAnswered', data: { requestId: 'clr-1', answers: ['x'], answeredBy: 'u' } }]).state;
    expect(plannedMails(asked, answered)).toEqual([]); // decided before the mail went: none
  });
  it('the end of a run, if asked for; nothing for an event a fork copied (but a request it reopened); an outbox mail for any task', () => {
    const failed: DecidedEvent = { type: 'TaskFailed', data: { code: 'x', message: 'y' } };
    expect(plannedMails(failed, given([submitted(['failed']), failed]).state).map((m) => m.key)).toEqual(['failed', 'failed']);
    expect(plannedMails(failed, given([submitted(['completed']), failed]).state)).toEqual([]);
    expect(plannedMails({ ...asked, metadata: { copiedFrom: 'e' } }, given([submitted(['awaiting_input']), started, turn, asked]).state)).toEqual([]);
    // …but for a request the fork reopened (still open at its fork point): the fork's person is asked.
    expect(plannedMails({ ...asked, metadata: { copiedFrom: 'e', reopened: true } }, given([submitted(['awaiting_input']), started, turn, asked]).state).map((m) => m.key)).toEqual(['request:clr-1', 'request:clr-1']);
    const outbox = { type: 'EmailRequested', data: { emailId: 'e1', to: ['a@example.com', 'b@example.com'] } };
    expect(plannedMails(outbox, given([{ ...submitted([]), data: { ...submitted([]).data, notify: null } } as DecidedEvent]).state)).toEqual([{ kind: 'outbox', moment: 'outbox', key: 'email:e1', recipient: 'a@example.com, b@example.com', to: ['a@example.com', 'b@example.com'], emailId: 'e1' }]);
  });
  it('ids are stable per task, key and recipient', () => {
    expect(mailIds('t', 'completed', 'a@x.io', 'baton.example')).toEqual(mailIds('t', 'completed', 'a@x.io', 'baton.example'));
    expect(mailIds('t', 'completed', 'a@x.io', 'baton.example').messageId).toMatch(/^<[0-9a-f]{32}@baton\.example>$/);
    expect(mailIds('t', 'completed', 'b@x.io', 'd').deliveryId).not.toBe(mailIds('t', 'completed', 'a@x.io', 'd').deliveryId);
  });
});
