import { given } from '@baton/testing';
import { emailIdFor, type DecidedEvent } from '@baton/domain';
import { describe, expect, it } from 'vitest';
import { outboxRequest } from './outbox.ts';
import { parseToolInput, sendEmailTool } from './tools.ts';

const submitted: DecidedEvent = { type: 'TaskSubmitted', data: { prompt: 'p', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 't', requestHash: null, forkedFrom: null, workspace: null, budget: null } };
const artifact: DecidedEvent = { type: 'ArtifactStored', data: { agentId: null, path: 'report.md', bytes: 12, sha256: 'a'.repeat(64), mediaType: 'text/markdown' } };
const input = (o: Record<string, unknown> = {}) => {
  const r = parseToolInput(sendEmailTool, { to: ['ann@example.com'], subject: 'Hi', body: '# Report', ...o });
  if (!r.ok) throw new Error(r.error);
  return r.value;
};

describe('send_email → the outbox', () => {
  it('decides one RequestEmail whose id is stable for the tool use; the result says it was queued, not sent', () => {
    const state = given([submitted, artifact]).state;
    const r = outboxRequest(state, 'email-agent-1', 'tu1', input({ attach: ['report.md'] }));
    expect(r).toEqual({
      ok: true,
      command: { type: 'RequestEmail', emailId: emailIdFor(state.id, 'email-agent-1', 'tu1'), agentId: 'email-agent-1', toolUseId: 'tu1', to: ['ann@example.com'], subject: 'Hi', body: '# Report', attachments: [{ path: 'report.md', bytes: 12, sha256: 'a'.repeat(64) }] },
      result: expect.stringMatching(/^queued as [0-9a-f-]{36}: to ann@example\.com, subject "Hi", with report\.md attached\. .*not in this result\.$/),
    });
    expect(outboxRequest(state, 'email-agent-1', 'tu1', input())).toMatchObject({ command: { emailId: emailIdFor(state.id, 'email-agent-1', 'tu1') } });
    expect(emailIdFor(state.id, 'email-agent-1', 'tu2')).not.toBe(emailIdFor(state.id, 'email-agent-1', 'tu1'));
  });
  it("refuses recipients the deployment does not let the task's tenant mail (MAIL_ALLOWED_RECIPIENTS), naming them and what it may mail", () => {
    const state = given([submitted, artifact]).state;
    expect(outboxRequest(state, 'a', 'tu1', input({ to: ['ann@example.com', 'eve@evil.example'] }), { t: ['example.com'] })).toEqual({ ok: false, error: "to: not queued: eve@evil.example: this deployment does not mail that address for tenant 't' (MAIL_ALLOWED_RECIPIENTS allows example.com)" });
    expect(outboxRequest(state, 'a', 'tu1', input({ to: ['ann@example.com'] }), { t: ['example.com'] }).ok).toBe(true);
  });
  it('refuses an attachment that is not a file of the task, naming the ones there are', () => {
    expect(outboxRequest(given([submitted, artifact]).state, 'a', 'tu1', input({ attach: ['secret.txt'] }))).toEqual({ ok: false, error: "attach: 'secret.txt' is not a file of this task; its files are: report.md" });
  });
  it('its input names the field of a bad address', () => {
    const r = parseToolInput(sendEmailTool, { to: ['nobody'], subject: 'x', body: 'y' });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toMatch(/to\.0: must be an email address/);
  });
});
