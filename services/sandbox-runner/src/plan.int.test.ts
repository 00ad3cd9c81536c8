import { randomUUID } from 'node:crypto';
import { readdir, readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { builtinTeams, OfflineModel, REVIEW_REMINDER, type ModelClient, type ModelRequest, type ModelResponse } from '@baton/agents';
import { agentStreamId, forkEvents, forkFiles, schedulePlan, type Command, type TaskState } from '@baton/domain';
import { handleCommand, importTask, loadTask, type EventStore } from '@baton/event-store';
import { copyTaskFiles, readArtifact } from '@baton/storage';
import { findBwrap, LocalSandboxProvider } from '@baton/sandbox';
import { silentLogger } from '@baton/runtime';
import { pgTest as test } from '@baton/testing';
import { afterEach, beforeEach, describe, expect } from 'vitest';
import { runSubagentJob, type RunnerDeps } from './subagent.ts';
import { artifactStore } from './wiring.ts';

/**
 * A plan run by the runner on the shipped example project, with the real engineers' configs,
 * the offline model and vitest in bubblewrap: two engineers in parallel, each test-first, the
 * reviewer asking for a round of changes, then approving. The lead's side (the scheduler) is
 * driven here as the orchestrator drives it: schedulePlan after every step.
 */
const EXAMPLE = fileURLToPath(new URL('../../../examples/inventory', import.meta.url));
const engineering = builtinTeams.engineering!;
let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'baton-plan-'));
});
afterEach(async () => rm(root, { recursive: true, force: true }));

async function exampleFiles(dir = EXAMPLE, rel = ''): Promise<{ path: string; mode: number; content: Buffer }[]> {
  const out: { path: string; mode: number; content: Buffer }[] = [];
  for (const e of await readdir(path.join(dir, rel), { withFileTypes: true })) {
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await exampleFiles(dir, p)));
    else if (e.isFile()) out.push({ path: p, mode: 0o644, content: await readFile(path.join(dir, p)) });
  }
  return out;
}

const deps = (store: EventStore): RunnerDeps => ({
  store,
  model: new OfflineModel(),
  teams: { engineering },
  sandboxes: new LocalSandboxProvider({ root, pool: store.pool }),
  artifacts: artifactStore(store.pool),
  inputWorkspace: async () => exampleFiles(),
  runnerId: 'runner-a',
  now: () => new Date(),
  log: silentLogger(),
});

const SUBTASKS = [
  { id: 'backend', agent: 'backend-engineer', description: 'Add a low-stock report to the API', fileLocks: ['api/**'], dependsOn: [] },
  { id: 'frontend', agent: 'frontend-engineer', description: 'Render the low-stock report', fileLocks: ['web/**'], dependsOn: [] },
];

/** An engineering task whose lead submitted a plan (recorded: no approval asked). */
async function planned(store: EventStore): Promise<string> {
  const id = randomUUID();
  const workspace = { digest: 'a'.repeat(64), source: 'example' as const, name: 'inventory', files: 0, bytes: 0 };
  await handleCommand(store, id, { type: 'SubmitTask', prompt: 'add a low-stock report', team: 'engineering', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null, workspace, budget: null });
  await handleCommand(store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'engineering-lead', configVersion: 'v' });
  await handleCommand(store, id, {
    type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', offline: true, durationMs: 0,
    content: [{ type: 'tool_use', id: 'plan', name: 'submit_plan', input: {} }],
    usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 },
  });
  await handleCommand(store, id, { type: 'RecordPlan', agentId: 'lead', toolUseId: 'plan', summary: 'low-stock report', subtasks: SUBTASKS, reviewAgent: 'reviewer', maxReviewRounds: 1 });
  return id;
}

/** The orchestrator's part: dispatch what the plan says is ready. */
async function schedule(store: EventStore, id: string): Promise<string[]> {
  const res = await handleCommand(store, id, (s: TaskState): Command[] | null => {
    const ready = schedulePlan(s);
    return ready.length > 0 ? ready : null;
  });
  return res.events.filter((e) => e.type === 'SubagentDispatched').map((e) => (e.data as { agentId: string }).agentId);
}

/** Run every dispatched agent, scheduling after each, until the plan settles; the agents in the order they ran. */
async function drive(store: EventStore, id: string, d: RunnerDeps = deps(store)): Promise<string[]> {
  const ran: string[] = [];
  for (let guard = 0; guard < 20; guard++) {
    await schedule(store, id);
    const { state } = await loadTask(store, id);
    const next = Object.values(state.agents).filter((a) => a.status === 'dispatched');
    if (next.length === 0) return ran;
    // Dispatched together, they run together (as on two runner slots).
    const outcomes = await Promise.all(next.map((a) => runSubagentJob(d, id, a.id, () => {})));
    expect(outcomes.every((o) => o === 'completed')).toBe(true);
    ran.push(...next.map((a) => a.id));
  }
  throw new Error('the plan did not settle');
}

describe.runIf(findBwrap() !== null)('a plan on the example project (offline engineers, vitest in the sandbox)', () => {
  test('two engineers in parallel, each test-first (fail, then pass); the reviewer asks for doc comments; the owners add them; the review approves', async ({ pg }) => {
    const id = await planned(pg.store);
    expect(await drive(pg.store, id)).toEqual(['backend', 'frontend', 'review-1', 'backend-fix1', 'frontend-fix1', 'review-2']);
    const { state, events } = await loadTask(pg.store, id);
    expect(state.plan?.reviews[1]?.issues ?? []).toEqual([]);
    expect(state.plan).toMatchObject({ status: 'completed', round: 1, reviews: [{ verdict: 'request_changes' }, { verdict: 'approve' }] });
    expect(state.plan?.reviews[0]?.issues).toEqual([
      expect.objectContaining({ severity: 'minor', file: 'api/inventory.ts', message: 'exported function `backendChangeNote` has no doc comment' }),
      expect.objectContaining({ severity: 'minor', file: 'web/format.ts', message: 'exported function `frontendChangeNote` has no doc comment' }),
    ]);
    // TDD, as run_tests recorded it: the new test failed before the change and the suite passed after.
    const runs = events.filter((e) => e.streamId === agentStreamId(id, 'backend') && e.type === 'ToolResultsRecorded').flatMap((e) => (e.type === 'ToolResultsRecorded' ? e.data.results : [])).filter((r) => r.toolName === 'run_tests');
    expect(runs.map((r) => [r.isError, r.tests?.failed !== 0])).toEqual([[true, true], [false, false]]);
    expect(runs[1]?.tests?.passed).toBeGreaterThan(7);
    expect(state.agents.backend).toMatchObject({ status: 'completed', fileLocks: ['api/**'], filesCreated: ['api/inventory.backend.test.ts'], filesModified: ['api/inventory.ts'], tests: { failed: 0 } });
    // The lead's tool use has the outcome; the change is in the artifacts (the fix rounds' versions).
    expect(state.lead?.openToolUses[0]).toMatchObject({ state: 'resolved', result: { isError: false } });
    const inventory = (await readArtifact(pg.store.pool, id, 'api/inventory.ts'))?.content.toString('utf8') ?? '';
    expect(inventory).toMatch(/\/\*\* What subtask 'backend' added.*\*\/\nexport function backendChangeNote\(\): string \{/);
  }, 120_000);

  test('a reviewer that ends without submit_review is reminded once: a verdict then lets the plan finish; one that ignores the reminder fails the plan for want of a verdict', async ({ pg }) => {
    // The engineers are the offline model; the reviewer answers in words only — after the reminder too, or then with a verdict.
    const reviewer = (obeys: boolean): ModelClient => {
      const offline = new OfflineModel();
      const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
      return {
        name: 'test',
        complete: async (req: ModelRequest): Promise<ModelResponse> => {
          if (req.agentType !== 'reviewer') return offline.complete(req);
          const last = req.messages.at(-1);
          if (obeys && last?.role === 'user' && last.content === REVIEW_REMINDER) {
            return { content: [{ type: 'tool_use', id: 'verdict', name: 'submit_review', input: { verdict: 'approve', summary: 'fine' } }], stopReason: 'tool_use', usage, model: 'm', offline: false };
          }
          const done = last?.role === 'user' && Array.isArray(last.content) && last.content.some((b) => b.type === 'tool_result');
          return { content: [{ type: 'text', text: done ? 'Recorded.' : 'Looks good to me.' }], stopReason: 'end_turn', usage, model: 'm', offline: false };
        },
      };
    };
    for (const obeys of [true, false]) {
      const id = await planned(pg.store);
      expect(await drive(pg.store, id, { ...deps(pg.store), model: reviewer(obeys) })).toEqual(['backend', 'frontend', 'review-1']);
      const { state, events } = await loadTask(pg.store, id);
      const reminders = events.filter((e) => e.type === 'AgentReminded');
      expect(reminders.map((e) => [e.streamId, e.data])).toEqual([[agentStreamId(id, 'review-1'), { agentId: 'review-1', text: REVIEW_REMINDER }]]);
      expect(state.agents['review-1']).toMatchObject({ status: 'completed', reminders: 1, turns: obeys ? 3 : 2 });
      if (obeys) {
        expect(state.plan).toMatchObject({ status: 'completed', reviews: [{ verdict: 'approve', summary: 'fine' }] });
      } else {
        expect(state.plan?.status).toBe('failed');
        expect(state.agents['review-1']?.summary).toBe('Looks good to me.');
      }
    }
  }, 180_000);

  test('a crash mid-DAG resumes without re-running a finished subtask; a fork from mid-DAG finishes the same way', async ({ pg }) => {
    const id = await planned(pg.store);
    await schedule(pg.store, id);
    // backend finished; then the runner "crashed" before frontend ran (its job is redelivered later).
    expect(await runSubagentJob(deps(pg.store), id, 'backend', () => {})).toBe('completed');
    const mid = await loadTask(pg.store, id);
    expect(mid.state.plan?.subtasks.map((t) => t.status)).toEqual(['done', 'running']);
    // Fork at this version: the copy continues from here.
    const forkId = randomUUID();
    const copied = forkEvents(mid.events, mid.state.version, forkId, { now: new Date(), requestedBy: 'test' });
    await copyTaskFiles(pg.store.pool, id, forkId, forkFiles(mid.events, copied));
    await importTask(pg.store, forkId, copied);
    for (const task of [id, forkId]) {
      const ran = await drive(pg.store, task);
      expect(ran).not.toContain('backend');
      expect(ran[0]).toBe('frontend');
      const { state } = await loadTask(pg.store, task);
      expect(state.plan?.status).toBe('completed');
      expect(state.plan?.subtasks.find((t) => t.id === 'backend')?.agentIds).toEqual(['backend', 'backend-fix1']);
    }
  }, 180_000);
});
