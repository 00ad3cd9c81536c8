import { existsSync, lstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ApprovalRule } from './policy.ts';
import type { AgentDefinition, TeamDefinition } from './teams.ts';
import { allTools } from './tools.ts';

/** The teams shipped with Baton (`config/teams` at the repository root). */
export const DEFAULT_TEAMS_DIR = fileURLToPath(new URL('../../../config/teams', import.meta.url));

const Id = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'lowercase letters, digits, - and _ (at most 63)');
const Glob = z.string().min(1).max(300);

const Limits = z.strictObject({
  memoryMb: z.number().int().min(64).max(65_536).optional(),
  cpuSeconds: z.number().int().min(1).max(3600).optional(),
  processes: z.number().int().min(8).max(4096).optional(),
  fileSizeMb: z.number().int().min(1).max(10_240).optional(),
  openFiles: z.number().int().min(16).max(65_536).optional(),
});

/** One agent's JSON file (seed schema, snake_case). */
export const AgentFile = z.strictObject({
  id: Id,
  name: z.string().min(1).max(200),
  model: z.string().min(1).max(200),
  // In the team's directory: a path out of it (`../../etc/passwd`) is refused — the prompt is sent to the model with every call.
  prompt_file: z.string().min(1).max(300).refine((f) => !path.isAbsolute(f) && !f.split(/[\\/]/).includes('..'), 'must be a file in the team\'s directory (no absolute path, no ..)'),
  // An unknown tool is named with the file's other problems, not only once they are mended.
  tools: z
    .array(
      z
        .string()
        .min(1)
        .superRefine((t, ctx) => {
          if (!(t in allTools)) ctx.addIssue({ code: 'custom', message: `unknown tool '${t}' (known: ${Object.keys(allTools).join(', ')})` });
        }),
    )
    .max(50),
  file_scope: z.strictObject({ allowed: z.array(Glob).default([]), blocked: z.array(Glob).default([]) }).optional(),
  test_command: z.string().min(1).max(2000).optional(),
  max_turns: z.number().int().min(1).max(500).default(10),
  max_tokens: z.number().int().min(16).max(128_000).default(4096),
  delegates_to: z.array(Id).optional(),
  review_agent: Id.optional(),
  /** Lead only: how many rounds of changes its review agent may ask for (default 1). */
  review_rounds: z.number().int().min(0).max(5).optional(),
  sandbox: z
    .strictObject({
      network: z.boolean().default(false),
      env: z.array(z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'an environment variable name')).default([]),
      limits: Limits.default({}),
    })
    .optional(),
});

/** A team's `team.json`. */
export const TeamFile = z.strictObject({
  id: Id,
  description: z.string().max(2000).default(''),
  lead: Id,
  agents: z.array(Id).max(50),
  approvals: z.array(ApprovalRule).default([]),
});

/** A bad team config: every problem, each naming its file and field. */
export class TeamConfigError extends Error {
  readonly problems: string[];
  constructor(dir: string, problems: string[]) {
    super(`invalid team config in ${dir}:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = new.target.name;
    this.problems = problems;
  }
}

const issues = (file: string, err: z.ZodError): string[] => err.issues.map((i) => `${file}: ${i.path.join('.') || '(file)'}: ${i.message}`);

/** The most a prompt file may hold: it is sent with every one of its agent's model calls. */
export const MAX_PROMPT_BYTES = 256 * 1024;

/** Why a file that is there could not be read (permissions, say), in node's words. (What is missing, a link to nothing, a directory or a pipe is named before reading.) */
const unreadable = (err: unknown): string => `cannot be read (${(err as Error).message})`;

/**
 * A file's text, or null with the problem named (a leading byte order mark dropped: editors add
 * one, JSON refuses it). Only a regular file is read: a pipe would hang the service's start for good.
 */
function readText(file: string, shown: string, problems: string[]): string | null {
  try {
    const st = statSync(file, { throwIfNoEntry: false });
    if (!st) {
      problems.push(`${shown}: ${lstatSync(file, { throwIfNoEntry: false })?.isSymbolicLink() ? 'a symbolic link to nothing' : 'missing'}`);
      return null;
    }
    if (!st.isFile()) {
      problems.push(`${shown}: ${st.isDirectory() ? 'is a directory, not a file' : 'is not a regular file (a pipe, socket or device)'}`);
      return null;
    }
    return readFileSync(file, 'utf8').replace(/^\ufeff/, '');
  } catch (err) {
    problems.push(`${shown}: ${unreadable(err)}`);
    return null;
  }
}

function readJson(file: string, shown: string, problems: string[]): unknown {
  const text = readText(file, shown, problems);
  if (text === null) return undefined;
  try {
    return JSON.parse(text);
  } catch (err) {
    problems.push(`${shown}: not valid JSON (${(err as Error).message.replace(/\s*\n\s*/g, ' ')})`);
    return undefined;
  }
}

function loadAgent(dir: string, id: string, rel: (f: string) => string, problems: string[]): AgentDefinition | null {
  const file = path.join(dir, `${id}.json`);
  const raw = readJson(file, rel(file), problems);
  if (raw === undefined) return null;
  const parsed = AgentFile.safeParse(raw);
  if (!parsed.success) {
    problems.push(...issues(rel(file), parsed.error));
    // A prompt file that is not there is named now too, not once the rest is mended.
    const promptFile = (raw as { prompt_file?: unknown } | null)?.prompt_file;
    if (typeof promptFile === 'string' && promptFile && !existsSync(path.resolve(dir, promptFile))) problems.push(`${rel(file)}: prompt_file: '${promptFile}' does not exist`);
    return null;
  }
  const a = parsed.data;
  const before = problems.length;
  if (a.id !== id) problems.push(`${rel(file)}: id: '${a.id}' does not match the file name ('${id}')`);
  const promptPath = path.resolve(dir, a.prompt_file);
  let prompt = '';
  if (!existsSync(promptPath)) problems.push(`${rel(file)}: prompt_file: '${a.prompt_file}' ${lstatSync(promptPath, { throwIfNoEntry: false })?.isSymbolicLink() ? 'is a symbolic link to nothing' : 'does not exist'}`);
  else {
    const size = statSync(promptPath, { throwIfNoEntry: false })?.size ?? 0;
    if (size > MAX_PROMPT_BYTES) problems.push(`${rel(file)}: prompt_file: '${a.prompt_file}' is ${size} bytes; at most ${MAX_PROMPT_BYTES} (it is sent with every model call of the agent)`);
    else {
      prompt = (readText(promptPath, `${rel(file)}: prompt_file: '${a.prompt_file}'`, problems) ?? '').trim();
      // What was read counts, not what stat said (a /proc file says 0 bytes).
      const read = Buffer.byteLength(prompt);
      if (read > MAX_PROMPT_BYTES) problems.push(`${rel(file)}: prompt_file: '${a.prompt_file}' is ${read} bytes; at most ${MAX_PROMPT_BYTES} (it is sent with every model call of the agent)`);
      else if (!prompt && problems.length === before) problems.push(`${rel(file)}: prompt_file: '${a.prompt_file}' is empty`);
    }
  }
  if (problems.length > before) return null;
  return {
    id: a.id,
    name: a.name,
    model: a.model,
    prompt,
    tools: a.tools,
    maxTurns: a.max_turns,
    maxTokens: a.max_tokens,
    ...(a.delegates_to ? { delegatesTo: a.delegates_to } : {}),
    ...(a.review_agent ? { reviewAgent: a.review_agent } : {}),
    ...(a.review_rounds !== undefined ? { reviewRounds: a.review_rounds } : {}),
    ...(a.test_command ? { testCommand: a.test_command } : {}),
    ...(a.file_scope ? { fileScope: a.file_scope } : {}),
    ...(a.sandbox ? { sandbox: { network: a.sandbox.network, env: a.sandbox.env, limits: stripUndefined(a.sandbox.limits) } } : {}),
  };
}

const stripUndefined = <T extends object>(o: T): Partial<T> => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

/**
 * Load every team under a directory (`<team>/team.json`, `<team>/<agent>.json` + prompt files).
 * Throws TeamConfigError listing every problem found (paths relative to the directory), so one
 * start-up shows them all.
 */
export function loadTeams(dir: string = DEFAULT_TEAMS_DIR): Record<string, TeamDefinition> {
  const root = path.resolve(dir);
  const rel = (f: string): string => path.relative(root, f);
  const problems: string[] = [];
  if (!existsSync(root)) throw new TeamConfigError(root, [`${root}: no such directory`]);
  if (!statSync(root).isDirectory()) throw new TeamConfigError(root, [`${root}: not a directory`]);
  const teams: Record<string, TeamDefinition> = {};
  // A directory this process may not list is a problem named, not a crash (a service would have died with a stack trace, not exit 78).
  const list = (d: string, shown: string): string[] | null => {
    try {
      return readdirSync(d).sort();
    } catch (err) {
      problems.push(`${shown}: ${unreadable(err)}`);
      return null;
    }
  };
  const names = list(root, root);
  if (names === null) throw new TeamConfigError(root, problems);
  for (const name of names) {
    // A hidden directory (`.git`, when the teams are kept in git) is not a team.
    if (name.startsWith('.')) continue;
    const teamDir = path.join(root, name);
    let isDir: boolean;
    try {
      isDir = statSync(teamDir).isDirectory();
    } catch (err) {
      // A link to nothing, a directory this process may not read: said, not a crash (a restart loop).
      problems.push(`${name}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'a symbolic link to nothing' : unreadable(err)}`);
      continue;
    }
    if (!isDir) continue;
    const entries = list(teamDir, name);
    if (entries === null) continue;
    const file = path.join(teamDir, 'team.json');
    if (!existsSync(file)) {
      problems.push(`${rel(file)}: missing (every directory here is a team; move others out, or start their name with '.')`);
      continue;
    }
    const raw = readJson(file, rel(file), problems);
    if (raw === undefined) {
      // Unreadable: its agents are not known by name — every other JSON file here is checked as one, so one start-up shows every problem.
      for (const f of entries.filter((f) => f.endsWith('.json') && f !== 'team.json')) loadAgent(teamDir, f.slice(0, -'.json'.length), rel, problems);
      continue;
    }
    const parsed = TeamFile.safeParse(raw);
    if (!parsed.success) {
      problems.push(...issues(rel(file), parsed.error));
      // Its agents' files are checked all the same, where team.json names them, so one start-up shows every problem.
      const named = raw as { lead?: unknown; agents?: unknown } | null;
      const ids = [named?.lead, ...(Array.isArray(named?.agents) ? named.agents : [])].filter((x): x is string => typeof x === 'string' && Id.safeParse(x).success);
      for (const id of new Set(ids)) loadAgent(teamDir, id, rel, problems);
      continue;
    }
    const t = parsed.data;
    if (t.id !== name) problems.push(`${rel(file)}: id: '${t.id}' does not match the directory name ('${name}')`);
    // An agent file team.json does not name was never loaded (its mistakes unseen, the agent not in the team): a typo in `agents`, or a file left over.
    for (const f of entries.filter((f) => f.endsWith('.json') && f !== 'team.json')) {
      const id = f.slice(0, -'.json'.length);
      if (id !== t.lead && !t.agents.includes(id)) problems.push(`${rel(path.join(teamDir, f))}: not an agent of team '${t.id}' (team.json's lead and agents do not name '${id}'): list it there, or move the file out`);
    }
    if (t.agents.includes(t.lead)) problems.push(`${rel(file)}: agents: the lead '${t.lead}' is listed among the agents`);
    t.agents.forEach((id, i) => {
      if (t.agents.indexOf(id) !== i) problems.push(`${rel(file)}: agents.${i}: '${id}' is listed twice`);
    });
    const lead = loadAgent(teamDir, t.lead, rel, problems);
    const agents: Record<string, AgentDefinition> = {};
    for (const id of new Set(t.agents)) {
      if (id === t.lead) continue;
      const a = loadAgent(teamDir, id, rel, problems);
      if (a) agents[id] = a;
    }
    for (const [id, a] of Object.entries(agents)) {
      const agentFile = rel(path.join(teamDir, `${id}.json`));
      const leadOnly = { delegates_to: a.delegatesTo, review_agent: a.reviewAgent, review_rounds: a.reviewRounds };
      for (const [field, set] of Object.entries(leadOnly)) {
        if (set !== undefined) problems.push(`${agentFile}: ${field}: only the lead's is read ('${t.lead}'); this agent is not the lead`);
      }
    }
    if (!lead) continue;
    const leadFile = rel(path.join(teamDir, `${t.lead}.json`));
    for (const [i, d] of (lead.delegatesTo ?? []).entries()) {
      if (!t.agents.includes(d)) problems.push(`${leadFile}: delegates_to.${i}: '${d}' is not an agent of team '${t.id}' (agents: ${t.agents.join(', ') || 'none'})`);
    }
    if (lead.reviewAgent && !t.agents.includes(lead.reviewAgent)) problems.push(`${leadFile}: review_agent: '${lead.reviewAgent}' is not an agent of team '${t.id}'`);
    // Its review is recorded only by submit_review: without it every review would end review_missing.
    const reviewer = lead.reviewAgent ? agents[lead.reviewAgent] : undefined;
    if (reviewer && !reviewer.tools.includes('submit_review')) problems.push(`${rel(path.join(teamDir, `${lead.reviewAgent}.json`))}: tools: the review agent ('review_agent' of ${t.lead}) needs 'submit_review' — its verdict is recorded only by it`);
    if ((lead.delegatesTo?.length ?? 0) > 0 && !lead.tools.includes('Task') && !lead.tools.includes('submit_plan')) problems.push(`${leadFile}: tools: a lead that delegates needs the 'Task' or the 'submit_plan' tool`);
    if (lead.tools.includes('submit_plan') && (lead.delegatesTo?.length ?? 0) === 0) problems.push(`${leadFile}: delegates_to: a lead with 'submit_plan' needs agents to assign subtasks to`);
    if (lead.tools.includes('Task') && (lead.delegatesTo?.length ?? 0) === 0) problems.push(`${leadFile}: delegates_to: a lead with 'Task' needs agents to delegate to (every delegation would be refused)`);
    if (lead.reviewRounds !== undefined && !lead.reviewAgent) problems.push(`${leadFile}: review_rounds: set without a review_agent`);
    for (const [id, a] of Object.entries(agents)) {
      if (a.tools.includes('submit_plan') || a.tools.includes('Task')) problems.push(`${rel(path.join(teamDir, `${id}.json`))}: tools: only the lead delegates ('Task', 'submit_plan')`);
    }
    const members: Record<string, AgentDefinition> = { ...agents, [t.lead]: lead };
    t.approvals.forEach((r, i) => {
      if (r.tool && !allTools[r.tool]) problems.push(`${rel(file)}: approvals.${i}.tool: unknown tool '${r.tool}'`);
      else if (r.tool === 'ask_user') problems.push(`${rel(file)}: approvals.${i}.tool: 'ask_user' is never held for approval (it asks a person already)`);
      if (r.agent && r.agent !== t.lead && !t.agents.includes(r.agent)) problems.push(`${rel(file)}: approvals.${i}.agent: '${r.agent}' is not in team '${t.id}'`);
      else if (r.agent && r.tool && members[r.agent] && !members[r.agent]?.tools.includes(r.tool)) problems.push(`${rel(file)}: approvals.${i}: '${r.agent}' has no tool '${r.tool}' (its tools: ${members[r.agent]?.tools.join(', ')})`);
      const same = t.approvals.findIndex((o) => o.agent === r.agent && o.tool === r.tool);
      if (same !== i) problems.push(`${rel(file)}: approvals.${i}: the same agent and tool as approvals.${same} (only the first would ever apply)`);
    });
    teams[t.id] = { id: t.id, description: t.description, lead, agents, ...(t.approvals.length ? { approvals: t.approvals } : {}) };
  }
  if (problems.length > 0) throw new TeamConfigError(root, problems);
  if (Object.keys(teams).length === 0) throw new TeamConfigError(root, [`${root}: no teams (expected <team>/team.json)`]);
  return teams;
}

/**
 * A service's teams at start-up: loaded and validated, or the process stops with every problem
 * logged (a service must not run with half a config).
 */
export function loadTeamsOrExit(dir: string | undefined, log: { info: (o: object, m: string) => void; fatal: (o: object, m: string) => void }): Record<string, TeamDefinition> {
  try {
    const teams = loadTeams(dir ?? DEFAULT_TEAMS_DIR);
    log.info({ dir: dir ?? DEFAULT_TEAMS_DIR, teams: Object.keys(teams) }, 'teams loaded');
    return teams;
  } catch (err) {
    if (!(err instanceof TeamConfigError)) throw err;
    log.fatal({ problems: err.problems }, err.message);
    process.exit(78); // EX_CONFIG
  }
}
