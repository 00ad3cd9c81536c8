import { execFile, spawn } from 'node:child_process';
import { access, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { TaskView } from '@baton/api';
import { testPool, waitFor, webhookReceiver, type WebhookReceiver } from '@baton/testing';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import type { ApiEvent, BatonClient } from '@baton/client';
import { startE2eStack, type E2eStack } from './e2e-stack.ts';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const run = promisify(execFile);

/**
 * Parallel waits, cancel and fork through the four services as processes, decided with the
 * CLI (`baton answer`, `baton cancel`) and followed with `baton watch`.
 */
/** A test that runs the CLI as a process a dozen times: each start is slow on a busy machine (the whole suite beside it). */
const CLI_TEST_MS = 240_000;

describe('human in the loop, end to end', () => {
  let stack: E2eStack;
  let api: BatonClient;
  let url: string;
  let workspaces: string;
  let db: pg.Pool;
  let receiver: WebhookReceiver;
  /** The webhooks received: each one's type and the requests open in its task. */
  const hooks = () => (receiver.bodies as { type: string; data: { task: TaskView } }[]).map((b) => ({ type: b.type, requestIds: b.data.task.pendingRequests.map((r) => r.requestId) }));

  beforeAll(async () => {
    receiver = await webhookReceiver();
    stack = await startE2eStack('hitl', { env: () => ({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }) });
    ({ api, url, workspaces } = stack);
    db = testPool(stack.dbUrl);
  }, 90_000);

  afterAll(async () => {
    await db?.end();
    await receiver?.close();
    await stack?.stop();
  });

  const cli = async (...args: string[]): Promise<string> => (await run(process.execPath, ['packages/cli/src/main.ts', ...args], { cwd: ROOT, env: { ...process.env, BATON_URL: url } })).stdout;
  const task = (id: string) => api.request<TaskView>('GET', `/v1/tasks/${id}`);
  const submitComparison = async (): Promise<string> => {
    const t = await api.request<TaskView>('POST', '/v1/tasks', {
      prompt: 'Compare PostgreSQL and SQLite for embedded analytics; ask me which sources to use',
      requirePlanApproval: false,
      webhook: { url: receiver.url(), events: ['task.awaiting_input'] },
    });
    // Two researchers in parallel, each asking its own question.
    await waitFor(async () => (await task(t.id)).pendingRequests.length === 2, { timeoutMs: 30_000, what: 'both researchers to ask' });
    return t.id;
  };

  it('two subagents ask at once: each answer resumes only its own agent; nothing done runs again; `baton watch` prints the questions; `baton list --follow` lists the waiting task and prints each change by which it leaves that status', async () => {
    const id = await submitComparison();
    const watchOut: string[] = [];
    const watcher = spawn(process.execPath, ['packages/cli/src/main.ts', 'watch', id], { cwd: ROOT, env: { ...process.env, BATON_URL: url }, stdio: ['ignore', 'pipe', 'inherit'] });
    watcher.stdout.on('data', (d) => watchOut.push(String(d)));
    const watchExit = new Promise<number | null>((r) => watcher.once('exit', r));
    // `baton list --follow --status awaiting_input`: the waiting task listed, then printed again as it leaves that status.
    const listOut: string[] = [];
    const lister = spawn(process.execPath, ['packages/cli/src/main.ts', 'list', '--follow', '--status', 'awaiting_input'], { cwd: ROOT, env: { ...process.env, BATON_URL: url }, stdio: ['ignore', 'pipe', 'inherit'] });
    lister.stdout.on('data', (d) => listOut.push(String(d)));
    onTestFinished(() => void lister.kill()); // also when an expectation fails
    await waitFor(() => listOut.join('').includes('following changes'), { what: '`baton list --follow` to list and follow' });
    expect(listOut.join('')).toMatch(new RegExp(`^${id}  awaiting_input\\s+research  \\S+  \\(2 open requests\\)  Compare PostgreSQL`, 'm'));

    let t = await task(id);
    expect(t.status).toBe('awaiting_input');
    const byAgent = Object.fromEntries(t.pendingRequests.map((r) => [r.agentId, r]));
    expect(Object.keys(byAgent).sort()).toEqual(['researcher-1', 'researcher-2']);

    expect(await cli('answer', id, 'news and blogs', '--request', byAgent['researcher-2']!.requestId)).toMatch(/researcher-1/);
    await waitFor(async () => (await task(id)).agents.find((a) => a.id === 'researcher-2')?.status === 'completed', { timeoutMs: 30_000, what: 'researcher-2 to finish' });
    t = await task(id);
    expect(t.status).toBe('awaiting_input');
    expect(t.agents.find((a) => a.id === 'researcher-1')).toMatchObject({ status: 'paused', turns: 1 });
    expect(t.pendingRequests.map((r) => r.requestId)).toEqual([byAgent['researcher-1']!.requestId]);

    // Answered already: the server's answer says so (and how), not a guess that the id is wrong.
    await expect(cli('answer', id, 'again', '--request', byAgent['researcher-2']!.requestId)).rejects.toThrow(/already (answered|decided).*\(HTTP 409 /);
    await expect(cli('answer', id, 'x', '--request', 'clr-nobody')).rejects.toThrow(/clr-nobody.*\(HTTP 404 /);
    await cli('answer', id, 'peer-reviewed papers'); // the only open question now
    await waitFor(async () => (await task(id)).status === 'completed', { timeoutMs: 30_000, what: 'the task to complete' });
    // The change by which the task leaves awaiting_input for good: no request open, whatever its
    // status by then (the stream sends a task's latest summary: on a loaded machine the first one
    // after the answer can already say completed).
    await waitFor(() => new RegExp(`^${id}  (running|completed)\\s+research  \\S+  Compare PostgreSQL`, 'm').test(listOut.join('')), { what: '`baton list --follow` to print the task leaving awaiting_input' }).catch((err: Error) => {
      throw new Error(`${err.message}; it printed:\n${listOut.join('')}`);
    });
    lister.kill('SIGINT');
    expect(await cli('list', '--status', 'completed')).toMatch(new RegExp(`^${id}  completed`, 'm'));
    await expect(cli('list', '--follow', '--stuck')).rejects.toThrow(/--follow with --stuck: a task becomes stuck by not changing/);

    const events = await api.allEvents(id);
    const turns = (agentId: string) => events.filter((e) => e.type === 'ModelTurnRecorded' && e.data.agentId === agentId).map((e) => e.data.turn);
    expect(turns('researcher-1')).toEqual([1, 2, 3, 4]); // ask, search, write, finish: the asking turn never repeated
    expect(turns('researcher-2')).toEqual([1, 2, 3, 4]);
    expect(turns('report-writer-1')).toEqual([1, 2, 3, 4]); // glob, read both notes, write, finish
    expect(await api.artifactOf(id, 'researcher-1', 'notes.md')).toMatch(/- peer-reviewed papers/);
    expect(await api.artifactOf(id, 'researcher-2', 'notes.md')).toMatch(/- news and blogs/);
    // researcher-2 finished first and holds notes.md; researcher-1's is kept beside it, and the writer read both.
    expect((await api.artifacts(id)).map((a) => `${a.agentId}:${a.path}`).sort()).toEqual(['report-writer-1:report.md', 'researcher-1:researcher-1/notes.md', 'researcher-2:notes.md']);
    // Two researchers finishing at once both wrote notes.md: one holds the path, the other's is kept under its id.
    expect(await api.artifact(id, 'report.md')).toMatch(/Built from notes\.md, researcher-1\/notes\.md\./);

    expect(await watchExit).toBe(0);
    const printed = watchOut.join('');
    expect(printed).toMatch(/\? {2}question clr-researcher-1-\S+ from researcher-1/);
    expect(printed).toMatch(/options: peer-reviewed papers \| news and blogs \| both/);
    expect(printed).toMatch(/→ baton answer /);
    expect(printed).toMatch(/TaskCompleted/);
    // A task.awaiting_input webhook as each request opened.
    await waitFor(() => hooks().filter((h) => h.type === 'task.awaiting_input').length >= 2, { what: 'awaiting_input webhooks' });
    expect(hooks().flatMap((h) => h.requestIds)).toEqual(expect.arrayContaining([byAgent['researcher-1']!.requestId, byAgent['researcher-2']!.requestId]));
  });

  it('cancel while both subagents wait: requests close, agents stop, sandboxes are killed; `baton cancel` again is refused', async () => {
    const id = await submitComparison();
    // Both wait for a person: their sandboxes are paused (the workspaces live in Postgres, not on the runner's disk).
    const sandboxes = async () => (await db.query('select agent_id, state from sandboxes where task_id = $1 order by agent_id', [id])).rows.map((r) => `${r.agent_id}:${r.state}`);
    await waitFor(async () => (await sandboxes()).join() === 'researcher-1:paused,researcher-2:paused', { what: 'both sandboxes paused' });
    expect(await cli('cancel', id, '--reason', 'changed my mind')).toMatch(/cancelled/);
    const t = await task(id);
    expect(t).toMatchObject({ status: 'cancelled', pendingRequests: [] });
    expect(t.agents.map((a) => a.status)).toEqual(['cancelled', 'cancelled']);
    await waitFor(async () => (await sandboxes()).join() === 'researcher-1:killed,researcher-2:killed', { timeoutMs: 20_000, what: 'the sandboxes to be killed' });
    await expect(access(path.join(workspaces, id, 'researcher-1'))).rejects.toThrow(/ENOENT/);
    await expect(cli('cancel', id)).rejects.toThrow(/409 task_final/);
  });

  it('fork where both subagents wait, answer differently: the fork runs to completion on its own; the source is untouched', async () => {
    const id = await submitComparison();
    const source = await task(id);
    const out = await cli('fork', id, '--at', String(source.version));
    const forkId = /task ([0-9a-f-]{36})/.exec(out)?.[1] as string;
    expect(out).toMatch(new RegExp(`fork of ${id} at v${source.version}`));
    const fork = await task(forkId);
    expect(fork.pendingRequests).toHaveLength(2);
    for (const r of fork.pendingRequests) await api.request('POST', `/v1/tasks/${forkId}/answers/${r.requestId}`, { answers: 'both' });
    await waitFor(async () => (await task(forkId)).status === 'completed', { timeoutMs: 30_000, what: 'the fork to complete' });
    expect(await api.artifactOf(forkId, 'researcher-1', 'notes.md')).toMatch(/- both/);
    const after = await task(id);
    expect(after).toMatchObject({ status: 'awaiting_input', version: source.version });
    const forkEvents: ApiEvent[] = await api.allEvents(forkId);
    expect(forkEvents[0]).toMatchObject({ type: 'TaskSubmitted', data: { forkedFrom: { taskId: id, atVersion: source.version } } });
    // The fork made again by the current code, with the configuration it was pinned to (recorded by the services that loaded it).
    expect(await cli('verify', forkId)).toMatch(/^identical: [1-9]\d* decisions? checked over \d+ events?, with the run's own team configuration \(sha256:[0-9a-f]+\)\n$/);
    await expect(cli('verify', forkId, '--config', 'then')).rejects.toThrow(/--config must be pinned or current, got 'then'/);
  });

  it('a budget reached mid-run stops every model call and asks a person: a raise resumes the run where it stopped, a refusal fails it', async () => {
    const hook = { url: receiver.url(), events: ['task.awaiting_input'] };
    // One token: the lead's first turn is allowed (nothing spent yet); the researcher's first model call finds it reached.
    const { id } = await api.request<TaskView>('POST', '/v1/tasks', { prompt: 'Write a short report on vector databases', requirePlanApproval: false, budget: { tokens: 1 }, webhook: hook });
    await waitFor(async () => (await task(id)).status === 'awaiting_input', { timeoutMs: 30_000, what: 'the budget request' });
    let t = await task(id);
    expect(t.pendingRequests).toEqual([expect.objectContaining({ kind: 'budget', requestId: 'budget-1', agentId: 'researcher-1', limit: { usd: null, tokens: 1 }, onTimeout: 'stop' })]);
    expect(t.agents).toEqual([expect.objectContaining({ id: 'researcher-1', status: 'paused', turns: 0 })]);
    expect(t.budget).toEqual({ limit: { usd: null, tokens: 1 }, spent: { usd: 0, tokens: expect.any(Number) } });
    const spent = t.budget!.spent.tokens;
    expect(await cli('status', id)).toMatch(/\$ {2}budget budget-1 — the task reached its budget \(\d+ of 1 tokens\)/);

    // A raise must be above what was spent (422 naming it); approving without a limit is refused by the CLI.
    const low = await fetch(`${url}/v1/tasks/${id}/approvals/budget-1`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ decision: 'approve', budget: { tokens: spent } }) });
    expect(low.status).toBe(422);
    expect(((await low.json()) as { error: { message: string } }).error.message).toMatch(/budget.tokens: \d+ is not above what the task has spent/);
    await expect(cli('approve', id, 'budget-1')).rejects.toThrow(/--usd and\/or --tokens/);

    // Just enough for one more model call: the researcher resumes, takes its first turn, and the budget stops it again.
    await cli('approve', id, 'budget-1', '--tokens', String(spent + 1));
    await waitFor(async () => (await task(id)).pendingRequests.some((r) => r.requestId === 'budget-2'), { timeoutMs: 30_000, what: 'the second budget request' });
    t = await task(id);
    expect(t.status).toBe('awaiting_input');
    expect(t.agents).toEqual([expect.objectContaining({ id: 'researcher-1', status: 'paused', turns: 1 })]);

    await cli('approve', id, '--tokens', '100000000'); // the only open request
    await waitFor(async () => (await task(id)).status === 'completed', { timeoutMs: 30_000, what: 'the task to complete' });
    const events = await api.allEvents(id);
    expect(events.filter((e) => e.type === 'ModelTurnRecorded' && e.data.agentId === 'researcher-1').map((e) => e.data.turn)).toEqual([1, 2, 3]); // no turn ran twice
    expect(events.filter((e) => e.type.startsWith('Budget')).map((e) => `${e.type}:${String(e.data.requestId)}`)).toEqual(['BudgetExceeded:budget-1', 'BudgetRaised:budget-1', 'BudgetExceeded:budget-2', 'BudgetRaised:budget-2']);
    expect(events.filter((e) => e.type === 'SubagentPaused')).toHaveLength(2);
    // `baton replay --diff`: what each event changed in the task.
    const diff = await cli('replay', id, '--diff');
    expect(diff).toMatch(/BudgetExceeded\n(?: {4}.*\n)*? {4}pendingRequests\[0\]: ∅ → \{"kind":"budget","requestId":"budget-1"/);
    expect(diff).toMatch(/SubagentPaused\n(?: {4}.*\n)*? {4}status: "running" → "awaiting_input"/);
    // With --at N: what version N changed (--diff used to be ignored there).
    const exceeded = events.find((e) => e.type === 'BudgetExceeded')!;
    expect(await cli('replay', id, '--at', String(exceeded.version), '--diff')).toMatch(new RegExp(`^v${exceeded.version - 1} → v${exceeded.version}\n(?: {4}.*\n)*? {4}pendingRequests\\[0\\]: ∅ → \\{"kind":"budget","requestId":"budget-1"`));
    await waitFor(() => hooks().some((h) => h.requestIds.includes('budget-2')), { what: 'the awaiting_input webhook of the budget request' });

    // Refused: the run stops, failed with the reason.
    const other = await api.request<TaskView>('POST', '/v1/tasks', { prompt: 'Write a short report on vector databases', requirePlanApproval: false, budget: { tokens: 1 } });
    await waitFor(async () => (await task(other.id)).status === 'awaiting_input', { timeoutMs: 30_000, what: 'the budget request' });
    await cli('reject', other.id, 'budget-1', '--reason', 'too dear');
    t = await task(other.id);
    expect(t).toMatchObject({ status: 'failed', pendingRequests: [], error: { code: 'budget_exceeded', message: expect.stringMatching(/reached its budget \(\d+ of 1 tokens\); stopped by .*: too dear/) } });
    expect(t.agents.map((a) => a.status)).toEqual(['cancelled']);
  });

  it('webhooks, deliveries and teams from the CLI: an endpoint added (its secret shown once), listed, a delivery sent again, the secret rotated, the endpoint removed', async () => {
    const endpoint = await webhookReceiver();
    const received = (): string[] => endpoint.types();
    try {
      const hookUrl = endpoint.url('/tenant');
      expect(await cli('teams')).toMatch(/^research — .*\n {2}lead \S+ \(.+, \d+ turns\): Task, ask_user; delegates to .*researcher/m);
      const added = await cli('webhooks', 'add', hookUrl, '--events', 'task.completed');
      const wid = added.split('  ')[0] as string;
      expect(added).toMatch(/^secret: whsec_\S+ {2}\(shown this once/m);
      const listed = await cli('webhooks');
      expect(listed).toContain(`${wid}  ${hookUrl}  task.completed  since `);
      expect(listed).not.toMatch(/whsec_/);

      // (Waited for through the API: a CLI process per look would be slow on a busy machine.)
      const t = await api.request<TaskView>('POST', '/v1/tasks', { prompt: 'bench', team: 'bench', requirePlanApproval: false });
      await waitFor(async () => (await api.deliveries(t.id)).some((d) => d.url === hookUrl && d.ok), { timeoutMs: 30_000, what: 'the task.completed webhook delivered and recorded' });
      const deliveryLine = (await cli('deliveries', t.id)).split('\n').find((l) => l.includes(`webhook task.completed  → ${hookUrl}`));
      expect(deliveryLine).toMatch(/ {2}attempt 1 {2}ok 204 \(\d+ ms\)$/);
      const deliveryId = deliveryLine!.split('  ')[0] as string;
      expect(await cli('redeliver', t.id, deliveryId)).toMatch(/^queued: delivery \S+ is sent again by a notifier \(redelivery request #\d+\); `baton deliveries /);
      await waitFor(async () => (await api.deliveries(t.id)).some((d) => d.redelivery && d.ok), { timeoutMs: 30_000, what: 'the redelivery sent and recorded' });
      expect(await cli('deliveries', t.id)).toContain('(redelivery)  ok 204');
      expect(received().filter((x) => x === 'task.completed')).toHaveLength(2);
      expect(await cli('deliveries', '--given-up')).toBe('nothing given up\n');

      // A task's own webhook and mail from the CLI (they needed curl): checked by the gateway, named when wrong.
      const own = endpoint.url('/own');
      const submitted = await cli('submit', 'bench', '--team', 'bench', '--no-approval', '--webhook', own, '--webhook-events', 'task.completed', '--mail', 'ann@example.com', '--mail-on', 'completed');
      const ownId = /^task (\S+)/.exec(submitted)?.[1] as string;
      expect((await api.request<TaskView>('GET', `/v1/tasks/${ownId}`)).notify).toEqual({ email: { to: ['ann@example.com'], on: ['completed'] } });
      await waitFor(async () => (await api.deliveries(ownId)).some((d) => d.url === own && d.ok), { timeoutMs: 30_000, what: "the task's own webhook delivered" });
      await expect(cli('submit', 'bench', '--team', 'bench', '--mail', 'ann@example.com', '--mail-on', 'sometimes')).rejects.toThrow(/body\.notify\.email\.on\.0/);
      await expect(cli('submit', 'bench', '--webhook-events', 'task.completed')).rejects.toThrow(/--webhook-events goes with --webhook <url>/);

      expect(await cli('webhooks', 'show', wid)).toContain(`${wid}  ${hookUrl}  task.completed  since `);
      expect(await cli('webhooks', 'update', wid, '--events', 'task.completed,task.failed')).toContain(`${wid}  ${hookUrl}  task.completed,task.failed  since `);
      await expect(cli('webhooks', 'update', wid)).rejects.toThrow(/give --url, --events or both/);
      const rotated = await cli('webhooks', 'rotate-secret', wid, '--overlap', '60');
      expect(rotated).toMatch(/rotated \S+ \(the previous secret signs too until \S+\)/);
      expect(rotated).toMatch(/^secret: whsec_/m);
      await expect(cli('webhooks', 'rotate-secret', wid, '--overlap', 'soon')).rejects.toThrow(/--overlap must be a whole number of seconds, got 'soon'/);
      // The key of the tenant's tasks' own webhooks: none, made (shown once), made again (refused), rotated, shown.
      expect(await cli('webhooks', 'task-secret')).toMatch(/^none: this tenant's tasks' own webhooks are signed with the deployment's WEBHOOK_SECRET/);
      const key = await cli('webhooks', 'task-secret', 'create', '--overlap', '0');
      expect(key).toMatch(/^key since \S+\nsecret: whsec_\S+ {2}\(shown this once/);
      await expect(cli('webhooks', 'task-secret', 'create')).rejects.toThrow(/has a key for its tasks' own webhooks already: POST \/v1\/task-webhook-secret\/rotate replaces it \(HTTP 409 task_webhook_secret_exists\)/);
      const rekeyed = await cli('webhooks', 'task-secret', 'rotate', '--overlap', '60');
      expect(rekeyed).toMatch(/^key since \S+, rotated \S+ \(the previous key signs too until \S+\)\nsecret: whsec_/);
      expect(await cli('webhooks', 'task-secret', 'show')).toMatch(/^key since \S+, rotated \S+ \(the previous key signs too until \S+\)\n$/);
      expect(await cli('webhooks', 'remove', wid)).toBe(`removed ${wid}\n`);
      expect(await cli('webhooks', 'list')).toBe('no webhook endpoints\n');
      await expect(cli('redeliver', t.id, deliveryId)).rejects.toThrow(/which has been deleted: there is nothing to send it to \(HTTP 409 endpoint_deleted\)/);
    } finally {
      await endpoint.close();
    }
  }, CLI_TEST_MS);

  it('baton submit --workspace <directory | .tar.gz> and --example: the task starts from that codebase (a directory archived without .git and node_modules); what the gateway refuses is said', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'baton-cli-ws-'));
    try {
      const app = path.join(dir, 'app');
      await mkdir(path.join(app, 'src'), { recursive: true });
      await mkdir(path.join(app, 'node_modules', 'left-pad'), { recursive: true });
      await mkdir(path.join(app, '.git'), { recursive: true });
      await writeFile(path.join(app, 'package.json'), '{"name":"app"}\n');
      await writeFile(path.join(app, 'src', 'index.ts'), 'export const x = 1;\n');
      await writeFile(path.join(app, 'node_modules', 'left-pad', 'index.js'), 'module.exports = 1;\n');
      await writeFile(path.join(app, '.git', 'HEAD'), 'ref: refs/heads/main\n');
      const fromDir = await cli('submit', 'Fix it', '--team', 'bench', '--workspace', app);
      expect(fromDir).toMatch(/^ {2}workspace: upload app\.tar\.gz, 2 files, \d+ bytes \([0-9a-f]{12}\)$/m);
      const dirTask = await task(fromDir.split(/\s+/)[1] as string);
      // The same files as a .tar.gz of one's own: the same workspace (its digest).
      const archive = path.join(dir, 'app.tgz');
      await run('tar', ['-czf', archive, '-C', app, 'package.json', 'src']);
      const fromArchive = await task((await cli('submit', 'Fix it', '--team', 'bench', '--workspace', archive)).split(/\s+/)[1] as string);
      expect(fromArchive.workspace).toMatchObject({ source: 'upload', name: 'app.tgz', files: 2, digest: dirTask.workspace!.digest });
      expect(await cli('submit', 'Add a report', '--team', 'bench', '--example', 'inventory')).toMatch(/^ {2}workspace: example inventory, \d+ files/m);
      // Refused, saying why: both; not an archive; missing; a link the gateway will not take; an unknown example.
      await expect(cli('submit', 'x', '--example', 'inventory', '--workspace', app)).rejects.toThrow(/give --example or --workspace, not both/);
      await writeFile(path.join(dir, 'notes.txt'), 'hi');
      await expect(cli('submit', 'x', '--workspace', path.join(dir, 'notes.txt'))).rejects.toThrow(/notes\.txt is a file but not a \.tar\.gz/);
      await expect(cli('submit', 'x', '--workspace', path.join(dir, 'nope'))).rejects.toThrow(/--workspace: no such file or directory/);
      await symlink('/etc/passwd', path.join(app, 'passwd'));
      await expect(cli('submit', 'x', '--workspace', app)).rejects.toThrow(/passwd.*(HTTP 400 invalid_workspace)/s);
      await expect(cli('submit', 'x', '--example', 'nope')).rejects.toThrow(/unknown example 'nope'; configured: .*inventory/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, CLI_TEST_MS);

  it('chat from the CLI: the reply streams to stdout, the conversation goes on with --chat, is listed, and becomes a task; a bad chat id is said', async () => {
    const chat = (...args: string[]) => run(process.execPath, ['packages/cli/src/main.ts', 'chat', ...args], { cwd: ROOT, env: { ...process.env, BATON_URL: url } });
    const first = await chat('Compare', 'PostgreSQL', 'and', 'SQLite');
    expect(first.stdout).toMatch(/\[offline model\][\s\S]*\n$/);
    const chatId = /chat ([0-9a-f-]{36}): continue with --chat \1/.exec(first.stderr)?.[1];
    expect(chatId, first.stderr).toBeDefined();
    const second = await chat('for', 'embedded', 'analytics', '--chat', chatId!);
    expect(second.stderr).toContain(`chat ${chatId}:`);
    expect(await cli('chats')).toMatch(new RegExp(`^${chatId}  research  \\S+  4 messages  Compare PostgreSQL and SQLite$`, 'm'));
    const made = await cli('chat-task', chatId!, '--team', 'bench', '--no-approval');
    expect(made).toMatch(/^task [0-9a-f-]{36} {2}\w+ {2}v\d+ {2}team bench/);
    expect(await cli('chats')).toMatch(new RegExp(`^${chatId}  .*4 messages, 1 task  `, 'm'));
    await expect(chat('hello', '--chat', '00000000-0000-4000-8000-000000000000')).rejects.toThrow(/chat 00000000-0000-4000-8000-000000000000 not found \(HTTP 404/);
  }, CLI_TEST_MS);
});
