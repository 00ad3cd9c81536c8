import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { AgentView, TaskView } from '@baton/api';
import type { BatonClient } from '@baton/client';
import { waitFor } from '@baton/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startE2eStack, type E2eStack } from './e2e-stack.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../../..');

/**
 * The engineering flow through the four services as processes, with no API key (the offline
 * model) on the shipped example project: submit with the example workspace, see the plan and
 * approve it (after an invalid edit is refused by name), two engineers run in parallel under
 * their locks, the reviewer asks for a round of changes and then approves, and the change
 * comes back as a diff.
 */
describe('engineering team, end to end', () => {
  let stack: E2eStack;
  let api: BatonClient;
  let url: string;

  beforeAll(async () => {
    stack = await startE2eStack('eng');
    ({ api, url } = stack);
  }, 90_000);

  afterAll(async () => {
    await stack?.stop();
  });
  const task = (id: string) => api.request<TaskView>('GET', `/v1/tasks/${id}`);
  const cli = async (...args: string[]): Promise<string> => (await run(process.execPath, ['packages/cli/src/main.ts', ...args], { cwd: ROOT, env: { ...process.env, BATON_URL: url } })).stdout;

  it('plan → approve → two engineers in parallel (test-first) → review round → approve → diff', async () => {
    const submitted = await api.request<TaskView>('POST', '/v1/tasks', { prompt: 'Add a low-stock report to the inventory app', team: 'engineering', workspace: { example: 'inventory' } });
    expect(submitted.workspace).toMatchObject({ source: 'example', name: 'inventory' });

    // The lead plans from the example's files and waits for approval of its plan.
    await waitFor(async () => (await task(submitted.id)).pendingRequests.length === 1, { timeoutMs: 30_000, what: 'the plan to await approval' });
    const waiting = await task(submitted.id);
    expect(waiting.lead?.phase).toBe('awaiting_approval');
    const request = waiting.pendingRequests[0]!;
    expect(request).toMatchObject({ kind: 'approval', toolName: 'submit_plan' });
    if (request.kind !== 'approval') throw new Error('expected an approval');
    expect(request.plan).toMatch(/1\. `backend` \[backend-engineer\][\s\S]*locks: `api\/\*\*`[\s\S]*2\. `frontend` \[frontend-engineer\][\s\S]*locks: `web\/\*\*`/);
    const input = request.input as { summary: string; subtasks: { id: string; file_locks: string[] }[] };

    // An edit that makes the two subtasks lock the same files at once is refused, naming why.
    const clash = { ...input, subtasks: input.subtasks.map((s) => ({ ...s, file_locks: ['api/**', 'web/**'] })) };
    await expect(api.request('POST', `/v1/tasks/${submitted.id}/approvals/${request.requestId}`, { decision: 'approve', input: clash })).rejects.toMatchObject({
      status: 400,
      body: { error: { message: expect.stringMatching(/body\.input\.subtasks\.1\.file_locks: 'frontend' and 'backend' can run at the same time and both lock/) } },
    });
    // Approved with an edit that leaves out what has a default (depends_on), under an Idempotency-Key; sent again
    // as it was (a client that never saw its answer), it is answered as made — compared parsed, as recorded.
    const edit = { decision: 'approve', input: { ...input, subtasks: input.subtasks.map(({ depends_on: _, ...rest }: { depends_on?: unknown; id: string; file_locks: string[] }) => rest) } };
    const decideAt = `/v1/tasks/${submitted.id}/approvals/${request.requestId}`;
    await api.request('POST', decideAt, edit, { 'idempotency-key': `plan-${submitted.id}` });
    await expect(api.request('POST', decideAt, edit, { 'idempotency-key': `plan-${submitted.id}` })).resolves.toMatchObject({ id: submitted.id }); // (a 409 before)

    // Both engineers run at the same time, each holding its own locks.
    let sawParallel = false;
    await waitFor(async () => {
      const agents = (await api.request<{ items: AgentView[] }>('GET', `/v1/tasks/${submitted.id}/agents`)).items;
      const held = agents.filter((a) => a.locksHeld).map((a) => a.id).sort();
      if (held.join() === 'backend,frontend') sawParallel = true;
      return agents.some((a) => a.id === 'review-1');
    }, { timeoutMs: 120_000, intervalMs: 50, what: 'the engineers to finish and the review to start' });
    expect(sawParallel).toBe(true);

    await waitFor(async () => ['completed', 'failed'].includes((await task(submitted.id)).status), { timeoutMs: 180_000, what: 'the task to finish' });
    const done = await task(submitted.id);
    expect(done.status).toBe('completed');
    expect(done.lead?.phase).toBe('done');
    expect(done.plan).toMatchObject({ status: 'completed', round: 1, reviews: [{ verdict: 'request_changes' }, { verdict: 'approve' }], acceptance: { accepted: true, concerns: [] } });
    expect(done.plan?.subtasks.map((t) => [t.id, t.status, t.agentIds])).toEqual([
      ['backend', 'done', ['backend', 'backend-fix1']],
      ['frontend', 'done', ['frontend', 'frontend-fix1']],
    ]);

    // Per-agent status: the lead first, each engineer with its subtask, locks (released), tests.
    const agents = (await api.request<{ items: AgentView[] }>('GET', `/v1/tasks/${submitted.id}/agents`)).items;
    expect(agents.map((a) => a.id)).toEqual(['lead', 'backend', 'frontend', 'review-1', 'backend-fix1', 'frontend-fix1', 'review-2']);
    const backend = await api.request<AgentView>('GET', `/v1/tasks/${submitted.id}/agents/backend`);
    expect(backend).toMatchObject({ role: 'subtask', status: 'completed', subtask: { id: 'backend' }, fileLocks: ['api/**'], locksHeld: false, currentAction: null, tests: { failed: 0 } });
    expect(backend.filesCreated).toEqual(['api/inventory.backend.test.ts']);
    await expect(api.request('GET', `/v1/tasks/${submitted.id}/agents/nobody`)).rejects.toMatchObject({ status: 404 });

    // Test-first, as run_tests recorded it: the engineer's first run failed, its last passed.
    const events = await api.allEvents(submitted.id);
    const runs = events.filter((e) => e.type === 'ToolResultsRecorded' && e.data.agentId === 'frontend').flatMap((e) => e.data.results as { toolName: string; isError: boolean }[]).filter((r) => r.toolName === 'run_tests');
    expect(runs.map((r) => r.isError)).toEqual([true, false]);

    // The change against the input, as a unified diff (and per file as JSON).
    const diff = await fetch(`${url}/v1/tasks/${submitted.id}/diff`);
    expect(diff.headers.get('content-type')).toMatch(/^text\/x-diff/);
    const patch = await diff.text();
    expect(patch).toMatch(/^diff --git a\/api\/inventory\.backend\.test\.ts b\/api\/inventory\.backend\.test\.ts\nnew file mode/m);
    expect(patch).toMatch(/^\+\/\*\* What subtask 'backend' added/m);
    const json = await api.request<{ files: { path: string; status: string }[] }>('GET', `/v1/tasks/${submitted.id}/diff?format=json`);
    expect(json.files.map((f) => [f.path, f.status])).toEqual([
      ['api/inventory.backend.test.ts', 'added'],
      ['api/inventory.ts', 'modified'],
      ['web/format.frontend.test.ts', 'added'],
      ['web/format.ts', 'modified'],
    ]);

    // A fork of the finished task (its sandboxes released), made while the frontend engineer was at
    // work: after its turns, before it completed. Its workspace is rebuilt from the
    // log when it resumes in the fork, so its change to web/format.ts is not lost.
    const frontendStored = events.find((e) => e.type === 'ArtifactStored' && e.data.agentId === 'frontend' && e.streamId.startsWith('task-'));
    const frontendDone = events.find((e) => e.type === 'SubagentCompleted' && e.data.agentId === 'frontend');
    expect(frontendStored && frontendDone && frontendStored.version < frontendDone.version).toBe(true);
    // The same point read back without forking, through the CLI (`--at`, the API's `?at=`): the
    // frontend's first file is among the artifacts, its change to web/format.ts is not yet.
    const at = String(frontendStored!.version);
    const diffThen = await cli('diff', submitted.id, '--at', at);
    expect(diffThen).toBe(await (await fetch(`${url}/v1/tasks/${submitted.id}/diff?at=${at}`)).text());
    expect(diffThen).toContain(`+++ b/${String(frontendStored!.data.path)}`);
    expect(diffThen).not.toContain('+++ b/web/format.ts');
    expect(await cli('diff', submitted.id)).toBe(patch);
    // The task's files as a .tar.gz: the example with the patch applied, byte for byte; an existing file is not overwritten without --force.
    const dir = await mkdtemp(path.join(tmpdir(), 'baton-archive-'));
    try {
      const file = path.join(dir, 'change.tar.gz');
      expect(await cli('archive', submitted.id, '--out', file)).toMatch(/^wrote .*change\.tar\.gz \(\d+ bytes\); unpack it with: mkdir /);
      await mkdir(path.join(dir, 'archived'));
      await run('tar', ['-xzf', file, '-C', path.join(dir, 'archived')]);
      await cp(path.join(ROOT, 'examples/inventory'), path.join(dir, 'patched'), { recursive: true });
      await writeFile(path.join(dir, 'change.patch'), patch);
      await run('git', ['apply', path.join(dir, 'change.patch')], { cwd: path.join(dir, 'patched') });
      await run('diff', ['-r', path.join(dir, 'patched'), path.join(dir, 'archived')]); // exit 1 (a rejection) on any difference
      await expect(cli('archive', submitted.id, '--out', file)).rejects.toThrow(/change\.tar\.gz exists: choose another with --out, or replace it with --force/);
      expect(await cli('archive', submitted.id, '--out', file, '--force')).toMatch(/^wrote /);
      // Without --out: the gateway's name (with the version for --at), in the current directory.
      const { stdout } = await run(process.execPath, [path.join(ROOT, 'packages/cli/src/main.ts'), 'archive', submitted.id, '--at', at], { cwd: dir, env: { ...process.env, BATON_URL: url } });
      expect(stdout).toMatch(new RegExp(`^wrote task-${submitted.id.slice(0, 8)}-v${at}\\.tar\\.gz `));
      const then = path.join(dir, 'then');
      await mkdir(then);
      await run('tar', ['-xzf', path.join(dir, `task-${submitted.id.slice(0, 8)}-v${at}.tar.gz`), '-C', then]);
      expect(await readFile(path.join(then, String(frontendStored!.data.path)), 'utf8')).toBe(await cli('artifact', submitted.id, String(frontendStored!.data.path), '--at', at));
      expect(await readFile(path.join(then, 'web/format.ts'), 'utf8')).toBe(await readFile(path.join(ROOT, 'examples/inventory/web/format.ts'), 'utf8'));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const listedThen = (await cli('artifacts', submitted.id, '--at', at)).split('\n').map((l) => l.split('  ')[0]);
    expect(listedThen).toContain(frontendStored!.data.path);
    expect(listedThen).not.toContain('web/format.ts');
    expect(await cli('artifact', submitted.id, String(frontendStored!.data.path), '--at', at)).toBe(await (await fetch(`${url}/v1/tasks/${submitted.id}/artifacts/${String(frontendStored!.data.path)}?at=${at}`)).text());
    // The audit of who decided what: only the requests and decisions, by type; an unknown type is named.
    const decisions = (await cli('events', submitted.id, '--type', 'ApprovalRequested,ApprovalGranted', '--json')).trim().split('\n').map((l) => JSON.parse(l) as { type: string; position: number });
    expect(decisions.map((e) => e.type)).toEqual(events.filter((e) => e.type === 'ApprovalRequested' || e.type === 'ApprovalGranted').map((e) => e.type));
    expect(decisions.map((e) => e.type)).toContain('ApprovalGranted');
    await expect(cli('events', submitted.id, '--type', 'ApprovalGranted,PlanOK')).rejects.toThrow(/query\.type: unknown event type 'PlanOK'; known: /);
    // A page of transitions: --no-steps, --after, --limit.
    const transitions = events.filter((e) => !['ModelTurnRecorded', 'ToolResultsRecorded', 'ModelUnavailable', 'AgentReminded'].includes(e.type));
    const page = (await cli('events', submitted.id, '--no-steps', '--after', String(transitions[1]!.position), '--limit', '3', '--json')).trim().split('\n').map((l) => JSON.parse(l) as { position: number });
    expect(page.map((e) => e.position)).toEqual(transitions.slice(2, 5).map((e) => e.position));
    // A fork starts between commits: the frontend's files and its completion are one commit, so
    // the fork is made at the version before them (the frontend's turns on its own stream are copied).
    const fork = await api.request<TaskView>('POST', `/v1/tasks/${submitted.id}/fork`, { atVersion: frontendStored!.version - 1 });
    await waitFor(async () => ['completed', 'failed'].includes((await task(fork.id)).status), { timeoutMs: 180_000, what: 'the fork to finish' });
    const forked = await task(fork.id);
    expect(forked.status).toBe('completed');
    // Its files were those of the fork point (the artifacts in the versions its history names, not
    // as the source's round of changes rewrote them since): its reviewer asks for the same changes.
    const verdicts = (t: TaskView) => t.plan?.reviews.map((r) => [r.verdict, r.issues.map((i) => i.file).sort()]);
    expect(verdicts(forked)).toEqual(verdicts(done));
    const forkDiff = await api.request<{ files: { path: string; status: string }[] }>('GET', `/v1/tasks/${fork.id}/diff?format=json`);
    expect(forkDiff.files.map((f) => [f.path, f.status])).toEqual(json.files.map((f) => [f.path, f.status]));
    expect(await (await fetch(`${url}/v1/tasks/${fork.id}/artifacts/web/format.ts`)).text()).toMatch(/frontendChangeNote/);
  }, 300_000);
});
