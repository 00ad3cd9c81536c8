import { randomUUID } from 'node:crypto';
import { handleCommand, type EventStore } from '@baton/event-store';
import type { EventMetadata } from '@baton/domain';

/**
 * A research task whose lead has delegated to `<agentType>-1` (no runner has taken it yet): what
 * runner, lease and watchdog tests start from.
 */
export async function dispatchedTask(store: EventStore, agentType = 'researcher', prompt = 'Research the topic', o: { metadata?: EventMetadata } = {}): Promise<string> {
  const id = randomUUID();
  await handleCommand(store, id, { type: 'SubmitTask', prompt: 'topic', team: 'research', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null, workspace: null, budget: null });
  await handleCommand(store, id, { type: 'StartTask', leadAgentId: 'lead', leadAgentType: 'research-lead', configVersion: 'v' });
  await handleCommand(store, id, {
    type: 'RecordModelTurn', agentId: 'lead', turn: 1, model: 'm', stopReason: 'tool_use', offline: true, durationMs: 0,
    content: [{ type: 'tool_use', id: 'tu1', name: 'Task', input: { agent: agentType, prompt } }],
    usage: { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 },
  });
  await handleCommand(store, id, { type: 'DispatchSubagent', agentId: `${agentType}-1`, agentType, toolUseId: 'tu1', prompt }, o.metadata ? { metadata: o.metadata } : {});
  return id;
}
