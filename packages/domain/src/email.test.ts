import { given } from '@baton/testing';
import { describe, expect, it } from 'vitest';
import type { Command, DecidedEvent } from './commands.ts';
import { AllowedRecipients, EmailNotify, NotifyConfig, recipientsRefused, recipientsRefusedMessage } from './email.ts';
import { IllegalTransitionError, InvalidCommandError, TaskFinalError } from './errors.ts';
import { parseNewEvent } from './events.ts';

const EMAIL = '5b7e8a52-2d7d-5f0e-9a4e-0c1f7a3b9e11';
const submitted: DecidedEvent = {
  type: 'TaskSubmitted',
  data: { prompt: 'research X and mail it to bob@example.com', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 't', requestHash: null, forkedFrom: null, workspace: null, budget: null, notify: { email: { to: ['ann@example.com'], on: ['completed'] } } },
};
const started: DecidedEvent = { type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v1' } };
const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
const leadTurn: DecidedEvent = { type: 'ModelTurnRecorded', data: { agentId: 'lead', turn: 1, model: 'm', content: [{ type: 'tool_use', id: 'tu1', name: 'Task', input: { agent: 'email-agent', prompt: 'p' } }], stopReason: 'tool_use', usage, offline: true, durationMs: 1 } };
const dispatched: DecidedEvent = { type: 'SubagentDispatched', data: { agentId: 'email-agent-1', agentType: 'email-agent', toolUseId: 'tu1', prompt: 'p' } };
const agentStarted: DecidedEvent = { type: 'SubagentStarted', data: { agentId: 'email-agent-1', attempt: 1, runnerId: 'r' } };
const sendInput = { to: ['bob@example.com'], subject: 'The report', body: '# Hi' };
const agentTurn: DecidedEvent = { type: 'ModelTurnRecorded', data: { agentId: 'email-agent-1', turn: 1, model: 'm', content: [{ type: 'tool_use', id: 'tu9', name: 'send_email', input: sendInput }], stopReason: 'tool_use', usage, offline: true, durationMs: 1 } };
const requested: DecidedEvent = { type: 'EmailRequested', data: { emailId: EMAIL, agentId: 'email-agent-1', toolUseId: 'tu9', to: ['bob@example.com'], subject: 'The report', body: '# Hi', attachments: [] } };
const sending = [submitted, started, leadTurn, dispatched, agentStarted, agentTurn];
const cmd = (type: Command['type'], data: unknown): Command => ({ type, ...(data as object) }) as Command;
const sent = { emailId: EMAIL, messageId: '<m@baton>', accepted: ['bob@example.com'], rejected: [] };

describe('notify', () => {
  it('is recorded in TaskSubmitted and folded into the state (a replay or a fork sees it)', () => {
    const s = given([]).when(cmd('SubmitTask', submitted.data)).then([submitted]);
    expect(s.notify).toEqual({ email: { to: ['ann@example.com'], on: ['completed'] } });
    expect(given([{ ...submitted, data: { ...submitted.data, notify: undefined } } as DecidedEvent]).state.notify).toBeNull();
  });
  it('checks addresses and moments, naming the field', () => {
    expect(EmailNotify.parse({ to: ['a@example.com'] }).on).toEqual(['awaiting_input', 'completed', 'failed']);
    const bad = NotifyConfig.safeParse({ email: { to: ['not an address'], on: ['sometimes'] } });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues.map((i) => i.path.join('.'))).toEqual(['email.to.0', 'email.on.0']);
    expect(NotifyConfig.safeParse({ email: { to: [] } }).success).toBe(false);
  });
});

describe('RequestEmail', () => {
  it('records EmailRequested for an open tool use of a running agent; the email is queued on the task', () => {
    const s = given(sending).when(cmd('RequestEmail', requested.data)).then([requested]);
    expect(s.emails[EMAIL]).toMatchObject({ agentId: 'email-agent-1', to: ['bob@example.com'], status: 'queued', attachments: [] });
  });
  it('is a no-op the second time (the tool run again after a crash or a retry)', () => {
    given([...sending, requested]).when(cmd('RequestEmail', requested.data)).then([]);
  });
  it('is refused for a tool use that is not open, an agent not running, or a final task', () => {
    given(sending).when(cmd('RequestEmail', { ...requested.data, toolUseId: 'nope' })).thenThrows(InvalidCommandError, /not open/);
    given(sending.slice(0, 4)).when(cmd('RequestEmail', requested.data)).thenThrows(IllegalTransitionError, /dispatched/);
    given([...sending, { type: 'TaskCancelled', data: { reason: 'r', requestedBy: 'u' } }]).when(cmd('RequestEmail', requested.data)).thenThrows(TaskFinalError);
  });
  it('validates the addresses it records', () => {
    expect(() => parseNewEvent({ id: EMAIL, type: 'EmailRequested', data: { ...requested.data, to: ['bob'] } })).toThrow(/to/);
  });
});

describe('RecordEmailSent / RecordEmailFailed', () => {
  it('settles a queued email once; later outcomes are no-ops', () => {
    const s = given([...sending, requested]).when(cmd('RecordEmailSent', sent)).then([{ type: 'EmailSent', data: sent }]);
    expect(s.emails[EMAIL]).toMatchObject({ status: 'sent', messageId: '<m@baton>', settledAt: expect.any(String) });
    given([...sending, requested, { type: 'EmailSent', data: sent }]).when(cmd('RecordEmailFailed', { emailId: EMAIL, code: 'x', message: 'y' })).then([]);
    const f = given([...sending, requested]).when(cmd('RecordEmailFailed', { emailId: EMAIL, code: 'smtp_rejected', message: '550 no' })).state();
    expect(f.emails[EMAIL]).toMatchObject({ status: 'failed', error: { code: 'smtp_rejected', message: '550 no' } });
  });
  it('may follow the task’s final event (the SMTP server answers when it answers); an unknown email is refused', () => {
    const done = [...sending, requested, { type: 'TaskFailed', data: { code: 'x', message: 'y' } } as DecidedEvent];
    const s = given(done).when(cmd('RecordEmailSent', sent)).then([{ type: 'EmailSent', data: sent }]);
    expect(s.status).toBe('failed');
    given(sending).when(cmd('RecordEmailSent', sent)).thenThrows(InvalidCommandError, /no email/);
  });
});

describe('where a tenant may mail (MAIL_ALLOWED_RECIPIENTS)', () => {
  const rules = { acme: AllowedRecipients.parse(['Acme.Example', '*.partner.example', 'ann@gmail.com']), '*': AllowedRecipients.parse(['example.com']) };
  it('a domain, a domain with its subdomains, one address; case ignored; another tenant falls under "*"; none set: anywhere', () => {
    expect(recipientsRefused(rules, 'acme', ['bob@acme.example', 'BOB@ACME.EXAMPLE', 'x@partner.example', 'x@eu.partner.example', 'ann@gmail.com', 'eve@gmail.com', 'x@sub.acme.example', 'x@evilpartner.example'])).toEqual(['eve@gmail.com', 'x@sub.acme.example', 'x@evilpartner.example']);
    expect(recipientsRefused(rules, 'globex', ['g@example.com', 'g@acme.example'])).toEqual(['g@acme.example']);
    expect(recipientsRefused({ acme: ['acme.example'] }, 'globex', ['g@example.com'])).toEqual(['g@example.com']); // no "*": others mail no one
    expect(recipientsRefused(undefined, 'acme', ['anyone@anywhere.example'])).toEqual([]);
    // Only plain addresses match, whatever a caller checked before: a quoted local part, two @, a comma, white space.
    expect(recipientsRefused(rules, 'acme', ['"eve@evil.com"@acme.example', 'eve@evil.com@acme.example', 'eve@evil.com,bob@acme.example', 'bob@acme.example\n'])).toHaveLength(4);
    expect(recipientsRefusedMessage(rules, 'acme', ['eve@gmail.com'])).toBe("eve@gmail.com: this deployment does not mail that address for tenant 'acme' (MAIL_ALLOWED_RECIPIENTS allows acme.example, *.partner.example, ann@gmail.com)");
  });
  it('entries are domains or addresses, named when not', () => {
    const r = AllowedRecipients.safeParse(['example.com', 'https://x.example', '*.', '']);
    expect(r.success).toBe(false);
    expect(r.error?.issues.map((i) => i.path.join('.'))).toEqual(['1', '2', '3']);
    expect(AllowedRecipients.safeParse([]).error?.issues[0]?.message).toBe('name at least one domain or address');
  });
});
