// Records the determinism check's corpus: real runs of the four services (offline model), their
// logs written to packages/agents/src/fixtures/runs/<name>.json as the API shows events.
//   node packages/cli/src/record-corpus.ts   (DATABASE_URL and NATS_URL as for the tests)
// `baton verify` and verify.test.ts replay every run of the corpus against the current code.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TaskView } from '@baton/api';
import { deleteNamespace } from '@baton/testing/nats';
import { BatonClient } from '@baton/client';
import { launch, prepareDatabase } from './launcher.ts';
import { dropDatabase, freePort, freshDatabase, waitReady } from './procs.ts';

const OUT = path.resolve(import.meta.dirname, '../../agents/src/fixtures/runs');
const base = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

const dbUrl = await freshDatabase(base, `baton_corpus_${randomBytes(3).toString('hex')}`);
await prepareDatabase(dbUrl, () => {});
const workspaces = await mkdtemp(path.join(tmpdir(), 'baton-corpus-'));
const namespace = `corpus${randomBytes(3).toString('hex')}`;
const port = await freePort();
const services = launch({ env: { ...process.env, DATABASE_URL: dbUrl, NATS_URL: natsUrl, BATON_NAMESPACE: namespace, PORT: String(port), WORKSPACE_ROOT: workspaces, LOG_LEVEL: 'warn', RATE_LIMIT_WRITES_PER_S: '0', OPS_PORT: '0' }, write: () => {}, color: false });
const api = new BatonClient(`http://127.0.0.1:${port}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const task = (id: string) => api.request<TaskView>('GET', `/v1/tasks/${id}`);

/** Run a task to its end, deciding each open request with `decide` (null: leave it). */
async function run(body: object, decide: (t: TaskView, r: TaskView['pendingRequests'][number]) => { path: string; body: object }): Promise<string> {
  const { id } = await api.request<TaskView>('POST', '/v1/tasks', body);
  const deadline = Date.now() + 120_000;
  for (;;) {
    const t = await task(id);
    if (['completed', 'failed', 'cancelled'].includes(t.status)) return id;
    if (Date.now() > deadline) throw new Error(`task ${id} did not end: ${t.status}`);
    const r = t.pendingRequests[0];
    if (r && t.status === 'awaiting_input') {
      const d = decide(t, r);
      await api.request('POST', `/v1/tasks/${id}/${d.path}/${r.requestId}`, d.body);
    } else await sleep(100);
  }
}
const approve = (_t: TaskView, r: TaskView['pendingRequests'][number]) => (r.kind === 'clarification' ? { path: 'answers', body: { answers: r.options?.[2] ?? 'both' } } : r.kind === 'budget' ? { path: 'approvals', body: { decision: 'approve', budget: { tokens: 100_000_000 } } } : { path: 'approvals', body: { decision: 'approve' } });

try {
  await waitReady(api);
  let rejected = 0;
  const runs: Record<string, string> = {
    'research-approved': await run({ prompt: 'Research how event sourcing makes agent runs durable' }, approve),
    'research-compare-questions': await run({ prompt: 'Compare PostgreSQL and SQLite for embedded analytics; ask me which sources to use', requirePlanApproval: false }, approve),
    'research-vague-clarified': await run({ prompt: 'AI stuff', requirePlanApproval: false }, (t, r) => (r.kind === 'clarification' ? { path: 'answers', body: { answers: ['vector databases', 'a CTO', 'a one-page brief'] } } : approve(t, r))),
    'research-rejected-replanned': await run({ prompt: 'Research the history of event sourcing' }, (t, r) => (r.kind === 'approval' && rejected++ === 0 ? { path: 'approvals', body: { decision: 'reject', reason: 'only the last ten years' } } : approve(t, r))),
    'research-budget-raised': await run({ prompt: 'Write a short report on vector databases', requirePlanApproval: false, budget: { tokens: 1 } }, approve),
    'engineering-reviewed': await run({ prompt: 'Add a low-stock report: the API lists products below their reorder level, and the web app shows them', team: 'engineering', workspace: { example: 'inventory' } }, approve),
  };
  for (const [name, id] of Object.entries(runs)) {
    const events = await api.allEvents(id);
    await writeFile(path.join(OUT, `${name}.json`), `${JSON.stringify(events, null, 1)}\n`);
    console.log(`${name}: ${events.length} events, ${(await task(id)).status}`);
  }
} finally {
  await services.stop('SIGTERM');
  await deleteNamespace(natsUrl, namespace);
  await rm(workspaces, { recursive: true, force: true });
  await dropDatabase(dbUrl);
}
