import type { Command } from './commands.ts';
import { overlappingLocks } from './plan.ts';
import { briefSummary, oneLine } from './text.ts';
import { activeAgents, budgetHeld, isFinal, planIsRunning, type PlanState, type SubtaskState, type TaskState } from './state.ts';

type Dispatch = Extract<Command, { type: 'DispatchSubagent' }>;

/** The agent id of a subtask's work in a round: the subtask's id, then `<id>-fix<n>` for each round of changes. */
export const subtaskAgentId = (subtaskId: string, round: number): string => (round === 0 ? subtaskId : `${subtaskId}-fix${round}`);
/** The reviewer of a round: `review-1` for the first build, `review-2` after the first round of changes, … */
export const reviewAgentId = (round: number): string => `review-${round + 1}`;

/**
 * The scheduler: what the plan dispatches now, a pure function of the task's state. Every
 * pending subtask whose dependencies are done starts at once (in parallel), unless an active
 * agent holds a lock that overlaps its own (then it waits for that agent to end, which releases
 * it); once every subtask is done, the review agent starts. Nothing waits in a timer or a
 * process: the next call — after the next agent finishes — dispatches what has become ready.
 */
export function schedulePlan(s: TaskState): Dispatch[] {
  const plan = s.plan;
  // Nothing starts while a person decides on the budget: the raise runs the scheduler again.
  if (!plan || isFinal(s) || !planIsRunning(s) || budgetHeld(s)) return [];
  const held = activeAgents(s).flatMap((a) => (a.fileLocks ? [a.fileLocks] : []));
  const out: Dispatch[] = [];
  for (const t of plan.subtasks) {
    if (t.status !== 'pending') continue;
    if (!t.dependsOn.every((d) => plan.subtasks.find((x) => x.id === d)?.status === 'done')) continue;
    if (held.some((locks) => overlappingLocks(t.fileLocks, locks))) continue;
    const agentId = subtaskAgentId(t.id, plan.round);
    if (s.agents[agentId]) continue; // dispatched already (its completion is not folded yet)
    held.push(t.fileLocks);
    out.push({
      type: 'DispatchSubagent',
      agentId,
      agentType: t.agent,
      toolUseId: plan.toolUseId,
      prompt: subtaskBrief(plan, t),
      role: 'subtask',
      subtaskId: t.id,
      fileLocks: t.fileLocks,
      round: plan.round,
    });
  }
  const allDone = plan.subtasks.every((t) => t.status === 'done');
  const reviewer = reviewAgentId(plan.round);
  if (allDone && plan.reviewAgent && plan.reviews.length < plan.round + 1 && !s.agents[reviewer]) {
    out.push({ type: 'DispatchSubagent', agentId: reviewer, agentType: plan.reviewAgent, toolUseId: plan.toolUseId, prompt: reviewBrief(plan), role: 'review', round: plan.round, fileLocks: [] }); // a reviewer changes nothing
  }
  return out;
}

const bullet = (lines: readonly string[]): string => lines.map((l) => `- ${l}`).join('\n');
const files = (t: Pick<SubtaskState, 'filesCreated' | 'filesModified' | 'filesDeleted'>): string =>
  [...t.filesCreated.map((f) => `${f} (new)`), ...t.filesModified, ...t.filesDeleted.map((f) => `${f} (deleted)`)].join(', ') || 'no files';
const tests = (t: Pick<SubtaskState, 'tests'>): string => (t.tests ? `tests: ${t.tests.passed} passed, ${t.tests.failed} failed` : 'no test run recorded');

/** What a subtask's agent is told: its part of the plan, its locks, what its dependencies did, and (in a later round) the review's issues. */
export function subtaskBrief(plan: PlanState, t: SubtaskState): string {
  const parts = [
    `You are doing subtask '${t.id}' of this plan: ${plan.summary}`,
    `Your subtask: ${t.description}`,
    `File locks — the only paths you may create, change or delete: ${t.fileLocks.join(', ')}. A write anywhere else is refused, and a command's changes outside them are reverted.`,
  ];
  const deps = plan.subtasks.filter((x) => t.dependsOn.includes(x.id));
  if (deps.length > 0) parts.push(`This builds on work that is done (its files are in your workspace):\n${bullet(deps.map((d) => `${d.id} (${d.agent}): ${briefSummary(d.summary ?? 'no summary')} — changed ${files(d)}`))}`);
  if (t.rework) {
    parts.push(
      `The review (${reviewAgentId(plan.round - 1)}) asked for changes in your area (round ${plan.round} of changes). Address each issue, keep the tests passing, and say what you changed:\n${bullet(t.rework.map((i) => `[${i.severity}] ${i.file ? `${i.file}${i.line ? `:${i.line}` : ''}: ` : ''}${i.message}`))}`,
    );
  }
  return parts.join('\n\n');
}

/** The files a plan's subtasks deleted and none of them created or changed again, sorted (pure). */
export function deletedByPlan(plan: Pick<PlanState, 'subtasks'>): string[] {
  const changed = new Set(plan.subtasks.flatMap((t) => [...t.filesCreated, ...t.filesModified]));
  return [...new Set(plan.subtasks.flatMap((t) => t.filesDeleted))].filter((f) => !changed.has(f)).sort();
}

/** What the reviewer is told: the plan, and every subtask — what it was asked, what it did, the files it changed and its tests. */
export function reviewBrief(plan: PlanState): string {
  const changed = [...new Set(plan.subtasks.flatMap((t) => [...t.filesCreated, ...t.filesModified]))].sort();
  const deleted = deletedByPlan(plan);
  return [
    `Review the change made for this plan: ${plan.summary}`,
    `Subtasks:\n${bullet(plan.subtasks.map((t) => `${t.id} (${t.agent}), asked: ${oneLine(t.description, 500)}\n  did: ${briefSummary(t.summary ?? 'no summary')} — changed ${files(t)}; ${tests(t)}`))}`,
    `Changed files (read every one): ${changed.join(', ') || 'none'}`,
    deleted.length > 0 ? `Deleted files (gone from your workspace): ${deleted.join(', ')}` : '',
    plan.round > 0 ? `This is the review after round ${plan.round} of changes; the previous review said: ${plan.reviews.at(-1)?.summary ?? ''}` : '',
    'Finish by calling submit_review with your verdict (approve or request_changes), the issues (severity, file, line, message) and a summary.',
  ]
    .filter(Boolean)
    .join('\n\n');
}
