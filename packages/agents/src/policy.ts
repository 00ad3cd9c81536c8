import { digestJson, type Command, type TaskState } from '@baton/domain';
import { z } from 'zod';
import type { ToolDefinition } from './tools.ts';

/**
 * Approval policy: which tool calls need a person before they run, per team, agent and tool.
 *
 * A team lists rules; the most specific matching rule wins (agent and tool > tool > agent).
 * With no matching rule, the tool's own default applies (`send_email`: always); with none,
 * delegating to a subagent needs approval when the task's `requirePlanApproval` is true, and
 * nothing else does. `ask_user` never needs approval.
 */
export const ApprovalRule = z.strictObject({
  /** Agent type (e.g. `researcher`, or the lead's type); absent = any agent. */
  agent: z.string().min(1).optional(),
  /** Tool name; absent = any tool. */
  tool: z.string().min(1).optional(),
  /** always | never | when the task asks for plan approval (`requirePlanApproval`). */
  require: z.enum(['always', 'never', 'when_plan_approval']),
  /** What the deadline does when nobody decides. */
  onTimeout: z.enum(['reject', 'approve']).default('reject'),
});
export type ApprovalRule = z.infer<typeof ApprovalRule>;
export const ApprovalPolicy = z.array(ApprovalRule);

export interface ApprovalDecision {
  required: boolean;
  onTimeout: 'reject' | 'approve';
}

const specificity = (r: ApprovalRule): number => (r.agent && r.tool ? 3 : r.tool ? 2 : r.agent ? 1 : 0);

export function approvalFor(
  rules: readonly ApprovalRule[] | undefined,
  task: Pick<TaskState, 'requirePlanApproval'>,
  agentType: string,
  tool: Pick<ToolDefinition, 'runsIn' | 'name' | 'approval'>,
): ApprovalDecision {
  if (tool.runsIn === 'person') return { required: false, onTimeout: 'reject' };
  let best: ApprovalRule | undefined;
  for (const r of rules ?? []) {
    if ((r.agent && r.agent !== agentType) || (r.tool && r.tool !== tool.name)) continue;
    if (!best || specificity(r) > specificity(best)) best = r;
  }
  const require = best?.require ?? tool.approval ?? (tool.runsIn === 'delegation' ? 'when_plan_approval' : 'never');
  const required = require === 'always' || (require === 'when_plan_approval' && task.requirePlanApproval);
  return { required, onTimeout: best?.onTimeout ?? 'reject' };
}

type AskCommand = Extract<Command, { type: 'RequestApproval' | 'RequestClarification' }>;

/**
 * The command that asks a person about one tool call, for the lead and subagents alike:
 * `ask_user` opens a clarification with its (parsed) questions; any other tool an approval of
 * its exact input, with the input's digest.
 */
export function askPerson(o: {
  tool: Pick<ToolDefinition, 'runsIn'>;
  call: { id: string; name: string; input: Record<string, unknown> };
  /** The call's input as the tool's schema parsed it. */
  parsed: Record<string, unknown>;
  requestId: string;
  agentId: string;
  deadline: string;
  plan: string;
  onTimeout: ApprovalDecision['onTimeout'];
}): AskCommand {
  const { call, requestId, agentId, deadline } = o;
  if (o.tool.runsIn === 'person') {
    const q = o.parsed as { questions: string[]; context: string; options?: string[] };
    return { type: 'RequestClarification', requestId, agentId, toolUseId: call.id, questions: q.questions, context: q.context, ...(q.options ? { options: q.options } : {}), deadline };
  }
  return { type: 'RequestApproval', requestId, agentId, toolUseId: call.id, toolName: call.name, input: call.input, inputDigest: digestJson(call.input), plan: o.plan, deadline, onTimeout: o.onTimeout };
}
