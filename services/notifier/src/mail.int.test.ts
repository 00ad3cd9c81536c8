import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { outboxRequest, sendEmailTool } from '@baton/agents';
import { busNames, encodeEvent, ensureTopology, MAX_EVENT_MESSAGE_BYTES, Relay } from '@baton/bus';
import type { Command, MailRecipientRules, NotifyConfig } from '@baton/domain';
import { handleCommand, loadTask } from '@baton/event-store';
import { mailIds, verifyLinkToken } from '@baton/mail';
import { silentLogger, type Logger } from '@baton/runtime';
import { claimMail, listDeliveries, mailSends, markHandingOver, requestRedelivery, storeArtifact } from '@baton/storage';
import { smtpCatcher, stackTest as test, waitFor, type NatsFixture, type PgFixture, type SmtpCatcher } from '@baton/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect } from 'vitest';
import { createServer, type AddressInfo } from 'node:net';
import { smtpMailer } from './mailer.ts';
import { startNotifier } from './worker.ts';

const SECRET = 'notifier-test-link-secret-0123456789abcdef';
const PUBLIC = 'https://baton.example';
const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };

let smtp: SmtpCatcher;
beforeEach(async () => {
  smtp = await smtpCatcher();
});
afterEach(async () => smtp.close());

/** A relay and a notifier with mail on (against the test SMTP server unless `mailer: null`). */
async function startStack(pg: PgFixture, nats: NatsFixture, o: { notifiers?: number; leaseMs?: number; mailOff?: boolean; maxAttempts?: number; log?: Logger; mailTimeoutMs?: number; recipients?: MailRecipientRules; ackWaitMs?: number; beforeNotifiers?: () => Promise<void> } = {}) {
  const names = busNames(nats.namespace);
  await ensureTopology(await jetstreamManager(nats.nc), names, o.ackWaitMs ? { ackWaitMs: { notifier: o.ackWaitMs } } : {});
  const log = o.log ?? silentLogger();
  const relay = new Relay({ pool: pg.db.pool, store: pg.store, nc: nats.nc, names, log });
  relay.start();
  await o.beforeNotifiers?.();
  const notifiers: Awaited<ReturnType<typeof startNotifier>>[] = [];
  for (let i = 0; i < (o.notifiers ?? 1); i++) {
    const mailer = o.mailOff ? null : smtpMailer(smtp.url, o.mailTimeoutMs ?? 5000);
    notifiers.push(
      await startNotifier({
        store: pg.store, pool: pg.db.pool, js: jetstream(nats.nc), names, log, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', timeoutMs: 2000, concurrency: 4, now: () => new Date(),
        maxAttempts: o.maxAttempts ?? 6, backoffMs: [50, 100, 200], allowPrivateNetworks: true,
        mail: { mailer, from: 'Baton <baton@example.com>', publicUrl: PUBLIC, linkSecret: SECRET, linkTtlMs: 3_600_000, attachMaxBytes: 1024, leaseMs: o.leaseMs ?? 30_000, holder: `notifier-${i}`, ...(o.recipients ? { recipients: o.recipients } : {}) },
      }),
    );
  }
  return { names, stop: async () => { for (const n of notifiers) await n.stop(); await relay.stop(); } };
}

/** A task whose lead waits for approval of a delegation (the request `apr-lead-tu1`). */
async function awaitingApproval(pg: PgFixture, notify: NotifyConfig | null, tenantId = 'acme', prompt = 'go <b>now</b>'): Promise<string> {
  const id = randomUUID();
  const run = (c: Command) => handleCommand(pg.store, id, c);
  await run({ type: 'SubmitTask', prompt: 'Research event sourcing', team: 'research', requirePlanApproval: true, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId, requestHash: null, forkedFrom: null, workspace: null, budget: null, notify });
  await run({ type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' });
  await run({ type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', offline: true, durationMs: 0, usage, content: [{ type: 'text', text: 'Plan: **research** first' }, { type: 'tool_use', id: 'tu1', name: 'Task', input: { agent: 'researcher', prompt } }] });
  await run({ type: 'RequestApproval', requestId: 'apr-lead-tu1', agentId: 'lead', toolUseId: 'tu1', toolName: 'Task', input: { agent: 'researcher', prompt }, inputDigest: 'd', plan: 'Plan: **research** first', deadline: new Date(Date.now() + 600_000).toISOString(), onTimeout: 'reject' });
  return id;
}

/** Approve, then finish the run with report.md (`bytes` long) and notes.md. */
const lastRedeliveryId = async (pg: PgFixture): Promise<string> => (await pg.db.pool.query('select max(id)::text as id from webhook_redeliveries')).rows[0].id;

async function complete(pg: PgFixture, id: string, reportBytes = 40): Promise<void> {
  const run = (c: Command) => handleCommand(pg.store, id, c);
  await run({ type: 'DecideApproval', requestId: 'apr-lead-tu1', decision: 'approve', decidedBy: 'u' });
  await run({ type: 'RecordToolResults', agentId: 'lead', results: [{ toolUseId: 'tu1', toolName: 'Task', content: 'done', isError: false }] });
  await run({ type: 'RecordModelTurn', agentId: 'lead', turn: 2, model: 'm', stopReason: 'end_turn', offline: true, durationMs: 0, usage, content: [{ type: 'text', text: 'written' }] });
  const report = `# Findings\n\n${'x'.repeat(Math.max(0, reportBytes - 12))}\n`;
  for (const [path, content] of [['report.md', report], ['notes.md', 'y'.repeat(2000)]] as const) {
    const a = await storeArtifact(pg.db.pool, { taskId: id, path, agentId: null, content: Buffer.from(content) });
    await run({ type: 'StoreArtifact', agentId: null, path, bytes: a.bytes, sha256: a.sha256, mediaType: a.mediaType });
  }
  await run({ type: 'CompleteTask', summary: 'The report is written.', reportPath: 'report.md' });
}

/** A task whose email agent called send_email (approved): returns the task and its EmailRequested's id once recorded. */
async function outboxTask(pg: PgFixture, to: string[]): Promise<{ id: string; emailId: string }> {
  const id = randomUUID();
  const run = (c: Command) => handleCommand(pg.store, id, c);
  await run({ type: 'SubmitTask', prompt: 'Research X and mail it', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'acme', requestHash: null, forkedFrom: null, workspace: null, budget: null });
  await run({ type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' });
  await run({ type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', offline: true, durationMs: 0, usage, content: [{ type: 'tool_use', id: 'tu1', name: 'Task', input: { agent: 'email-agent', prompt: 'p' } }] });
  await run({ type: 'DispatchSubagent', agentId: 'email-agent-1', agentType: 'email-agent', toolUseId: 'tu1', prompt: 'p' });
  const a = await storeArtifact(pg.db.pool, { taskId: id, path: 'report.md', agentId: null, content: Buffer.from('# Report\n\nFindings.\n') });
  await run({ type: 'StoreArtifact', agentId: null, path: 'report.md', bytes: a.bytes, sha256: a.sha256, mediaType: a.mediaType });
  await run({ type: 'StartSubagent', agentId: 'email-agent-1', attempt: 1, runnerId: 'r' });
  const input = { to, subject: 'The report', body: '# Report\n\n**Findings**.', attach: ['report.md'] };
  const { state } = await run({ type: 'RecordModelTurn', agentId: 'email-agent-1', turn: 1, model: 'm', stopReason: 'tool_use', offline: true, durationMs: 0, usage, content: [{ type: 'tool_use', id: 'tu9', name: 'send_email', input }], attempt: 1 });
  const r = outboxRequest(state, 'email-agent-1', 'tu9', sendEmailTool.input.parse(input));
  if (!r.ok) throw new Error(r.error);
  await run(r.command);
  return { id, emailId: r.command.emailId };
}

const tokenOf = (url: string | undefined): string => new URL(url ?? 'x:').searchParams.get('token') ?? '';

describe('mail notifications', () => {
  test('a request that waits: one mail per recipient with signed Approve / Reject links and the console link; the report at the end, with files attached under the limit and linked', async ({ pg, nats }) => {
    const stack = await startStack(pg, nats);
    const id = await awaitingApproval(pg, { email: { to: ['ann@example.com', 'bob@example.com'], on: ['awaiting_input', 'completed'] } });
    await waitFor(() => smtp.mails.length === 2, { what: 'the approval mails' });
    const ann = smtp.mails.find((m) => m.to[0] === 'ann@example.com')!;
    expect(ann).toMatchObject({ from: 'baton@example.com', subject: '[Baton] Approval needed: Task → researcher — Research event sourcing', envelopeTo: ['ann@example.com'] });
    expect(ann.headers.get('x-baton-task')).toBe(id);
    expect(ann.html).toContain('<strong>research</strong>');
    expect(ann.html).toContain('go &lt;b&gt;now&lt;/b&gt;');
    const links = [...ann.text.matchAll(/^(Approve|Reject|Open in console): (\S+)$/gm)].map((m) => [m[1], m[2]]);
    expect(links.map((l) => l[0])).toEqual(['Approve', 'Reject', 'Open in console']);
    expect(links[2]?.[1]).toBe(`${PUBLIC}/#/tasks/${id}`);
    for (const [action, url] of links.slice(0, 2)) {
      expect(url).toMatch(new RegExp(`^${PUBLIC}/mail/decide\\?token=v1\\.`));
      const check = verifyLinkToken(SECRET, tokenOf(url), new Date());
      expect(check).toEqual({ ok: true, claims: { t: 'acme', k: id, r: 'apr-lead-tu1', d: action?.toLowerCase(), a: 'ann@example.com', e: expect.any(Number) } });
    }

    await complete(pg, id);
    await waitFor(() => smtp.mails.length === 4, { what: 'the report mails' });
    const report = smtp.mails.slice(2).find((m) => m.to[0] === 'bob@example.com')!;
    expect(report.subject).toBe('[Baton] Done: Research event sourcing');
    expect(report.html).toContain('<h1>Findings</h1>');
    expect(report.text).toMatch(/# Findings/);
    // report.md fits the 1 KiB limit and is attached; notes.md (2000 bytes) is only linked.
    expect(report.attachments.map((a) => a.filename)).toEqual(['report.md']);
    // Linked by a signed link a reader without an API key can follow (the API's URL answered them 401): that version of that file, for 30 days.
    const notes = new RegExp(`- notes\\.md \\(2000 bytes\\): ${PUBLIC.replaceAll('.', '\\.')}/mail/file\\?token=(\\S+)`).exec(report.text)?.[1] as string;
    const check = verifyLinkToken(SECRET, notes, new Date());
    expect(check).toMatchObject({ ok: true, claims: { k: id, r: 'notes.md', d: 'file', a: 'bob@example.com', h: expect.stringMatching(/^[0-9a-f]{64}$/) } });
    expect(check.ok && check.claims.e * 1000 - Date.now()).toBeGreaterThan(29 * 86_400_000);
    expect(report.html).toMatch(/<a href="https:\/\/baton\.example\/mail\/file\?token=[^"]+">report\.md<\/a> \(\d+ bytes, attached\)/);
    await stack.stop();
    const deliveries = await listDeliveries(pg.db.pool, id);
    expect(deliveries.map((d) => `${d.channel} ${d.type} ${d.url} ${d.attempt} ${d.ok} ${d.statusCode}`).sort()).toEqual([
      'email email.awaiting_input mailto:ann@example.com 1 true 250',
      'email email.awaiting_input mailto:bob@example.com 1 true 250',
      'email email.completed mailto:ann@example.com 1 true 250',
      'email email.completed mailto:bob@example.com 1 true 250',
    ]);
    expect(new Set(deliveries.map((d) => d.webhookId)).size).toBe(4);
  });

  test('a request whose event is too big to travel on the bus whole (it comes without its data) is mailed all the same, read from the log', async ({ pg, nats }) => {
    const stack = await startStack(pg, nats);
    const prompt = `${'long brief '.repeat(Math.ceil(MAX_EVENT_MESSAGE_BYTES / 11))}the end`;
    const id = await awaitingApproval(pg, { email: { to: ['ann@example.com'], on: ['awaiting_input'] } }, 'acme', prompt);
    await waitFor(() => smtp.mails.length === 1, { what: 'the approval mail' });
    expect(smtp.mails[0]).toMatchObject({ subject: '[Baton] Approval needed: Task → researcher — Research event sourcing', envelopeTo: ['ann@example.com'] });
    expect(smtp.mails[0]?.text).toMatch(/"prompt": "long brief long brief[^]*more characters; see the console\)/);
    await stack.stop();
    expect((await listDeliveries(pg.db.pool, id)).map((d) => `${d.type} ${d.ok}`)).toEqual(['email.awaiting_input true']);
  });

  test('a server that refuses (451) and then accepts: retried with backoff, one mail, every attempt recorded; a moment not asked for sends nothing', async ({ pg, nats }) => {
    smtp.refuseNext(2, 451, 'try again later');
    const stack = await startStack(pg, nats);
    const id = await awaitingApproval(pg, { email: { to: ['ann@example.com'], on: ['awaiting_input'] } });
    await waitFor(() => smtp.mails.length === 1, { what: 'the mail, at the third attempt' });
    await handleCommand(pg.store, id, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    await waitFor(async () => (await loadTask(pg.store, id)).state.status === 'cancelled', { what: 'cancelled' });
    await stack.stop();
    expect(smtp.received).toBe(3);
    expect(smtp.mails).toHaveLength(1);
    const deliveries = await listDeliveries(pg.db.pool, id);
    expect(deliveries.map((d) => [d.attempt, d.ok, d.statusCode])).toEqual([[1, false, 451], [2, false, 451], [3, true, 250]]);
    expect(deliveries[0]?.error).toMatch(/451 try again later/);
    expect(await mailSends(pg.db.pool, id)).toEqual([{ key: 'request:apr-lead-tu1', recipient: 'ann@example.com', state: 'sent', attempts: 3, lastError: null }]);
  });

  test('a server that takes the whole message and answers too late: outcome unknown, not sent again (it got it); one that never greets is tried again', async ({ pg, nats }) => {
    const release = smtp.hold(); // the final answer held past MAIL_TIMEOUT_MS
    const stack = await startStack(pg, nats, { mailTimeoutMs: 1000 });
    const id = await awaitingApproval(pg, { email: { to: ['ann@example.com'], on: ['awaiting_input'] } });
    await waitFor(async () => (await listDeliveries(pg.db.pool, id)).some((d) => d.givenUp), { what: 'the attempt recorded as given up' });
    release();
    await waitFor(() => smtp.mails.length === 1, { what: 'the held mail taken after all' });
    await stack.stop();
    expect(smtp.received).toBe(1); // before: once per attempt, each answered late
    const deliveries = await listDeliveries(pg.db.pool, id);
    expect(deliveries.map((d) => [d.attempt, d.ok, d.givenUp])).toEqual([[1, false, true]]);
    expect(deliveries[0]?.error).toMatch(/^outcome unknown: no answer after the whole message was sent \(.*\); not sent again \(it may have gone out\)$/);
    expect((await mailSends(pg.db.pool, id))[0]).toMatchObject({ state: 'unknown', attempts: 1 });

    // Nothing handed over (a server that never greets): a plain failure, retried.
    const silent = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const err = await smtpMailer(`smtp://127.0.0.1:${(silent.address() as AddressInfo).port}`, 300).send({ from: 'a@example.com', to: ['b@example.com'], subject: 's', text: 't', html: 'h', messageId: '<m@x>', attachments: [], headers: {} }).catch((e: unknown) => e);
    silent.close();
    expect(err).toMatchObject({ name: 'SendError', outcomeUnknown: false, permanent: false });
  });

  test('two notifiers and the event delivered twice (the bus re-fed) while the SMTP server is slow: one mail', async ({ pg, nats }) => {
    const lines: string[] = [];
    const log = pino({ level: 'info' }, new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) })) as unknown as Logger;
    const release = smtp.hold();
    const stack = await startStack(pg, nats, { notifiers: 2, log });
    const id = await awaitingApproval(pg, { email: { to: ['ann@example.com'], on: ['awaiting_input'] } });
    await waitFor(() => smtp.received === 1, { what: 'the first notifier sending (held by the server)' });
    // The same event again under another message id, as when the relay re-feeds the bus from the log.
    const requested = (await loadTask(pg.store, id)).events.find((e) => e.type === 'ApprovalRequested')!;
    await jetstream(nats.nc).publish(stack.names.eventSubject(id, requested.type), encodeEvent(requested), { msgID: `refeed-${requested.id}` });
    await waitFor(() => lines.some((l) => l.includes('another notifier is sending it')), { what: 'the duplicate to find the mail claimed' });
    release();
    await waitFor(async () => (await mailSends(pg.db.pool, id))[0]?.state === 'sent', { what: 'the mail sent' });
    await stack.stop();
    expect(smtp.received).toBe(1);
    expect(smtp.mails).toHaveLength(1);
    expect((await listDeliveries(pg.db.pool, id)).map((d) => [d.attempt, d.ok])).toEqual([[1, true]]);
  });
});

describe('a mail sent again at a person\'s asking (a redelivery of its delivery)', () => {
  test('a request mail the server refused for good is sent again, with new links; once the request is decided, asking again sends nothing and says why', async ({ pg, nats }) => {
    smtp.refuseNext(1, 550, 'mailbox full');
    const stack = await startStack(pg, nats);
    const id = await awaitingApproval(pg, { email: { to: ['ann@example.com'], on: ['awaiting_input', 'completed'] } });
    await waitFor(async () => (await mailSends(pg.db.pool, id))[0]?.state === 'failed', { what: 'the mail given up (550)' });
    expect(smtp.mails).toHaveLength(0);
    const [first] = await listDeliveries(pg.db.pool, id);
    await requestRedelivery(pg.db.pool, { taskId: id, deliveryId: first!.id, requestedBy: 'ops@acme' });
    await waitFor(() => smtp.mails.length === 1, { what: 'the mail sent again' });
    const links = [...smtp.mails[0]!.text.matchAll(/^(Approve|Reject): (\S+)$/gm)].map((m) => m[2]);
    expect(links).toHaveLength(2);
    expect(verifyLinkToken(SECRET, tokenOf(links[0]), new Date())).toMatchObject({ ok: true, claims: { k: id, r: 'apr-lead-tu1', d: 'approve', a: 'ann@example.com' } });
    await waitFor(async () => (await listDeliveries(pg.db.pool, id)).length === 2, { what: 'the second attempt recorded' });
    expect((await listDeliveries(pg.db.pool, id)).map((d) => [d.attempt, d.ok, d.redelivery, d.statusCode, d.webhookId === first!.webhookId])).toEqual([[1, false, false, 550, true], [2, true, true, 250, true]]);
    expect(await mailSends(pg.db.pool, id)).toEqual([{ key: 'request:apr-lead-tu1', recipient: 'ann@example.com', state: 'sent', attempts: 2, lastError: null }]);

    // Decided: the request's mail has nothing left to ask. Recorded as a failed attempt naming why; nothing sent.
    await handleCommand(pg.store, id, { type: 'DecideApproval', requestId: 'apr-lead-tu1', decision: 'approve', decidedBy: 'u' });
    await requestRedelivery(pg.db.pool, { taskId: id, deliveryId: first!.id, requestedBy: 'ops@acme' });
    await waitFor(async () => (await listDeliveries(pg.db.pool, id)).length === 3, { what: 'the refused resend recorded' });
    await stack.stop();
    expect(smtp.mails).toHaveLength(1);
    expect((await listDeliveries(pg.db.pool, id))[2]).toMatchObject({ attempt: 3, ok: false, redelivery: true, error: expect.stringMatching(/^not sent: the request this mail asked about \(apr-lead-tu1\) is no longer open/) });
  });

  test('the end mail is sent again, the report attached as it is now; with mail off, the attempt says so', async ({ pg, nats }) => {
    let stack = await startStack(pg, nats);
    const id = await awaitingApproval(pg, { email: { to: ['ann@example.com'], on: ['completed'] } });
    await complete(pg, id);
    await waitFor(() => smtp.mails.length === 1, { what: 'the report mail' });
    await waitFor(async () => (await listDeliveries(pg.db.pool, id)).length === 1, { what: 'its attempt recorded' });
    const [first] = await listDeliveries(pg.db.pool, id);
    await requestRedelivery(pg.db.pool, { taskId: id, deliveryId: first!.id, requestedBy: 'ops@acme' });
    await waitFor(() => smtp.mails.length === 2, { what: 'the report mailed again' });
    // A new message (its own Message-ID), of the same mail.
    expect(smtp.mails[1]).toMatchObject({ subject: smtp.mails[0]!.subject, messageId: smtp.mails[0]!.messageId!.replace('@', `.r${await lastRedeliveryId(pg)}@`) });
    expect(smtp.mails[1]!.attachments.map((a) => a.filename)).toEqual(['report.md']);
    await stack.stop();

    stack = await startStack(pg, nats, { mailOff: true });
    await requestRedelivery(pg.db.pool, { taskId: id, deliveryId: first!.id, requestedBy: 'ops@acme' });
    await waitFor(async () => (await listDeliveries(pg.db.pool, id)).length === 3, { what: 'the resend with mail off recorded' });
    await stack.stop();
    expect(smtp.mails).toHaveLength(2);
    expect((await listDeliveries(pg.db.pool, id)).map((d) => [d.attempt, d.ok, d.error])).toEqual([[1, true, null], [2, true, null], [3, false, 'not sent: mail is off: the notifier has no SMTP_URL']]);
  });
});

describe('the outbox', () => {
  test('an EmailRequested is sent once — its markdown as text and HTML, the artifact attached — and EmailSent is recorded on the task', async ({ pg, nats }) => {
    const stack = await startStack(pg, nats);
    const { id, emailId } = await outboxTask(pg, ['ann@example.com', 'bob@example.com']);
    await waitFor(async () => (await loadTask(pg.store, id)).state.emails[emailId]?.status === 'sent', { what: 'EmailSent' });
    await stack.stop();
    expect(smtp.mails).toHaveLength(1);
    const [mail] = smtp.mails;
    expect(mail).toMatchObject({ subject: 'The report', to: ['ann@example.com', 'bob@example.com'], envelopeTo: ['ann@example.com', 'bob@example.com'] });
    expect(mail?.text).toMatch(/^# Report\n\n\*\*Findings\*\*\.\n\n-- \nSent by Baton's email-agent-1 for task /);
    expect(mail?.html).toContain('<strong>Findings</strong>');
    expect(mail?.attachments.map((a) => [a.filename, a.content.toString()])).toEqual([['report.md', '# Report\n\nFindings.\n']]);
    expect(mail?.headers.get('x-baton-email')).toBe(emailId);
    const { state, events } = await loadTask(pg.store, id);
    expect(state.emails[emailId]).toMatchObject({ status: 'sent', messageId: mail?.messageId });
    expect(events.filter((e) => e.type === 'EmailSent').map((e) => e.data)).toEqual([{ emailId, messageId: mail?.messageId, accepted: ['ann@example.com', 'bob@example.com'], rejected: [] }]);
    expect((await listDeliveries(pg.db.pool, id)).map((d) => `${d.channel} ${d.type} ${d.url} ${d.ok}`)).toEqual(['email email.outbox mailto:ann@example.com, bob@example.com true']);
  });

  test('a recipient the server refuses while taking the others: sent, and the task and the attempt say who did not get it, and why', async ({ pg, nats }) => {
    smtp.refuseRecipient('bob@example.com', 550, 'no such user');
    const stack = await startStack(pg, nats);
    const { id, emailId } = await outboxTask(pg, ['ann@example.com', 'bob@example.com']);
    await waitFor(async () => (await loadTask(pg.store, id)).state.emails[emailId]?.status === 'sent', { what: 'EmailSent' });
    await stack.stop();
    expect(smtp.mails.map((m) => m.envelopeTo)).toEqual([['ann@example.com']]);
    expect((await loadTask(pg.store, id)).state.emails[emailId]).toMatchObject({ status: 'sent', refused: ['bob@example.com'] });
    expect((await listDeliveries(pg.db.pool, id))[0]).toMatchObject({ ok: true, error: expect.stringMatching(/^refused: bob@example\.com \(550 no such user\)$/) });
  });

  test('refused for good (550): not retried, EmailFailed recorded; with mail off: EmailFailed mail_off', async ({ pg, nats }) => {
    smtp.refuseNext(1, 550, 'no such user');
    let stack = await startStack(pg, nats);
    const { id, emailId } = await outboxTask(pg, ['nobody@example.com']);
    await waitFor(async () => (await loadTask(pg.store, id)).state.emails[emailId]?.status === 'failed', { what: 'EmailFailed' });
    await stack.stop();
    expect((await loadTask(pg.store, id)).state.emails[emailId]?.error).toEqual({ code: 'smtp_rejected', message: expect.stringMatching(/550 no such user/) });
    expect(smtp.received).toBe(1);

    stack = await startStack(pg, nats, { mailOff: true });
    const off = await outboxTask(pg, ['ann@example.com']);
    await waitFor(async () => (await loadTask(pg.store, off.id)).state.emails[off.emailId]?.status === 'failed', { what: 'EmailFailed (mail off)' });
    await stack.stop();
    expect((await loadTask(pg.store, off.id)).state.emails[off.emailId]?.error).toEqual({ code: 'mail_off', message: 'mail is off: the notifier has no SMTP_URL' });
    expect(smtp.received).toBe(1);
  });

  test('a notifier that stopped while sending: the mail is never sent again; its outcome is recorded as unknown', async ({ pg, nats }) => {
    const { id, emailId } = await outboxTask(pg, ['ann@example.com']);
    // What a notifier killed while handing the message over leaves: a claim whose lease has run out, nothing recorded.
    await claimMail(pg.db.pool, { taskId: id, key: `email:${emailId}`, recipient: 'ann@example.com', messageId: '<m@x>', holder: 'killed', leaseMs: 1 });
    await markHandingOver(pg.db.pool, { taskId: id, key: `email:${emailId}`, recipient: 'ann@example.com', holder: 'killed' });
    const stack = await startStack(pg, nats);
    await waitFor(async () => (await loadTask(pg.store, id)).state.emails[emailId]?.status === 'failed', { what: 'EmailFailed outcome_unknown' });
    await stack.stop();
    expect(smtp.received).toBe(0);
    expect((await loadTask(pg.store, id)).state.emails[emailId]?.error?.code).toBe('outcome_unknown');
    // The attempt it was (the stopped notifier's first), not 0.
    expect((await listDeliveries(pg.db.pool, id)).map((d) => [d.attempt, d.ok, d.error])).toEqual([[1, false, expect.stringMatching(/^outcome unknown/)]]);
  });

  test('a revised plan after a rejection: its mail says it is revised, and why the last was rejected', async ({ pg, nats }) => {
    const stack = await startStack(pg, nats);
    const id = await awaitingApproval(pg, { email: { to: ['ann@example.com'], on: ['awaiting_input'] } });
    await waitFor(() => smtp.mails.length === 1, { what: 'the first approval mail' });
    const run = (c: Command) => handleCommand(pg.store, id, c);
    await run({ type: 'DecideApproval', requestId: 'apr-lead-tu1', decision: 'reject', reason: 'too broad', decidedBy: 'u' });
    await run({ type: 'RecordToolResults', agentId: 'lead', results: [{ toolUseId: 'tu1', toolName: 'Task', content: 'The user rejected the plan: too broad', isError: false }] });
    await run({ type: 'RecordModelTurn', agentId: 'lead', turn: 2, model: 'm', stopReason: 'tool_use', offline: true, durationMs: 0, usage, content: [{ type: 'tool_use', id: 'tu2', name: 'Task', input: { agent: 'researcher', prompt: 'narrower' } }] });
    await run({ type: 'RequestApproval', requestId: 'apr-lead-tu2', agentId: 'lead', toolUseId: 'tu2', toolName: 'Task', input: { agent: 'researcher', prompt: 'narrower' }, inputDigest: 'd2', plan: 'Plan: narrower', deadline: new Date(Date.now() + 600_000).toISOString(), onTimeout: 'reject' });
    await waitFor(() => smtp.mails.length === 2, { what: 'the revised approval mail' });
    await stack.stop();
    expect(smtp.mails.map((m) => m.subject)).toEqual(['[Baton] Approval needed: Task → researcher — Research event sourcing', '[Baton] Revised, approval needed: Task → researcher — Research event sourcing']);
    expect(smtp.mails[1]!.text).toContain('This is a revised request: the previous one was rejected (the last: too broad).');
  });

  test('MAIL_ALLOWED_RECIPIENTS is the last word: a notification to an address the tenant may not mail is not sent (given up, said in /deliveries), the others are; an outbox mail naming one fails recipient_not_allowed', async ({ pg, nats }) => {
    const stack = await startStack(pg, nats, { recipients: { acme: ['example.com'] } });
    const id = await awaitingApproval(pg, { email: { to: ['ann@example.com', 'eve@attacker.example'], on: ['awaiting_input'] } });
    await waitFor(async () => (await listDeliveries(pg.db.pool, id)).length === 2, { what: 'both attempts recorded' });
    const { emailId, id: outboxId } = await outboxTask(pg, ['bob@example.com', 'eve@attacker.example']);
    await waitFor(async () => (await loadTask(pg.store, outboxId)).state.emails[emailId]?.status === 'failed', { what: 'EmailFailed' });
    await stack.stop();
    expect(smtp.mails.map((m) => m.envelopeTo)).toEqual([['ann@example.com']]);
    expect((await listDeliveries(pg.db.pool, id)).map((d) => [d.url, d.ok, d.givenUp, d.error]).sort()).toEqual([
      ['mailto:ann@example.com', true, false, null],
      ['mailto:eve@attacker.example', false, true, "not sent: eve@attacker.example: this deployment does not mail that address for tenant 'acme' (MAIL_ALLOWED_RECIPIENTS allows example.com)"],
    ]);
    expect((await loadTask(pg.store, outboxId)).state.emails[emailId]?.error).toEqual({ code: 'recipient_not_allowed', message: expect.stringMatching(/^not sent: eve@attacker\.example: this deployment does not mail that address for tenant 'acme'/) });
  });

  test('a request mail waiting to be tried again (its attempt met a 451) when the request is decided: settled and said in /deliveries, not left "the notifiers try again" for ever', async ({ pg, nats }) => {
    smtp.refuseNext(1, 451, 'try again later');
    const stack = await startStack(pg, nats);
    const id = await awaitingApproval(pg, { email: { to: ['ann@example.com'], on: ['awaiting_input'] } });
    await waitFor(async () => (await mailSends(pg.db.pool, id)).some((m) => m.state === 'retry'), { what: 'the mail waiting to be tried again' });
    await handleCommand(pg.store, id, { type: 'DecideApproval', requestId: 'apr-lead-tu1', decision: 'approve', decidedBy: 'u' });
    await waitFor(async () => (await mailSends(pg.db.pool, id)).every((m) => m.state === 'failed'), { what: 'the mail settled' });
    await stack.stop();
    expect(smtp.mails).toHaveLength(0);
    expect((await mailSends(pg.db.pool, id)).map((m) => m.lastError)).toEqual([expect.stringMatching(/^not sent: the request closed before it was tried again \(its last attempt: .*451 try again later/)]);
    expect((await listDeliveries(pg.db.pool, id)).map((d) => [d.attempt, d.ok, d.givenUp, d.error])).toEqual([
      [1, false, false, expect.stringMatching(/451 try again later/)],
      [2, false, true, 'not sent: the request closed before it was tried again'],
    ]);
  });

  test('an event back past its attempts unsettled (notifiers kept stopping mid-way): its mails are given up and said — a request mail failed in /deliveries, an agent\'s mail EmailFailed — not left "sending"/"queued" for ever, and nothing is sent', async ({ pg, nats }) => {
    const request = await awaitingApproval(pg, { email: { to: ['ann@example.com'], on: ['awaiting_input'] } });
    const { id: outbox, emailId } = await outboxTask(pg, ['bob@example.com']);
    // Notifiers that took each message and died before settling it (twice: past the one attempt allowed here).
    const takeAndDie = async (): Promise<void> => {
      const raw = await jetstream(nats.nc).consumers.get(busNames(nats.namespace).eventsStream, busNames(nats.namespace).consumers.notifier);
      const taken = new Map<string, number>();
      await waitFor(async () => {
        const m = await raw.next({ expires: 1000 });
        if (m) taken.set(m.subject, m.info.deliveryCount);
        const counts = [...taken.entries()].filter(([s]) => s.endsWith('ApprovalRequested') || s.endsWith('EmailRequested')).map(([, n]) => n);
        return counts.length === 2 && counts.every((n) => n >= 2);
      }, { timeoutMs: 20_000, what: 'the two messages taken twice and never settled' });
    };
    const stack = await startStack(pg, nats, { maxAttempts: 1, ackWaitMs: 300, beforeNotifiers: takeAndDie });
    await waitFor(async () => (await loadTask(pg.store, outbox)).state.emails[emailId]?.status === 'failed' && (await mailSends(pg.db.pool, request)).some((m) => m.state === 'failed'), { timeoutMs: 20_000, what: 'both mails given up' });
    await stack.stop();
    expect(smtp.received).toBe(0);
    expect((await loadTask(pg.store, outbox)).state.emails[emailId]?.error).toEqual({ code: 'given_up', message: expect.stringMatching(/^not sent: given up: delivered \d+ times, past the \d+ attempts allowed, without being settled/) });
    expect((await listDeliveries(pg.db.pool, request)).map((d) => [d.attempt, d.ok, d.givenUp, d.error])).toEqual([[1, false, true, expect.stringMatching(/^not sent: given up: delivered/)]]);
  });

  test("an agent's mail the ledger settled while the task still shows it queued (its notifier died between the two): the task is told from the ledger, nothing sent", async ({ pg, nats }) => {
    const { id, emailId } = await outboxTask(pg, ['bob@example.com']);
    const { messageId } = mailIds(id, `email:${emailId}`, 'bob@example.com', new URL(PUBLIC).hostname);
    await pg.db.pool.query(`insert into mail_sends (task_id, mail_key, recipient, message_id, state, attempts, last_error) values ($1, $2, 'bob@example.com', $3, 'failed', 4, '451 try again later')`, [id, `email:${emailId}`, messageId]);
    const stack = await startStack(pg, nats);
    await waitFor(async () => (await loadTask(pg.store, id)).state.emails[emailId]?.status === 'failed', { what: 'EmailFailed from the ledger' });
    await stack.stop();
    expect(smtp.received).toBe(0);
    expect((await loadTask(pg.store, id)).state.emails[emailId]?.error).toEqual({ code: 'not_sent', message: '451 try again later' });
  });

  test("a request's mail a notifier was sending when it stopped, the request closed since (it timed out while the deployment was down): settled and said in /deliveries, never sent", async ({ pg, nats }) => {
    const id = await awaitingApproval(pg, { email: { to: ['ann@example.com', 'bob@example.com'], on: ['awaiting_input'] } });
    const key = 'request:apr-lead-tu1';
    // Ann's mail was being handed over, Bob's not yet, when the notifier was killed; then the request closed.
    // Bob's claim is still within its lease when the request's message comes back: it is looked at again when the lease ends.
    await claimMail(pg.db.pool, { taskId: id, key, recipient: 'ann@example.com', messageId: '<m@x>', holder: 'killed', leaseMs: 1 });
    await claimMail(pg.db.pool, { taskId: id, key, recipient: 'bob@example.com', messageId: '<m@x>', holder: 'killed', leaseMs: 1500 });
    await markHandingOver(pg.db.pool, { taskId: id, key, recipient: 'ann@example.com', holder: 'killed' });
    await handleCommand(pg.store, id, { type: 'DecideApproval', requestId: 'apr-lead-tu1', decision: 'reject', reason: 'no answer in time', decidedBy: 'deadline' });
    const stack = await startStack(pg, nats);
    await waitFor(async () => (await mailSends(pg.db.pool, id)).every((m) => m.state !== 'sending'), { what: 'both claims settled' });
    await stack.stop();
    expect(smtp.received).toBe(0);
    expect((await mailSends(pg.db.pool, id)).map((m) => [m.recipient, m.state])).toEqual([['ann@example.com', 'unknown'], ['bob@example.com', 'failed']]);
    expect((await listDeliveries(pg.db.pool, id)).map((d) => [d.url, d.type, d.attempt, d.ok, d.givenUp, d.error]).sort()).toEqual([
      ['mailto:ann@example.com', 'email.awaiting_input', 1, false, true, expect.stringMatching(/^outcome unknown: .* the request has closed since; not sent again \(it may have gone out\)$/)],
      ['mailto:bob@example.com', 'email.awaiting_input', 1, false, true, 'not sent: the notifier sending it stopped before handing it over, and the request has closed since'],
    ]);
  });

  test('a notifier that stopped before the message went (connecting, at MAIL or RCPT): the next one sends it, once', async ({ pg, nats }) => {
    const { id, emailId } = await outboxTask(pg, ['ann@example.com']);
    await claimMail(pg.db.pool, { taskId: id, key: `email:${emailId}`, recipient: 'ann@example.com', messageId: '<m@x>', holder: 'killed', leaseMs: 1 });
    const stack = await startStack(pg, nats);
    await waitFor(async () => (await loadTask(pg.store, id)).state.emails[emailId]?.status === 'sent', { what: 'EmailSent' });
    await stack.stop();
    expect(smtp.mails).toHaveLength(1);
    expect((await listDeliveries(pg.db.pool, id)).map((d) => [d.attempt, d.ok])).toEqual([[2, true]]);
  });
});
