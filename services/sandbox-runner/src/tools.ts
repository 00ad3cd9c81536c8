import type { ToolResult, ToolUseBlock } from '@baton/domain';
import { allTools, parseToolInput } from '@baton/agents';
import type { Workspace } from './workspace.ts';

const MAX_RESULT_CHARS = 4000;

/**
 * Run one tool call of a subagent. Never throws: an unknown or disallowed tool, invalid input
 * or a failing tool becomes an error result the model sees, and the loop goes on.
 */
export async function runTool(call: ToolUseBlock, allowed: readonly string[], ws: Workspace): Promise<ToolResult> {
  const base = { toolUseId: call.id, toolName: call.name };
  const fail = (content: string): ToolResult => ({ ...base, content, isError: true });
  const def = allTools[call.name];
  if (!def || !allowed.includes(call.name)) return fail(`tool '${call.name}' is not available to this agent; available: ${allowed.join(', ')}`);
  const parsed = parseToolInput(def, call.input);
  if (!parsed.ok) return fail(parsed.error);
  const input = parsed.value as Record<string, string>;
  try {
    switch (call.name) {
      case 'write_file': {
        const effect = await ws.write(input.path as string, input.content as string);
        const p = ws.resolve(input.path as string).slice(ws.root.length + 1);
        return { ...base, content: `${effect} ${p} (${Buffer.byteLength(input.content as string)} bytes)`, isError: false, files: { created: effect === 'created' ? [p] : [], modified: effect === 'modified' ? [p] : [] } };
      }
      case 'read_file':
        return { ...base, content: truncate(await ws.read(input.path as string)), isError: false };
      case 'list_directory':
        return { ...base, content: (await ws.list(input.path ?? '.')).join('\n') || '(empty)', isError: false };
      default:
        return fail(`tool '${call.name}' cannot run in the sandbox runner`);
    }
  } catch (err) {
    return fail(err instanceof Error ? err.message : String(err));
  }
}

function truncate(s: string): string {
  return s.length <= MAX_RESULT_CHARS ? s : `${s.slice(0, MAX_RESULT_CHARS)}\n[output truncated: ${s.length} characters, showing the first ${MAX_RESULT_CHARS}]`;
}
