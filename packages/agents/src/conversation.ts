import type { RecordedEvent } from '@baton/domain';
import type { ModelMessage, UserBlock } from './model.ts';

/**
 * Rebuild an agent's conversation from its recorded events: the opening prompt, then each
 * model turn as an assistant message and each set of tool results (or a reminder) as a user message. Every
 * tool_use is paired with its tool_result, by construction of the log.
 */
export function buildConversation(prompt: string, agentId: string, events: Iterable<RecordedEvent>): ModelMessage[] {
  const messages: ModelMessage[] = [{ role: 'user', content: prompt }];
  for (const e of events) {
    if (e.type === 'ModelTurnRecorded' && e.data.agentId === agentId) {
      const last = messages[messages.length - 1];
      // A turn a server tool paused (pause_turn) was sent back as it was and the model went on: one assistant message.
      if (last?.role === 'assistant') last.content = [...last.content, ...e.data.content];
      else messages.push({ role: 'assistant', content: e.data.content });
    } else if (e.type === 'AgentReminded' && e.data.agentId === agentId) {
      messages.push({ role: 'user', content: e.data.text });
    } else if (e.type === 'ToolResultsRecorded' && e.data.agentId === agentId) {
      const blocks: Extract<UserBlock, { type: 'tool_result' }>[] = e.data.results.map((r) => ({ type: 'tool_result', tool_use_id: r.toolUseId, content: r.content, ...(r.isError ? { is_error: true } : {}) }));
      const last = messages[messages.length - 1];
      // Results recorded in several batches for one turn belong to one user message.
      if (last && last.role === 'user' && Array.isArray(last.content) && last.content.every((b) => b.type === 'tool_result')) {
        (last.content as UserBlock[]).push(...blocks);
      } else {
        messages.push({ role: 'user', content: blocks });
      }
    }
  }
  return messages;
}
