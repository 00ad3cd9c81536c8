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

export const editFileTool = defineTool({
  name: 'edit_file',
  description: 'Replace an exact piece of text in a file of your workspace. old_string must occur exactly once unless replace_all is true.',
  runsIn: 'runner',
  input: z.object({
    path: relPath,
    old_string: z.string().min(1).max(200_000).describe('The exact text to replace'),
    new_string: z.string().max(200_000).describe('The text to put in its place'),
    replace_all: z.boolean().default(false).describe('Replace every occurrence'),
  }),
});

export const globTool = defineTool({
  name: 'glob',
  description: 'Find files in your workspace whose path matches a glob pattern (e.g. "**/*.md", "src/*.ts").',
  runsIn: 'runner',
  input: z.object({ pattern: z.string().min(1).max(500), path: relPath.default('.').describe('Directory to search from') }),
});

export const searchFilesTool = defineTool({
  name: 'search_files',
  description: 'Search the text files of your workspace for a regular expression; returns path:line: text for each match.',
  runsIn: 'runner',
  input: z.object({
    pattern: z.string().min(1).max(500).describe('A JavaScript regular expression'),
    path: relPath.default('.').describe('Directory to search from'),
    glob: z.string().min(1).max(500).optional().describe('Only files whose path matches this glob'),
    ignore_case: z.boolean().default(false),
  }),
});

const timeoutSeconds = z.number().int().min(1).max(600).default(60).describe('Wall-clock limit in seconds (default 60)');

export const runCommandTool = defineTool({
  name: 'run_command',
  description: 'Run a shell command (bash) in your sandbox, with your workspace as the working directory. Returns the exit code and output (truncated to 4,000 characters).',
  runsIn: 'runner',
  input: z.object({ command: z.string().min(1).max(20_000), cwd: relPath.optional(), timeout_seconds: timeoutSeconds }),
});

export const runTestsTool = defineTool({
  name: 'run_tests',
  description: "Run the project's tests (your configured test command unless you give one). Returns the exit code, pass/fail counts when recognisable, and the output (truncated to 4,000 characters).",
  runsIn: 'runner',
  input: z.object({ command: z.string().min(1).max(20_000).optional().describe('Override the configured test command'), timeout_seconds: timeoutSeconds }),
});

export const webSearchTool = defineTool({
  name: 'web_search',
  description: 'Search the web (offline: a local full-text corpus) and return the best matching pages with a snippet and their source.',
  runsIn: 'runner',
  input: z.object({ query: z.string().min(1).max(500), max_results: z.number().int().min(1).max(20).default(5) }),
});

export const allTools: Record<string, ToolDefinition> = Object.fromEntries(
  [taskTool, benchStepTool, benchGateTool, askUserTool, writeFileTool, readFileTool, listDirectoryTool, editFileTool, globTool, searchFilesTool, runCommandTool, runTestsTool, webSearchTool].map((t) => [t.name, t as unknown as ToolDefinition]),
);
