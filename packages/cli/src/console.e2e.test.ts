import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { TaskView } from '@baton/api';
import { smtpCatcher, tarGz, waitFor, webhookReceiver, type SmtpCatcher } from '@baton/testing';
import { chromium, type Browser, type BrowserContext, type Locator, type Page, type Request } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ApiEvent, BatonClient } from '@baton/client';
import { axeFindings, type AxeFinding } from './axe.ts';
import { startE2eStack, type E2eStack } from './e2e-stack.ts';

const ROOT = path.resolve(import.meta.dirname, '../../..');
/** Debian's Chromium (`.ci/run` installs it); a browser is never downloaded. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Screenshots of each state, for a reviewer to look at. */
const SHOTS = path.join(ROOT, 'test-results', 'console');
const KEY = `console-test-key-${randomBytes(6).toString('hex')}`;

/**
 * The web console in a real browser, against the four services run as processes with API keys
 * on (the live view must work without the key in a URL): approve, review & edit, reject and
 * re-plan, cancel, answer two parallel questions from their toasts, the rendered report.
 */
describe('the web console, in Chromium', () => {
  let stack: E2eStack;
  let smtp: SmtpCatcher;
  let api: BatonClient;
  let url: string;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  /** Uncaught errors in the page: none may happen. */
  const pageErrors: Error[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: install it (apt-get install chromium; .ci/run does) or set CHROMIUM_PATH`);
    await mkdir(SHOTS, { recursive: true });
    smtp = await smtpCatcher();
    stack = await startE2eStack('console', { apiKey: KEY, env: ({ url }) => ({ BATON_API_KEYS: `${KEY}:acme`, RATE_LIMIT_WRITES_PER_S: '0', OFFLINE_CHAT_WORD_DELAY_MS: '30', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', SMTP_URL: smtp.url, MAIL_FROM: 'Baton <baton@example.com>', PUBLIC_URL: url, MAIL_LINK_SECRET: randomBytes(32).toString('hex') }) });
    ({ api, url } = stack);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
    context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    // The person has entered their key once (kept in this browser only).
    await context.addInitScript({ content: `localStorage.setItem('baton.apiKey', ${JSON.stringify(KEY)})` });
    page = await context.newPage();
    page.on('pageerror', (err) => pageErrors.push(err));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
    await smtp?.close();
  });

  afterEach(() => {
    expect(pageErrors.map((e) => e.stack ?? e.message)).toEqual([]);
    expect(findings.splice(0), "axe-core's serious findings in the states shot").toEqual([]);
  });

  const task = (id: string) => api.request<TaskView>('GET', `/v1/tasks/${id}`);
  /** What axe-core found serious in the states shot (none may be). */
  const findings: (AxeFinding & { state: string })[] = [];
  /** A state worth looking at: a screenshot for a reviewer, and axe-core's check of it. */
  const shot = async (name: string) => {
    await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
    findings.push(...(await axeFindings(page)).map((f) => ({ state: name, ...f })));
  };
  const submit = async (body: object): Promise<string> => (await api.request<TaskView>('POST', '/v1/tasks', body)).id;
  const awaitingInput = async (id: string, n = 1) => waitFor(async () => (await task(id)).pendingRequests.length === n, { timeoutMs: 30_000, what: `${n} open request(s)` });
  const open = async (id: string) => {
    await page.goto(`${url}/#/tasks/${id}`);
    await page.locator('.task-head h2').waitFor();
  };
  const REPORT = 'Write a short report on vector databases';
  /** A confirmation button once it takes a press (aria-disabled for a moment after it asks: the rest of a double-click confirms nothing). */
  const armed = async (button: Locator): Promise<Locator> => {
    await waitFor(async () => (await button.getAttribute('aria-disabled')) === null, { what: 'the confirmation armed' });
    return button;
  };

  it('approve from the banner: the run goes on live, the report renders, one "All done" toast', async () => {
    const id = await submit({ prompt: REPORT });
    await awaitingInput(id);
    await open(id);
    expect(await page.getByRole('heading', { level: 1 }).allTextContents()).toEqual(['Baton']); // the page's one top heading, for screen readers' outline
    await page.getByRole('region', { name: 'waiting for you' }).getByText('Waiting for your approval…').waitFor();
    const card = page.locator('article.approval');
    await card.getByText('wants to call').waitFor();
    expect(await card.locator('.badge.agent').allTextContents()).toEqual(['lead', 'researcher']);
    expect(await card.locator('.deadline').textContent()).toMatch(/decides itself in \d+m \d\ds — then: rejected/);
    expect(await card.locator('.plan-text').textContent()).toMatch(/Plan for "Write a short report on vector databases"/);
    await waitFor(() => card.getByRole('button', { name: 'Approve', exact: true }).isEnabled(), { what: 'the card armed' });
    await shot('1-approval');
    await page.getByRole('region', { name: 'waiting for you' }).getByRole('button', { name: 'Approve' }).click();
    // The research runs; the next delegation (the report writer) comes to the person, live.
    await page.locator('article.approval .badge.agent', { hasText: 'report-writer' }).waitFor({ timeout: 30_000 });
    await page.getByRole('region', { name: 'waiting for you' }).getByRole('button', { name: 'Approve' }).click();
    await page.locator('.toast.t-completed', { hasText: 'All done' }).waitFor({ timeout: 30_000 });
    expect(await page.locator('.toast').count()).toBe(1);
    await page.locator('article[aria-label="report"] h1').waitFor();
    expect(await page.locator('article[aria-label="report"]').textContent()).toMatch(/vector databases/i);
    await page.locator('.timeline li[data-type="TaskCompleted"]').waitFor();
    expect(await page.locator('.live').textContent()).toMatch(/live|ended/);
    await shot('2-report');
    expect((await task(id)).status).toBe('completed');
    // The timeline shows the task as it was at any entry: at the first approval request it was waiting.
    await page.locator('.timeline li[data-type="ApprovalRequested"]').first().getByRole('button', { name: 'state' }).click();
    const at = page.getByLabel('state at version');
    await at.locator('.status.s-awaiting_input').waitFor();
    expect(await at.textContent()).toMatch(/open requests: apr-lead-/);
    expect(await at.getByLabel('files at version').textContent()).toBe('files then: none');
    // At the first file stored: the files as they were then (not the report yet), each downloadable in that version.
    await page.locator('.timeline li[data-type="ArtifactStored"]').first().getByRole('button', { name: 'state' }).click();
    const files = at.getByLabel('files at version');
    await files.getByRole('button', { name: 'notes.md' }).waitFor();
    expect(await files.getByRole('button').allTextContents()).toEqual(['notes.md']);
    const [file] = await Promise.all([page.waitForEvent('download'), files.getByRole('button', { name: 'notes.md' }).click()]);
    expect(file.suggestedFilename()).toBe('notes.md');
    expect(await readFile(await file.path(), 'utf8')).toBe(await api.artifact(id, 'notes.md'));
    // The state asked for from the bottom of a long page comes into view there, with the focus.
    await page.locator('.timeline li[data-type="TaskCompleted"]').getByRole('button', { name: 'state' }).click();
    await at.locator('.status.s-completed').waitFor();
    const inView = async (): Promise<{ focused: boolean; top: number; height: number }> => at.evaluate((node) => {
      const el = node as unknown as { ownerDocument: { activeElement: unknown; defaultView: { innerHeight: number } | null }; getBoundingClientRect(): { top: number } };
      return { focused: el === el.ownerDocument.activeElement, top: el.getBoundingClientRect().top, height: el.ownerDocument.defaultView?.innerHeight ?? 0 };
    });
    let seen = {};
    await waitFor(async () => {
      const v = await inView();
      seen = v;
      return v.focused && v.top > -1 && v.top < v.height; // (subpixel: scrolled to its top)
    }, { what: 'the state card in view, focused' }).catch((err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify(seen)}`);
    });
    // A double-click on "fork from here" makes one fork.
    const forks: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().endsWith('/fork')) forks.push(r.url());
    });
    const forkHere = page.locator('.timeline li[data-type="ApprovalRequested"]').first().getByRole('button', { name: /^fork from here, version \d+$/ });
    // Clicked low on the page (the window scrolled to the button, a long task list beside it), the new task opens at the top, in view.
    for (let i = 0; i < 40; i++) await submit({ prompt: `filler ${i}`, team: 'bench' });
    await page.locator('.task-list li').nth(30).waitFor();
    await forkHere.evaluate((el) => el.scrollIntoView({ block: 'end' }));
    await page.evaluate('window.scrollBy(0, 400)');
    await forkHere.scrollIntoViewIfNeeded();
    const scrolled = (await page.evaluate('window.scrollY')) as number;
    await forkHere.dblclick();
    await waitFor(async () => !page.url().includes(id), { what: 'the fork opened' });
    expect(forks).toHaveLength(1);
    expect(scrolled).toBeGreaterThan(0);
    await waitFor(async () => (await page.evaluate('window.scrollY')) === 0, { what: 'the fork shown from the top of the page' });
    // The task it was forked from lists it among its forks, with the version it was copied at.
    const forkId = /#\/tasks\/([0-9a-f-]{36})/.exec(page.url())?.[1] as string;
    const forkedAt = (await task(forkId)).forkedFrom?.atVersion;
    await page.locator('.task-head').getByRole('link', { name: /^⑂ fork of / }).click();
    const listed = page.getByRole('region', { name: 'Forks' }).locator(`li[data-fork="${forkId}"]`);
    await listed.waitFor();
    expect(await listed.textContent()).toMatch(new RegExp(`^⑂ ${forkId.slice(0, 8)} [a-z ]+ from version ${forkedAt} · `));
  });

  it('an engineering task: the plan as a DAG with each subtask\'s tests, the reviews, the change, and whether it is accepted', async () => {
    const id = await submit({ prompt: 'Add a low-stock report to the inventory app', team: 'engineering', workspace: { example: 'inventory' } });
    await awaitingInput(id);
    // The plan's long JSON lines wrap in their box: the page is no wider than the window, and the banner's buttons are on screen — on a laptop and on a phone.
    for (const viewport of [{ width: 1280, height: 900 }, { width: 390, height: 844 }]) {
      await page.setViewportSize(viewport);
      await open(id);
      const approve = page.getByRole('region', { name: 'waiting for you' }).getByRole('button', { name: 'Approve submit_plan' });
      await approve.waitFor();
      expect(await page.evaluate('document.documentElement.scrollWidth'), `page width at ${viewport.width}`).toBeLessThanOrEqual(viewport.width);
      const box = await approve.boundingBox();
      expect(box && box.x + box.width, `the banner's Approve at ${viewport.width}`).toBeLessThanOrEqual(viewport.width);
      // On screen, not below the whole task list (one column: the task opened comes first).
      expect(box && box.y + box.height, `the banner's Approve within the first screen at ${viewport.width}`).toBeLessThanOrEqual(viewport.height);
      await shot(`engineering-plan-${viewport.width}`);
    }
    // The locks read as they are (as markdown, `api/**, web/**` had turned into bold text).
    expect(await page.locator('article.approval .plan-text code').allTextContents()).toEqual(expect.arrayContaining(['api/**', 'web/**']));
    await page.setViewportSize({ width: 1400, height: 1000 });
    const request = (await task(id)).pendingRequests[0]!;
    await api.request('POST', `/v1/tasks/${id}/approvals/${request.requestId}`, { decision: 'approve' });
    await waitFor(async () => (await task(id)).status === 'completed', { timeoutMs: 180_000, what: 'the engineering task to complete' });
    // The page showed this task already: away and back, so the task page mounts afresh and its reads are counted (from then on only).
    await page.goto(`${url}/#/chat`);
    await page.getByRole('heading', { name: 'New conversation' }).waitFor();
    const changeReads: string[] = [];
    const countChangeReads = (r: Request) => void (new URL(r.url()).pathname.endsWith('/diff') && changeReads.push(r.url()));
    page.on('request', countChangeReads);
    await open(id);
    const plan = page.locator('section.plan');
    await plan.locator('.acceptance[data-accepted="true"]').waitFor();
    expect(await plan.locator('.acceptance').textContent()).toBe("The change is accepted: the last review approved it, and no subtask's last test run fails.");
    expect(await Promise.all((await plan.locator('[data-subtask]').all()).map((l) => l.getAttribute('data-subtask')))).toEqual(['backend', 'frontend']);
    expect(await plan.locator('[data-subtask="backend"]').textContent()).toMatch(/tests \d+ passed, 0 failed/);
    expect(await plan.locator('.review').textContent()).toMatch(/^Review \(review-2\): approve/);
    await plan.locator('details.diff').waitFor();
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(1400); // the diff's long lines scroll in their box
    // The change file by file, as the API lists it: each file its own fold, named with what changed in it.
    const change = await api.change(id);
    expect(await plan.locator('details.diff > summary').textContent()).toBe(`The change: ${change.files.length} files · +${change.files.reduce((n, f) => n + f.additions, 0)} −${change.files.reduce((n, f) => n + f.deletions, 0)}`);
    expect(await plan.locator('details.diff-file').evaluateAll((els) => els.map((e) => e.getAttribute('data-file')))).toEqual(change.files.map((f) => f.path));
    const first = change.files[0]!;
    expect(await plan.locator('details.diff-file').first().locator('summary').textContent()).toBe(`${first.path} ${first.status} · +${first.additions} −${first.deletions}`);
    // The input it started from, in the task's head; the patch downloads as the API gives it.
    expect(await page.locator('.task-head .workspace').textContent()).toMatch(/^from example inventory · \d+ files, \d+ bytes$/);
    const [saved] = await Promise.all([page.waitForEvent('download'), plan.getByRole('button', { name: 'Download patch' }).click()]);
    expect(saved.suggestedFilename()).toBe(`task-${id.slice(0, 8)}.patch`);
    expect(await readFile(await saved.path(), 'utf8')).toBe(change.patch);
    expect(await plan.locator('details.diff').getAttribute('open')).not.toBeNull(); // the click did not fold the change
    // Every file (the input with the change applied) downloads as one .tar.gz, with the key, as the API gives it.
    const [archive] = await Promise.all([page.waitForEvent('download'), page.locator('.artifacts').getByRole('button', { name: 'Download all files' }).click()]);
    expect(archive.suggestedFilename()).toBe(`task-${id.slice(0, 8)}.tar.gz`);
    expect(await readFile(await archive.path())).toEqual(Buffer.from((await api.archive(id)).content));
    // Read once for the finished task: its events in (the timeline ends at TaskCompleted), the page's re-renders read it no more.
    await page.locator('.timeline li[data-type="TaskCompleted"]').waitFor();
    page.off('request', countChangeReads);
    expect(changeReads).toHaveLength(1);
    await shot('engineering-accepted');
  }, 240_000);

  it('a request opened between the page\'s first reads still shows; the banner names what it approves and steps aside while the person edits; Discard drops the edits; a double-click approves once', async () => {
    const early = await api.request<TaskView>('POST', '/v1/tasks', { prompt: REPORT });
    const id = early.id;
    await awaitingInput(id);
    // The page's first read of the task answers with it as it was before the lead asked — as when
    // the request is recorded between that read and the read of the task's events.
    let first = true;
    await page.route(`**/v1/tasks/${id}`, (route) => {
      if (!first || route.request().method() !== 'GET') return route.continue();
      first = false;
      return route.fulfill({ json: early });
    });
    await open(id);
    const banner = page.getByRole('region', { name: 'waiting for you' });
    await banner.getByRole('button', { name: 'Approve Task → researcher' }).waitFor();
    await page.unroute(`**/v1/tasks/${id}`);
    expect(first).toBe(false);

    // Review & Edit from the banner: the card's text box has the focus, and the banner has no Approve that would drop the edits.
    await banner.getByRole('button', { name: 'Review & Edit' }).click();
    await banner.getByText('Editing below').waitFor();
    expect(await banner.getByRole('button', { name: /Approve/ }).count()).toBe(0);
    await waitFor(async () => (await page.evaluate("document.activeElement?.getAttribute('aria-label')")) === 'edited input', { what: 'the focus in the edited input' });
    const original = await page.getByLabel('edited input').inputValue();
    await page.getByLabel('edited input').fill('{ "agent": "nobody" }');
    await page.getByRole('button', { name: 'Discard edits' }).click();
    await page.locator('article.approval').getByRole('button', { name: 'Review & Edit' }).click();
    expect(await page.getByLabel('edited input').inputValue()).toBe(original);
    await page.getByLabel('edited input').press('Escape');
    await banner.getByRole('button', { name: 'Approve Task → researcher' }).waitFor();
    // The keyboard stays where the person was: on the card's Review & Edit, not the top of the page.
    await waitFor(async () => (await page.evaluate('document.activeElement?.textContent')) === 'Review & Edit', { what: 'the focus back on Review & Edit' });

    // A double-click on the banner's Approve is one decision: the next request (the report writer's) stays open.
    const decisions: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().includes('/approvals/')) decisions.push(r.url());
    });
    await banner.getByRole('button', { name: 'Approve Task → researcher' }).dblclick();
    await waitFor(async () => (await task(id)).pendingRequests.some((r) => r.kind === 'approval' && r.input.agent === 'report-writer'), { timeoutMs: 30_000, what: "the report writer's request" });
    await banner.getByRole('button', { name: 'Approve Task → report-writer' }).waitFor();
    expect(decisions).toHaveLength(1);
    expect((await task(id)).pendingRequests).toHaveLength(1);
    // Cancel asks to confirm, in the banner as in the list.
    await banner.getByRole('button', { name: 'Cancel task' }).click();
    await armed(banner.getByRole('button', { name: 'Confirm cancel' })).then((b) => b.click());
    await waitFor(async () => (await task(id)).status === 'cancelled', { what: 'the task cancelled' });
  });

  it('a submit whose answer is lost after the gateway recorded it is one task: sent again by itself, and a click again after it gave up is the same task (with no crypto.randomUUID, too)', async () => {
    const prompt = `Lost answers ${Date.now()}`;
    // The request reaches the gateway (the task is recorded); its answer never reaches the page.
    let lose = 3;
    await page.route('**/v1/tasks', async (route) => {
      if (route.request().method() !== 'POST' || lose === 0) return route.continue();
      lose--;
      await route.fetch();
      return route.abort('connectionreset');
    });
    // As on a plain-HTTP page at an address other than localhost, where browsers give no crypto.randomUUID (the console loaded blank).
    await page.addInitScript(() => Object.defineProperty(globalThis.crypto, 'randomUUID', { value: undefined }));
    await page.goto(`${url}/#/tasks`);
    await page.reload();
    const form = page.locator('form.new-task');
    await form.getByLabel('prompt').fill(prompt);
    await form.getByRole('button', { name: 'Submit' }).click();
    // Three tries (the client's own two resends), all lost: the page says it may have been recorded.
    await form.page().getByText(/it may have been recorded/).first().waitFor();
    expect(lose).toBe(0);
    await form.getByRole('button', { name: 'Submit' }).click();
    await page.locator('.task-head h2', { hasText: prompt }).waitFor();
    await page.unroute('**/v1/tasks');
    const made = (await api.list({ search: prompt })).items;
    expect(made).toHaveLength(1);
    await api.request('POST', `/v1/tasks/${made[0]!.id}/cancel`, { reason: 'done looking' });
  });

  it('a task from the form starts from an example project or an uploaded .tar.gz; an upload not yet chosen, or not an archive, is named', async () => {
    await page.goto(`${url}/#/tasks`);
    const form = page.locator('form.new-task');
    await form.getByLabel('team').selectOption('engineering');
    await form.getByLabel('workspace').selectOption('example:inventory');
    expect(await form.getByLabel('workspace').locator('option:checked').textContent()).toMatch(/^example: inventory \(\d+ files\)$/);
    await form.getByLabel('prompt').fill('Add a low-stock report to the inventory app');
    await form.getByRole('button', { name: 'Submit' }).click();
    await page.locator('.task-head h2', { hasText: 'Add a low-stock report' }).waitFor();
    const fromExample = page.url().split('#/tasks/')[1]!;
    expect((await task(fromExample)).workspace).toMatchObject({ source: 'example', name: 'inventory' });
    await api.request('POST', `/v1/tasks/${fromExample}/cancel`, { reason: 'done looking' });

    await page.goto(`${url}/#/tasks`);
    await form.getByLabel('prompt').fill('Fix the failing test');
    await form.getByLabel('workspace').selectOption('upload');
    await form.getByRole('button', { name: 'Submit' }).click();
    await form.getByRole('alert').getByText('Choose the .tar.gz of the project to start from').waitFor();
    await form.getByLabel('project archive').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('not an archive') });
    await form.getByRole('button', { name: 'Submit' }).click();
    await form.getByRole('alert').getByText(/not a gzip file/).waitFor();
    // The gateway's refusal names the file field: marked invalid and focused.
    expect(await form.getByLabel('project archive').getAttribute('aria-invalid')).toBe('true');
    await waitFor(async () => (await page.evaluate("document.activeElement?.getAttribute('aria-label')")) === 'project archive', { what: 'the focus on the file field' });
    const archive = { name: 'app.tar.gz', mimeType: 'application/gzip', buffer: await tarGz([{ name: 'src/app.ts', content: 'export const x = 1;\n' }, { name: 'README.md', content: '# app\n' }]) };
    // A file chosen, then another workspace and "upload" again: the field is empty, and so is what is sent (the hidden file was uploaded).
    await form.getByLabel('project archive').setInputFiles(archive);
    await form.getByLabel('workspace').selectOption('example:inventory');
    await form.getByLabel('workspace').selectOption('upload');
    await form.getByRole('button', { name: 'Submit' }).click();
    await form.getByRole('alert').getByText('Choose the .tar.gz of the project to start from').waitFor();
    await form.getByLabel('project archive').setInputFiles(archive);
    await form.getByRole('button', { name: 'Submit' }).click();
    await page.locator('.task-head h2', { hasText: 'Fix the failing test' }).waitFor();
    const fromUpload = page.url().split('#/tasks/')[1]!;
    expect((await task(fromUpload)).workspace).toMatchObject({ source: 'upload', name: 'app.tar.gz', files: 2 });
    await api.request('POST', `/v1/tasks/${fromUpload}/cancel`, { reason: 'done looking' });
  });

  it('review & edit: an edit naming no such agent is refused on the card and the request stays open; a valid edit runs', async () => {
    const id = await submit({ prompt: REPORT });
    await awaitingInput(id);
    await open(id);
    const card = page.locator('article.approval');
    await card.getByRole('button', { name: 'Review & Edit' }).click();
    const editor = card.getByLabel('edited input');
    await editor.fill('{"agent": "nobody", "prompt": "x"}');
    await card.getByRole('button', { name: 'Approve with edits' }).click();
    await card.locator('.error').getByText(/body\.input\.agent: unknown agent 'nobody'/).waitFor();
    // Where it is mended: the edited input, marked and focused (the focus had stayed on the button).
    expect(await editor.getAttribute('aria-invalid')).toBe('true');
    await waitFor(async () => (await page.evaluate("document.activeElement?.getAttribute('aria-label')")) === 'edited input', { what: 'the focus in the edited input' });
    await shot('3-edit-refused');
    expect((await task(id)).pendingRequests).toHaveLength(1);
    await editor.fill('{"agent": "researcher", "prompt": "Research vector databases for a CTO, open-source only, and write notes.md"}');
    await card.getByRole('button', { name: 'Approve with edits' }).click();
    await page.locator('article.approval .badge.agent', { hasText: 'report-writer' }).waitFor({ timeout: 30_000 });
    await page.getByRole('region', { name: 'waiting for you' }).getByRole('button', { name: 'Approve' }).click();
    await page.locator('.toast.t-completed').waitFor({ timeout: 30_000 });
    const events = await api.allEvents(id);
    const dispatched = events.find((e: ApiEvent) => e.type === 'SubagentDispatched');
    expect(dispatched?.data.prompt).toBe('Research vector databases for a CTO, open-source only, and write notes.md');
    expect(events.find((e: ApiEvent) => e.type === 'ApprovalGranted')?.data.edited).toBe(true);
  });

  it('reject with a reason: the lead re-plans with it; Cancel task in the banner ends the run', async () => {
    const id = await submit({ prompt: REPORT });
    await awaitingInput(id);
    await open(id);
    const card = page.locator('article.approval');
    await card.getByRole('button', { name: 'Reject…' }).click();
    await card.getByLabel('reason').fill('open-source databases only');
    await card.getByRole('button', { name: 'Reject', exact: true }).click();
    await page.locator('article.approval .plan-text', { hasText: 'Revised plan, taking your feedback into account (open-source databases only)' }).waitFor({ timeout: 30_000 });
    await shot('4-replanned');
    await page.getByRole('region', { name: 'waiting for you' }).getByRole('button', { name: 'Cancel task' }).click();
    expect((await task(id)).status).toBe('awaiting_input'); // a first press only asks
    await armed(page.getByRole('region', { name: 'waiting for you' }).getByRole('button', { name: 'Confirm cancel' })).then((b) => b.click());
    await page.locator('.toast.t-cancelled', { hasText: 'Cancelled' }).waitFor();
    await page.locator('.task-head .status.s-cancelled').waitFor();
    expect((await task(id)).status).toBe('cancelled');
    // Who cancelled it and why stay on the page.
    expect(await page.locator('.card.cancelled').textContent()).toMatch(/^Cancelled by key:\S+@acme at .+: cancelled from the console$/);
  });

  it('offline, the page says so at once (not "● live" on a stale task) and a decision is not sent; back online it resumes and shows what was decided meanwhile', async () => {
    const id = await submit({ prompt: REPORT });
    await awaitingInput(id);
    await open(id);
    await page.locator('.live', { hasText: '● live' }).waitFor();
    await context.setOffline(true);
    await page.locator('.live', { hasText: '○ reconnecting' }).waitFor();
    // A tap while offline sends nothing, and says so (it had said "it may have been recorded").
    await page.locator('article.approval').getByRole('button', { name: 'Approve', exact: true }).click();
    await page.getByText('this device is offline: nothing was sent to the Baton gateway — send it again once it is back online').first().waitFor();
    const [request] = (await task(id)).pendingRequests;
    await api.approve(id, request?.requestId as string); // decided on another device meanwhile
    await context.setOffline(false);
    await page.locator('.live', { hasText: '● live' }).waitFor();
    await page.locator(`article.approval[data-request="${request?.requestId}"]`).waitFor({ state: 'detached', timeout: 30_000 });
    await page.locator('.timeline li[data-type="ApprovalGranted"]').first().waitFor();
  });

  it("an edit survives a reload; one whose request is decided elsewhere is said — who decided, how — and the banner no longer speaks of an edit; on a slow network the banner's and the card's Approve send one decision between them", async () => {
    const id = await submit({ prompt: REPORT });
    await awaitingInput(id);
    await open(id);
    const card = page.locator('article.approval');
    const banner = page.getByRole('region', { name: 'waiting for you' });
    await card.getByRole('button', { name: 'Review & Edit' }).click();
    await card.getByLabel('edited input').fill('{"agent": "researcher", "prompt": "only the open-source ones"}');
    await banner.getByText('Editing below').waitFor();
    // A reload keeps the edit (it was dropped without a word): the card is editing, with it.
    await page.reload();
    await page.locator('.task-head h2').waitFor();
    await banner.getByText('Editing below').waitFor();
    expect(await card.getByLabel('edited input').inputValue()).toBe('{"agent": "researcher", "prompt": "only the open-source ones"}');
    // Another tab (here: the API) rejects it; the lead re-plans, and its new request is not being edited.
    const first = (await task(id)).pendingRequests[0]!;
    await api.request('POST', `/v1/tasks/${id}/approvals/${first.requestId}`, { decision: 'reject', reason: 'too broad' });
    await page.getByRole('alert').getByText(/^The request you were editing closed before your edits were sent \(rejected by key:\S+@acme: too broad\): they were not applied\.$/).waitFor({ timeout: 30_000 });
    await page.locator('article.approval .plan-text', { hasText: 'Revised plan' }).waitFor({ timeout: 30_000 });
    expect(await banner.getByText('Editing below').count()).toBe(0);
    await shot('edit-closed-elsewhere');

    // Each decision takes 1.5 s to reach the gateway: the card's Approve, pressed while the banner's is on its way, sends nothing.
    const decisions: string[] = [];
    await page.route('**/approvals/**', async (route) => {
      decisions.push(`${route.request().method()} ${route.request().url()} ${route.request().postData() ?? ""}`);
      await new Promise((r) => setTimeout(r, 1500));
      await route.continue();
    });
    await banner.getByRole('button', { name: /^Approve Task/ }).click();
    await waitFor(async () => (await card.getByRole('button', { name: 'Approve', exact: true }).getAttribute('aria-disabled')) === 'true', { what: "the card's Approve busy too" });
    // Pressed anyway (force: Playwright would wait for it to be enabled — by then, for the next request).
    await card.getByRole('button', { name: 'Approve', exact: true }).click({ force: true });
    await waitFor(async () => (await task(id)).pendingRequests.some((r) => r.kind === 'approval' && r.input.agent === 'report-writer'), { timeoutMs: 30_000, what: "the report writer's request" });
    await page.unroute('**/approvals/**');
    expect(decisions, decisions.join('\n')).toHaveLength(1);
    expect(await page.locator('.error').allTextContents()).not.toContainEqual(expect.stringMatching(/already decided/));
    await api.request('POST', `/v1/tasks/${id}/cancel`, { reason: 'done looking' });
  });

  it('two researchers ask at once: their toasts stack above the rest and are answered in place; an empty answer says so', async () => {
    const id = await submit({ prompt: 'Compare PostgreSQL and SQLite for embedded analytics; ask me which sources to use', requirePlanApproval: false });
    await awaitingInput(id, 2);
    await open(id);
    const asking = page.locator('.toast.asking');
    await waitFor(async () => (await asking.count()) === 2, { what: 'two asking toasts' });
    expect(await page.locator('.toasts .toast').first().getAttribute('class')).toMatch(/asking/); // questions float on top
    // Each says what its agent works on (the question's context), so the two can be told apart.
    const contexts = await asking.locator('.context').allTextContents();
    expect(contexts).toHaveLength(2);
    expect(new Set(contexts).size).toBe(2);
    await shot('5-toasts');
    // They cover the page's right edge: folded to one line on request, and back.
    await page.getByRole('button', { name: 'Hide progress' }).click();
    expect(await page.locator('.toast.folded').textContent()).toMatch(/^\d+ agents at work, 2 asking — show$/);
    expect(await asking.count()).toBe(0);
    await page.locator('.toast.folded').click();
    await waitFor(async () => (await asking.count()) === 2, { what: 'the toasts shown again' });
    const first = asking.first();
    const firstAgent = await first.getAttribute('data-agent');
    // The toast and the question's card on the page are one draft: typed in one, it is in the other.
    const requestId = await first.locator('article.clarification').getAttribute('data-request');
    await first.getByRole('textbox').fill('half typed');
    expect(await page.locator(`article.clarification:not(.compact)[data-request="${requestId}"]`).getByRole('textbox').inputValue()).toBe('half typed');
    await first.getByRole('textbox').fill('');
    await first.getByRole('button', { name: 'Answer' }).click();
    await first.locator('.error').getByText('Write an answer (or pick an option).').waitFor();
    await first.getByRole('button', { name: 'both' }).click(); // an option fills the answer (not sent at once: a slipped tap on a phone had answered)
    expect(await first.getByRole('textbox').inputValue()).toBe('both');
    await first.getByRole('button', { name: 'Answer' }).click();
    await waitFor(async () => (await asking.count()) === 1, { timeoutMs: 30_000, what: 'one question left' });
    const second = asking.first();
    expect(await second.getAttribute('data-agent')).not.toBe(firstAgent);
    await second.getByRole('textbox').fill('peer-reviewed papers');
    await second.getByRole('button', { name: 'Answer' }).click();
    await page.locator('.toast.t-completed').waitFor({ timeout: 30_000 });
    expect(await api.artifactOf(id, firstAgent as string, 'notes.md')).toMatch(/- both/);
    // The end's toast can be dismissed (it covered the timeline's buttons).
    await page.locator('.toast.t-completed').getByRole('button', { name: 'dismiss' }).click();
    await waitFor(async () => (await page.locator('.toast').count()) === 0, { what: 'the toast dismissed' });
  });

  it('the task list filters by status and team, marks forks; without the key the console says one is needed', async () => {
    const id = await submit({ prompt: REPORT });
    await awaitingInput(id);
    const fork = await api.request<TaskView>('POST', `/v1/tasks/${id}/fork`, { atVersion: (await task(id)).version });
    // A cancelled task of this test's own (the filter below needs one, whatever ran before).
    await api.request('POST', `/v1/tasks/${await submit({ prompt: 'Cancelled before it starts' })}/cancel`, {});
    await page.goto(`${url}/#/tasks`);
    await page.locator(`li[data-task="${fork.id}"] .fork`).waitFor();
    await page.getByLabel('filter by status').selectOption('cancelled');
    await waitFor(async () => (await page.locator('.task-list li[data-task]').count()) > 0 && (await page.locator('.task-list li[data-task] .status').allTextContents()).every((t) => t === 'cancelled'), { what: 'only cancelled tasks' });
    // With filters no task matches, the list says so.
    await page.getByLabel('search prompts').fill(`no such prompt ${randomBytes(4).toString('hex')}`);
    await page.locator('.task-list li.hint', { hasText: 'No task matches these filters.' }).waitFor();
    await page.getByLabel('search prompts').fill('');
    await page.getByLabel('filter by team').selectOption('engineering');
    await page.getByLabel('filter by status').selectOption('');
    await waitFor(async () => (await page.locator(`.task-list li[data-task="${id}"]`).count()) === 0, { what: 'the research task filtered out' });
    expect((await page.locator('.task-list li[data-task] .meta').allTextContents()).filter((t) => !t.startsWith('engineering ·'))).toEqual([]);
    await page.getByLabel('filter by team').selectOption('research');
    // A misclick on the list's Cancel ends nothing: it asks to confirm (and is named by the task's prompt).
    const cancelButton = page.locator(`li[data-task="${id}"] button[data-cancel]`);
    expect(await cancelButton.getAttribute('aria-label')).toBe(`Cancel task ${REPORT}`);
    await cancelButton.click();
    await cancelButton.getByText('Confirm cancel').waitFor();
    expect(await cancelButton.getAttribute('aria-label')).toBe(`Confirm cancel: task ${REPORT}`);
    expect((await task(id)).status).toBe('awaiting_input');
    await (await armed(cancelButton)).click();
    await waitFor(async () => (await task(id)).status === 'cancelled', { what: 'the cancel from the list' });
    // The filters survive a reload (kept for this tab), and are cleared for the tests after this one.
    await page.getByLabel('search prompts').fill('vector');
    await waitFor(async () => String(await page.evaluate("sessionStorage.getItem('baton.taskFilters')")).includes('"search":"vector"'), { what: 'the search applied' });
    await page.reload();
    await page.locator(`li[data-task="${id}"]`).waitFor();
    expect([await page.getByLabel('filter by team').inputValue(), await page.getByLabel('search prompts').inputValue()]).toEqual(['research', 'vector']);
    await page.getByLabel('filter by team').selectOption('');
    await page.getByLabel('search prompts').fill('');
    await waitFor(async () => (await page.evaluate("sessionStorage.getItem('baton.taskFilters')")) === JSON.stringify({ status: '', team: '', search: '' }), { what: 'the filters cleared' });

    const anonymous = await browser.newPage();
    const refusedLists: number[] = [];
    anonymous.on('response', (r) => {
      if (new URL(r.url()).pathname === '/v1/tasks' && r.status() === 401) refusedLists.push(Date.now());
    });
    await anonymous.goto(`${url}/`);
    await anonymous.getByRole('alert').getByText("This gateway needs an API key: enter yours above (your team's admin has it).").waitFor();
    // Without a key the list is not polled (each poll would be refused every 4 s): over a poll period and more, nothing is asked again.
    // The first reads are three, each refused: the list, its stream, and the list again once the stream is refused.
    // (Waiting for the network to be idle instead raced on a loaded machine: a 500 ms stall before the third read.)
    await waitFor(async () => refusedLists.length >= 3, { what: 'the first three reads refused' });
    await anonymous.waitForTimeout(4500);
    expect(refusedLists.length).toBe(3);
    await anonymous.close();
    // A key that is sent and refused is named as such, not as a missing key.
    const wrong = await browser.newContext();
    await wrong.addInitScript({ content: `localStorage.setItem('baton.apiKey', 'not-the-key')` });
    const wrongPage = await wrong.newPage();
    await wrongPage.goto(`${url}/`);
    await wrongPage.getByRole('alert').getByText(/^The gateway refused this API key \(.+\): enter another above\.$/).waitFor();
    await wrong.close();
    // The CLI, likewise: without a key it says where one goes; a refused key is named as such.
    const cliRefused = (key: string | undefined) =>
      promisify(execFile)(process.execPath, [path.join(ROOT, 'packages/cli/src/main.ts'), 'list'], { env: { ...process.env, BATON_URL: url, BATON_API_KEY: key ?? '' } }).then(
        () => 'accepted',
        (err: { stderr: string }) => err.stderr,
      );
    expect(await cliRefused(undefined)).toBe('baton: missing Authorization: Bearer <api key> (HTTP 401 unauthorized)\nbaton: this gateway needs an API key: set BATON_API_KEY\n');
    expect(await cliRefused('not-the-key-not-the-key')).toMatch(/^baton: invalid API key \(HTTP 401 unauthorized\)\nbaton: the key in BATON_API_KEY was refused: is it one of the gateway's \(BATON_API_KEYS\)\?\n$/);
    // A task id that is no id says so.
    await page.goto(`${url}/#/tasks/not-a-task`);
    await page.getByRole('alert').getByText("No task 'not-a-task': a task id is a UUID").waitFor();
  });

  it('the task list is live: changes come on the stream of your tasks\' changes and are merged in — a task submitted elsewhere appears, its status moves, with no list request', async () => {
    const listLoads: string[] = [];
    const onRequest = (r: { url(): string; method(): string; headers(): Record<string, string> }): void => {
      const u = new URL(r.url());
      if (u.pathname === '/v1/tasks' && r.method() === 'GET' && !(r.headers()['accept'] ?? '').includes('text/event-stream')) listLoads.push(u.search);
    };
    await page.goto(`${url}/#/tasks`);
    page.on('request', onRequest);
    try {
      const listStream = page.waitForRequest((r) => new URL(r.url()).pathname === '/v1/tasks' && (r.headers()['accept'] ?? '').includes('text/event-stream'));
      await page.reload(); // a fresh load of the console
      await listStream;
      // Two loads: the list's own, and the one when the stream is ready.
      await waitFor(() => listLoads.length >= 2, { what: 'the list loaded, and again once the stream was ready' });
      await page.locator('.task-list li[data-task]').first().waitFor();
      const loads = listLoads.length;
      const id = await submit({ prompt: 'A task submitted from another client', team: 'bench', requirePlanApproval: true });
      const item = page.locator(`.task-list li[data-task="${id}"]`);
      await item.waitFor();
      await api.cancel(id, 'from another client');
      await item.locator('.status.s-cancelled').waitFor();
      expect(listLoads.length).toBe(loads); // it came on the stream: no poll, no reload
      await shot('5b-live-list');
    } finally {
      page.off('request', onRequest);
    }
  });

  it("a task's deliveries: each webhook attempt, how it went; Send again records a new attempt", async () => {
    const receiver = await webhookReceiver();
    try {
      const hook = receiver.url();
      const id = await submit({ prompt: 'bench', team: 'bench', requirePlanApproval: false, webhook: { url: hook, events: ['task.completed'] } });
      await waitFor(async () => (await api.deliveries(id)).some((d) => d.ok), { timeoutMs: 30_000, what: 'the webhook delivered' });
      await open(id);
      // The task is over: its live view says ended (it does not keep reconnecting).
      await page.locator('.task-head .live.l-ended').waitFor();
      const section = page.getByRole('region', { name: 'deliveries' });
      const first = section.locator('li', { hasText: 'task.completed' });
      await first.waitFor();
      expect(await first.textContent()).toMatch(new RegExp(`ok 204 task.completed to ${hook}.*attempt 1`));
      await section.getByRole('button', { name: /^Send again, delivery \d+$/ }).click();
      await section.locator('li', { hasText: '(sent again)' }).waitFor({ timeout: 30_000 });
      expect(await section.locator('li').count()).toBe(2);
      expect(receiver.types()).toEqual(['task.completed', 'task.completed']);
      await shot('5c-deliveries');
    } finally {
      await receiver.close();
    }
  });

  it('a live view the gateway refuses (a revoked key) says so, instead of reconnecting for ever', async () => {
    const id = await submit({ prompt: 'bench', team: 'bench', requirePlanApproval: true });
    await awaitingInput(id);
    const events = (u: URL): boolean => u.pathname === `/v1/tasks/${id}/events`;
    await page.route(events, (route) =>
      route.request().headers().accept?.includes('text/event-stream') ? route.fulfill({ status: 403, json: { error: { code: 'forbidden', message: 'the key was revoked' } } }) : route.continue(),
    );
    await open(id);
    await page.locator('.task-head .live.l-lost', { hasText: 'not live' }).waitFor();
    expect(await page.title()).toBe('bench — Baton'); // the tab names the task
    expect(await page.getByRole('alert').filter({ hasText: 'The live view stopped' }).textContent()).toMatch(/The live view stopped: .*the key was revoked.*Reload the page/);
    await page.unroute(events);
  });

  it('a notification mail the SMTP server refused for good: Send again mails it, and the new attempt is shown', async () => {
    smtp.refuseNext(1, 550, 'mailbox full');
    const id = await submit({ prompt: 'bench', team: 'bench', requirePlanApproval: false, notify: { email: { to: ['ann@example.com'], on: ['completed'] } } });
    await waitFor(async () => (await api.deliveries(id)).some((d) => d.type === 'email.completed' && !d.ok), { timeoutMs: 30_000, what: 'the end mail refused' });
    await open(id);
    const section = page.getByRole('region', { name: 'deliveries' });
    const refused = section.locator('li', { hasText: 'email.completed' });
    await refused.waitFor();
    expect(await refused.textContent()).toMatch(/failed 550 email\.completed mail to mailto:ann@example\.com.*attempt 1.*550 mailbox full/);
    await refused.getByRole('button', { name: /^Send again, delivery \d+$/ }).click();
    await section.locator('li', { hasText: '(sent again)' }).waitFor({ timeout: 30_000 });
    expect(await section.locator('li', { hasText: '(sent again)' }).textContent()).toMatch(/^ok 250 email\.completed/);
    expect(smtp.mails.filter((m) => m.headers.get('x-baton-task') === id).map((m) => m.to)).toEqual([['ann@example.com']]);
  });

  it('chat: the reply streams word by word, the conversation survives a reload, and action mode turns it into a task', async () => {
    await page.goto(`${url}/#/chat`);
    await page.getByRole('heading', { name: 'New conversation' }).waitFor();
    // Watch the reply being written: a streaming bubble with text in it, before the recorded reply replaces it.
    await page.evaluate(`window.__sawStream = false; new MutationObserver(() => { const el = document.querySelector('.msg.streaming'); if (el && el.textContent && el.textContent !== '…') window.__sawStream = true; }).observe(document.body, { subtree: true, childList: true, characterData: true });`);
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByRole('alert').getByText('Write a message first.').waitFor();
    // Shift+Enter is a new line; Enter sends.
    const message = page.getByLabel('message', { exact: true });
    await message.fill('Which databases handle');
    await message.press('Shift+Enter');
    await message.pressSequentially('embedded analytics well?');
    expect(await message.inputValue()).toBe('Which databases handle\nembedded analytics well?');
    await message.press('Enter');
    // Enter again while the reply streams: nothing is sent (the replies would interleave); the draft stays.
    await page.locator('.msg.streaming').waitFor();
    await message.fill('and a second question');
    await message.press('Enter');
    await page.locator('.msg.assistant:not(.streaming)').waitFor({ timeout: 30_000 });
    expect(await message.inputValue()).toBe('and a second question');
    expect(await page.locator('.messages .msg[data-role]').count()).toBe(2);
    await message.fill('');
    expect(await page.locator('.msg.user').first().textContent()).toMatch(/Which databases handle\s+embedded analytics well\?/);
    // As written: the person's line break is kept (not folded as markdown would).
    expect(await page.locator('.msg.user .as-written').first().innerText()).toBe('Which databases handle\nembedded analytics well?');
    expect(await page.evaluate('window.__sawStream')).toBe(true);
    await page.waitForURL(/#\/chat\/[0-9a-f-]{36}$/);
    const chatId = /#\/chat\/([0-9a-f-]{36})$/.exec(page.url())?.[1] as string;
    expect(await page.locator('.msg.assistant .meta').first().textContent()).toBe('offline model');
    await shot('6-chat');
    await page.reload();
    await waitFor(async () => (await page.locator('.messages .msg[data-role]').count()) === 2, { what: 'the conversation after a reload' });
    await page.getByRole('button', { name: 'Action mode' }).click();
    await page.getByRole('button', { name: 'Start task' }).click();
    await page.waitForURL(/#\/tasks\/[0-9a-f-]{36}$/);
    const taskId = /#\/tasks\/([0-9a-f-]{36})$/.exec(page.url())?.[1] as string;
    await page.locator('.task-head h2', { hasText: 'Which databases handle embedded analytics well?' }).waitFor();
    const t = await task(taskId);
    expect(t.metadata).toMatchObject({ chatId });
    await shot('7-chat-task');
  });

  it("chat: a reply whose stream the page lost (a reload mid-reply) is awaited and shown once recorded; action mode waits for it; a task's mark sits after the message it ends with; a conversation that does not exist says so", async () => {
    // A conversation with one exchange, turned into a task there (by the API).
    let chatId = '';
    await api.chat({ message: 'Tell me about write-ahead logs' }, (e) => {
      if (e.event === 'chat') chatId = e.data.chatId;
    });
    const started = await api.chatToTask(chatId, { requirePlanApproval: true });
    await page.goto(`${url}/#/chat/${chatId}`);
    await page.locator('.messages .msg[data-role]').nth(1).waitFor();
    const message = page.getByLabel('message', { exact: true });
    // A long message: the offline model restates it word by word (30 ms apart), so the reply takes seconds.
    await message.fill(`Now compare them with ${Array.from({ length: 120 }, (_, i) => `journal${i}`).join(' ')}`);
    await message.press('Enter');
    await page.locator('.msg.streaming').waitFor();
    expect(await page.getByRole('button', { name: 'Action mode' }).isDisabled()).toBe(true);
    await page.reload();
    // The page after the reload: the message, no reply yet, and a note that it is coming — then the reply, with no reload.
    await page.getByRole('status').getByText(/A reply is on its way/).waitFor();
    // While the page waits, its reads fail for a while (the gateway restarting): it goes on reading.
    let refused = 0;
    await page.route(`**/v1/chats/${chatId}`, async (route) => {
      if (refused < 3) {
        refused++;
        return route.abort('connectionrefused');
      }
      return route.continue();
    });
    expect(await page.getByRole('button', { name: 'Action mode' }).isDisabled()).toBe(true);
    await waitFor(async () => (await page.locator('.messages .msg.assistant:not(.streaming)').count()) === 2, { timeoutMs: 30_000, what: 'the reply recorded after the reload to be shown' });
    await page.getByRole('status').getByText(/on its way/).waitFor({ state: 'detached' });
    expect(refused).toBe(3);
    await page.unroute(`**/v1/chats/${chatId}`);
    expect(await page.getByRole('button', { name: 'Action mode' }).isDisabled()).toBe(false);
    // The task's mark is after the first reply (where its prompt ends), not below the later messages.
    const order = await page.locator('.messages > .msg').evaluateAll((els) => els.map((e) => (e.classList.contains('system') ? 'task' : (e.getAttribute('data-role') ?? '?'))));
    expect(order).toEqual(['user', 'assistant', 'task', 'user', 'assistant']);
    expect(await page.locator('.msg.system a').getAttribute('href')).toBe(`#/tasks/${started.id}`);
    await page.goto(`${url}/#/chat/${randomUUID()}`);
    await page.getByRole('alert').getByText(/No such conversation: it does not exist, or it is not one of yours/).waitFor();
  });

  it('the task list pages: older tasks load on "Show older tasks" and stay shown, live, as new tasks come and a reload happens', async () => {
    // More tasks than a page (100) holds: the ones the tests above made, and these.
    const fillers: string[] = [];
    for (let i = 0; i < 101; i++) fillers.push(await submit({ prompt: `page filler ${i}`, team: 'bench', requirePlanApproval: true }));
    let total = 0;
    for await (const _ of api.tasks({})) total++;
    expect(total).toBeGreaterThan(100);
    const rows = page.locator('.task-list li[data-task]');
    await page.goto(`${url}/#/tasks`);
    await page.reload(); // a fresh load (the open page had the new tasks come in live: its list is whole)
    const older = page.getByRole('button', { name: /^Show older tasks/ });
    await older.waitFor();
    expect(await rows.count()).toBe(100);
    expect(await older.textContent()).toBe('Show older tasks (100 shown)');
    const secondPage = page.locator(`.task-list li[data-task="${fillers[0]}"]`); // the 101st newest
    expect(await secondPage.count()).toBe(0);
    await older.click();
    await waitFor(async () => (await rows.count()) === total, { what: `all ${total} tasks shown` });
    await older.waitFor({ state: 'detached' }); // every task is shown: nothing older to load
    // A task on the second page still follows its changes live.
    await api.cancel(fillers[0] as string, 'from another client');
    await secondPage.locator('.status.s-cancelled').waitFor();
    const oldest = (await rows.last().getAttribute('data-task')) as string;
    // A new task goes on top and pushes nothing out; a reload of the list keeps both pages.
    const newest = await submit({ prompt: 'newest of all', team: 'bench', requirePlanApproval: true });
    await page.locator(`.task-list li[data-task="${newest}"]`).waitFor();
    expect(await rows.first().getAttribute('data-task')).toBe(newest);
    expect(await rows.count()).toBe(total + 1);
    await page.evaluate("window.dispatchEvent(new Event('baton:tasks-changed'))"); // what the console does after its own submit
    await waitFor(async () => (await rows.count()) === total + 1 && (await rows.last().getAttribute('data-task')) === oldest, { what: 'both pages after a reload' });
    expect(await rows.first().locator('time').getAttribute('datetime')).toMatch(/^\d{4}-\d\d-\d\dT/);
    await shot('8-task-list-pages');
    total += 1;
    // On a fresh first page, tasks that come in live join it; a reload then keeps every one
    // shown: it reads on down to the oldest task shown (here into the second page, which it
    // shows whole), not only the one page asked for.
    await page.reload();
    await older.waitFor();
    const lastShown = (await rows.last().getAttribute('data-task')) as string;
    for (let i = 0; i < 3; i++) await submit({ prompt: `live ${i}`, team: 'bench', requirePlanApproval: true });
    total += 3;
    await waitFor(async () => (await rows.count()) === 103, { what: 'three tasks come in live' });
    let listReads = 0;
    const countReads = (r: { url(): string; request(): { method(): string; headers(): Record<string, string> } }): void => {
      if (new URL(r.url()).pathname === '/v1/tasks' && r.request().method() === 'GET' && !(r.request().headers()['accept'] ?? '').includes('text/event-stream')) listReads++;
    };
    page.on('response', countReads);
    await page.evaluate("window.dispatchEvent(new Event('baton:tasks-changed'))");
    await waitFor(() => listReads >= 2, { what: 'the reload to read two pages (down to the oldest task shown)' });
    page.off('response', countReads);
    await waitFor(async () => (await rows.count()) === total, { what: `all ${total} tasks (two whole pages) after the reload` });
    expect(await page.locator(`.task-list li[data-task="${lastShown}"]`).count()).toBe(1);
    // Search: only tasks whose prompt contains the text (any case), one page of them; none says so.
    await page.getByLabel('search prompts').fill('PAGE FILLER 10');
    await waitFor(async () => (await rows.count()) === 2, { what: "the two fillers whose prompt contains 'page filler 10'" });
    expect((await rows.locator('.prompt').allTextContents()).sort()).toEqual(['page filler 10', 'page filler 100']);
    await older.waitFor({ state: 'detached' });
    await page.getByLabel('search prompts').fill('no prompt says this');
    await page.locator('.task-list li.hint', { hasText: 'No task matches these filters.' }).waitFor();
    await page.getByLabel('search prompts').fill('');
    await waitFor(async () => (await rows.count()) === 100, { what: 'the first page again once the search is cleared' });
  }, 120_000);
});
