import { z } from 'zod';
import type { ToolSpec } from './model.ts';

/**
 * One zod schema per tool: it is both the JSON Schema the model sees and the parser of the
 * model's input (and of a person's edited input, for approvals).
 */
export interface ToolDefinition<I extends z.ZodObject = z.ZodObject> {
  name: string;
  description: string;
  input: I;
  /**
   * Where the tool runs: the orchestrator (lead tools), the runner (workspace tools), a
   * subagent (delegation), or a person (ask_user: the answer is the result).
   */
  runsIn: 'orchestrator' | 'runner' | 'delegation' | 'person';
}

export function defineTool<I extends z.ZodObject>(t: ToolDefinition<I>): ToolDefinition<I> {
  return t;
}

const specs = new WeakMap<ToolDefinition, ToolSpec>();

/** The model-facing spec of a tool (computed once per definition). */
export function toolSpec(t: ToolDefinition): ToolSpec {
  const cached = specs.get(t);
  if (cached) return cached;
  const schema = z.toJSONSchema(t.input, { target: 'draft-07', io: 'input' }) as Record<string, unknown>;
  delete schema.$schema;
  const spec = { name: t.name, description: t.description, input_schema: schema };
  specs.set(t, spec);
  return spec;
}

export type ParseResult<T> = { ok: true; value: T } | { ok: false; error: string; issues: { path: string; message: string }[] };

/** Parse tool input; the error names each offending field. */
export function parseToolInput<I extends z.ZodObject>(t: ToolDefinition<I>, input: unknown): ParseResult<z.infer<I>> {
  const r = t.input.safeParse(input);
  if (r.success) return { ok: true, value: r.data };
  const issues = r.error.issues.map((i) => ({ path: i.path.join('.') || '(input)', message: i.message }));
  return { ok: false, error: `invalid input for ${t.name}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, issues };
}

export const taskTool = defineTool({
  name: 'Task',
  description: 'Delegate a piece of work to a subagent. The subagent works in its own context and returns a summary and the files it produced.',
  runsIn: 'delegation',
  input: z.object({
    agent: z.string().min(1).describe('The subagent type to delegate to (one of the team\'s agents)'),
    prompt: z.string().min(1).max(20_000).describe('Complete instructions for the subagent; it cannot see your conversation'),
    description: z.string().max(200).optional().describe('A short label for this delegation'),
  }),
});

export const benchStepTool = defineTool({
  name: 'bench_step',
  description: 'Record one benchmark step (does nothing else).',
  runsIn: 'orchestrator',
  input: z.object({ step: z.number().int().positive() }),
});

/** The gate of the benchmark workload: a no-op whose call needs approval (BENCHMARKS.md: after turn 3). */
export const benchGateTool = defineTool({
  name: 'bench_gate',
  description: 'A benchmark checkpoint that a person approves (does nothing else).',
  runsIn: 'orchestrator',
  input: z.object({ step: z.number().int().positive() }),
});

export const askUserTool = defineTool({
  name: 'ask_user',
  description:
    'Ask the person who gave you this task one or more questions and wait for the answers. Use it when the request is too vague to do well, or a choice is theirs to make. The answers come back as this tool\'s result.',
  runsIn: 'person',
  input: z.object({
    questions: z.array(z.string().min(1).max(1000)).min(1).max(10).describe('The questions, each one self-contained'),
    context: z.string().max(4000).default('').describe('Why you are asking: what is unclear'),
    options: z.array(z.string().min(1).max(200)).max(20).optional().describe('Suggested answers the person may pick from'),
  }),
});

const relPath = z.string().min(1).max(1024).describe('Path relative to the workspace root');

export const writeFileTool = defineTool({
  name: 'write_file',
  description: 'Create or overwrite a file in your workspace.',
  runsIn: 'runner',
  input: z.object({ path: relPath, content: z.string().max(1_000_000) }),
});

export const readFileTool = defineTool({
  name: 'read_file',
  description: 'Read a text file from your workspace.',
  runsIn: 'runner',
  input: z.object({ path: relPath }),
});

export const listDirectoryTool = defineTool({
  name: 'list_directory',
  description: 'List the entries of a directory in your workspace.',
  runsIn: 'runner',
  input: z.object({ path: relPath.default('.') }),
});

export const allTools: Record<string, ToolDefinition> = Object.fromEntries(
  [taskTool, benchStepTool, benchGateTool, askUserTool, writeFileTool, readFileTool, listDirectoryTool].map((t) => [t.name, t as unknown as ToolDefinition]),
);
