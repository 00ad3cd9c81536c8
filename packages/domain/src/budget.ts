import type { Command } from './commands.ts';
import type { Budget, Spent } from './events.ts';
import { isFinal, type PendingRequest, type TaskState, type UsageTotals } from './state.ts';

/**
 * Budgets, as pure functions of the task's state. A task may carry a limit in US dollars and/or
 * tokens; once what it has spent reaches a limit, the next agent about to call its model opens a
 * request of kind `budget` instead (and a subagent pauses, holding nothing). No agent calls a
 * model while that request is open; a person raises the limit (the run goes on) or stops the run.
 */

/** Every token a model read or wrote: input, output and cache. */
export const tokensOf = (u: UsageTotals): number => u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheWriteTokens;

export const spentOf = (s: TaskState): Spent => ({ usd: s.usage.costUsd, tokens: tokensOf(s.usage) });

/** The measures whose limit the task has reached (empty: none, or no budget). */
export function budgetReached(s: TaskState, limit: Budget | null = s.budget): ('usd' | 'tokens')[] {
  if (!limit) return [];
  const spent = spentOf(s);
  const out: ('usd' | 'tokens')[] = [];
  if (limit.usd !== null && spent.usd >= limit.usd) out.push('usd');
  if (limit.tokens !== null && spent.tokens >= limit.tokens) out.push('tokens');
  return out;
}

export type BudgetRequest = Extract<PendingRequest, { kind: 'budget' }>;
export const openBudgetRequest = (s: TaskState): BudgetRequest | undefined => Object.values(s.pendingRequests).find((r): r is BudgetRequest => r.kind === 'budget');

/** Budget requests are numbered in the task: `budget-1`, `budget-2`, … */
export function nextBudgetRequestId(s: TaskState): string {
  const ids = [...Object.keys(s.pendingRequests), ...Object.keys(s.decidedRequests)];
  return `budget-${ids.filter((id) => id.startsWith('budget-')).length + 1}`;
}

/**
 * What an agent about to call its model must do about the budget: null — go on; otherwise it
 * stops here and records these commands (opening the request if nobody has yet; a subagent
 * also pauses). The lead simply waits: the decision wakes it.
 */
export function budgetHold(s: TaskState, agentId: string, o: { attempt?: number | undefined; now: Date }): Command[] | null {
  if (!s.budget || isFinal(s)) return null;
  const open = openBudgetRequest(s);
  if (!open && budgetReached(s).length === 0) return null;
  const out: Command[] = [];
  if (!open) {
    const deadline = new Date(o.now.getTime() + s.approvalTimeoutSeconds * 1000).toISOString();
    out.push({ type: 'ExceedBudget', requestId: nextBudgetRequestId(s), agentId, deadline });
  }
  const isLead = s.lead?.agentId === agentId;
  if (!isLead && o.attempt !== undefined) out.push({ type: 'PauseSubagent', agentId, attempt: o.attempt, reason: 'budget' });
  return out;
}

/** Dollars with cents, or four decimals under a dollar, or as many as a tiny amount needs to show (not $0.0000 for a limit of $0.000001). */
const usd = (n: number): string => `$${n >= 1 ? n.toFixed(2) : n === 0 || n >= 0.0001 ? n.toFixed(4) : n.toPrecision(2)}`;

/** "$0.5200 of $0.5000, 12000 of 10000 tokens": what was spent against each limit. */
export function describeSpend(spent: Spent, limit: Budget): string {
  const parts: string[] = [];
  if (limit.usd !== null) parts.push(`${usd(spent.usd)} of ${usd(limit.usd)}`);
  if (limit.tokens !== null) parts.push(`${spent.tokens} of ${limit.tokens} tokens`);
  return parts.join(', ');
}

/**
 * The limit a person's raise makes (measures not named keep theirs), or what is wrong with it:
 * a raise must name a measure, and must leave every limit above what was spent.
 */
export function raisedLimit(s: TaskState, raise: { usd?: number | undefined; tokens?: number | undefined } | undefined): { ok: true; limit: Budget } | { ok: false; problem: string } {
  if (!raise || (raise.usd === undefined && raise.tokens === undefined)) return { ok: false, problem: 'budget: name the new limit (budget.usd and/or budget.tokens) to continue, or reject to stop' };
  const current = s.budget ?? { usd: null, tokens: null };
  const limit: Budget = { usd: raise.usd ?? current.usd, tokens: raise.tokens ?? current.tokens };
  const spent = spentOf(s);
  // A limit the raise did not name is the one the task reached: say to raise it, not just that it is low.
  const kept = (named: number | undefined): string => (named === undefined ? ' — the limit it reached; raise it too' : '');
  if (limit.usd !== null && limit.usd <= spent.usd) return { ok: false, problem: `budget.usd: ${usd(limit.usd)} is not above what the task has spent (${usd(spent.usd)})${kept(raise.usd)}` };
  if (limit.tokens !== null && limit.tokens <= spent.tokens) return { ok: false, problem: `budget.tokens: ${limit.tokens} is not above what the task has spent (${spent.tokens} tokens)${kept(raise.tokens)}` };
  return { ok: true, limit };
}
