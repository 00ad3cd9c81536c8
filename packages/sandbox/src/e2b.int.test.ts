import { randomUUID } from 'node:crypto';
import { pgTest as test } from '@baton/testing';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { sandboxContract } from './contract.ts';
import { E2BSandboxProvider } from './e2b.ts';
import { FakeE2B } from './fake-e2b.ts';
import { DEFAULT_LIMITS, SandboxFencedError, type SandboxSpec } from './provider.ts';

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
});
