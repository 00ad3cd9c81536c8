import { EMAIL_BODY_MAX, EMAIL_MAX_ATTACHMENTS, EMAIL_SUBJECT_MAX, EmailAddress, MAX_MAIL_RECIPIENTS, pathCharacterProblem, planProblems, ReviewIssue, ReviewVerdict, SubtaskId, type PlanSubtask } from '@baton/domain';
import { z } from 'zod';
import type { ToolSpec } from './model.ts';
import type { AgentDefinition, TeamDefinition } from './teams.ts';

/**
 * One zod schema per tool: it is both the JSON Schema the model sees and the parser of the
 * model's input (and of a person's edited input, for approvals). Strict: a key the tool does not
 * know is an error naming it (a misspelt `dependsOn` must not be dropped silently).
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
  /** Checks beyond the schema that need the team (a plan's agents): each problem with its path. */
  check?: (input: z.infer<I>, team: TeamDefinition) => { path: string; message: string }[];
  /** What a person approving a call of it is shown, besides the lead's own words. */
  describe?: (input: z.infer<I>) => string;
  /**
   * Whether a call needs a person when no rule of the team's approval policy names it (policy.ts);
   * absent: delegation when the task asks for plan approval, nothing else.
   */
  approval?: 'always' | 'never' | 'when_plan_approval';
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

/** A zod issue as problems at paths: a key the schema does not know is named in the path. */
function issueAt(i: z.core.$ZodIssue): { path: string; message: string }[] {
  const at = (...p: PropertyKey[]) => p.map(String).join('.') || '(input)';
  if (i.code === 'unrecognized_keys') return i.keys.map((k) => ({ path: at(...i.path, k), message: `unknown field '${k}'` }));
  return [{ path: at(...i.path), message: i.message }];
}

/**
 * A field of the wrong type is said to be that alone: zod also measures it against the size the
 * right type would have had (a string given for a list of at most 10 questions was told it
 * "must have at most 10 characters" besides).
 */
function typeFirst(issues: readonly z.core.$ZodIssue[]): z.core.$ZodIssue[] {
  const wrongType = new Set(issues.filter((i) => i.code === 'invalid_type').map((i) => i.path.map(String).join('\u0000')));
  return issues.filter((i) => i.code === 'invalid_type' || !wrongType.has(i.path.map(String).join('\u0000')));
}

export type ParseResult<T> = { ok: true; value: T } | { ok: false; error: string; issues: { path: string; message: string }[] };

/**
 * Parse tool input; the error names each offending field. With the team, the tool's own checks
 * run too (a plan's agents and dependencies) — the model, and a person editing an approval,
 * get the same answer.
 */
export function parseToolInput<I extends z.ZodObject>(t: ToolDefinition<I>, input: unknown, team?: TeamDefinition): ParseResult<z.infer<I>> {
  const r = t.input.safeParse(input);
  const issues = r.success ? (team && t.check ? t.check(r.data, team) : []) : typeFirst(r.error.issues).flatMap(issueAt);
  if (r.success && issues.length === 0) return { ok: true, value: r.data };
  return { ok: false, error: `invalid input for ${t.name}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, issues };
}

/** The agent types a lead may delegate to: its `delegatesTo`, and its review agent. */
export function delegationTargets(lead: AgentDefinition): string[] {
  return [...new Set([...(lead.delegatesTo ?? []), ...(lead.reviewAgent ? [lead.reviewAgent] : [])])];
}

export const taskTool = defineTool({
  name: 'Task',
  description: 'Delegate a piece of work to a subagent. The subagent works in its own context and returns a summary and the files it produced.',
  runsIn: 'delegation',
  input: z.strictObject({
    agent: z.string().min(1).describe('The subagent type to delegate to (one of the team\'s agents)'),
    prompt: z.string().min(1).max(20_000).describe('Complete instructions for the subagent; it cannot see your conversation'),
    description: z.string().max(200).optional().describe('A short label for this delegation'),
  }),
  // The model's call and a person's edit alike must name an agent the lead can delegate to.
  check: (input, team) =>
    delegationTargets(team.lead).includes(input.agent) && team.agents[input.agent] ? [] : [{ path: 'agent', message: `unknown agent '${input.agent}'; this team delegates to: ${delegationTargets(team.lead).join(', ')}` }],
});

const PlanSubtaskInput = z.strictObject({
  id: SubtaskId.describe('A short id, e.g. "api-report" (lowercase letters, digits, - and _)'),
  agent: z.string().min(1).describe('The engineer agent type that does it'),
  description: z.string().min(1).max(8000).describe('Complete instructions: the agent sees only this, its dependencies\' summaries and the files'),
  file_locks: z.array(z.string().min(1).max(300)).min(1).max(100).describe('Paths or globs this subtask may create, change or delete (e.g. "api/**"); nothing else'),
  depends_on: z.array(z.string().min(1).max(40)).max(50).default([]).describe('Ids of subtasks that must be done first'),
});

/** A plan's subtasks as the domain holds them (the tool's input is snake_case, as the model writes it). */
export const planSubtasksOf = (input: { subtasks: z.infer<typeof PlanSubtaskInput>[] }): PlanSubtask[] =>
  input.subtasks.map((t) => ({ id: t.id, agent: t.agent, description: t.description, fileLocks: t.file_locks, dependsOn: t.depends_on }));

/** The agents a plan may assign: the lead's delegates, less its reviewer (the review is the plan's last step). */
export const planAgents = (team: TeamDefinition): string[] => (team.lead.delegatesTo ?? []).filter((a) => a !== team.lead.reviewAgent && team.agents[a]);

/** `text` as a markdown code span: fenced by more backticks than it holds in a row, padded where it begins or ends with one. */
export function codeSpan(text: string): string {
  const fence = '`'.repeat(Math.max(0, ...(text.match(/`+/g) ?? []).map((r) => r.length)) + 1);
  const pad = text.startsWith('`') || text.endsWith('`') ? ' ' : '';
  return `${fence}${pad}${text}${pad}${fence}`;
}

export const submitPlanTool = defineTool({
  name: 'submit_plan',
  description:
    'Submit your plan: subtasks for your engineers, each with the files it may change (file_locks) and the subtasks it depends on. Subtasks whose dependencies are done run in parallel; two subtasks that can run at the same time may not lock the same file. Once every subtask is done the reviewer reviews the change. The result, when all of that is finished, is each subtask\'s outcome and the review\'s verdict.',
  runsIn: 'delegation',
  input: z.strictObject({
    summary: z.string().min(1).max(4000).describe('The plan in a few sentences: what changes and why this split'),
    subtasks: z.array(PlanSubtaskInput).min(1).max(20),
  }),
  check: (input, team) => planProblems(planSubtasksOf(input), planAgents(team)),
  describe: (input) =>
    [
      `Plan: ${input.summary}`,
      // Ids and globs in code spans: the plan is shown as markdown, where `src/**, docs/**` read as bold.
      ...input.subtasks.map((t, i) => `${i + 1}. ${codeSpan(t.id)} [${t.agent}] ${t.description}\n   locks: ${t.file_locks.map(codeSpan).join(', ')}${t.depends_on.length ? `; after: ${t.depends_on.map(codeSpan).join(', ')}` : ''}`),
    ].join('\n'),
});

export const submitReviewTool = defineTool({
  name: 'submit_review',
  description: 'Record your review of the change: the verdict, every issue (severity, file, line, message) and a summary. Call it once, after reading every changed file.',
  runsIn: 'runner',
  input: z
    .strictObject({
      verdict: ReviewVerdict.describe('approve, or request_changes (the engineers then address the issues)'),
      issues: z
        .array(ReviewIssue.extend({ file: ReviewIssue.shape.file.default(null), line: ReviewIssue.shape.line.default(null) }).strict())
        .max(100)
        .default([]),
      summary: z.string().min(1).max(8000),
    })
    .refine((r) => r.verdict === 'approve' || r.issues.length > 0, { message: 'request_changes needs at least one issue', path: ['issues'] }),
});

/** What a reviewer that gave its final answer without calling `submit_review` is sent (once, AgentReminded): without a verdict the plan fails. */
export const REVIEW_REMINDER =
  'You ended without calling submit_review, so your review is not recorded, and without a verdict the plan fails. Call submit_review now: approve, or request_changes with every issue (file, line, message).';

/** What a lead with `submit_plan` that answered without ever calling it is sent (once): a plan written as text runs nothing. */
export const PLAN_REMINDER =
  'You answered without calling submit_plan, so nothing will be built: a plan written as text is not run. If the task needs a change, call submit_plan now; if it needs none, give your final answer again and say why.';

export const benchStepTool = defineTool({
  name: 'bench_step',
  description: 'Record one benchmark step (does nothing else).',
  runsIn: 'orchestrator',
  input: z.strictObject({ step: z.number().int().positive() }),
});

/** The gate of the benchmark workload: a no-op whose call needs approval (BENCHMARKS.md: after turn 3). */
export const benchGateTool = defineTool({
  name: 'bench_gate',
  description: 'A benchmark checkpoint that a person approves (does nothing else).',
  runsIn: 'orchestrator',
  input: z.strictObject({ step: z.number().int().positive() }),
});

export const askUserTool = defineTool({
  name: 'ask_user',
  description:
    'Ask the person who gave you this task one or more questions and wait for the answers. Use it when the request is too vague to do well, or a choice is theirs to make. The answers come back as this tool\'s result.',
  runsIn: 'person',
  input: z.strictObject({
    questions: z.array(z.string().min(1).max(1000)).min(1).max(10).describe('The questions, each one self-contained'),
    context: z.string().max(4000).default('').describe('Why you are asking: what is unclear'),
    options: z.array(z.string().min(1).max(200)).max(20).optional().describe('Suggested answers the person may pick from'),
  }),
});

const relPath = z
  .string()
  .min(1)
  .max(1024)
  .superRefine((p, ctx) => {
    const problem = pathCharacterProblem(p);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  })
  .describe('Path relative to the workspace root');

/** A file's path: one ending in '/' names a directory (written, it became a file no tree could hold beside its directory). */
const filePath = relPath
  .refine((p) => !/\/\.?$/.test(p) && p !== '.', { message: "names a directory (it ends in '/' or is '.'): give the file's name" })
  .describe("A file's path relative to the workspace root");

export const writeFileTool = defineTool({
  name: 'write_file',
  description: 'Create or overwrite a file in your workspace.',
  runsIn: 'runner',
  input: z.strictObject({ path: filePath, content: z.string().max(1_000_000) }),
});

export const readFileTool = defineTool({
  name: 'read_file',
  description:
    'Read a text file from your workspace. A long file comes a window at a time (at most 2000 lines or 40000 characters), saying which lines it shows and the offset to read on from; offset and limit choose the window.',
  runsIn: 'runner',
  input: z.strictObject({
    path: filePath,
    offset: z.number().int().min(1).optional().describe('the first line to read, 1-based (default 1)'),
    limit: z.number().int().min(1).max(2000).optional().describe('at most this many lines (default 2000)'),
  }),
});

export const listDirectoryTool = defineTool({
  name: 'list_directory',
  description: 'List the entries of a directory in your workspace.',
  runsIn: 'runner',
  input: z.strictObject({ path: relPath.default('.') }),
});

export const editFileTool = defineTool({
  name: 'edit_file',
  description: 'Replace an exact piece of text in a file of your workspace. old_string must occur exactly once unless replace_all is true.',
  runsIn: 'runner',
  input: z.strictObject({
    path: filePath,
    old_string: z.string().min(1).max(200_000).describe('The exact text to replace'),
    new_string: z.string().max(200_000).describe('The text to put in its place'),
    replace_all: z.boolean().default(false).describe('Replace every occurrence'),
  }),
});

export const globTool = defineTool({
  name: 'glob',
  description: 'Find files in your workspace whose path matches a glob pattern (e.g. "**/*.md", "src/*.ts").',
  runsIn: 'runner',
  input: z.strictObject({ pattern: z.string().min(1).max(500), path: relPath.default('.').describe('Directory to search from') }),
});

export const searchFilesTool = defineTool({
  name: 'search_files',
  description: 'Search the text files of your workspace for a regular expression; returns path:line: text for each match.',
  runsIn: 'runner',
  input: z.strictObject({
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
  input: z.strictObject({ command: z.string().min(1).max(20_000), cwd: relPath.optional(), timeout_seconds: timeoutSeconds }),
});

export const runTestsTool = defineTool({
  name: 'run_tests',
  description: "Run the project's tests (your configured test command unless you give one). Returns the exit code, pass/fail counts when recognisable, and the output (truncated to 4,000 characters).",
  runsIn: 'runner',
  input: z.strictObject({
    command: z.string().min(1).max(20_000).optional().describe('Override the configured test command'),
    path: relPath.optional().describe('Only the tests under this path (appended to the command)'),
    timeout_seconds: timeoutSeconds,
  }),
});

export const webSearchTool = defineTool({
  name: 'web_search',
  description: 'Search the web (offline: a local full-text corpus) and return the best matching pages with a snippet and their source.',
  runsIn: 'runner',
  input: z.strictObject({ query: z.string().min(1).max(500), max_results: z.number().int().min(1).max(20).default(5) }),
});

/**
 * An email, through the task's outbox (docs/email.md): the call records EmailRequested and the
 * notifier delivers it once, from the log — never from the sandbox. A person approves each call
 * unless the team's policy waives it (`{ "tool": "send_email", "require": "never" }`).
 */
export const sendEmailTool = defineTool({
  name: 'send_email',
  description:
    "Send an email: markdown body, optionally with some of the task's files (its artifacts, e.g. report.md) attached. The mail is queued in the task's outbox and delivered once by Baton's notifier; the result says it was queued and under which id (whether it was delivered is recorded on the task later, not told to you). A person may have to approve it first.",
  runsIn: 'runner',
  approval: 'always',
  input: z.strictObject({
    to: z.array(EmailAddress).min(1).max(MAX_MAIL_RECIPIENTS).describe('Recipients (email addresses)'),
    subject: z.string().trim().min(1).max(EMAIL_SUBJECT_MAX),
    body: z.string().min(1).max(EMAIL_BODY_MAX).describe('The message, in markdown'),
    attach: z.array(relPath).max(EMAIL_MAX_ATTACHMENTS).default([]).describe("Paths of the task's artifacts to attach (e.g. report.md)"),
  }),
  describe: (i) => [`Email to: ${i.to.join(', ')}`, `Subject: ${i.subject}`, ...(i.attach.length ? [`Attached: ${i.attach.join(', ')}`] : []), '', i.body].join('\n'),
});
export type SendEmailInput = z.infer<typeof sendEmailTool.input>;

export const allTools: Record<string, ToolDefinition> = Object.fromEntries(
  [taskTool, submitPlanTool, submitReviewTool, benchStepTool, benchGateTool, askUserTool, writeFileTool, readFileTool, listDirectoryTool, editFileTool, globTool, searchFilesTool, runCommandTool, runTestsTool, webSearchTool, sendEmailTool].map((t) => [t.name, t as unknown as ToolDefinition]),
);
