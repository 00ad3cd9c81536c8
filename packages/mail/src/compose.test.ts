import { given } from '@baton/testing';
import { excerpt, type DecidedEvent, type PendingRequest, type PlanState } from '@baton/domain';
import { describe, expect, it } from 'vitest';
import { defanged, earlierRejections, endMail, MAX_INLINE_REPORT_CHARS, outboxMail, requestMail } from './compose.ts';
import { humanTime } from './time.ts';

const submitted: DecidedEvent = { type: 'TaskSubmitted', data: { prompt: 'Research <b>event sourcing</b>', team: 'research', requirePlanApproval: true, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 't', requestHash: null, forkedFrom: null, workspace: null, budget: null } };
const started: DecidedEvent = { type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' } };
const task = given([submitted, started]).state;
const approval: PendingRequest = { kind: 'approval', requestId: 'apr-lead-tu1', agentId: 'lead', toolUseId: 'tu1', toolName: 'Task', input: { agent: 'researcher', prompt: '<script>alert(1)</script>' }, inputDigest: 'd', plan: 'Plan: **research** first', deadline: '2026-01-01T00:10:00.000Z', onTimeout: 'reject', openedAt: '2026-01-01T00:00:00.000Z' };
const links = { approve: 'https://baton.example/mail/decide?token=A', reject: 'https://baton.example/mail/decide?token=R', answer: 'https://baton.example/mail/answer?token=Q', console: 'https://baton.example/#/tasks/x', expiresAt: '2026-01-01T00:10:00.000Z' };

describe('mail contents', () => {
  it('an approval: the plan rendered, the input shown escaped, Approve / Reject / Open in console', () => {
    const m = requestMail(task, approval, links);
    expect(m.subject).toBe('[Baton] Approval needed: Task → researcher — Research <b>event sourcing</b>');
    expect(m.text).toMatch(/The lead waits for your approval to call Task\.[\s\S]*Plan: \*\*research\*\* first[\s\S]*"prompt": "<script>alert\(1\)<\/script>"[\s\S]*Approve: https:\/\/baton\.example\/mail\/decide\?token=A\nReject: https:\/\/baton\.example\/mail\/decide\?token=R\nOpen in console: https:\/\/baton\.example\/#\/tasks\/x/);
    expect(m.html).toContain('<strong>research</strong>');
    expect(m.html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(m.html).not.toContain('<script>');
    expect(m.html).toContain('Research &lt;b&gt;event sourcing&lt;/b&gt;');
    expect(m.html).toMatch(/href="https:\/\/baton\.example\/mail\/decide\?token=A"[^>]*>Approve</);
  });
  it('a revised request says so in its subject and first lines, with why the last was rejected; a sibling rejected after it was asked is not its history', () => {
    const asked = (requestId: string, toolName = 'Task', agentId = 'lead') => ({ type: 'ApprovalRequested', data: { requestId, agentId, toolName } });
    const events = [
      asked('apr-lead-tu0'),
      { type: 'ApprovalRejected', data: { requestId: 'apr-lead-tu0', reason: 'too broad', decidedBy: 'u' } },
      asked('apr-lead-w', 'write_file'),
      { type: 'ApprovalRejected', data: { requestId: 'apr-lead-w', reason: 'not that file', decidedBy: 'u' } },
      asked('apr-r-t', 'Task', 'researcher-1'),
      { type: 'ApprovalRejected', data: { requestId: 'apr-r-t', reason: 'another agent', decidedBy: 'u' } },
      asked('apr-lead-tux'),
      { type: 'ApprovalTimedOut', data: { requestId: 'apr-lead-tux', action: 'reject' } },
      asked(approval.requestId),
      asked('apr-lead-sibling'),
      { type: 'ApprovalRejected', data: { requestId: 'apr-lead-sibling', reason: 'later', decidedBy: 'u' } },
    ];
    const rejected = earlierRejections(events, approval);
    expect(rejected).toEqual([{ requestId: 'apr-lead-tu0', reason: 'too broad' }, { requestId: 'apr-lead-tux', reason: 'nobody decided before the deadline' }]);
    const m = requestMail(task, approval, links, rejected);
    expect(m.subject).toBe('[Baton] Revised, approval needed: Task → researcher — Research <b>event sourcing</b>');
    expect(m.text).toMatch(/^The lead waits for your approval to call Task\.\nThis is a revised request: the previous 2 were rejected \(the last: nobody decided before the deadline\)\./);
    expect(m.html).toContain('<p><b>This is a revised request: the previous 2 were rejected (the last: nobody decided before the deadline).</b></p>');
    expect(requestMail(task, approval, links, rejected.slice(0, 1)).text).toContain('This is a revised request: the previous one was rejected (the last: too broad).');
    expect(earlierRejections(events.slice(0, 2), approval)).toHaveLength(1);
    expect(earlierRejections([asked(approval.requestId)], approval)).toEqual([]);
    // One granted since (the revision approved): the next request is a new one, not a revision.
    const granted = [...events.slice(0, 2), asked('apr-lead-tu5'), { type: 'ApprovalGranted', data: { requestId: 'apr-lead-tu5', input: {}, edited: true, decidedBy: 'u' } }, asked(approval.requestId)];
    expect(earlierRejections(granted, approval)).toEqual([]);
    expect(earlierRejections([...events.slice(0, 2), asked('apr-lead-tu6'), { type: 'ApprovalTimedOut', data: { requestId: 'apr-lead-tu6', action: 'approve' } }, asked(approval.requestId)], approval)).toEqual([]);
  });
  it("plain text a mail client may link itself leaves only http(s) and mailto linkable: other schemes, programs' schemes and Windows shares are written so none links them; prose stays as it was", () => {
    expect(defanged('see smb://evil/share, SMB://x, ftp://f, search-ms:query=x, ms-word:ofe|u|x, javascript:alert(1), file:/etc/passwd, data:text/html;base64,AA and \\\\evil\\share or (\\\\evil\\s)')).toBe(
      'see smb[:]//evil/share, SMB[:]//x, ftp[:]//f, search-ms[:]query=x, ms-word[:]ofe|u|x, javascript[:]alert(1), file[:]/etc/passwd, data[:]text/html;base64,AA and [\\\\]evil\\share or ([\\\\]evil\\s)',
    );
    const prose = 'Web search: done. The file: notes.md. Data: 3 rows. Intent: ship it. https://example.com/a and mailto:ann@example.com; C:\\temp';
    expect(defanged(prose)).toBe(prose);
    const m = requestMail(task, { ...approval, plan: 'Read [the brief](smb://evil/share) first' }, links);
    expect(m.text).toContain('Read [the brief](smb[:]//evil/share) first');
    expect(m.text).toContain('Approve: https://baton.example/mail/decide?token=A');
    expect(outboxMail(task, { subject: 's', body: 'at \\\\evil\\share', agentId: 'a' }).text).toMatch(/^at \[\\\\\]evil\\share/);
  });
  it('a question: the questions, the options, an Answer link', () => {
    const m = requestMail(task, { kind: 'clarification', requestId: 'clr-1', agentId: 'researcher-1', toolUseId: 't', questions: ['Which sources?'], context: 'need to know', options: ['papers', 'blogs'], openedAt: 'x', deadline: '2026-11-28T11:52:26.988Z' }, links);
    // The task and the agent in the subject: two tasks, or two agents of one, asking alike had mails of one subject.
    expect(m.subject).toBe('[Baton] A question for you: Which sources? — Research <b>event sourcing</b> (researcher-1)');
    // When it times out and what then, in both parts; times as a person reads them.
    for (const part of [m.text, m.html]) expect(part).toContain('Nobody answering by Sat, 28 Nov 2026, 11:52 UTC: the agent goes on with its best judgement. The link works until');
    expect(m.text).toMatch(/Agent researcher-1 asks:\n\n1\. Which sources\?\n\nOptions: papers \| blogs[\s\S]*Answer: https:\/\/baton\.example\/mail\/answer\?token=Q/);
    expect(m.html).toMatch(/>Answer</);
  });
  it('the report: markdown rendered (raw HTML escaped), a text part, the files listed and linked', () => {
    const done = given([submitted, started, { type: 'TaskCompleted', data: { summary: 'written', reportPath: 'report.md' } }]).state;
    const m = endMail(done, { report: '# Findings\n\n- one <img src=x onerror=alert(1)>\n\n[link](javascript:alert(1))', artifacts: [{ path: 'report.md', bytes: 10, url: 'https://b/v1/tasks/x/artifacts/report.md', attached: true }], console: links.console });
    expect(m.subject).toBe('[Baton] Done: Research <b>event sourcing</b>');
    expect(m.html).toContain('<h1>Findings</h1>');
    expect(m.html).not.toMatch(/<img|href="javascript/);
    expect(m.html).toMatch(/<a href="https:\/\/b\/v1\/tasks\/x\/artifacts\/report\.md">report\.md<\/a> \(10 bytes, attached\)/);
    expect(m.text).toMatch(/# Findings[\s\S]*Files:\n- report\.md \(10 bytes, attached\): https:\/\/b\/v1\/tasks\/x\/artifacts\/report\.md/);
  });
  it('an engineering task completed with a change that is not accepted says so, and why, in the subject and the body', () => {
    const done = given([submitted, started, { type: 'TaskCompleted', data: { summary: 'built it', reportPath: null } }]).state;
    const plan: PlanState = {
      toolUseId: 'plan-1', summary: 'add a report', reviewAgent: 'reviewer', maxReviewRounds: 1, round: 1, status: 'completed',
      subtasks: [{ id: 'api', agent: 'backend-engineer', description: 'd', fileLocks: ['api/**'], dependsOn: [], status: 'done', agentIds: ['api'], summary: null, filesCreated: [], filesModified: [], filesDeleted: [], tests: { passed: 3, failed: 1, skipped: 0 }, rework: null }],
      reviews: [{ agentId: 'review-2', round: 1, verdict: 'request_changes', issues: [{ severity: 'major', file: 'api/a.ts', line: 3, message: 'm' }], summary: 'no' }],
    };
    const m = endMail({ ...done, plan }, { report: null, artifacts: [], console: 'c' });
    expect(m.subject).toBe('[Baton] Done, not accepted: Research <b>event sourcing</b>');
    expect(m.text).toContain('The change is not accepted:\n- the last review (review-2) asked for changes (1 issue) and no round of changes was left (at most 1)\n- tests still fail in api (its last run)\n\nbuilt it');
    expect(m.html).toContain('<li>tests still fail in api (its last run)</li>');
    expect(endMail({ ...done, plan: { ...plan, reviews: [{ ...plan.reviews[0]!, verdict: 'approve', issues: [] }], subtasks: [{ ...plan.subtasks[0]!, tests: { passed: 4, failed: 0, skipped: 0 } }] } }, { report: null, artifacts: [], console: 'c' }).subject).toBe('[Baton] Done: Research <b>event sourcing</b>');
  });
  it('a failure says why', () => {
    const failed = given([submitted, started, { type: 'TaskFailed', data: { code: 'lead_failed', message: 'boom' } }]).state;
    expect(endMail(failed, { report: null, artifacts: [], console: 'c' })).toMatchObject({ subject: '[Baton] Failed: Research <b>event sourcing</b>', text: expect.stringMatching(/lead_failed: boom/) });
  });
  it('a cancellation says who cancelled, when and why', () => {
    const cancelled = given([submitted, started, { type: 'TaskCancelled', data: { reason: 'changed my mind', requestedBy: 'key:1a2b3c4d@t' } }]).state;
    const m = endMail(cancelled, { report: null, artifacts: [], console: 'c' });
    expect(m.text).toMatch(/Cancelled by key:1a2b3c4d@t at \w{3}, \d+ \w{3} \d{4}, \d\d:\d\d UTC: changed my mind/);
    expect(m.html).toMatch(/Cancelled by key:1a2b3c4d@t at \w{3}, \d+ \w{3} \d{4}, \d\d:\d\d UTC: changed my mind/);
  });
  it('images are never loaded: a remote one becomes a link, any other its alt text', () => {
    const m = outboxMail(task, { subject: 's', body: '![pixel](https://tracker.example/p.gif?who=reader) ![local](images/a.png) ![](data:image/png;base64,AAAA)', agentId: 'writer-1' });
    expect(m.html).not.toContain('<img');
    expect(m.html).toContain('<a href="https://tracker.example/p.gif?who=reader">[image: pixel]</a>');
    expect(m.html).toContain('[image: local]');
    expect(m.html).toContain('[image: image]');
  });
  it('a long report only begins in the mail (its text and its HTML), cut at a line, and says where the rest is', () => {
    const done = given([submitted, started, { type: 'TaskCompleted', data: { summary: 'written', reportPath: 'report.md' } }]).state;
    const report = Array.from({ length: 4000 }, (_, i) => `line ${i} ${'漢'.repeat(40)}`).join('\n');
    const m = endMail(done, { report, artifacts: [{ path: 'report.md', bytes: Buffer.byteLength(report), url: 'u', attached: false }], console: 'c' });
    expect(m.text.length).toBeLessThan(MAX_INLINE_REPORT_CHARS + 2000);
    expect(m.html.length).toBeLessThan(3 * MAX_INLINE_REPORT_CHARS);
    expect(m.text).toMatch(/漢\n\n\[The report goes on: [0-9]{3},[0-9]{3} characters in all; the whole of it is under Files below\.\]/);
    expect(excerpt('ab\ud83d\ude00cd', 3)).toBe('ab'); // never half of a surrogate pair
    expect(excerpt('short', 10)).toBe('short');
    // The lead's summary too (a 200,000-character one made a 1.6 MB mail); a subject never ends in half an emoji.
    const long = given([submitted, started, { type: 'TaskCompleted', data: { summary: `${'s'.repeat(MAX_INLINE_REPORT_CHARS - 1)}😀${'s'.repeat(100_000)}`, reportPath: null } }]).state;
    const big = endMail({ ...long, prompt: `${'a'.repeat(78)}😀 tail` }, { report: null, artifacts: [], console: 'c' });
    expect(big.text.length).toBeLessThan(MAX_INLINE_REPORT_CHARS + 2000);
    expect(big.text).toMatch(/s\n… \(100002 more characters; see the console\)/);
    expect(big.subject.isWellFormed() && big.text.isWellFormed() && big.html.isWellFormed()).toBe(true);
    expect(big.subject).toBe(`[Baton] Done: ${'a'.repeat(78)}…`);
  });
  it('an outbox mail: the agent’s subject, its markdown as text and HTML, and where it came from', () => {
    const m = outboxMail(task, { subject: 'The report', body: '# Hi\n\n**bold**', agentId: 'email-agent-1' });
    expect(m).toMatchObject({ subject: 'The report', text: expect.stringMatching(/^# Hi\n\n\*\*bold\*\*\n\n-- \nSent by Baton's email-agent-1 for task /) });
    expect(m.html).toContain('<h1>Hi</h1>');
    expect(m.html).toContain('<strong>bold</strong>');
  });
  it('a phone reads them: the language and a viewport are set, long words wrap, buttons are thumb-sized', () => {
    const m = requestMail(task, { kind: 'clarification', requestId: 'clr-1', agentId: 'researcher-1', toolUseId: 't', questions: ['Which sources?'], context: '', openedAt: 'x' }, links);
    expect(m.html).toMatch(/^<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">/);
    expect(m.html).toMatch(/<body style="[^"]*overflow-wrap:anywhere/);
    expect(m.html).toMatch(/padding:12px 20px[^"]*line-height:20px/);
    expect(humanTime('2026-01-01T00:00:00Z')).toBe('Thu, 1 Jan 2026, 00:00 UTC');
    expect(humanTime('soon')).toBe('soon');
  });
});
