import { cutText, isToolUse, type ContentBlock, type StopReason } from '@baton/domain';
import type { ModelMessage, ModelRequest } from './model.ts';

/** What every offline role is built from: the label, tool calls, and reading back the conversation. */
export const OFFLINE_LABEL = '[offline model]';

export type Play = (req: ModelRequest, turn: number) => { content: ContentBlock[]; stopReason: StopReason };

export const toolUseId = (agentType: string, turn: number, i = 0): string => `toolu_offline_${agentType.replace(/[^a-z0-9]/gi, '')}_${turn}_${i}`;
export const text = (t: string): ContentBlock => ({ type: 'text', text: `${OFFLINE_LABEL} ${t}` });

/** Text on one line (whitespace runs collapsed), at most `max` characters. */
export const oneLine = (text: string, max: number): string => cutText(text.replace(/\s+/g, ' ').trim(), max);

export function firstPrompt(messages: ModelMessage[]): string {
  const first = messages[0];
  if (!first || first.role !== 'user') return '';
  return typeof first.content === 'string' ? first.content : first.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
}

/** The agent's tool calls paired with their results, in order (from the rebuilt conversation). */
export function calls(messages: ModelMessage[]): { name: string; input: Record<string, unknown>; result: string | null; isError: boolean }[] {
  const out: { id: string; name: string; input: Record<string, unknown>; result: string | null; isError: boolean }[] = [];
  for (const m of messages) {
    if (m.role === 'assistant') {
      for (const b of m.content) if (isToolUse(b)) out.push({ id: b.id, name: b.name, input: b.input, result: null, isError: false });
    } else if (Array.isArray(m.content)) {
      for (const b of m.content) {
        const c = b.type === 'tool_result' ? out.find((x) => x.id === b.tool_use_id) : undefined;
        if (c && b.type === 'tool_result') {
          c.result = b.content;
          c.isError = b.is_error === true;
        }
      }
    }
  }
  return out;
}

export const has = (req: ModelRequest, tool: string): boolean => req.tools.some((t) => t.name === tool);
export const call = (req: ModelRequest, turn: number, name: string, input: Record<string, unknown>, i = 0): ContentBlock => ({ type: 'tool_use', id: toolUseId(req.agentType, turn, i), name, input });

/** How many rejected plans an offline lead revises before it stops. */
const MAX_REPLANS = 3;
const REJECTED = /^(?:The user rejected the plan:?|Nobody decided on the plan)/;
type Call = ReturnType<typeof calls>[number];

/**
 * The plans (calls of `tool`) a person rejected, with their reasons, and whether the lead stops
 * now: the latest rejection came from the deadline (nobody to re-plan for), or it has revised
 * MAX_REPLANS times already. Otherwise a lead re-plans with the reasons.
 */
export function rejectedPlans(history: readonly Call[], tool: string): { calls: Call[]; reasons: string[]; stop: string | null } {
  const rejected = history.filter((c) => c.name === tool && c.result !== null && REJECTED.test(c.result));
  const reasons = rejected.map((c) => (c.result ?? '').replace(REJECTED, '').trim());
  const last = rejected.at(-1);
  const stop = last && (/^Nobody decided on/.test(last.result ?? '') || rejected.length > MAX_REPLANS) ? (last.result ?? '') : null;
  return { calls: rejected, reasons, stop };
}
