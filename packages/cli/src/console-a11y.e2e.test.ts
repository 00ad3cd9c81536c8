import { existsSync } from 'node:fs';
import type { TaskView } from '@baton/api';
import type { BatonClient } from '@baton/client';
import { waitFor } from '@baton/testing';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { axeFindings } from './axe.ts';
import { startE2eStack, type E2eStack } from './e2e-stack.ts';

/** Debian's Chromium (`.ci/run` installs it); a browser is never downloaded. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const REPORT = 'Write a short report on vector databases';

/**
 * The console for a person on a keyboard and a screen reader, in Chromium against the four
 * services: axe-core finds nothing serious in the states a person decides in; focus is never
 * dropped to the page when the control pressed goes; what an action did and what changed on its
 * own is said (the one live region); a refusal names its field; a phone's one column shows the
 * task opened alone, with the focus.
 */
describe('the web console for a keyboard and a screen reader', () => {
  let stack: E2eStack;
  let api: BatonClient;
  let url: string;
  let browser: Browser;
  const pages: Page[] = [];
  const pageErrors: Error[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: install it (apt-get install chromium; .ci/run does) or set CHROMIUM_PATH`);
    stack = await startE2eStack('a11y', { env: () => ({ RATE_LIMIT_WRITES_PER_S: '0' }) });
    ({ api, url } = stack);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  afterEach(async () => {
    for (const p of pages.splice(0)) await p.context().close();
    expect(pageErrors.splice(0).map((e) => e.stack ?? e.message)).toEqual([]);
  });

  const newPage = async (viewport = { width: 1280, height: 900 }): Promise<Page> => {
    const page = await (await browser.newContext({ viewport })).newPage();
    page.on('pageerror', (err) => pageErrors.push(err));
    pages.push(page);
    return page;
  };
  const task = (id: string) => api.request<TaskView>('GET', `/v1/tasks/${id}`);
  const submit = async (body: object): Promise<string> => (await api.request<TaskView>('POST', '/v1/tasks', body)).id;
  const awaitingInput = async (id: string, n = 1) => waitFor(async () => (await task(id)).pendingRequests.length === n, { timeoutMs: 30_000, what: `${n} open request(s)` });
  const open = async (page: Page, id: string) => {
    await page.goto(`${url}/#/tasks/${id}`);
    await page.locator('.task-head h2').waitFor();
  };
  /** What the live region has said (its last messages). */
  const said = (page: Page) => page.locator('[data-announcer]').textContent().then((t) => t ?? '');
  const focused = (page: Page) => page.evaluate('(() => { const a = document.activeElement; return a ? (a.id || a.tagName.toLowerCase()) : null; })()') as Promise<string | null>;
  const noFindings = async (page: Page, where: string) => expect(await axeFindings(page), `axe-core's serious findings: ${where}`).toEqual([]);

  it('an approval decided with the keyboard: focus comes to the task, not the page; what it did and what came next are said; axe finds nothing serious before or after', async () => {
    const id = await submit({ prompt: REPORT });
    await awaitingInput(id);
    const page = await newPage();
    await open(page, id);
    const card = page.locator('article.approval');
    const approve = card.getByRole('button', { name: 'Approve', exact: true });
    await waitFor(() => approve.isEnabled(), { what: 'the card armed' });
    // The card is a titled region: its heading says who asks for what, not a request id.
    expect(await page.getByRole('article', { name: 'lead wants to call Task → researcher' }).count()).toBe(1);
    await noFindings(page, 'a plan waiting for approval');

    await approve.focus();
    await page.keyboard.press('Enter');
    // The card goes once the decision is recorded; the focus goes to the task's heading, not to the page's body.
    await waitFor(async () => (await focused(page)) === 'task-heading', { what: 'the focus on the task heading' });
    await waitFor(async () => (await said(page)).includes('Approved: lead wants to call Task → researcher.'), { what: 'the approval said' });
    // What comes next on its own is said too: the next request, and, once decided elsewhere, the end.
    await waitFor(async () => (await said(page)).includes('Waiting for your approval: lead wants to call Task → report-writer.'), { timeoutMs: 30_000, what: 'the next request said' });
    const next = (await task(id)).pendingRequests[0]!;
    await api.request('POST', `/v1/tasks/${id}/approvals/${next.requestId}`, { decision: 'approve' });
    await waitFor(async () => (await said(page)).includes('The task completed.'), { timeoutMs: 30_000, what: 'the end said' });
    await page.locator('article[aria-label="report"] h1').waitFor();
    await noFindings(page, 'a completed task with its report and timeline');
  });

  it('a refusal names its field: marked invalid, described by the error, and focused — the new-task form and an edited approval', async () => {
    const page = await newPage();
    await page.goto(`${url}/#/tasks`);
    await page.getByRole('button', { name: 'Submit' }).click();
    const prompt = page.getByLabel('prompt', { exact: true });
    await waitFor(async () => (await prompt.getAttribute('aria-invalid')) === 'true', { what: 'the prompt marked invalid' });
    expect(await focused(page)).toBe('new-task-prompt');
    const described = await prompt.getAttribute('aria-describedby');
    expect(await page.locator(`#${described}`).textContent()).toBe('Write what the task should do.');
    await prompt.fill('a prompt');
    expect(await prompt.getAttribute('aria-invalid')).toBeNull(); // mended: no longer marked
    await page.getByLabel('budget in USD').fill('-1');
    await page.getByRole('button', { name: 'Submit' }).click();
    await waitFor(async () => (await focused(page)) === 'new-task-budget', { what: 'the budget focused' });
    expect(await page.getByLabel('budget in USD').getAttribute('aria-invalid')).toBe('true');

    const id = await submit({ prompt: REPORT });
    await awaitingInput(id);
    await open(page, id);
    const card = page.locator('article.approval');
    await card.getByRole('button', { name: 'Review & Edit' }).click();
    const editor = card.getByLabel('edited input');
    expect(await focused(page)).toBe('textarea'); // where the person edits
    await editor.fill('{ not json');
    await card.getByRole('button', { name: 'Approve with edits' }).click();
    await waitFor(async () => (await editor.getAttribute('aria-invalid')) === 'true', { what: 'the edit marked invalid' });
    expect(await focused(page)).toBe('textarea');
    expect(await page.locator(`#${CSS_ESCAPE(await editor.getAttribute('aria-describedby'))}`).textContent()).toMatch(/^The edited input is not JSON: /);
    await noFindings(page, 'an approval being edited, with its error');
  });

  it('a request decided elsewhere while the page could not hear of it: the 409 is said on the page, the stale card goes, focus comes to the task', async () => {
    const id = await submit({ prompt: REPORT });
    await awaitingInput(id);
    const page = await newPage();
    // The page's live view hangs (a proxy that holds the stream): it learns nothing by itself.
    await page.route('**/v1/tasks/*/events*', () => {});
    await open(page, id);
    const approve = page.locator('article.approval').getByRole('button', { name: 'Approve', exact: true });
    await waitFor(() => approve.isEnabled(), { what: 'the card armed' });
    const r = (await task(id)).pendingRequests[0]!;
    await api.request('POST', `/v1/tasks/${id}/approvals/${r.requestId}`, { decision: 'approve' });
    await approve.focus();
    await page.keyboard.press('Enter');
    await page.getByRole('alert').filter({ hasText: 'already decided' }).waitFor();
    expect(await page.getByRole('alert').filter({ hasText: 'already decided' }).textContent()).toMatch(/The page shows the task as it is now\.$/);
    await waitFor(async () => (await page.locator(`article[data-request="${r.requestId}"]`).count()) === 0, { what: 'the stale card gone' });
    await waitFor(async () => (await focused(page)) === 'task-heading', { what: 'the focus on the task heading' });
  });

  it('a phone (375 × 740): a task opened from the list with the keyboard is shown alone, with the focus; the list is a link away; the toasts are in the page; axe finds nothing serious', async () => {
    const id = await submit({ prompt: 'Compare PostgreSQL and SQLite for embedded analytics; ask me which sources to use', requirePlanApproval: false });
    await awaitingInput(id, 2);
    const page = await newPage({ width: 375, height: 740 });
    await page.goto(`${url}/#/tasks`);
    const link = page.locator(`li[data-task="${id}"] a`);
    await link.focus();
    await page.keyboard.press('Enter');
    await page.locator('.task-head h2').waitFor();
    expect(await focused(page)).toBe('content');
    expect(await page.locator('aside.side').isVisible()).toBe(false);
    expect(await page.getByRole('link', { name: '← All tasks' }).isVisible()).toBe(true);
    // The next Tab goes into the task (not back into a list hidden away).
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.closest("#content") !== null')).toBe(true);
    await page.locator('.toast.asking').first().waitFor();
    expect(await page.locator('.toasts').evaluate((el) => (el as unknown as { ownerDocument: { defaultView: { getComputedStyle(e: unknown): { position: string } } } }).ownerDocument.defaultView.getComputedStyle(el).position)).toBe('static');
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(375);
    await noFindings(page, 'two questions open, on a phone');
    await page.getByRole('link', { name: '← All tasks' }).click();
    await page.locator(`li[data-task="${id}"]`).waitFor();
    expect(await page.locator('aside.side').isVisible()).toBe(true);
    // Back where the person left the list: the task just shown has the focus.
    await waitFor(async () => (await page.evaluate('document.activeElement?.closest("li")?.dataset.task')) === id, { what: 'the focus back on the task in the list' });
  });

  it('Cancel task: a double-click only asks (the rest of it is no confirmation); a confirmed cancel is said once; a fork made elsewhere comes into the Forks section live', async () => {
    const id = await submit({ prompt: REPORT });
    await awaitingInput(id);
    const page = await newPage();
    await open(page, id);
    const banner = page.getByRole('region', { name: 'waiting for you' });
    await banner.getByRole('button', { name: 'Cancel task' }).dblclick();
    await banner.getByRole('button', { name: 'Confirm cancel' }).waitFor();
    expect((await task(id)).status).toBe('awaiting_input');
    // A fork made through the API, not this page: it shows among the forks as it happens.
    const fork = await api.request<TaskView>('POST', `/v1/tasks/${id}/fork`, { atVersion: 1 });
    await page.getByRole('region', { name: 'Forks' }).locator(`li[data-fork="${fork.id}"]`).waitFor();
    const confirm = banner.getByRole('button', { name: 'Confirm cancel' });
    await waitFor(async () => (await confirm.getAttribute('aria-disabled')) === null, { what: 'the confirmation armed' });
    await confirm.click();
    await waitFor(async () => (await task(id)).status === 'cancelled', { what: 'the task cancelled' });
    await waitFor(async () => (await said(page)).includes('The task was cancelled.'), { what: 'the cancel said' });
    expect((await page.locator('[data-announcer] p').allTextContents()).filter((m) => /cancelled/.test(m))).toEqual(['The task was cancelled.']);
  });
});

/** An id from `useId` (`:r1:`-like) as a CSS selector. */
function CSS_ESCAPE(id: string | null): string {
  return (id ?? '').replace(/[^a-zA-Z0-9_-]/g, (c) => `\\${c}`);
}
