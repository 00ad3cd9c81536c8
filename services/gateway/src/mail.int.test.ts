import { randomUUID } from 'node:crypto';
import type { Command } from '@baton/domain';
import { handleCommand, loadTask } from '@baton/event-store';
import { storeArtifact } from '@baton/storage';
import { signLinkToken, type LinkClaims } from '@baton/mail';
import { createLogger } from '@baton/runtime';
import { pgTest as test, type PgFixture } from '@baton/testing';
import { describe, expect } from 'vitest';
import { fixedApiKeys } from './api-keys.ts';
import { testGateway } from './test-gateway.ts';

const SECRET = 'gateway-test-link-secret-0123456789abcdef';
const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };

/** A task of `tenant` whose lead waits on an approval (apr-lead-tu1) or a question (clr-lead-tu1). */
async function waiting(pg: PgFixture, kind: 'approval' | 'clarification', tenantId = 'default'): Promise<string> {
  const id = randomUUID();
  const run = (c: Command) => handleCommand(pg.store, id, c);
  await run({ type: 'SubmitTask', prompt: 'Research <i>event sourcing</i>', team: 'research', requirePlanApproval: true, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId, requestHash: null, forkedFrom: null, workspace: null, budget: null });
  await run({ type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' });
  await run({ type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', offline: true, durationMs: 0, usage, content: [{ type: 'tool_use', id: 'tu1', name: kind === 'approval' ? 'Task' : 'ask_user', input: {} }] });
  const deadline = new Date(Date.now() + 600_000).toISOString();
  if (kind === 'approval') await run({ type: 'RequestApproval', requestId: 'apr-lead-tu1', agentId: 'lead', toolUseId: 'tu1', toolName: 'Task', input: { agent: 'researcher', prompt: '<script>x()</script>' }, inputDigest: 'd', plan: 'Plan: **research**', deadline, onTimeout: 'reject' });
  else await run({ type: 'RequestClarification', requestId: 'clr-lead-tu1', agentId: 'lead', toolUseId: 'tu1', questions: ['Who is it for?', 'How deep?'], context: 'vague', options: ['CTO', 'engineers'], deadline });
  return id;
}

const claimsFor = (id: string, o: Partial<LinkClaims> = {}): LinkClaims => ({ t: 'default', k: id, r: 'apr-lead-tu1', d: 'approve', a: 'ann@example.com', e: Math.floor(Date.now() / 1000) + 3600, ...o });
const form = (fields: [string, string][]) => ({ headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams(fields).toString() });

describe('mailed decision links', () => {
  test('GET shows the request and a form, deciding nothing (mail scanners fetch links); its POST approves through the API’s path, as mail:<address>; the link used again says so', async ({ pg }) => {
    const app = await testGateway(pg, null, { mailLinkSecret: SECRET });
    const id = await waiting(pg, 'approval');
    const token = signLinkToken(SECRET, claimsFor(id));
    const page = await app.inject({ method: 'GET', url: `/mail/decide?token=${token}` });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['cache-control']).toBe('no-store');
    expect([page.headers['x-content-type-options'], page.headers['content-security-policy']]).toEqual(['nosniff', expect.stringContaining("frame-ancestors 'none'")]);
    expect(page.body).toContain('Approve this request?');
    expect(page.body).toContain('<strong>research</strong>');
    expect(page.body).toContain('&lt;script&gt;x()&lt;/script&gt;');
    expect(page.body).not.toContain('<script>');
    // Relative: behind a proxy serving the gateway under a path, the form and the link stay under it.
    expect(page.body).toMatch(new RegExp(`<form method="post" action="decide"><input type="hidden" name="token" value="${token}">`));
    expect(page.body).toContain(`href="../#/tasks/${id}"`);
    expect(Object.keys((await loadTask(pg.store, id)).state.pendingRequests)).toEqual(['apr-lead-tu1']); // nothing decided

    const post = await app.inject({ method: 'POST', url: '/mail/decide', ...form([['token', token]]) });
    expect(post.statusCode).toBe(200);
    expect(post.body).toContain('Approved as ann@example.com');
    const { events } = await loadTask(pg.store, id);
    expect(events.at(-1)).toMatchObject({ type: 'ApprovalGranted', data: { requestId: 'apr-lead-tu1', decidedBy: 'mail:ann@example.com', edited: false }, metadata: { actor: 'mail:ann@example.com' } });

    // The same link again (a reload after a lost answer, a form sent twice): done, said plainly — it read like a failure.
    for (const again of [app.inject({ method: 'GET', url: `/mail/decide?token=${token}` }), app.inject({ method: 'POST', url: '/mail/decide', ...form([['token', token]]) })]) {
      const r = await again;
      expect(r.statusCode).toBe(200);
      expect(r.body).toMatch(/<h1>Done: approved<\/h1><p>You approved this at \w{3}, \d+ \w{3} \d{4}, \d\d:\d\d UTC; it is recorded\. Nothing more to do\.<\/p>/);
    }
    // Its reject link, followed after: decided by someone (here: this address) otherwise — who and when.
    const reject = await app.inject({ method: 'GET', url: `/mail/decide?token=${signLinkToken(SECRET, claimsFor(id, { d: 'reject' }))}` });
    expect([reject.statusCode, reject.body]).toEqual([409, expect.stringMatching(/Already decided[\s\S]*was already decided: approved \(by mail:ann@example.com at \w{3}, [^)]*UTC\)\. Nothing was changed\./)]);
    // The page on a phone: the language set, a main landmark, the task in the title, the JSON input folded away, the other decision a tap away.
    const second = await waiting(pg, 'approval');
    const shown = await app.inject({ method: 'GET', url: `/mail/decide?token=${signLinkToken(SECRET, claimsFor(second))}` });
    expect(shown.body).toMatch(/^<!doctype html><html lang="en">[\s\S]*<title>Approve this request\? · Research &lt;i&gt;event sourcing&lt;\/i&gt; — Baton<\/title>[\s\S]*<main>/);
    expect(shown.body).toMatch(/<details><summary>The exact input \(JSON\)<\/summary><pre>/);
    const instead = /<a href="(decide\?token=[^"]+)">Reject instead…<\/a>/.exec(shown.body)?.[1] as string;
    expect((await app.inject({ method: 'GET', url: `/mail/${instead}` })).body).toContain('Reject this request?');
    expect((await loadTask(pg.store, id)).events).toHaveLength(events.length);
  });

  test("a link's token never reaches the log, even at debug (which logs each request's URL)", async ({ pg }) => {
    const lines: string[] = [];
    const log = createLogger('gateway', { level: 'debug', destination: { write: (line: string) => void lines.push(line) } });
    const app = await testGateway(pg, null, { mailLinkSecret: SECRET, log });
    const id = await waiting(pg, 'approval');
    const token = signLinkToken(SECRET, claimsFor(id));
    expect((await app.inject({ method: 'GET', url: `/mail/decide?token=${token}&x=1` })).statusCode).toBe(200);
    const logged = lines.join('');
    expect(logged).toContain('"url":"/mail/decide?token=[redacted]&x=1"');
    expect(logged).not.toContain(token.slice(3, 40));
  });

  test("a tenant's links stop working once it has no API key left (offboarded, or every key revoked after a leak); while it has one they work", async ({ pg }) => {
    const keys = new Map([['key-of-acme-aaaaaaaa01', 'acme']]);
    const app = await testGateway(pg, null, { mailLinkSecret: SECRET, apiKeys: fixedApiKeys(keys) });
    const [acme, gone] = [await waiting(pg, 'approval', 'acme'), await waiting(pg, 'approval', 'globex')];
    expect((await app.inject({ method: 'GET', url: `/mail/decide?token=${signLinkToken(SECRET, claimsFor(acme, { t: 'acme' }))}` })).statusCode).toBe(200);
    for (const r of [
      await app.inject({ method: 'GET', url: `/mail/decide?token=${signLinkToken(SECRET, claimsFor(gone, { t: 'globex' }))}` }),
      await app.inject({ method: 'POST', url: '/mail/decide', ...form([['token', signLinkToken(SECRET, claimsFor(gone, { t: 'globex' }))]]) }),
    ]) {
      expect([r.statusCode, r.body]).toEqual([403, expect.stringMatching(/This link no longer works[\s\S]*no API key/)]);
    }
    expect(Object.keys((await loadTask(pg.store, gone)).state.pendingRequests)).toEqual(['apr-lead-tu1']);
  });

  test('reject with a reason; tampered, expired, another tenant’s, a link for another page — each a clear page, nothing changed', async ({ pg }) => {
    const app = await testGateway(pg, null, { mailLinkSecret: SECRET });
    const id = await waiting(pg, 'approval');
    const before = (await loadTask(pg.store, id)).events.length;
    const token = signLinkToken(SECRET, claimsFor(id, { d: 'reject' }));
    const [v, payload, sig] = token.split('.') as [string, string, string];
    const approveTampered = `${v}.${Buffer.from(JSON.stringify(claimsFor(id, { d: 'approve' }))).toString('base64url')}.${sig}`;
    const cases: [string, number, RegExp][] = [
      [approveTampered, 400, /This link is not valid/],
      [`${v}.${payload}.${sig.slice(0, 10)}`, 400, /This link is not valid/],
      [signLinkToken('another-secret-entirely-0123456789abcdef', claimsFor(id)), 400, /This link is not valid/],
      [signLinkToken(SECRET, claimsFor(id, { e: Math.floor(Date.now() / 1000) - 1 })), 410, /This link has expired/],
      [signLinkToken(SECRET, claimsFor(id, { t: 'other-tenant' })), 404, /No such task/],
      [signLinkToken(SECRET, claimsFor(id, { d: 'answer' })), 400, /not valid here/],
      [signLinkToken(SECRET, claimsFor(id, { r: 'apr-nope' })), 404, /No such request/],
    ];
    for (const [t, status, body] of cases) {
      for (const r of [await app.inject({ method: 'GET', url: `/mail/decide?token=${encodeURIComponent(t)}` }), await app.inject({ method: 'POST', url: '/mail/decide', ...form([['token', t]]) })]) {
        expect([r.statusCode, r.body], t).toEqual([status, expect.stringMatching(body)]);
      }
    }
    const missing = await app.inject({ method: 'POST', url: '/mail/decide', ...form([]) });
    expect([missing.statusCode, missing.body]).toEqual([400, expect.stringMatching(/body\.token: /)]);
    // The text rules of every request (no NUL) refuse here too: a page naming the field, not a 500.
    const nul = await app.inject({ method: 'POST', url: '/mail/decide', ...form([['token', token], ['reason', 'a\u0000b']]) });
    expect([nul.statusCode, nul.body]).toEqual([400, expect.stringMatching(/This request could not be read[\s\S]*body\.reason: contains a NUL character/)]);
    // One spelling per signature: the last character's unused bits changed is another token.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const other = `${sig.slice(0, -1)}${alphabet[alphabet.indexOf(sig.at(-1) ?? 'A') ^ 1]}`;
    expect(Buffer.from(other, 'base64url').equals(Buffer.from(sig, 'base64url'))).toBe(true); // the same bytes
    expect((await app.inject({ method: 'GET', url: `/mail/decide?token=${v}.${payload}.${other}` })).statusCode).toBe(400);
    // A form another site's page sends, with a good token: refused as the API refuses such requests.
    const crossSite = await app.inject({ method: 'POST', url: '/mail/decide', ...form([['token', token], ['reason', 'x']]), headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'cross-site' } });
    expect([crossSite.statusCode, crossSite.body]).toEqual([403, expect.stringMatching(/Send this from the page the link opened/)]);
    expect((await loadTask(pg.store, id)).events).toHaveLength(before);

    const page = await app.inject({ method: 'GET', url: `/mail/decide?token=${token}` });
    expect(page.body).toMatch(/Reject this request\?[\s\S]*<textarea id="reason" name="reason"/);
    const post = await app.inject({ method: 'POST', url: '/mail/decide', ...form([['token', token], ['reason', 'too broad']]) });
    expect([post.statusCode, post.body]).toEqual([200, expect.stringMatching(/Rejected as ann@example\.com/)]);
    expect((await loadTask(pg.store, id)).events.at(-1)).toMatchObject({ type: 'ApprovalRejected', data: { reason: 'too broad', decidedBy: 'mail:ann@example.com' } });
    // Sent again (its answer lost): done, not a refusal — a rejection's record carries its reason.
    const again = await app.inject({ method: 'POST', url: '/mail/decide', ...form([['token', token], ['reason', 'too broad']]) });
    expect([again.statusCode, again.body]).toEqual([200, expect.stringMatching(/<h1>Done: rejected<\/h1>/)]);
    // The approve link of the same request, followed after: already decided.
    const late = await app.inject({ method: 'POST', url: '/mail/decide', ...form([['token', signLinkToken(SECRET, claimsFor(id))]]) });
    expect([late.statusCode, late.body]).toEqual([409, expect.stringMatching(/rejected: too broad/)]);
  });

  test('a question: a form with a field per question (options suggested); its POST answers; a task that ended says so; without a secret the pages say links are off', async ({ pg }) => {
    const app = await testGateway(pg, null, { mailLinkSecret: SECRET });
    const id = await waiting(pg, 'clarification');
    const token = signLinkToken(SECRET, claimsFor(id, { r: 'clr-lead-tu1', d: 'answer' }));
    const page = await app.inject({ method: 'GET', url: `/mail/answer?token=${token}` });
    expect(page.statusCode).toBe(200);
    // Each question a fieldset; its choices shown to tick (they were hidden in a datalist), a field for one's own words.
    expect(page.body).toMatch(/<fieldset><legend>Who is it for\?<\/legend><label class="choice"><input type="radio" name="pick-0" value="CTO"[^>]*> CTO<\/label>[\s\S]*<input type="text" id="answer-0" name="answer"[\s\S]*<legend>How deep\?<\/legend>/);
    expect((await app.inject({ method: 'GET', url: `/mail/decide?token=${token}` })).statusCode).toBe(400); // an answer link is no decide link
    // A decide link naming a question (never mailed so): its POST is refused as its page is, not taken as a decision.
    const decideQuestion = await app.inject({ method: 'POST', url: '/mail/decide', ...form([['token', signLinkToken(SECRET, claimsFor(id, { r: 'clr-lead-tu1' }))]]) });
    expect([decideQuestion.statusCode, decideQuestion.body]).toEqual([409, expect.stringMatching(/This request is not an approval/)]);
    // One left blank: the form again, saying which, with what was given kept.
    const empty = await app.inject({ method: 'POST', url: '/mail/answer', ...form([['token', token], ['pick-0', 'engineers'], ['answer', ' '], ['answer', ' ']]) });
    expect([empty.statusCode, empty.body]).toEqual([400, expect.stringMatching(/<p class="problem">Question 2 has no answer: write one, or tick a choice\.<\/p>[\s\S]*value="engineers" checked/)]);
    // A crafted choice (not one offered) is refused, naming the question; a field past the questions is not read.
    const crafted = await app.inject({ method: 'POST', url: '/mail/answer', ...form([['token', token], ['pick-0', 'the board'], ['pick-7', 'x'], ['answer', ''], ['answer', 'two pages']]) });
    expect([crafted.statusCode, crafted.body]).toEqual([400, expect.stringMatching(/<p class="problem">Question 1: that choice is not one of those offered\.<\/p>/)]);
    // A choice ticked for one, words for the other.
    const post = await app.inject({ method: 'POST', url: '/mail/answer', ...form([['token', token], ['pick-0', 'CTO'], ['answer', ''], ['answer', 'two pages']]) });
    expect([post.statusCode, post.body]).toEqual([200, expect.stringMatching(/Answered/)]);
    expect((await loadTask(pg.store, id)).events.at(-1)).toMatchObject({ type: 'ClarificationAnswered', data: { answers: ['CTO', 'two pages'], answeredBy: 'mail:ann@example.com' } });

    const other = await waiting(pg, 'approval');
    await handleCommand(pg.store, other, { type: 'CancelTask', reason: 'r', requestedBy: 'u' });
    const ended = await app.inject({ method: 'GET', url: `/mail/decide?token=${signLinkToken(SECRET, claimsFor(other))}` });
    expect([ended.statusCode, ended.body]).toEqual([409, expect.stringMatching(/Already decided|The task is cancelled/)]);

    const off = await testGateway(pg, null);
    const r = await off.inject({ method: 'GET', url: `/mail/decide?token=${signLinkToken(SECRET, claimsFor(other))}` });
    expect([r.statusCode, r.body]).toEqual([503, expect.stringMatching(/Mail links are off/)]);
  });
});

describe('mailed file links', () => {
  test("a report mail's file link gives the version it listed with no API key; another version stored since, a tampered, expired, foreign or decide link — each a clear page", async ({ pg }) => {
    const keys = new Map([['key-of-default-00000001', 'default'], ['key-of-other-00000002', 'other-tenant']]);
    const app = await testGateway(pg, null, { mailLinkSecret: SECRET, apiKeys: keys });
    const id = await waiting(pg, 'approval');
    const store = async (content: string) => {
      const stored = await storeArtifact(pg.db.pool, { taskId: id, path: 'out/report.md', agentId: null, content: Buffer.from(content) });
      await handleCommand(pg.store, id, { type: 'StoreArtifact', agentId: null, path: stored.path, bytes: stored.bytes, sha256: stored.sha256, mediaType: stored.mediaType });
      return stored.sha256;
    };
    const first = await store('# Report\n');
    const link = (o: Partial<LinkClaims> = {}) => `/mail/file?token=${signLinkToken(SECRET, claimsFor(id, { r: 'out/report.md', d: 'file', h: first, ...o }))}`;
    await store('# Report, revised\n');
    const r = await app.inject({ method: 'GET', url: link() }); // no Authorization: a mail's reader has no key
    expect(r.statusCode).toBe(200);
    expect(r.body).toBe('# Report\n'); // the version the mail listed
    expect([r.headers['content-type'], r.headers['content-security-policy'], r.headers['x-content-type-options'], r.headers['cache-control']]).toEqual(['text/markdown; charset=utf-8', "default-src 'none'; sandbox", 'nosniff', 'no-store']);
    expect(r.headers['content-disposition']).toContain('report.md');
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${id}/artifacts/out/report.md` })).statusCode).toBe(401); // the API's own URL needs the key
    const cases: [string, number, RegExp][] = [
      [link({ e: Math.floor(Date.now() / 1000) - 1 }), 410, new RegExp(`This link has expired[\\s\\S]*href="\\.\\./#/tasks/${id}"`)],
      [link({ t: 'other-tenant' }), 404, /No such task/],
      [link({ r: 'out/other.md', h: undefined }), 404, /No such file/],
      [link({ r: 'out/other.md' }), 404, /No such file/], // a version of another path: versions are kept by hash, the log says whose
      [`/mail/file?token=${signLinkToken(SECRET, claimsFor(id))}`, 400, /not valid here/], // a decide link
      [`${link()}x`, 400, /This link is not valid/],
    ];
    for (const [url, status, body] of cases) {
      const page = await app.inject({ method: 'GET', url });
      expect([page.statusCode, page.body], url).toEqual([status, expect.stringMatching(body)]);
    }
    // A file link is no decide link.
    expect((await app.inject({ method: 'GET', url: link().replace('/mail/file', '/mail/decide') })).statusCode).toBe(400);
  });
});

describe('notify on POST /v1/tasks', () => {
  test('recorded in TaskSubmitted and shown on the task; addresses and moments are checked naming the field; the tenant’s default applies when the task names none; chat’s action mode takes it too', async ({ pg }) => {
    const app = await testGateway(pg, null, { notify: { '*': { email: { to: ['ops@example.com'], on: ['failed'] } } } });
    const notify = { email: { to: ['ann@example.com'], on: ['awaiting_input', 'completed'] } };
    const t = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'Research X', notify } });
    expect(t.statusCode).toBe(201);
    expect(t.json().notify).toEqual(notify);
    const { events } = await loadTask(pg.store, t.json().id);
    expect(events[0]?.data).toMatchObject({ notify });
    const dflt = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'Research X' } });
    expect(dflt.json().notify).toEqual({ email: { to: ['ops@example.com'], on: ['failed'] } });
    const bad = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'Research X', notify: { email: { to: ['ann@', 'bob@example.com'], on: ['whenever'] } } } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.message).toMatch(/body\.notify\.email\.to\.0: must be an email address[\s\S]*body\.notify\.email\.on\.0/);
    const none = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'Research X', notify: { email: { to: [] } } } });
    expect([none.statusCode, none.json().error.message]).toEqual([400, expect.stringMatching(/body\.notify\.email\.to: name at least one address/)]);

    const chat = await app.inject({ method: 'POST', url: '/v1/chat', payload: { message: 'Research event sourcing' } });
    const chatId = chat.headers['x-chat-id'] as string;
    const fromChat = await app.inject({ method: 'POST', url: `/v1/chats/${chatId}/task`, payload: { notify } });
    expect([fromChat.statusCode, fromChat.json().notify]).toEqual([201, notify]);
  });

  test('only where MAIL_ALLOWED_RECIPIENTS lets the tenant mail: another address is a 400 naming the field and what it may mail (a task, a chat’s task); nothing recorded', async ({ pg }) => {
    const app = await testGateway(pg, null, { mailRecipients: { default: ['example.com', '*.example.org'] } });
    const ok = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'Research X', notify: { email: { to: ['ann@example.com', 'bob@eu.example.org'] } } } });
    expect(ok.statusCode).toBe(201);
    const refused = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'Research X', notify: { email: { to: ['ann@example.com', 'eve@attacker.example'] } } } });
    expect([refused.statusCode, refused.json().error]).toEqual([400, { code: 'validation_error', message: "body.notify.email.to.1: eve@attacker.example: this deployment does not mail that address for tenant 'default' (MAIL_ALLOWED_RECIPIENTS allows example.com, *.example.org)", details: [{ field: 'body.notify.email.to.1', message: expect.any(String) }] }]);
    // Each refused one by its own place (the same address twice: two fields).
    const twice = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'Research X', notify: { email: { to: ['eve@attacker.example', 'ann@example.com', 'eve@attacker.example'] } } } });
    expect(twice.json().error.details.map((f: { field: string }) => f.field)).toEqual(['body.notify.email.to.0', 'body.notify.email.to.2']);
    const chat = await app.inject({ method: 'POST', url: '/v1/chat', payload: { message: 'Research event sourcing' } });
    const fromChat = await app.inject({ method: 'POST', url: `/v1/chats/${chat.headers['x-chat-id'] as string}/task`, payload: { notify: { email: { to: ['eve@attacker.example'] } } } });
    expect([fromChat.statusCode, fromChat.json().error.message]).toEqual([400, expect.stringMatching(/^body\.notify\.email\.to\.0: eve@attacker\.example: this deployment does not mail/)]);
    expect((await pg.db.pool.query('select count(*)::int as n from tasks')).rows[0].n).toBe(1);
  });

  test("`*`'s default recipients (TENANT_NOTIFY) meet each tenant's own rule: a tenant gets those it may mail, none if none (they had been recorded, then dropped by the notifier)", async ({ pg }) => {
    const keys = fixedApiKeys(new Map([['key-of-acme-aaaaaaaa01', 'acme'], ['key-of-beta-bbbbbbbb02', 'beta']]));
    const app = await testGateway(pg, null, { apiKeys: keys, notify: { '*': { email: { to: ['ops@example.org', 'ops@acme.example'], on: ['failed'] } } }, mailRecipients: { acme: ['acme.example'], beta: ['beta.example'], '*': ['example.org'] } });
    const submit = async (key: string) => (await app.inject({ method: 'POST', url: '/v1/tasks', headers: { authorization: `Bearer ${key}` }, payload: { prompt: 'Research X' } })).json();
    expect((await submit('key-of-acme-aaaaaaaa01')).notify).toEqual({ email: { to: ['ops@acme.example'], on: ['failed'] } });
    expect((await submit('key-of-beta-bbbbbbbb02')).notify).toBeNull();
  });
});
