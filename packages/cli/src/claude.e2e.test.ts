import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { builtinTeams, OfflineModel, type ModelMessage } from '@baton/agents';
import type { TaskView } from '@baton/api';
import { deleteNamespace, newNamespace, waitFor } from '@baton/testing';
import { describe, expect, inject, it } from 'vitest';
import { BatonClient } from '@baton/client';
import { launch, prepareDatabase } from './launcher.ts';
import { dropDatabase, freePort, freshDatabase, waitReady } from './procs.ts';

/**
 * The services with ANTHROPIC_API_KEY set, talking through the real SDK to a local fake of the
 * Messages API. The fake plays each agent (recognised by its system prompt) with the offline
 * script, so the whole flow — lead, researcher, writer — runs over the Claude path.
 */
describe('end to end with Claude (a fake Messages API on loopback)', () => {
  it('a research task completes over the Anthropic path: turns are not offline, usage and cost add up', async () => {
    const agents = [builtinTeams.research!.lead, ...Object.values(builtinTeams.research!.agents)];
    const offline = new OfflineModel();
    const calls: { auth: string | undefined; agent: string }[] = [];
    const fake = createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        void (async () => {
          const body = JSON.parse(raw) as { model: string; system: string; messages: ModelMessage[]; max_tokens: number };
          const agent = agents.find((a) => body.system.startsWith(a.prompt)); // a lead's prompt is followed by its delegation targets
          calls.push({ auth: req.headers.authorization, agent: agent?.id ?? '?' });
          const out = await offline.complete({ agentType: agent?.id ?? '?', model: body.model, system: body.system, messages: body.messages, tools: [], maxTokens: body.max_tokens });
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({
            id: `msg_${calls.length}`, type: 'message', role: 'assistant', model: 'claude-sonnet-4-5-20250929', content: out.content, stop_reason: out.stopReason, stop_sequence: null,
            usage: { input_tokens: 1000, output_tokens: 100, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
          }));
        })();
      });
    });
    await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
    const dbUrl = await freshDatabase(inject('databaseUrl'), `baton_t_${inject('runId')}_claude${randomBytes(3).toString('hex')}`);
    await prepareDatabase(dbUrl, () => {});
    const workspaces = await mkdtemp(path.join(tmpdir(), 'baton-claude-'));
    const port = await freePort();
    const namespace = newNamespace();
    const services = launch({
      env: {
        ...process.env, DATABASE_URL: dbUrl, NATS_URL: inject('natsUrl'), BATON_NAMESPACE: namespace, PORT: String(port), WORKSPACE_ROOT: workspaces, LOG_LEVEL: 'warn',
        ANTHROPIC_API_KEY: 'sk-ant-test', ANTHROPIC_BASE_URL: `http://127.0.0.1:${(fake.address() as { port: number }).port}`,
      },
      write: (l) => (/ERROR|FATAL/.test(l) ? console.error(l) : undefined),
      color: false,
    });
    try {
      const api = new BatonClient(`http://127.0.0.1:${port}`);
      await waitReady(api);
      const t = await api.request<TaskView>('POST', '/v1/tasks', { prompt: 'Research the history of write-ahead logging', requirePlanApproval: false });
      await waitFor(async () => (await api.request<TaskView>('GET', `/v1/tasks/${t.id}`)).status === 'completed', { timeoutMs: 60_000, what: 'the task to complete over the Claude path' });
      const task = await api.request<TaskView>('GET', `/v1/tasks/${t.id}`);
      const turns = (await api.allEvents(t.id)).filter((e) => e.type === 'ModelTurnRecorded');
      expect(turns.length).toBe(7); // lead 3, researcher 2, writer 2
      expect(turns.every((e) => e.data.offline === false && e.data.model === 'claude-sonnet-4-5-20250929')).toBe(true);
      expect(task.usage).toMatchObject({ inputTokens: 7000, outputTokens: 700 });
      // Summed per agent too (the lead's 3 turns are the rest).
      expect(task.agents.map((a) => [a.type, a.usage.inputTokens, a.usage.outputTokens])).toEqual([['researcher', 2000, 200], ['report-writer', 2000, 200]]);
      expect(task.usage.costUsd).toBeCloseTo(7 * (1000 * 3 + 100 * 15) / 1e6, 6);
      expect(new Set(calls.map((c) => c.agent))).toEqual(new Set(['research-lead', 'researcher', 'report-writer']));
      expect(calls.every((c) => c.auth === 'Bearer sk-ant-test')).toBe(true);
      expect(task.result?.reportPath).toBe('report.md');
      expect(await api.artifact(t.id, 'report.md')).toMatch(/# Report/);
    } finally {
      await services.stop('SIGTERM');
      await deleteNamespace(inject('natsUrl'), namespace);
      fake.close();
      await rm(workspaces, { recursive: true, force: true });
      await dropDatabase(dbUrl);
    }
  }, 120_000);
});
