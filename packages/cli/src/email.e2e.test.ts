import { randomBytes } from 'node:crypto';
import type { TaskView } from '@baton/api';
import type { BatonClient } from '@baton/client';
import { smtpCatcher, waitFor, type CaughtMail, type SmtpCatcher } from '@baton/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startE2eStack, type E2eStack } from './e2e-stack.ts';

/**
 * Mail end to end: the four services as processes, a real SMTP server in the test process. A
 * research run whose prompt asks for the report to be mailed is approved step by step by
 * following the mailed links (GET the page, POST its form), and ends with exactly one mail to the
 * reader — sent by the notifier from the task's outbox — and the report mailed to the approver.
 */
describe('mail, end to end', () => {
  let stack: E2eStack;
  let api: BatonClient;
  let url: string;
  let smtp: SmtpCatcher;

  beforeAll(async () => {
    smtp = await smtpCatcher();
    stack = await startE2eStack('mail', { env: ({ url }) => ({ SMTP_URL: smtp.url, MAIL_FROM: 'Baton <baton@example.com>', PUBLIC_URL: url, MAIL_LINK_SECRET: randomBytes(32).toString('hex') }) });
    ({ api, url } = stack);
  }, 90_000);

  afterAll(async () => {
    await stack?.stop();
    await smtp?.close();
  });

  const task = (id: string) => api.request<TaskView>('GET', `/v1/tasks/${id}`);
  const to = (address: string) => (m: CaughtMail) => m.envelopeTo.includes(address);

  it('a research run asked to mail its report: every approval clicked in the mail (page, then its form), one mail to the reader, the report to the approver', async () => {
    const { id } = await api.request<TaskView>('POST', '/v1/tasks', {
      prompt: 'Research the history of event sourcing and email it to reader@example.com',
      notify: { email: { to: ['approver@example.com'], on: ['awaiting_input', 'completed'] } },
    });
    const followed: string[] = [];
    await waitFor(
      async () => {
        for (const m of smtp.mails.filter(to('approver@example.com'))) {
          const approve = /^Approve: (\S+)$/m.exec(m.text)?.[1];
          if (!approve || followed.includes(approve)) continue;
          followed.push(approve);
          // What a click does: the page first (it decides nothing), then its form's POST.
          const page = await fetch(approve);
          expect(page.status).toBe(200);
          const html = await page.text();
          expect(html).toMatch(/Approve this request\?/);
          const token = /name="token" value="([^"]+)"/.exec(html)?.[1] ?? '';
          const post = await fetch(`${url}/mail/decide`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ token }) });
          expect([post.status, await post.text()]).toEqual([200, expect.stringMatching(/Approved as approver@example\.com/)]);
        }
        return (await task(id)).status === 'completed';
      },
      { timeoutMs: 120_000, what: 'the run to complete, approved by mail' },
    );

    // Researcher, report writer, email agent (delegations), then the mail itself: four approvals, all by mail.
    const approvals = smtp.mails.filter((m) => m.subject.startsWith('[Baton] Approval needed'));
    // Each names what it approves: the delegations their agent (the mails of one run are told apart).
    expect(approvals.map((m) => m.subject.replace(/ — .*/, ''))).toEqual(['[Baton] Approval needed: Task → researcher', '[Baton] Approval needed: Task → report-writer', '[Baton] Approval needed: Task → email-agent', '[Baton] Approval needed: send_email']);
    expect(approvals[3]?.text).toMatch(/Email to: reader@example\.com\nSubject: Report: Research the history of event sourcing\nAttached: report\.md/);
    const events = await api.allEvents(id);
    expect(events.filter((e) => e.type === 'ApprovalGranted').map((e) => e.data.decidedBy)).toEqual(Array(4).fill('mail:approver@example.com'));

    // The outbox: one EmailRequested, delivered once, EmailSent recorded.
    await waitFor(async () => (await task(id)).emails.every((e) => e.status === 'sent'), { what: 'EmailSent' });
    const t = await task(id);
    expect(t.emails).toEqual([expect.objectContaining({ agentId: 'email-agent-1', to: ['reader@example.com'], status: 'sent', attachments: ['report.md'] })]);
    const toReader = smtp.mails.filter(to('reader@example.com'));
    expect(toReader).toHaveLength(1);
    expect(toReader[0]).toMatchObject({ subject: 'Report: Research the history of event sourcing', messageId: t.emails[0]?.messageId });
    expect(toReader[0]?.text).toMatch(/^# Report\n/);
    expect(toReader[0]?.html).toContain('<h1>Report</h1>');
    expect(toReader[0]?.attachments.map((a) => a.filename)).toEqual(['report.md']);
    expect(toReader[0]?.attachments[0]?.content.toString()).toBe(await api.artifact(id, 'report.md'));
    expect(events.filter((e) => e.type === 'EmailRequested')).toHaveLength(1);

    // The report, to the approver, once the run completed.
    await waitFor(() => smtp.mails.some((m) => m.subject.startsWith('[Baton] Done:')), { what: 'the report mail' });
    const done = smtp.mails.find((m) => m.subject.startsWith('[Baton] Done:'));
    expect(done?.envelopeTo).toEqual(['approver@example.com']);
    expect(done?.html).toContain('<h1>Report</h1>');
    expect(done?.attachments.map((a) => a.filename)).toContain('report.md');
    expect(smtp.mails).toHaveLength(6); // four approvals, the reader's mail, the report
    // A delivery is recorded once the SMTP server has taken the mail: the mail can be here before its record.
    const delivered = async (): Promise<string[]> => (await api.request<{ items: { channel: string; type: string; ok: boolean }[] }>('GET', `/v1/tasks/${id}/deliveries`)).items.filter((d) => d.channel === 'email' && d.ok).map((d) => d.type).sort();
    await waitFor(async () => (await delivered()).length >= 6, { what: 'six mail deliveries recorded' });
    expect(await delivered()).toEqual(['email.awaiting_input', 'email.awaiting_input', 'email.awaiting_input', 'email.awaiting_input', 'email.completed', 'email.outbox']);
  });
});
