import { spawn } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { deleteNamespace, newNamespace, testClient, waitFor, withDatabase } from '@baton/testing';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { BatonClient, type ApiEvent } from '@baton/client';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;

describe('end to end: the four services as processes, started the way the README does', () => {
  const dbName = `baton_t_${inject('runId')}_e2e${randomBytes(3).toString('hex')}`;
  const databaseUrl = withDatabase(inject('databaseUrl'), dbName);
  const namespace = newNamespace();
  afterAll(async () => {
    await deleteNamespace(inject('natsUrl'), namespace);
    const admin = testClient(inject('databaseUrl'));
    await admin.connect();
    await admin.query(`drop database if exists ${dbName} with (force)`).finally(() => admin.end());
  });

  it('submit over HTTP → plan approval → researcher (searching the offline corpus) and writer in their sandboxes → report artifact → completed, followed live over SSE; Ctrl-C stops everything', async () => {
    // A webhook receiver that checks the Standard Webhooks signature.
    const deliveries: { headers: Record<string, string | string[] | undefined>; body: string }[] = [];
    const receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        deliveries.push({ headers: req.headers, body });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const hookUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
    const workspaces = await mkdtemp(path.join(tmpdir(), 'baton-e2e-'));

    const output: string[] = [];
    const child = spawn(process.execPath, ['packages/cli/src/main.ts', 'up', '--port', '0'], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: databaseUrl, NATS_URL: inject('natsUrl'), BATON_NAMESPACE: namespace, WORKSPACE_ROOT: workspaces, WEBHOOK_SECRET: SECRET, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (d) => output.push(String(d)));
    child.stderr.on('data', (d) => output.push(String(d)));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      const url = await waitFor(() => /gateway listening \{"url":"(http:\/\/[^"]+)"\}/.exec(output.join(''))?.[1], { timeoutMs: 60_000, what: `the gateway to listen; output so far:\n${output.join('')}` });
      await waitFor(() => ['orchestrator started', 'sandbox-runner started', 'notifier started'].every((m) => output.join('').includes(m)), { timeoutMs: 30_000, what: 'all services started' });
      expect(output.join('')).toMatch(/created database/);
      const api = new BatonClient(url);
      const task = await api.request<{ id: string; status: string }>('POST', '/v1/tasks', {
        prompt: 'Research the history of event sourcing and write a short report',
        webhook: { url: hookUrl, events: ['task.completed', 'task.awaiting_input'] },
      });
      expect(task.status).toBe('pending');

      const events: ApiEvent[] = [];
      await api.follow(task.id, (e) => {
        events.push(e);
        if (e.type === 'ApprovalRequested') {
          void api.request('POST', `/v1/tasks/${task.id}/approvals/${String(e.data.requestId)}`, { decision: 'approve' });
        }
      }, { signal: AbortSignal.timeout(60_000) });

      const types = events.map((e) => e.type);
      expect(types[0]).toBe('TaskSubmitted');
      expect(types.at(-1)).toBe('TaskCompleted');
      expect(types.filter((t) => t === 'ApprovalRequested')).toHaveLength(2); // one per delegation
      expect(types.filter((t) => t === 'SubagentCompleted')).toHaveLength(2);
      expect(new Set(events.map((e) => e.position)).size).toBe(events.length);

      const final = await api.request<{ status: string; agents: { id: string; status: string; filesCreated: string[] }[]; result: { summary: string } }>('GET', `/v1/tasks/${task.id}`);
      expect(final.status).toBe('completed');
      expect(final.agents).toEqual([
        expect.objectContaining({ id: 'researcher-1', status: 'completed', filesCreated: ['notes.md'] }),
        expect.objectContaining({ id: 'report-writer-1', status: 'completed', filesCreated: ['report.md'] }),
      ]);
      expect(final.result).toMatchObject({ summary: expect.stringMatching(/offline model/), reportPath: 'report.md' });
      // The report is an artifact (Postgres), listed and downloadable; the sandboxes are gone.
      const listed = await api.request<{ items: { path: string; bytes: number; sha256: string; mediaType: string }[] }>('GET', `/v1/tasks/${task.id}/artifacts`);
      expect(listed.items.map((a) => a.path)).toEqual(['notes.md', 'report.md']);
      const res = await fetch(`${url}/v1/tasks/${task.id}/artifacts/report.md`);
      expect(res.headers.get('content-type')).toBe('text/markdown; charset=utf-8');
      const report = await res.text();
      expect(report).toMatch(/offline model/);
      // The researcher searched the offline corpus (the project's docs) and the writer cited what it found.
      expect(report).toMatch(/## Sources\n\n- \S+\.md/);
      await expect(readFile(path.join(workspaces, task.id, 'report-writer-1', 'report.md'), 'utf8')).rejects.toThrow(/ENOENT/);

      // Webhooks: awaiting_input twice, completed once, each signed.
      await waitFor(() => deliveries.some((d) => JSON.parse(d.body).type === 'task.completed'), { what: 'task.completed webhook' });
      for (const d of deliveries) {
        // Standard Webhooks: v1,base64(HMAC-SHA256(secret bytes, "{id}.{timestamp}.{body}"))
        const key = Buffer.from(SECRET.slice('whsec_'.length), 'base64');
        const expected = `v1,${createHmac('sha256', key).update(`${d.headers['webhook-id']}.${d.headers['webhook-timestamp']}.${d.body}`).digest('base64')}`;
        expect(d.headers['webhook-signature']).toBe(expected);
      }
      expect(deliveries.map((d) => JSON.parse(d.body).type).sort()).toEqual(['task.awaiting_input', 'task.awaiting_input', 'task.completed']);
      // The notifier records an attempt once the receiver has answered: the log may trail the receiver by a moment.
      const okLogged = async (): Promise<number> => (await api.request<{ items: { ok: boolean }[] }>('GET', `/v1/tasks/${task.id}/deliveries`)).items.filter((i) => i.ok).length;
      await waitFor(async () => (await okLogged()) >= 3, { what: 'three successful deliveries logged' });
      expect(await okLogged()).toBe(3);
    } finally {
      child.kill('SIGINT');
      const code = await exited;
      receiver.close();
      await rm(workspaces, { recursive: true, force: true });
      expect(code, output.join('').slice(-3000)).toBe(0);
      expect(output.join('')).toMatch(/all services stopped/);
    }
  });
});
