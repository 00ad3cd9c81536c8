import { randomUUID } from 'node:crypto';
import { claimNamespace } from '@baton/db';
import { pgTest as test, waitFor } from '@baton/testing';
import { Sandbox as E2B, type ConnectionOpts } from 'e2b';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { sandboxContract } from './contract.ts';
import { E2BSandboxProvider, strayVerdict } from './e2b.ts';
import { FakeE2B } from './fake-e2b.ts';
import { DEFAULT_LIMITS, SandboxFencedError, SandboxOutageError, SandboxRefusedError, type SandboxSpec } from './provider.ts';

const fake = new FakeE2B();
beforeAll(async () => {
  await fake.start();
});
afterAll(async () => fake.stop());

const provider = (pool: pg.Pool) => new E2BSandboxProvider({ pool, apiKey: 'e2b_test', apiUrl: fake.url, sandboxUrl: fake.url, template: 'baton-agent' });
sandboxContract('e2b (fake control plane and envd)', provider, { commands: true });

const spec = (over: Partial<SandboxSpec> = {}): SandboxSpec => ({ taskId: randomUUID(), agentId: 'researcher-1', network: false, env: { ALLOWED: 'yes' }, limits: DEFAULT_LIMITS, attempt: 1, ...over });
const callsFor = (ids: string[]) => fake.calls.filter((c) => ids.some((id) => c.path.includes(`/${id}`)) || (c.path === '/v2/sandboxes' && ids.includes(String((c.body as { metadata?: { taskId?: string } })?.metadata?.taskId))));

describe('E2B sandbox provider lifecycle', () => {
  test('create pauses on timeout, passes only the named env, no internet unless allowed; pause, reconnect from another replica, kill', async ({ pg }) => {
    const a = provider(pg.db.pool);
    const s = spec();
    const sbx = await a.open(s);
    const created = fake.calls.find((c) => c.path === '/v2/sandboxes' && (c.body as { metadata: { taskId: string } }).metadata.taskId === s.taskId);
    expect(created).toMatchObject({
      method: 'POST',
      apiKey: 'e2b_test',
      body: { templateID: 'baton-agent', autoPause: true, envVars: { ALLOWED: 'yes' }, allow_internet_access: false, metadata: { taskId: s.taskId, agentId: 'researcher-1' } },
    });
    const e2bId = (await pg.db.pool.query('select external_id from sandboxes where task_id = $1', [s.taskId])).rows[0]?.external_id as string;
    await a.pause(sbx);
    expect(fake.sandboxes.get(e2bId)?.state).toBe('paused');
    // The answer arrives; another runner replica resumes the same E2B sandbox (no second create).
    await provider(pg.db.pool).open({ ...s, attempt: 2 });
    expect(callsFor([s.taskId, e2bId]).map((c) => `${c.method} ${c.path.replace(e2bId, 'ID')}`)).toEqual(['POST /v2/sandboxes', 'POST /sandboxes/ID/pause', 'POST /v2/sandboxes/ID/connect']);
    expect(fake.sandboxes.get(e2bId)?.state).toBe('running');
    await expect(a.open(s)).rejects.toThrow(SandboxFencedError); // the older attempt is fenced out
    await a.kill(s.taskId, s.agentId);
    expect(fake.sandboxes.has(e2bId)).toBe(false);
    expect((await pg.db.pool.query('select state from sandboxes where task_id = $1', [s.taskId])).rows).toEqual([{ state: 'killed' }]);
    await a.kill(s.taskId, s.agentId); // idempotent: no second DELETE
    expect(callsFor([e2bId]).filter((c) => c.method === 'DELETE')).toHaveLength(1);
  });

  test('a sandbox E2B no longer has is created afresh; sweep kills the sandboxes of dead tasks', async ({ pg }) => {
    const p = provider(pg.db.pool);
    const s = spec({ network: true });
    await p.open(s);
    const first = (await pg.db.pool.query('select external_id from sandboxes where task_id = $1', [s.taskId])).rows[0]?.external_id as string;
    expect(fake.calls.find((c) => c.path === '/v2/sandboxes' && (c.body as { metadata: { taskId: string } }).metadata.taskId === s.taskId)?.body).toMatchObject({ allow_internet_access: true });
    fake.lose(first); // E2B dropped it
    await p.open({ ...s, attempt: 2 });
    const second = (await pg.db.pool.query('select external_id from sandboxes where task_id = $1', [s.taskId])).rows[0]?.external_id as string;
    expect(second).not.toBe(first);
    const live = spec();
    await p.open(live);
    const liveId = (await pg.db.pool.query('select external_id from sandboxes where task_id = $1', [live.taskId])).rows[0]?.external_id as string;
    expect(await p.sweep(async (ids) => new Map(ids.map((i) => [i, i === live.taskId ? 'live' : 'finished'] as const)))).toBeGreaterThanOrEqual(1);
    expect(fake.sandboxes.has(second)).toBe(false);
    expect(fake.sandboxes.has(liveId)).toBe(true);
  });

  test("E2B failing to resume a paused sandbox (a 500) is an outage, tried again — not a new, empty sandbox beside the lost one; a refusal for good (the key, the template) says which setting", async ({ pg }) => {
    const p = provider(pg.db.pool);
    const s = spec();
    const sbx = await p.open(s);
    await sbx.files.write('notes.md', 'what a command made\n');
    await p.pause(sbx);
    const e2bId = (await pg.db.pool.query('select external_id from sandboxes where task_id = $1', [s.taskId])).rows[0]?.external_id as string;
    fake.fail('POST', new RegExp(`^/v2/sandboxes/${e2bId}/connect$`), 500);
    const outage = await p.open({ ...s, attempt: 2 }).then(() => null, (err: unknown) => err as Error);
    expect(outage).toBeInstanceOf(SandboxOutageError);
    expect(outage?.message).toBe('E2B could not resume the sandbox: 500: injected fault 500');
    expect(callsFor([s.taskId]).filter((c) => c.path === '/v2/sandboxes')).toHaveLength(1); // no second sandbox
    const resumed = await p.open({ ...s, attempt: 3 });
    expect(await resumed.files.read('notes.md')).toBe('what a command made\n');
    expect(fake.sandboxes.get(e2bId)?.state).toBe('running');

    // Refused for good: a key E2B does not know; a template it does not have.
    fake.fail('POST', /^\/v2\/sandboxes$/, 401);
    await expect(p.open(spec())).rejects.toThrow(new SandboxRefusedError('E2B refused the API key (E2B_API_KEY): Unauthorized, please check your credentials. - injected fault 401'));
    fake.fail('POST', /^\/v2\/sandboxes$/, 404);
    await expect(p.open(spec())).rejects.toThrow(/^E2B has no template 'baton-agent' \(E2B_TEMPLATE; infra\/e2b builds it\): 404: injected fault 404$/);
    fake.fail('POST', /^\/v2\/sandboxes$/, 503);
    await expect(p.open(spec())).rejects.toBeInstanceOf(SandboxOutageError);
    // A 409 on a resume is not a refusal (it had failed the agent and deleted its sandbox): it may pass.
    const again = await p.open({ ...s, attempt: 4 });
    await p.pause(again);
    fake.fail('POST', new RegExp(`^/v2/sandboxes/${e2bId}/connect$`), 409);
    await expect(p.open({ ...s, attempt: 5 })).rejects.toThrow(new SandboxOutageError('E2B could not resume the sandbox: 409: injected fault 409'));
  });

  test("commands and file operations keep the sandbox alive (E2B's timeout is a time to live from the resume, not an idle time: a long command had its sandbox paused under it)", async ({ pg }) => {
    const p = new E2BSandboxProvider({ pool: pg.db.pool, apiKey: 'e2b_test', apiUrl: fake.url, sandboxUrl: fake.url, timeoutMs: 60_000 });
    const s = spec();
    const sbx = await p.open(s);
    const e2bId = (await pg.db.pool.query('select external_id from sandboxes where task_id = $1', [s.taskId])).rows[0]?.external_id as string;
    const extensions = () => fake.calls.filter((c) => c.path === `/sandboxes/${e2bId}/timeout`).map((c) => (c.body as { timeout: number }).timeout);
    await sbx.files.write('a.txt', 'a'); // fresh from its create: nothing to ask
    expect(extensions()).toEqual([]);
    await sbx.run('true', { timeoutMs: 600_000 }); // ten minutes of command, then the usual minute
    expect(extensions()).toEqual([660]);
    await sbx.files.read('a.txt');
    expect(extensions()).toEqual([660]); // alive long enough already
  });

  test("an aborted command is killed (in envd a command outlives its stream: it had gone on beside the next attempt's) and is not reported as timed out; one past its time is killed too", async ({ pg }) => {
    const sbx = await provider(pg.db.pool).open(spec());
    const stop = new AbortController();
    const running = sbx.run('echo started > started.txt; sleep 30', { timeoutMs: 60_000, signal: stop.signal });
    await waitFor(async () => (await sbx.files.read('started.txt').catch(() => null)) === 'started\n', { what: 'the command to start' });
    stop.abort();
    expect(await running).toMatchObject({ exitCode: null, timedOut: false });
    await waitFor(() => fake.processes.size === 0, { timeoutMs: 10_000, what: 'the aborted command killed' });
    const slow = await sbx.run('sleep 30', { timeoutMs: 500 });
    expect(slow).toMatchObject({ exitCode: null, timedOut: true });
    await waitFor(() => fake.processes.size === 0, { timeoutMs: 10_000, what: 'the command past its time killed' });
    // What it started goes too (envd signals one pid: a server or a runner's workers had gone on), the grandchildren of a loop that forks on included.
    const gone = (pid: number): boolean => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    };
    const tree = await sbx.run('sleep 300 & echo $! > kid.pid; (while true; do sleep 300 & echo $! >> grandkids.pid; wait; done) & echo $! > loop.pid; wait', { timeoutMs: 1000 });
    expect(tree).toMatchObject({ exitCode: null, timedOut: true });
    const pidsIn = async (...files: string[]) => (await Promise.all(files.map((f) => sbx.files.read(f)))).join('').split('\n').filter(Boolean).map(Number);
    const pids = await pidsIn('kid.pid', 'loop.pid', 'grandkids.pid');
    expect(pids.length).toBeGreaterThanOrEqual(3);
    await waitFor(() => pids.every(gone), { timeoutMs: 10_000, what: `the command's children (${pids.join(', ')}) killed` });
    // What outlived its parent (the shell exited, its child holds the output), a daemon (setsid, a
    // double fork) and three hundred children: each carries the command's mark, and goes.
    const orphans = await sbx.run('sleep 300 & echo $! > orphan.pid; (setsid sleep 300 & echo $! > daemon.pid); (sleep 300 & echo $! > double.pid) & for i in $(seq 1 300); do sleep 300 & echo $! >> many.pid; done; echo started', { timeoutMs: 1500 });
    expect(orphans.timedOut).toBe(true);
    const left = await pidsIn('orphan.pid', 'daemon.pid', 'double.pid', 'many.pid');
    expect(left.length).toBe(303);
    await waitFor(() => left.every(gone), { timeoutMs: 10_000, what: `the orphan, the daemons and 300 children killed (${left.filter((p) => !gone(p)).length} left)` });
    // envd not taking the kill at first (a 503): tried again.
    const refused = sbx.run('sleep 300 & echo $! > retried.pid; wait', { timeoutMs: 1500 });
    await waitFor(async () => (await sbx.files.read('retried.pid').catch(() => '')).trim() !== '', { what: 'the command started' });
    fake.fail('POST', /^\/process\.Process\/Start$/, 503, 1); // the kill's own start
    expect(await refused).toMatchObject({ timedOut: true });
    const retried = await pidsIn('retried.pid');
    await waitFor(() => retried.every(gone), { timeoutMs: 10_000, what: 'the child of a command whose first kill envd refused' });
  });

  test('a pause or kill E2B fails once is tried again (the sandbox had stayed running while its agent waited); one orphan E2B will not kill does not hold up the sweep of the rest', async ({ pg }) => {
    const p = provider(pg.db.pool);
    const s = spec();
    const sbx = await p.open(s);
    const idOf = async (taskId: string) => (await pg.db.pool.query('select external_id from sandboxes where task_id = $1', [taskId])).rows[0]?.external_id as string;
    const e2bId = await idOf(s.taskId);
    fake.fail('POST', new RegExp(`^/sandboxes/${e2bId}/pause$`), 500);
    await p.pause(sbx);
    expect(fake.sandboxes.get(e2bId)?.state).toBe('paused');
    fake.fail('DELETE', new RegExp(`^/sandboxes/${e2bId}$`), 500);
    await p.kill(s.taskId, 'researcher-1');
    expect(fake.sandboxes.has(e2bId)).toBe(false);

    const [stuck, other] = [spec(), spec()];
    await p.open(stuck);
    await p.open(other);
    const [stuckId, otherId] = [await idOf(stuck.taskId), await idOf(other.taskId)];
    fake.fail('DELETE', new RegExp(`^/sandboxes/${stuckId}$`), 500, 3);
    const sweep = await p.sweep(async (ids) => new Map(ids.map((i) => [i, 'finished'] as const))).then(() => null, (err: unknown) => err as Error);
    expect(sweep?.message).toMatch(new RegExp(`^1 orphaned sandboxes killed; 1 could not be \\(tried again at the next sweep\\): ${stuckId}: `));
    expect(fake.sandboxes.has(otherId)).toBe(false);
    expect(await p.sweep(async (ids) => new Map(ids.map((i) => [i, 'finished'] as const)))).toBe(1);
    expect(fake.sandboxes.has(stuckId)).toBe(false);
  }, 30_000);

  test("a sandbox E2B made whose answer was lost (the registry never heard of it) is killed by the sweep once seen so for the grace; the agent's own, a finished task's, an unknown task's and another deployment's are judged apart", async ({ pg }) => {
    const { deployment } = await claimNamespace(pg.db.pool, '');
    const p = new E2BSandboxProvider({ pool: pg.db.pool, apiKey: 'e2b_test', apiUrl: fake.url, sandboxUrl: fake.url, template: 'baton-agent', strayGraceMs: 400 });
    const s = spec();
    const ours = () => [...fake.sandboxes].filter(([, x]) => x.metadata.taskId === s.taskId).map(([id]) => id);
    fake.loseCreateAnswers(1);
    await expect(p.open(s)).rejects.toThrow(SandboxOutageError); // the runner waits the outage out and opens again
    const [lost] = ours();
    expect(fake.sandboxes.get(lost as string)?.metadata).toEqual({ taskId: s.taskId, agentId: s.agentId, deployment });
    await p.open(s);
    const registered = (await pg.db.pool.query('select external_id from sandboxes where task_id = $1', [s.taskId])).rows[0]?.external_id as string;
    expect(ours().sort()).toEqual([lost, registered].sort());
    const finished = spec();
    await p.open(finished);
    await pg.db.pool.query(`update sandboxes set state = 'killed' where task_id = $1`, [finished.taskId]); // recorded killed, yet E2B still has it
    // A task this log does not know, tagged as ours all the same (the registry's own sandboxes of unknown tasks are its to kill; this one is not in it).
    const stranger = spec();
    const conn = { apiKey: 'e2b_test', apiUrl: fake.url, sandboxUrl: fake.url } as ConnectionOpts;
    const strangerId = (await E2B.create('baton-agent', { ...conn, metadata: { taskId: stranger.taskId, agentId: stranger.agentId, deployment } })).sandboxId;
    // Another deployment's sandbox for the same task id, and a copy's of this database (the same deployment id, its own namespace): never listed here.
    const foreignId = (await E2B.create('baton-agent', { ...conn, metadata: { taskId: s.taskId, agentId: s.agentId, deployment: randomUUID() } })).sandboxId;
    const copyId = (await E2B.create('baton-agent', { ...conn, metadata: { taskId: s.taskId, agentId: s.agentId, deployment, namespace: 'copy' } })).sandboxId;
    const liveness = async (ids: string[]) => new Map(ids.filter((i) => i !== stranger.taskId).map((i) => [i, i === finished.taskId ? 'finished' : 'live'] as const));

    // First seen: the finished task's goes at once; the stray only once seen so past the grace (a create may be under way).
    expect(await p.sweep(liveness)).toBe(1);
    expect([...fake.sandboxes.values()].some((x) => x.metadata.taskId === finished.taskId)).toBe(false);
    expect(ours().sort()).toEqual([lost, registered, foreignId, copyId].sort());
    await new Promise((r) => setTimeout(r, 450));
    expect(await p.sweep(liveness)).toBe(1);
    expect(ours().sort()).toEqual([registered, foreignId, copyId].sort());
    expect(fake.sandboxes.has(strangerId)).toBe(true);
    // Listed by this deployment's tag only: another deployment's (or an older version's, untagged) are never listed.
    const lists = fake.calls.filter((c) => c.method === 'GET' && c.path === '/v2/sandboxes');
    expect(lists.length).toBeGreaterThanOrEqual(2);
    await p.kill(s.taskId, s.agentId);
    for (const id of [strangerId, foreignId, copyId]) await E2B.kill(id, conn);
  }, 30_000);

  test('strayVerdict: what the sweep makes of a listed sandbox', () => {
    const s = { sandboxId: 'sbx1', taskId: 't', agentId: 'a' };
    expect(strayVerdict(s, undefined, undefined)).toBe('keep'); // a task this log does not know
    expect(strayVerdict(s, { externalId: 'sbx1', state: 'running' }, 'finished')).toBe('finished');
    expect(strayVerdict(s, { externalId: 'sbx1', state: 'paused' }, 'live')).toBe('keep');
    expect(strayVerdict(s, { externalId: 'sbx2', state: 'running' }, 'live')).toBe('stray');
    expect(strayVerdict(s, { externalId: null, state: 'running' }, 'live')).toBe('stray');
    expect(strayVerdict(s, { externalId: 'sbx1', state: 'killed' }, 'live')).toBe('stray');
    expect(strayVerdict(s, undefined, 'live')).toBe('stray');
  });
});
