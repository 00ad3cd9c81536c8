import { describeSpend, eventDataSchemas, isTaskStream } from '@baton/domain';
import { oneLine, type PendingRequestView, type PlanView, type TaskView } from '@baton/api';
import type { ApiEvent, BatonClient } from '@baton/client';

/**
 * The CLI's human-in-the-loop commands: find the request a person means, decide it through the
 * public API, and print requests so that a person can decide without opening anything else.
 */

/** The open request a command refers to: the one named (named but not open: only its id, and the server says why — decided already, how and by whom, or no such request), or the only one of that kind. */
export function pickRequest(task: TaskView, kind: PendingRequestView['kind'], requestId?: string): PendingRequestView | { requestId: string; kind: null } {
  const open = task.pendingRequests.filter((r) => r.kind === kind);
  // A request named but not open: the server says why (decided already — how and by whom — or no such request).
  if (requestId) return task.pendingRequests.find((x) => x.requestId === requestId) ?? { requestId, kind: null };
  if (open.length === 1) return open[0] as PendingRequestView;
  if (open.length === 0) throw new Error(`task ${task.id} has no open ${kind} request (status ${task.status})`);
  throw new Error(`task ${task.id} has ${open.length} open ${kind} requests; name one: ${open.map((r) => r.requestId).join(', ')}`);
}

/** A request, as a person reads it, with the command that decides it (`open` false: one closed since, and no command to paste). */
export function describeRequest(taskId: string, r: PendingRequestView, open = true): string {
  const lines: string[] = [];
  let command: string;
  if (r.kind === 'approval') {
    lines.push(`⏸  approval ${r.requestId} — ${r.agentId} wants to call ${r.toolName}`);
    // A plan of one line follows its label; a longer one is indented under it, as written (blank lines kept blank).
    const plan = (r.plan ?? '').replace(/^(\s*\n)+/, '').trimEnd().split('\n'); // blank lines before and after left out; indentation kept
    if (plan.length === 1 && plan[0]) lines.push(`   plan: ${plan[0]}`);
    else if (plan.length > 1) lines.push('   plan:', ...plan.map((l) => (l.trim() ? `     ${l}` : '')));
    lines.push(`   input: ${JSON.stringify(r.input)}`);
    lines.push(`   deadline: ${r.deadline} (then: ${r.onTimeout})`);
    command = `baton approve ${taskId} ${r.requestId} [--input '<json>']   |   baton reject ${taskId} ${r.requestId} --reason '…'`;
  } else if (r.kind === 'budget') {
    lines.push(`$  budget ${r.requestId} — the task reached its budget (${describeSpend(r.spent, r.limit)}); no agent calls a model until this is decided`);
    lines.push(`   deadline: ${r.deadline} (then: ${r.onTimeout})`);
    // The limits the budget has, each to be raised (one it does not have would be added, not raised).
    const raise = [r.limit.usd !== null ? '--usd <new limit>' : null, r.limit.tokens !== null ? '--tokens <new limit>' : null].filter(Boolean).join(' ');
    command = `baton approve ${taskId} ${r.requestId} ${raise}   |   baton reject ${taskId} ${r.requestId} --reason '…'`;
  } else {
    lines.push(`?  question ${r.requestId} from ${r.agentId}${r.context ? ` — ${r.context}` : ''}`);
    r.questions.forEach((q, i) => lines.push(`   ${i + 1}. ${q}`));
    if (r.options?.length) lines.push(`   options: ${r.options.join(' | ')}`);
    if (r.deadline) lines.push(`   deadline: ${r.deadline}`);
    // One answer per question, in order (or one for all); the request named, so the command works whatever else is open.
    const answers = r.questions.length > 1 ? r.questions.map((_, i) => `'<answer ${i + 1}>'`).join(' ') : "'<answer>'";
    command = `baton answer ${taskId} ${answers} --request ${r.requestId}`;
  }
  lines.push(open ? `   → ${command}` : '   (decided or closed since: no longer open)');
  return lines.join('\n');
}

/** At most this many paths of one kind on an agent's line (`baton diff` / `baton artifacts` have them all). */
const MAX_LISTED_PATHS = 10;
const someOf = (paths: readonly string[]): string => (paths.length <= MAX_LISTED_PATHS ? paths.join(', ') : `${paths.slice(0, MAX_LISTED_PATHS).join(', ')} and ${paths.length - MAX_LISTED_PATHS} more (${paths.length} in all)`);

export function describeTask(t: TaskView): string {
  const lines = [`task ${t.id}  ${t.status}  v${t.version}  team ${t.team}${t.forkedFrom ? `  (fork of ${t.forkedFrom.taskId} at v${t.forkedFrom.atVersion})` : ''}`, `  prompt: ${t.prompt.slice(0, 200)}`];
  const w = t.workspace;
  if (w) lines.push(`  workspace: ${w.source === 'example' ? `example ${w.name}` : `upload${w.name ? ` ${w.name}` : ''}`}, ${w.files} files, ${w.bytes} bytes (${w.digest.slice(0, 12)})`);
  for (const a of t.agents) {
    const files = [a.filesCreated.length ? `created ${someOf(a.filesCreated)}` : '', a.filesModified.length ? `modified ${someOf(a.filesModified)}` : '', a.filesDeleted.length ? `deleted ${someOf(a.filesDeleted)}` : ''].filter(Boolean).join('; ');
    lines.push(`  agent ${a.id} (${a.type}): ${a.status}, ${a.turns} turn${a.turns === 1 ? '' : 's'}${files ? `; ${files}` : ''}`);
    // Why it failed, where the person looks (agent_lost, job_failed, …).
    if (a.error) lines.push(`    error: ${a.error.code}: ${a.error.message}`);
  }
  if (t.budget) lines.push(`  budget: ${describeSpend(t.budget.spent, t.budget.limit)}`);
  if (t.plan) lines.push(...describePlan(t.plan));
  for (const r of t.pendingRequests) lines.push(describeRequest(t.id, r).replace(/^(?=.)/gm, '  ')); // blank lines stay blank
  // The agents' mail (send_email): where each went, and what did not go.
  for (const m of t.emails) {
    const how = m.status === 'sent' ? `sent${m.refused.length > 0 ? `, refused by the server for ${m.refused.join(', ')}` : ''}` : m.status === 'failed' ? `! not sent${m.error ? ` (${m.error.code}: ${m.error.message})` : ''}` : 'queued';
    lines.push(`  mail ${m.emailId.slice(0, 8)} from ${m.agentId} to ${m.to.join(', ')}: "${oneLine(m.subject, 80)}" — ${how}`);
  }
  if (t.result) lines.push(`  result: ${t.result.summary}`);
  if (t.error) lines.push(`  error: ${t.error.code}: ${t.error.message}`);
  if (t.cancellation) lines.push(`  cancelled by ${t.cancellation.requestedBy} at ${t.cancellation.at}: ${t.cancellation.reason}`);
  return lines.join('\n');
}

/**
 * A plan as `baton status` prints it: each subtask with its state and last test run, the review
 * that stands, and — marked `!` — what a completed task may still leave wrong: a change the last
 * review did not approve, tests that still fail.
 */
export function describePlan(p: PlanView): string[] {
  const lines = [`  plan: ${p.status}${p.round > 0 ? ` (after ${p.round} round${p.round > 1 ? 's' : ''} of changes)` : ''}: ${p.summary.slice(0, 200)}`];
  for (const s of p.subtasks) {
    const tests = s.tests ? `, tests ${s.tests.passed} passed, ${s.tests.failed} failed` : '';
    lines.push(`    ${s.id} [${s.agent}] ${s.status}${tests}; locks ${s.fileLocks.join(', ')}${s.dependsOn.length > 0 ? `; after ${s.dependsOn.join(', ')}` : ''}`);
  }
  const review = p.reviews.at(-1);
  if (review) lines.push(`  review (${review.agentId}): ${review.verdict.replace('_', ' ')}${review.issues.length > 0 ? ` (${review.issues.length} issue${review.issues.length > 1 ? 's' : ''})` : ''}: ${review.summary.slice(0, 200)}`);
  // While it runs nothing is judged (a failing test is then the point: test-first).
  if (p.acceptance.accepted === true) lines.push('  accepted');
  if (p.acceptance.accepted === false) lines.push('  ! not accepted:', ...p.acceptance.concerns.map((c) => `  ! ${c.message}`));
  return lines;
}

/**
 * One line per event for `baton watch`: its position in the log and, for the task stream's
 * events, their version (`v16`: what `fork --at` and `--at` take). Requests are printed in full as
 * they open, with the command that decides them — but for one `closed` already (the task as it
 * stood when the watch began: no use pasting it).
 */
export function describeEvent(e: ApiEvent, closed: (requestId: string) => boolean = () => false): string {
  const d = e.data;
  const head = `#${e.position}${isTaskStream(e.streamId) ? ` v${e.version}` : ''} ${e.type}`;
  switch (e.type) {
    case 'ApprovalRequested':
    case 'ClarificationRequested':
    case 'BudgetExceeded':
      return `${head}\n${describeRequest(e.taskId, requestFromEvent(e), !closed(String(d.requestId)))}`;
    case 'ModelTurnRecorded': {
      const content = d.content as { type: string; text?: string; name?: string }[];
      const text = oneLine(content.filter((b) => b.type === 'text').map((b) => b.text).join(' '), 160);
      const tools = content.filter((b) => b.type === 'tool_use').map((b) => b.name);
      return `${head} ${String(d.agentId)} turn ${String(d.turn)}${text ? `: ${text}` : ''}${tools.length ? ` → ${tools.join(', ')}` : ''}`;
    }
    case 'ModelUnavailable':
      return `${head} ${String(d.agentId)}'s model could not answer (asked again later): ${oneLine(String(d.error), 160)}`;
    case 'AgentReminded':
      return `${head} ${String(d.agentId)} is reminded: ${oneLine(String(d.text), 160)}`;
    case 'SubagentDispatched':
      return `${head} ${String(d.agentId)}: ${oneLine(String(d.prompt), 120)}`;
    case 'SubagentStarted':
      // A runner records each attempt twice: its claim on the task stream, then on the agent's own stream (the fence).
      return `${head} ${String(d.agentId)} attempt ${String(d.attempt)} on ${String(d.runnerId)}${isTaskStream(e.streamId) ? '' : ' (its own stream: an older attempt still running is fenced off)'}`;
    case 'SubagentHandedBack':
      return `${head} ${String(d.agentId)} attempt ${String(d.attempt)} handed back by ${String(d.runnerId)} (${String(d.reason)}): the next attempt takes it up`;
    case 'SubagentCompleted':
      return `${head} ${String(d.agentId)}: ${oneLine(String(d.summary), 160)}`;
    case 'TaskCompleted':
      return `${head}: ${oneLine(String(d.summary), 300)}`;
    case 'TaskFailed':
      return `${head}: ${String(d.code)}: ${oneLine(String(d.message), 300)}`;
    default:
      return `${head}${'requestId' in d ? ` ${String(d.requestId)}` : ''}${'agentId' in d ? ` ${String(d.agentId)}` : ''}`;
  }
}

function requestFromEvent(e: ApiEvent): PendingRequestView {
  if (e.type === 'ApprovalRequested') {
    const d = eventDataSchemas.ApprovalRequested.parse(e.data);
    return { kind: 'approval', ...d, openedAt: e.recordedAt };
  }
  if (e.type === 'BudgetExceeded') {
    const d = eventDataSchemas.BudgetExceeded.parse(e.data);
    return { kind: 'budget', ...d, openedAt: e.recordedAt };
  }
  const { deadline, options, ...d } = eventDataSchemas.ClarificationRequested.parse(e.data);
  return { kind: 'clarification', ...d, ...(options ? { options } : {}), ...(deadline ? { deadline } : {}), openedAt: e.recordedAt };
}

export type Decision = { approve: true; input?: string; budget?: { usd?: number; tokens?: number }; requestId?: string } | { approve: false; reason?: string; requestId?: string };

/** Approve or reject an approval, or a budget request (approving one names the new limit: `budget`). */
export async function decide(api: BatonClient, taskId: string, how: Decision): Promise<TaskView> {
  const task = await api.request<TaskView>('GET', `/v1/tasks/${taskId}`);
  const budget = how.approve ? how.budget : undefined;
  const onlyBudget = !how.requestId && !task.pendingRequests.some((x) => x.kind === 'approval') && task.pendingRequests.some((x) => x.kind === 'budget');
  const r = pickRequest(task, budget || onlyBudget ? 'budget' : 'approval', how.requestId);
  if (r.kind === 'budget' && how.approve && !budget) throw new Error(`request ${r.requestId} is a budget request: approve it with the new limit (--usd and/or --tokens), or reject it to stop the run`);
  let input: unknown;
  if (how.approve && how.input !== undefined) {
    try {
      input = JSON.parse(how.input);
    } catch (err) {
      throw new Error(`--input must be JSON: ${(err as Error).message}`, { cause: err });
    }
  }
  const body = how.approve ? { decision: 'approve', ...(input !== undefined ? { input } : {}), ...(budget ? { budget } : {}) } : { decision: 'reject', ...(how.reason ? { reason: how.reason } : {}) };
  return api.request<TaskView>('POST', `/v1/tasks/${taskId}/approvals/${encodeURIComponent(r.requestId)}`, body);
}

export async function answer(api: BatonClient, taskId: string, answers: string[], requestId?: string): Promise<TaskView> {
  const task = await api.request<TaskView>('GET', `/v1/tasks/${taskId}`);
  const r = pickRequest(task, 'clarification', requestId);
  return api.request<TaskView>('POST', `/v1/tasks/${taskId}/answers/${encodeURIComponent(r.requestId)}`, { answers });
}
