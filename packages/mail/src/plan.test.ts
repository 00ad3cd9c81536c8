import { given, recorded } from '@baton/testing';
import type { DecidedEvent } from '@baton/domain';
import { describe, expect, it } from 'vitest';
import { distinctAddresses, mailIds, mailToResend, plannedMails } from './plan.ts';

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
  it('one mail per address, whatever the case of its letters (the first spelling kept)', () => {
    expect(distinctAddresses(['Ann@Example.com', 'bob@example.com', 'ann@example.com', 'ANN@EXAMPLE.COM'])).toEqual(['Ann@Example.com', 'bob@example.com']);
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

describe('which mails a person may have sent again', () => {
  const history = (extra: DecidedEvent[] = []) => recorded([submitted(['awaiting_input', 'completed']), started, turn, asked, ...extra]);
  const deliveryOf = (events: ReturnType<typeof recorded>, type: string, key: string, recipient: string, eventType: string) => ({
    type,
    eventId: events.find((e) => e.type === eventType)?.id ?? 'none',
    webhookId: mailIds(events[0]?.taskId ?? '', key, recipient, 'any.example').deliveryId,
  });
  it("a request's mail while the request is open, as it would be made now; not once it is decided", () => {
    const open = history();
    const ann = deliveryOf(open, 'email.awaiting_input', 'request:clr-1', 'ann@example.com', 'ClarificationRequested');
    expect(mailToResend(ann, open, given(open).state)).toEqual({ ok: true, mail: expect.objectContaining({ kind: 'request', key: 'request:clr-1', recipient: 'ann@example.com' }) });
    const answered = history([{ type: 'ClarificationAnswered', data: { requestId: 'clr-1', answers: ['x'], answeredBy: 'u' } }]);
    expect(mailToResend({ ...ann, eventId: answered[3]?.id ?? '' }, answered, given(answered).state)).toEqual({ ok: false, code: 'request_closed', message: expect.stringMatching(/\(clr-1\) is no longer open/) });
  });
  it("the end mail at any time; an agent's outbox mail never; a delivery the task no longer makes is named", () => {
    const done = history([{ type: 'TaskCompleted', data: { summary: 's', reportPath: null } } as DecidedEvent]);
    const bob = deliveryOf(done, 'email.completed', 'completed', 'bob@example.com', 'TaskCompleted');
    expect(mailToResend(bob, done, given(done).state)).toEqual({ ok: true, mail: { kind: 'end', moment: 'completed', key: 'completed', recipient: 'bob@example.com' } });
    expect(mailToResend({ ...bob, type: 'email.outbox' }, done, given(done).state)).toMatchObject({ ok: false, code: 'agent_mail' });
    expect(mailToResend({ ...bob, webhookId: 'mail_other' }, done, given(done).state)).toMatchObject({ ok: false, code: 'mail_unknown' });
    expect(mailToResend({ ...bob, eventId: 'gone' }, done, given(done).state)).toMatchObject({ ok: false, code: 'mail_unknown' });
  });
});
