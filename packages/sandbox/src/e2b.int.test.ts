import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { pgTest as test } from '@baton/testing';
import { afterEach, beforeEach, describe, expect } from 'vitest';
import { E2BSandboxProvider } from './e2b.ts';
import { DEFAULT_LIMITS, SandboxFencedError, type SandboxSpec } from './provider.ts';

/** A fake of E2B's control plane on loopback: records each call, keeps sandbox states. */
let server: Server;
let apiUrl: string;
const calls: { method: string; path: string; body: unknown; apiKey: string | undefined }[] = [];
const states = new Map<string, 'running' | 'paused'>();
beforeEach(async () => {
  calls.length = 0;
  states.clear();
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = raw ? JSON.parse(raw) : null;
      const path = (req.url ?? '').split('?')[0] ?? '';
      calls.push({ method: req.method ?? '', path, body, apiKey: req.headers['x-api-key'] as string | undefined });
      const json = (status: number, data: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(data));
      const sandbox = (id: string) => ({ sandboxID: id, templateID: 'baton-agent', clientID: 'c', envdVersion: '0.2.0', envdAccessToken: 'tok' });
      let m: RegExpExecArray | null;
      if (req.method === 'POST' && path === '/v2/sandboxes') {
        const id = `sbx${states.size + 1}`;
        states.set(id, 'running');
        return json(201, sandbox(id));
      }
      if (req.method === 'POST' && (m = /^\/v2\/sandboxes\/([^/]+)\/connect$/.exec(path))) {
        if (!states.has(m[1]!)) return json(404, { code: 404, message: 'not found' });
        states.set(m[1]!, 'running');
        return json(200, sandbox(m[1]!));
      }
      if (req.method === 'POST' && (m = /^\/sandboxes\/([^/]+)\/pause$/.exec(path))) {
        states.set(m[1]!, 'paused');
        return res.writeHead(204).end();
      }
      if (req.method === 'DELETE' && (m = /^\/sandboxes\/([^/]+)$/.exec(path))) {
        states.delete(m[1]!);
        return res.writeHead(204).end();
      }
      json(404, { code: 404, message: `no route ${req.method} ${path}` });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  apiUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterEach(async () => new Promise<void>((r) => server.close(() => r())));

const spec = (over: Partial<SandboxSpec> = {}): SandboxSpec => ({ taskId: randomUUID(), agentId: 'researcher-1', network: false, env: { ALLOWED: 'yes' }, limits: DEFAULT_LIMITS, attempt: 1, ...over });

describe('E2B sandbox provider (against a fake control plane)', () => {
  test('create pauses on timeout, passes only the named env, no internet unless allowed; pause, reconnect from another replica, kill', async ({ pg }) => {
    const a = new E2BSandboxProvider({ pool: pg.db.pool, apiKey: 'e2b_test', apiUrl, template: 'baton-agent' });
    const s = spec();
    const sbx = await a.open(s);
    expect(calls[0]).toMatchObject({
      method: 'POST',
      path: '/v2/sandboxes',
      apiKey: 'e2b_test',
      body: { templateID: 'baton-agent', autoPause: true, envVars: { ALLOWED: 'yes' }, allow_internet_access: false, metadata: { taskId: s.taskId, agentId: 'researcher-1' } },
    });
    await a.pause(sbx);
    expect(states.get('sbx1')).toBe('paused');
    // The answer arrives; another runner replica resumes the same E2B sandbox (no second create).
    const b = new E2BSandboxProvider({ pool: pg.db.pool, apiKey: 'e2b_test', apiUrl });
    await b.open({ ...s, attempt: 2 });
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual(['POST /v2/sandboxes', 'POST /sandboxes/sbx1/pause', 'POST /v2/sandboxes/sbx1/connect']);
    expect(states.get('sbx1')).toBe('running');
    await expect(a.open(s)).rejects.toThrow(SandboxFencedError); // the older attempt is fenced out
    await b.kill(s.taskId, s.agentId);
    expect(states.has('sbx1')).toBe(false);
    expect((await pg.db.pool.query('select state, external_id from sandboxes where task_id = $1', [s.taskId])).rows).toEqual([{ state: 'killed', external_id: 'sbx1' }]);
    await b.kill(s.taskId, s.agentId); // idempotent: no second DELETE
    expect(calls.filter((c) => c.method === 'DELETE')).toHaveLength(1);
  });

  test('a sandbox E2B no longer has is created afresh; sweep kills the sandboxes of dead tasks', async ({ pg }) => {
    const p = new E2BSandboxProvider({ pool: pg.db.pool, apiKey: 'e2b_test', apiUrl });
    const s = spec({ network: true });
    await p.open(s);
    expect(calls[0]?.body).toMatchObject({ allow_internet_access: true });
    states.clear(); // E2B lost it (expired)
    await p.open({ ...s, attempt: 2 });
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual(['POST /v2/sandboxes', 'POST /v2/sandboxes/sbx1/connect', 'POST /v2/sandboxes']);
    const live = spec();
    await p.open(live);
    expect(await p.sweep(async () => new Set([live.taskId]))).toBe(1);
    expect([...states.keys()]).toEqual(['sbx2']);
  });
});
