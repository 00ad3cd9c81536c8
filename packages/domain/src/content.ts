import { z } from 'zod';

/** Content blocks exchanged with a model; the shape follows the Anthropic Messages API. */
// Loose: fields the API adds (citations on text, caller on tool_use, …) are kept, so a
// conversation replayed from the log is sent back exactly as the model produced it.
export const TextBlock = z.looseObject({ type: z.literal('text'), text: z.string() });
export const ToolUseBlock = z.looseObject({
  type: z.literal('tool_use'),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.record(z.string(), z.unknown()),
});
/** Server-side blocks (e.g. web search results) are kept verbatim so a conversation can be replayed. */
export const OtherBlock = z.looseObject({ type: z.string().min(1) });
export const ContentBlock = z.union([TextBlock, ToolUseBlock, OtherBlock]);
export type TextBlock = z.infer<typeof TextBlock>;
export type ToolUseBlock = z.infer<typeof ToolUseBlock>;
export type ContentBlock = z.infer<typeof ContentBlock>;

/** Pass/fail counts of a test run, when the runner's summary was recognised. */
export const TestCounts = z.object({ passed: z.number().int().nonnegative(), failed: z.number().int().nonnegative(), skipped: z.number().int().nonnegative().default(0) });
export type TestCounts = z.infer<typeof TestCounts>;

export const ToolResult = z.object({
  toolUseId: z.string().min(1),
  toolName: z.string().min(1),
  content: z.string(),
  isError: z.boolean().default(false),
  /** Files the call created, modified or deleted in the agent's workspace (so a takeover runner knows them too). */
  files: z.object({ created: z.array(z.string()), modified: z.array(z.string()), deleted: z.array(z.string()).optional() }).optional(),
  /** A test run's counts (run_tests), so the agent's progress and completion can report them. */
  tests: TestCounts.optional(),
});
export type ToolResult = z.infer<typeof ToolResult>;

export const Usage = z.object({
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  cacheReadTokens: z.number().int().nonnegative().default(0),
  cacheWriteTokens: z.number().int().nonnegative().default(0),
  costUsd: z.number().nonnegative().default(0),
});
export type Usage = z.infer<typeof Usage>;

export const StopReason = z.enum(['end_turn', 'tool_use', 'max_tokens', 'stop_sequence', 'pause_turn', 'refusal']);
export type StopReason = z.infer<typeof StopReason>;

export function isToolUse(block: ContentBlock): block is ToolUseBlock {
  return block.type === 'tool_use' && typeof (block as { id?: unknown }).id === 'string';
}

export function textOf(content: readonly ContentBlock[]): string {
  return content
    .filter((b): b is TextBlock => b.type === 'text' && typeof (b as { text?: unknown }).text === 'string')
    .map((b) => b.text)
    .join('\n');
}
