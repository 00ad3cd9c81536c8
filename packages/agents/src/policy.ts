import type { TaskState } from '@baton/domain';
import type { ToolDefinition } from './tools.ts';

/**
 * Approval policy: does this tool call need a person before it runs?
 * Default: delegating to a subagent needs approval when the task's requirePlanApproval is true.
 * (Per-team/agent/tool overrides come with the human-in-the-loop issue.)
 */
export function needsApproval(task: Pick<TaskState, 'requirePlanApproval'>, tool: Pick<ToolDefinition, 'runsIn' | 'name'>): boolean {
  return tool.runsIn === 'delegation' && task.requirePlanApproval;
}
