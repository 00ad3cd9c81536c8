import { recorded, stateOf } from '@baton/testing';
import { describe, expect, it } from 'vitest';
import type { Command, DecidedEvent } from './commands.ts';
import { decide } from './decide.ts';
import { InvalidCommandError, IllegalTransitionError } from './errors.ts';
import { planAcceptance } from './acceptance.ts';
import { planProblems, globsOverlap, reworkFor, type PlanSubtask } from './plan.ts';
import { fold } from './evolve.ts';
import { reviewAgentId, schedulePlan } from './schedule.ts';
import { leadPhase, type TaskState } from './state.ts';

const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 };
const st = (id: string, dependsOn: string[] = [], fileLocks = [`${id}/**`], agent = 'backend-engineer'): PlanSubtask => ({ id, agent, description: `do ${id}`, fileLocks, dependsOn });

/** A task whose lead called submit_plan (tool use `plan-1`) — the plan not yet recorded. */
function leadWithPlanCall(): DecidedEvent[] {
  return [
    { type: 'TaskSubmitted', data: { prompt: 'change it', team: 'engineering', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 't', requestHash: null, forkedFrom: null, workspace: null, budget: null } },
    { type: 'TaskStarted', data: { leadAgentId: 'lead', leadAgentType: 'engineering-lead', configVersion: 'v' } },
    { type: 'ModelTurnRecorded', data: { agentId: 'lead', turn: 1, model: 'm', content: [{ type: 'tool_use', id: 'plan-1', name: 'submit_plan', input: {} }], stopReason: 'tool_use', usage, offline: true, durationMs: 1 } },
  ];
}

/** Drives the decider and the fold like the services do: commands through decide, events folded. */
class Run {
  events = recorded(leadWithPlanCall());
  get state(): TaskState {
    return stateOf(this.events);
  }
  apply(...commands: Command[]): void {
    for (const c of commands) this.events = [...this.events, ...recorded(decide(c, this.state), { from: this.events.length })];
  }
  plan(subtasks: PlanSubtask[], review: { agent: string | null; rounds: number } = { agent: null, rounds: 1 }): this {
    this.apply({ type: 'RecordPlan', agentId: 'lead', toolUseId: 'plan-1', summary: 'the plan', subtasks, reviewAgent: review.agent, maxReviewRounds: review.rounds });
    return this;
  }
  /** Dispatch what the scheduler says; returns the agent ids. */
  tick(): string[] {
    const d = schedulePlan(this.state);
    this.apply(...d);
    return d.map((x) => x.agentId);
  }
  finish(agentId: string, o: { success?: boolean; files?: string[]; deleted?: string[]; failingTests?: number; tests?: { passed: number; failed: number; skipped: number } | null } = {}): void {
    this.apply({ type: 'StartSubagent', agentId, attempt: 1, runnerId: 'r' });
    const tests = o.tests === undefined ? { passed: 2, failed: o.failingTests ?? 0, skipped: 0 } : o.tests;
    this.apply({ type: 'CompleteSubagent', agentId, attempt: 1, summary: `${agentId} done`, filesCreated: [], filesModified: o.files ?? [`${agentId}/x.ts`], ...(o.deleted ? { filesDeleted: o.deleted } : {}), success: o.success ?? true, iterationCapReached: false, ...(tests ? { tests } : {}) });
  }
  acceptance() {
    return planAcceptance(this.state.plan!);
  }
  fail(agentId: string): void {
    this.apply({ type: 'FailSubagent', agentId, code: 'boom', message: 'it broke' });
  }
  review(agentId: string, verdict: 'approve' | 'request_changes', issues: { file: string | null; message: string }[] = [], o: { tests?: { passed: number; failed: number; skipped: number } } = {}): void {
    this.apply({ type: 'StartSubagent', agentId, attempt: 1, runnerId: 'r' });
    if (o.tests) {
      // The reviewer runs the suite on everyone's change before its verdict.
      this.apply({ type: 'RecordModelTurn', agentId, turn: 1, model: 'm', content: [{ type: 'tool_use', id: `${agentId}-t`, name: 'run_tests', input: {} }], stopReason: 'tool_use', usage, offline: true, durationMs: 1, attempt: 1 });
      this.apply({ type: 'RecordToolResults', agentId, attempt: 1, results: [{ toolUseId: `${agentId}-t`, toolName: 'run_tests', content: 'tests', isError: o.tests.failed > 0, tests: o.tests }] });
    }
    const round = this.state.agents[agentId]?.round ?? 0;
    this.apply({ type: 'RecordReview', agentId, round, verdict, issues: issues.map((i) => ({ severity: 'major', line: null, ...i })), summary: verdict });
    this.apply({ type: 'CompleteSubagent', agentId, attempt: 1, summary: verdict, filesCreated: [], filesModified: [], success: true, iterationCapReached: false });
  }
  subtask(id: string) {
    return this.state.plan?.subtasks.find((t) => t.id === id);
  }
  leadResult() {
    const use = this.state.lead?.openToolUses.find((t) => t.toolUseId === 'plan-1');
    return use?.state === 'resolved' ? { ...use.result, outcome: JSON.parse(use.result?.content ?? '{}') } : null;
  }
}

describe('plan validation', () => {
  const agents = ['backend-engineer', 'frontend-engineer'];
  const problems = (subtasks: PlanSubtask[]) => planProblems(subtasks, agents).map((p) => `${p.path}: ${p.message}`);

  it('accepts a valid DAG', () => {
    expect(problems([st('a'), st('b', ['a'], ['a/**']), st('c', [], ['c/**'], 'frontend-engineer')])).toEqual([]);
  });
  it('names an unknown agent', () => {
    expect(problems([st('a', [], ['a/x'], 'designer')])).toEqual([expect.stringMatching(/^subtasks\.0\.agent: unknown agent 'designer'; this team's engineers: backend-engineer, frontend-engineer/)]);
  });
  it('names an unknown dependency and a self-dependency', () => {
    expect(problems([st('a', ['zzz']), st('b', ['b'])])).toEqual([
      expect.stringMatching(/^subtasks\.0\.depends_on\.0: unknown subtask 'zzz'/),
      expect.stringMatching(/^subtasks\.1\.depends_on\.0: subtask 'b' depends on itself/), // once: not as a cycle 'b → b' besides
    ]);
  });
  it('names a cycle with its path', () => {
    expect(problems([st('a', ['c']), st('b', ['a']), st('c', ['b'])])).toEqual([expect.stringMatching(/^subtasks: dependency cycle: a → c → b → a$/)]);
  });
  it('names every separate cycle at once (one correction can mend all), each the shortest way back to its first subtask', () => {
    const plan = [st('a', ['b']), st('b', ['a']), st('x', []), st('p', ['r', 'q']), st('q', ['p']), st('r', ['q']), st('s', ['s']), st('t', ['x', 'a'])];
    expect(problems(plan).filter((p) => p.startsWith('subtasks: '))).toEqual([
      'subtasks: dependency cycle: a → b → a',
      'subtasks: dependency cycle: p → q → p',
    ]);
    expect(problems(plan)).toContain("subtasks.6.depends_on.0: subtask 's' depends on itself");
  });
  it('refuses two subtasks that lock the same file and can run at the same time', () => {
    expect(problems([st('a', [], ['src/app.ts']), st('b', [], ['src/*.ts'])])).toEqual([expect.stringMatching(/^subtasks\.1\.file_locks: 'b' and 'a' can run at the same time and both lock 'src\/\*\.ts' \/ 'src\/app\.ts'/)]);
    // Ordered by a dependency (even a transitive one), the same file is fine.
    expect(problems([st('a', [], ['src/app.ts']), st('m', ['a'], ['m/**']), st('b', ['m'], ['src/app.ts'])])).toEqual([]);
  });
  it('names duplicate and reserved ids, missing and unsafe locks', () => {
    expect(problems([st('a'), st('a', [], ['z/**']), st('review-1', [], ['r/**']), st('x-fix1', [], ['q/**']), st('n', [], []), st('p', [], ['../etc/passwd']), st('w', [], ['**'])])).toEqual(expect.arrayContaining([
      expect.stringMatching(/^subtasks\.1\.id: duplicate subtask id 'a' \(also subtasks\.0\)/),
      expect.stringMatching(/^subtasks\.2\.id: 'review-1' is reserved/),
      expect.stringMatching(/^subtasks\.3\.id: 'x-fix1' is reserved/),
      expect.stringMatching(/^subtasks\.4\.file_locks: a subtask needs at least one file lock/),
      expect.stringMatching(/^subtasks\.5\.file_locks\.0: '\.\.\/etc\/passwd' contains '\.\.'/),
      expect.stringMatching(/^subtasks\.6\.file_locks\.0: '\*\*' locks the whole workspace/),
    ]));
  });
  it('a lock is written one way only: empty segments, ./, a trailing / or \\ are refused with the spelling to use, so two spellings of one file cannot both be locked at once', () => {
    expect(problems([st('a', [], ['api//inventory.ts']), st('b', [], ['./api/x.ts']), st('c', [], ['api/./y.ts']), st('d', [], ['web/']), st('e', [], ['.']), st('f', [], ['src\\z.ts'])])).toEqual([
      "subtasks.0.file_locks.0: 'api//inventory.ts' is not written as a plain relative path: write 'api/inventory.ts'",
      "subtasks.1.file_locks.0: './api/x.ts' is not written as a plain relative path: write 'api/x.ts'",
      "subtasks.2.file_locks.0: 'api/./y.ts' is not written as a plain relative path: write 'api/y.ts'",
      "subtasks.3.file_locks.0: 'web/' ends in '/'; lock a directory's files with 'web/**'",
      "subtasks.4.file_locks.0: '.' locks the whole workspace; lock the files this subtask changes",
      "subtasks.5.file_locks.0: 'src\\z.ts' is not written as a plain relative path: write 'src/z.ts'",
    ]);
    expect(problems([st('a', [], ['api/inventory.ts']), st('b', [], ['api//inventory.ts'])])).toEqual([expect.stringMatching(/^subtasks\.1\.file_locks\.0: 'api\/\/inventory\.ts' is not written as a plain relative path/)]);
  });
  it('extended globs, control characters and names given twice are refused (an extended glob was matched by the tools but not compared between subtasks: two held one file at once)', () => {
    expect(problems([st('a', [], ['+(api)/inventory.ts']), st('b', [], ['api/inventory.ts'])])).toEqual(["subtasks.0.file_locks.0: '+(api)/inventory.ts' uses an extended glob ('+(…)'), which locks do not take; use *, **, ?, [abc] or {a,b}"]);
    expect(problems([st('a', [], ['api/!(x).ts', 'api/@(y).ts'])]).map((p) => p.split(' uses')[0])).toEqual(["subtasks.0.file_locks.0: 'api/!(x).ts'", "subtasks.0.file_locks.1: 'api/@(y).ts'"]);
    expect(problems([st('a', [], ['api/a\nb.ts'])])).toEqual(["subtasks.0.file_locks.0: 'api/a b.ts' contains a control character (a newline, a tab)"]);
    expect(problems([st('a', [], ['api/x.ts', 'api/x.ts']), st('b', ['a', 'a'], ['b/**'])])).toEqual([
      "subtasks.0.file_locks.1: 'api/x.ts' is named twice (also file_locks.0)",
      "subtasks.1.depends_on.1: 'a' is named twice (also depends_on.0)",
    ]);
  });
  it('a lock inside .git is refused, however its case is written: version control state, not the project', () => {
    expect(problems([st('a', [], ['.git/hooks/pre-commit']), st('b', [], ['sub/.GIT/config']), st('c', [], ['.github/workflows/ci.yml']), st('d', [], ['.gitignore'])])).toEqual([
      "subtasks.0.file_locks.0: '.git/hooks/pre-commit' is inside .git (version control's own state, not the project); lock the project's files",
      "subtasks.1.file_locks.0: 'sub/.GIT/config' is inside .git (version control's own state, not the project); lock the project's files",
    ]);
  });
  it('a lock of nothing but wildcards is refused however it is spelled, and says what it would lock', () => {
    const refusal = (glob: string) => problems([st('a', [], [glob])]);
    expect(refusal('**/**')).toEqual(["subtasks.0.file_locks.0: '**/**' locks the whole workspace; lock the files this subtask changes"]);
    expect(refusal('**/*/**')).toEqual(["subtasks.0.file_locks.0: '**/*/**' locks the whole workspace; lock the files this subtask changes"]);
    expect(refusal('*')).toEqual(["subtasks.0.file_locks.0: '*' locks every file at the top of the workspace, whichever subtask changes them; lock the files this subtask changes"]);
    expect(refusal('*/*')).toEqual(["subtasks.0.file_locks.0: '*/*' locks every file 2 directories down, whichever subtask changes them; lock the files this subtask changes"]);
    expect(refusal('*.json')).toEqual([]);
  });
  it('lock overlap: exact for paths, conservative for two globs', () => {
    expect(globsOverlap('api/a.ts', 'api/**')).toBe(true);
    expect(globsOverlap('api/**', 'web/**')).toBe(false);
    expect(globsOverlap('src/*.ts', 'src/*.css')).toBe(false);
    expect(globsOverlap('src/**', 'src/lib/*.ts')).toBe(true);
    expect(globsOverlap('a.ts', 'b.ts')).toBe(false);
  });
  it('decide refuses an invalid plan too (an edited plan cannot slip past the lead)', () => {
    const r = new Run();
    expect(() => r.plan([st('a', ['a'])])).toThrow(InvalidCommandError);
    expect(() => r.plan([st('a', ['a'])])).toThrow(/invalid plan: subtasks\.0\.depends_on\.0: subtask 'a' depends on itself/);
  });
});

describe('scheduling (pure: a function of the task state)', () => {
  it('given a diamond, when it runs, then the top, the two sides in parallel, then the bottom', () => {
    const r = new Run().plan([st('top'), st('left', ['top']), st('right', ['top']), st('bottom', ['left', 'right'])]);
    expect(r.tick()).toEqual(['top']);
    expect(r.tick()).toEqual([]); // nothing else is ready while top runs
    r.finish('top');
    expect(r.tick()).toEqual(['left', 'right']);
    r.finish('left');
    expect(r.tick()).toEqual([]); // bottom waits for right
    r.finish('right');
    expect(r.tick()).toEqual(['bottom']);
    r.finish('bottom');
    expect(r.state.plan?.status).toBe('completed');
    expect(r.leadResult()).toMatchObject({ isError: false, outcome: { status: 'completed', subtasks: [{ id: 'top', status: 'done' }, { id: 'left' }, { id: 'right' }, { id: 'bottom' }] } });
    expect(r.state.lead?.phase).toBe('tools');
    expect(leadPhase(r.state)).toBe('planning'); // the lead's next turn writes the answer
  });

  it('given a chain, then one at a time, each brief naming what it builds on', () => {
    const r = new Run().plan([st('a'), st('b', ['a']), st('c', ['b'])]);
    expect(r.tick()).toEqual(['a']);
    r.finish('a');
    expect(r.tick()).toEqual(['b']);
    expect(r.state.agents.b?.prompt).toMatch(/builds on work that is done[\s\S]*a \(backend-engineer\): a done — changed a\/x\.ts/);
    r.finish('b');
    expect(r.tick()).toEqual(['c']);
  });

  it('given a fan-out, then every independent subtask at once, with its locks held until it ends', () => {
    const r = new Run().plan([st('a'), st('b'), st('c')]);
    expect(r.tick()).toEqual(['a', 'b', 'c']);
    expect(r.state.agents.b?.fileLocks).toEqual(['b/**']);
    expect(leadPhase(r.state)).toBe('delegating');
  });

  it('given a failed dependency, then its dependents are skipped, the rest runs, and the plan fails', () => {
    const r = new Run().plan([st('a'), st('b', ['a']), st('c', ['b']), st('d')]);
    expect(r.tick()).toEqual(['a', 'd']);
    r.fail('a');
    expect(r.subtask('b')?.status).toBe('skipped');
    expect(r.subtask('c')?.status).toBe('skipped');
    expect(r.tick()).toEqual([]);
    expect(r.state.plan?.status).toBe('running'); // d is still at work
    expect(r.acceptance()).toEqual({ accepted: null, concerns: [] });
    r.finish('d');
    expect(r.state.plan?.status).toBe('failed');
    expect(r.acceptance()).toEqual({ accepted: false, concerns: [{ code: 'subtasks_failed', message: 'subtask a failed; b, c were skipped' }] });
    expect(r.leadResult()).toMatchObject({ isError: true, outcome: { subtasks: [{ id: 'a', status: 'failed' }, { id: 'b', status: 'skipped' }, { id: 'c', status: 'skipped' }, { id: 'd', status: 'done' }] } });
  });

  it('given a cancelled run, then nothing more is dispatched, open subtasks and the plan are cancelled (not failed), and so is the lead', () => {
    const r = new Run().plan([st('a'), st('b', ['a'])]);
    r.tick();
    r.apply({ type: 'CancelTask', reason: 'stop', requestedBy: 'u' });
    expect(schedulePlan(r.state)).toEqual([]);
    expect(r.state.plan?.subtasks.map((t) => t.status)).toEqual(['cancelled', 'cancelled']);
    expect(r.state.plan?.status).toBe('cancelled');
    expect(leadPhase(r.state)).toBe('cancelled');
    expect(r.acceptance()).toEqual({ accepted: false, concerns: [{ code: 'cancelled', message: 'the task was cancelled while the plan ran' }] });
  });

  it('decide refuses a dispatch that jumps the DAG or takes a held lock', () => {
    const r = new Run().plan([st('a', [], ['src/**']), st('b', ['a'], ['src/b.ts'])]);
    const early: Command = { type: 'DispatchSubagent', agentId: 'b', agentType: 'backend-engineer', toolUseId: 'plan-1', prompt: 'p', role: 'subtask', subtaskId: 'b', fileLocks: ['src/b.ts'], round: 0 };
    expect(() => decide(early, r.state)).toThrow(/subtask 'b' waits for a/);
    r.tick();
    expect(() => decide({ ...early, agentId: 'b2', subtaskId: 'a' }, r.state)).toThrow(IllegalTransitionError);
  });
});

describe('review and the request-changes round', () => {
  const subtasks = () => [st('api', [], ['api/**']), st('web', [], ['web/**'], 'frontend-engineer')];

  it("an issue goes to one owner of its file: of the subtasks whose locks hold it, the last to change it — two owners made the same fix twice; the routing is recorded with the review", () => {
    // first and second both lock api/** (so second runs after first); ui locks web/**.
    const r = new Run().plan([st('first', [], ['api/**']), st('second', ['first'], ['api/**']), st('ui', [], ['web/**'], 'frontend-engineer')], { agent: 'reviewer', rounds: 1 });
    r.tick();
    r.finish('first', { files: ['api/a.ts'] });
    r.finish('ui', { files: ['web/v.ts'] });
    r.tick();
    r.finish('second', { files: ['api/a.ts', 'api/b.ts'] });
    r.tick();
    r.review('review-1', 'request_changes', [
      { file: 'api/a.ts', message: 'both changed it: the later one fixes it' },
      { file: 'api/c.ts', message: 'nobody changed it: the later holder' },
      { file: 'web/v.ts', message: 'the only holder' },
      { file: null, message: 'about no file: every subtask that changed files' },
    ]);
    const review = r.events.find((e) => e.type === 'ReviewRecorded');
    expect(review?.data).toMatchObject({ rework: [{ subtaskId: 'first', issues: [3] }, { subtaskId: 'second', issues: [0, 1, 3] }, { subtaskId: 'ui', issues: [2, 3] }] });
    expect(r.subtask('first')?.rework?.map((i) => i.message)).toEqual(['about no file: every subtask that changed files']);
    expect(r.subtask('second')?.rework?.map((i) => i.message)).toEqual(['both changed it: the later one fixes it', 'nobody changed it: the later holder', 'about no file: every subtask that changed files']);
    // A file only the earlier one changed goes to it.
    expect(reworkFor([{ id: 'first', dependsOn: [], fileLocks: ['api/**'], filesCreated: ['api/x.ts'], filesModified: [] }, { id: 'second', dependsOn: ['first'], fileLocks: ['api/**'], filesCreated: [], filesModified: ['api/b.ts'] }], [{ file: 'api/x.ts' }])).toEqual([{ subtaskId: 'first', issues: [0] }]);
  });

  it('a review recorded before the routing was (no rework in it) is folded as it was then: each issue to every subtask whose locks hold its file', () => {
    const r = new Run().plan([st('first', [], ['api/**']), st('second', ['first'], ['api/**'])], { agent: 'reviewer', rounds: 1 });
    r.tick();
    r.finish('first', { files: ['api/a.ts'] });
    r.tick();
    r.finish('second', { files: ['api/a.ts'] });
    r.tick();
    r.review('review-1', 'request_changes', [{ file: 'api/a.ts', message: 'm' }]);
    const old = r.events.map((e) => (e.type === 'ReviewRecorded' ? { ...e, data: { ...e.data, rework: undefined } } : e)) as typeof r.events;
    const plan = fold(old).plan;
    expect(plan?.subtasks.map((t) => [t.id, t.status, t.rework?.length ?? 0])).toEqual([['first', 'pending', 1], ['second', 'pending', 1]]);
  });

  it('the reviewer starts once every subtask is done; an approval completes the plan with the verdict', () => {
    const r = new Run().plan(subtasks(), { agent: 'reviewer', rounds: 1 });
    expect(r.tick()).toEqual(['api', 'web']);
    r.finish('api');
    expect(r.tick()).toEqual([]);
    r.finish('web', { files: ['web/view.ts'], deleted: ['web/old.ts'] });
    expect(r.tick()).toEqual([reviewAgentId(0)]);
    expect(r.state.agents['review-1']?.prompt).toMatch(/Changed files \(read every one\): api\/x\.ts, web\/view\.ts\n\nDeleted files \(gone from your workspace\): web\/old\.ts/);
    // Each subtask as it was asked (the reviewer had only what was done to judge by) and what it did.
    expect(r.state.agents['review-1']?.prompt).toMatch(/- web \(frontend-engineer\), asked: do web\n {2}did: web done — changed web\/view\.ts, web\/old\.ts \(deleted\); tests: 2 passed, 0 failed/);
    expect(leadPhase(r.state)).toBe('reviewing');
    expect(r.acceptance().accepted).toBeNull(); // reviewing
    r.review('review-1', 'approve');
    expect(r.state.plan?.status).toBe('completed');
    expect(r.acceptance()).toEqual({ accepted: true, concerns: [] });
    expect(r.leadResult()?.outcome.review).toEqual({ verdict: 'approve', summary: 'approve', issues: [], rounds: 0 });
  });

  it('request_changes sends each issue to the subtask owning its file, re-reviews, and stops after the configured rounds', () => {
    const r = new Run().plan(subtasks(), { agent: 'reviewer', rounds: 1 });
    r.tick();
    r.finish('api', { files: ['api/stock.ts'] });
    r.finish('web', { files: ['web/view.ts'] });
    r.tick();
    r.review('review-1', 'request_changes', [{ file: 'web/view.ts', message: 'no doc comment' }]);
    expect(r.state.plan?.round).toBe(1);
    expect(r.subtask('api')?.status).toBe('done');
    expect(r.subtask('web')).toMatchObject({ status: 'pending', rework: [{ file: 'web/view.ts', message: 'no doc comment' }] });
    expect(r.tick()).toEqual(['web-fix1']);
    // The review named as its reviewer is (review-1 asked for round 1: it used to say "a review of round 1").
    expect(r.state.agents['web-fix1']?.prompt).toMatch(/The review \(review-1\) asked for changes in your area \(round 1 of changes\)[\s\S]*\[major\] web\/view\.ts: no doc comment/);
    r.finish('web-fix1', { files: ['web/view.ts'] });
    expect(r.tick()).toEqual(['review-2']);
    r.review('review-2', 'request_changes', [{ file: null, message: 'still not right' }]);
    // No rounds left: the plan completes with the verdict as it stands.
    expect(r.tick()).toEqual([]);
    expect(r.state.plan?.status).toBe('completed');
    expect(r.leadResult()?.outcome.review).toMatchObject({ verdict: 'request_changes', rounds: 1 });
    // The task may still end completed (its lead has finished); the plan is not accepted, and says why.
    expect(r.acceptance()).toEqual({ accepted: false, concerns: [{ code: 'changes_requested', message: 'the last review (review-2) asked for changes (1 issue) and no round of changes was left (at most 1)' }] });
    expect(r.subtask('web')?.agentIds).toEqual(['web', 'web-fix1']);
  });

  it('a reviewer that ends without a verdict fails the plan; a verdict is validated', () => {
    const r = new Run().plan(subtasks(), { agent: 'reviewer', rounds: 1 });
    r.tick();
    r.finish('api');
    r.finish('web');
    r.tick();
    r.apply({ type: 'StartSubagent', agentId: 'review-1', attempt: 1, runnerId: 'r' });
    expect(() => r.apply({ type: 'RecordReview', agentId: 'review-1', round: 0, verdict: 'request_changes', issues: [], summary: 's' })).toThrow(/names at least one issue/);
    expect(() => r.apply({ type: 'RecordReview', agentId: 'api', round: 0, verdict: 'approve', issues: [], summary: 's' })).toThrow(/not the plan's reviewer/);
    r.apply({ type: 'CompleteSubagent', agentId: 'review-1', attempt: 1, summary: 'hmm', filesCreated: [], filesModified: [], success: true, iterationCapReached: false });
    expect(r.state.plan?.status).toBe('failed');
    expect(r.leadResult()?.isError).toBe(true);
    expect(r.acceptance()).toEqual({ accepted: false, concerns: [{ code: 'review_missing', message: 'the review (review-1) ended without a verdict' }] });
  });

  it("the last reviewer's own test run counts: a suite failing on everyone's change together is not accepted, though each subtask's last run was green and the review approved", () => {
    const reviewed = (failed: number): Run => {
      const r = new Run().plan(subtasks(), { agent: 'reviewer', rounds: 0 });
      r.tick();
      r.finish('api');
      r.finish('web');
      r.tick();
      r.review('review-1', 'approve', [], { tests: { passed: 5, failed, skipped: 0 } });
      return r;
    };
    const red = reviewed(2);
    expect(red.state.plan?.reviews[0]?.tests).toEqual({ passed: 5, failed: 2, skipped: 0 });
    expect(red.acceptance()).toEqual({ accepted: false, concerns: [{ code: 'tests_failing', message: "the reviewer's last test run (review-1) had 2 failing" }] });
    expect(reviewed(0).acceptance()).toEqual({ accepted: true, concerns: [] });
  });

  it('a plan whose subtasks ended with failing tests completes but is not accepted; one approved with green tests is, with no reviewer too', () => {
    const red = new Run().plan(subtasks(), { agent: 'reviewer', rounds: 0 });
    red.tick();
    red.finish('api', { failingTests: 2 });
    red.finish('web', { failingTests: 1 });
    expect(red.acceptance().accepted).toBeNull(); // test-first: red tests while it runs are the point
    red.tick();
    red.review('review-1', 'approve');
    expect(red.state.plan?.status).toBe('completed');
    expect(red.acceptance()).toEqual({ accepted: false, concerns: [{ code: 'tests_failing', message: 'tests still fail in api, web (their last run)' }] });
    const green = new Run().plan(subtasks());
    green.tick();
    green.finish('api');
    green.finish('web');
    expect(green.state.plan?.status).toBe('completed');
    expect(green.acceptance()).toEqual({ accepted: true, concerns: [] });
  });

  it('a change nothing tested is not accepted: a subtask that changed files and ran no tests, or whose last run recognised none (run_tests with a command that runs none)', () => {
    const r = new Run().plan(subtasks());
    r.tick();
    r.finish('api', { tests: null });
    r.finish('web', { tests: { passed: 0, failed: 0, skipped: 0 } });
    expect(r.state.plan?.status).toBe('completed');
    expect(r.acceptance()).toEqual({ accepted: false, concerns: [{ code: 'tests_missing', message: 'api changed files and ran no tests; no test was recognised in the last run of web' }] });
    // A subtask that changed nothing needs no tests.
    const idle = new Run().plan(subtasks());
    idle.tick();
    idle.finish('api', { files: [], tests: null });
    idle.finish('web');
    expect(idle.acceptance()).toEqual({ accepted: true, concerns: [] });
  });
});
