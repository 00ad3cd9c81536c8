import { reviewAgentId } from './schedule.ts';
import type { PlanState, SubtaskState } from './state.ts';

/** Why an ended plan is not accepted. */
export type PlanConcernCode = 'changes_requested' | 'tests_failing' | 'tests_missing' | 'subtasks_failed' | 'review_missing' | 'task_failed' | 'cancelled';

/**
 * Whether an engineering plan's change can be taken as it stands. A task ends `completed` when
 * its lead has finished, whatever its plan came to — the last review may still ask for changes
 * (no round of changes was left) or a subtask's tests may still fail — so this is the verdict to
 * act on, with each reason named.
 */
export interface PlanAcceptance {
  /**
   * null while the plan runs (a failing test is then the point: engineers work test-first);
   * true once it completed with the last review approving (or no reviewer) and every subtask's
   * last test run green; false otherwise, with `concerns` saying why.
   */
  accepted: boolean | null;
  concerns: { code: PlanConcernCode; message: string }[];
}

const plural = (n: number, one: string, many: string): string => (n === 1 ? one : many);

/** What acceptance is judged on: a plan's state, or its API view. */
export type PlanFacts = Pick<PlanState, 'status' | 'round' | 'maxReviewRounds' | 'reviewAgent' | 'reviews'> & { subtasks: readonly Pick<SubtaskState, 'id' | 'status' | 'tests' | 'filesCreated' | 'filesModified'>[] };

/** The acceptance of a plan, from its state alone (a pure function of the log). */
export function planAcceptance(plan: PlanFacts): PlanAcceptance {
  if (plan.status === 'running' || plan.status === 'reviewing') return { accepted: null, concerns: [] };
  const concerns: PlanAcceptance['concerns'] = [];
  const ids = (status: SubtaskState['status']): string[] => plan.subtasks.filter((t) => t.status === status).map((t) => t.id);
  if (plan.status === 'cancelled') concerns.push({ code: 'cancelled', message: 'the task was cancelled while the plan ran' });
  if (plan.status === 'failed') {
    const failed = ids('failed');
    const skipped = ids('skipped');
    const stopped = ids('cancelled');
    if (failed.length > 0) {
      const parts = [`${failed.join(', ')} failed`, ...(skipped.length > 0 ? [`${skipped.join(', ')} ${plural(skipped.length, 'was', 'were')} skipped`] : [])];
      concerns.push({ code: 'subtasks_failed', message: `${plural(failed.length, 'subtask', 'subtasks')} ${parts.join('; ')}` });
    } else if (stopped.length > 0 || plan.subtasks.some((t) => t.status === 'pending' || t.status === 'running')) {
      concerns.push({ code: 'task_failed', message: `the task failed while the plan ran (${stopped.length > 0 ? `${stopped.join(', ')} stopped` : 'the review stopped'})` });
    } else if (plan.reviewAgent && plan.reviews.length < plan.round + 1) {
      concerns.push({ code: 'review_missing', message: `the review (${reviewAgentId(plan.round)}) ended without a verdict` });
    } else {
      concerns.push({ code: 'task_failed', message: 'the task failed while the plan ran' });
    }
  }
  const review = plan.reviews.at(-1);
  if (plan.status === 'completed' && review?.verdict === 'request_changes') {
    const issues = review.issues.length;
    concerns.push({ code: 'changes_requested', message: `the last review (${review.agentId}) asked for changes${issues > 0 ? ` (${issues} ${plural(issues, 'issue', 'issues')})` : ''} and no round of changes was left (at most ${plan.maxReviewRounds})` });
  }
  const failing = plan.subtasks.filter((t) => (t.tests?.failed ?? 0) > 0).map((t) => t.id);
  // The last reviewer's own run is the suite on everyone's change together (a subtask's may have been its own tests only).
  const reviewRun = review?.tests;
  const failed = [
    ...(failing.length > 0 ? [`tests still fail in ${failing.join(', ')} (${plural(failing.length, 'its', 'their')} last run)`] : []),
    ...(reviewRun && reviewRun.failed > 0 ? [`the reviewer's last test run (${review.agentId}) had ${reviewRun.failed} failing`] : []),
  ];
  if (failed.length > 0) concerns.push({ code: 'tests_failing', message: failed.join('; ') });
  // A change nothing tested is not shown to work: no test run at all, or a last run in which no test was recognised (`run_tests` with a command that runs none).
  if (plan.status === 'completed') {
    const changed = plan.subtasks.filter((t) => t.filesCreated.length + t.filesModified.length > 0);
    const untested = changed.filter((t) => t.tests === null).map((t) => t.id);
    const none = changed.filter((t) => t.tests !== null && t.tests.passed + t.tests.failed === 0).map((t) => t.id);
    const parts = [...(untested.length > 0 ? [`${untested.join(', ')} changed files and ran no tests`] : []), ...(none.length > 0 ? [`no test was recognised in the last run of ${none.join(', ')}`] : [])];
    if (parts.length > 0) concerns.push({ code: 'tests_missing', message: parts.join('; ') });
  }
  return { accepted: concerns.length === 0, concerns };
}
