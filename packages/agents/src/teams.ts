import type { TeamInfoView } from '@baton/api';
import { digestJson, own } from '@baton/domain';
import { loadTeams } from './config.ts';
import type { ApprovalRule } from './policy.ts';
import { delegationTargets } from './tools.ts';

export interface AgentDefinition {
  /** The agent type, e.g. `researcher`. */
  id: string;
  name: string;
  model: string;
  prompt: string;
  tools: string[];
  maxTurns: number;
  maxTokens: number;
  /** Lead only: the agent types it may delegate to. */
  delegatesTo?: string[];
  /** Lead only: an agent that reviews subagents' work (a plan's last step; otherwise delegated to like any other). */
  reviewAgent?: string;
  /** Lead only: how many rounds of changes a plan's review may ask for (default 1). */
  reviewRounds?: number;
  /** What run_tests runs when the model gives no command. */
  testCommand?: string;
  /** Which workspace paths file tools may touch (globs): writes must match `allowed` (if any); nothing may match `blocked`. */
  fileScope?: { allowed: string[]; blocked: string[] };
  /** The agent's sandbox: network for commands (default off), host env vars passed in by name, resource limits. */
  sandbox?: { network: boolean; env: string[]; limits: Partial<SandboxLimitsConfig> };
}

/** Mirrors @baton/sandbox's SandboxLimits (agents do not depend on the sandbox package). */
export interface SandboxLimitsConfig {
  memoryMb: number;
  cpuSeconds: number;
  processes: number;
  fileSizeMb: number;
  openFiles: number;
}

export interface TeamDefinition {
  id: string;
  description: string;
  lead: AgentDefinition;
  agents: Record<string, AgentDefinition>;
  /** Which tool calls need a person (see policy.ts); default: delegation when the task asks for plan approval. */
  approvals?: ApprovalRule[];
}

/** A team as `GET /v1/teams` lists it (and `baton teams --check` describes a directory before it is deployed). */
export function toTeamInfoView(t: TeamDefinition): TeamInfoView {
  return {
    id: t.id,
    description: t.description,
    lead: { id: t.lead.id, name: t.lead.name, model: t.lead.model, tools: t.lead.tools, maxTurns: t.lead.maxTurns, delegatesTo: t.lead.delegatesTo ?? [], ...(t.lead.reviewAgent ? { reviewAgent: t.lead.reviewAgent, reviewRounds: t.lead.reviewRounds ?? 1 } : {}) },
    agents: Object.values(t.agents).map((a) => ({ id: a.id, name: a.name, model: a.model, tools: a.tools, maxTurns: a.maxTurns, ...(a.fileScope ? { fileScope: a.fileScope } : {}), ...(a.testCommand ? { testCommand: a.testCommand } : {}) })),
    approvals: (t.approvals ?? []).map((r) => ({ ...(r.agent ? { agent: r.agent } : {}), ...(r.tool ? { tool: r.tool } : {}), require: r.require, onTimeout: r.onTimeout })),
  };
}

export const DEFAULT_MODEL = 'claude-sonnet-4-6';

/** The teams shipped in config/teams (research, bench), loaded once. Services load BATON_TEAMS_DIR instead. */
export const builtinTeams: Readonly<Record<string, TeamDefinition>> = loadTeams();

/** Config versions worked out already, by definition (a loaded definition is not changed in place). */
const versions = new WeakMap<TeamDefinition, string>();

/** A team's config version: a digest of its definition, pinned in TaskStarted (worked out once per definition). */
export function configVersion(team: TeamDefinition): string {
  let v = versions.get(team);
  if (v === undefined) versions.set(team, (v = `sha256:${digestJson(team).slice(0, 16)}`));
  return v;
}

export function findAgent(team: TeamDefinition, agentType: string): AgentDefinition | undefined {
  return team.lead.id === agentType ? team.lead : team.agents[agentType];
}

/**
 * The team a run uses: the one its TaskStarted pinned. When the loaded config has moved on
 * since (a deploy changed a prompt), the pinned version's definition is fetched (and cached)
 * from where services record every version they load (Postgres `team_configs`).
 */
export class TeamCatalog {
  readonly current: Readonly<Record<string, TeamDefinition>>;
  private readonly fetch: (version: string) => Promise<unknown>;
  private readonly pinned = new Map<string, TeamDefinition>();
  constructor(current: Readonly<Record<string, TeamDefinition>>, fetch: (version: string) => Promise<unknown> = async () => null) {
    this.current = current;
    this.fetch = fetch;
    for (const t of Object.values(current)) this.pinned.set(configVersion(t), t);
  }

  /** What to record so other replicas can resolve these versions. */
  versions(): { version: string; teamId: string; definition: TeamDefinition }[] {
    return Object.values(this.current).map((t) => ({ version: configVersion(t), teamId: t.id, definition: t }));
  }

  /** The team for a run: its pinned version if given and known, else the current one (undefined: no such team). */
  async resolve(teamId: string, version?: string): Promise<TeamDefinition | undefined> {
    if (!version) return own(this.current, teamId);
    const hit = this.pinned.get(version);
    if (hit) return hit;
    const stored = (await this.fetch(version)) as TeamDefinition | null;
    if (stored && stored.id === teamId && stored.lead) {
      this.pinned.set(version, stored);
      return stored;
    }
    return own(this.current, teamId); // the version was never recorded (older data): the current config
  }
}

// The agent types a lead may delegate to are defined beside the Task tool that checks them.
export { delegationTargets };

/**
 * The lead's system prompt: its own prompt file, then the agents it can delegate to (so the
 * model knows the names the Task tool accepts), and the review step when a review agent is set.
 */
export function leadSystemPrompt(team: TeamDefinition): string {
  const targets = delegationTargets(team.lead).map((id) => team.agents[id]).filter((a) => a !== undefined);
  const parts = [team.lead.prompt];
  const list = (agents: AgentDefinition[]): string => agents.map((a) => `- \`${a.id}\`: ${a.name} (tools: ${a.tools.join(', ')})`).join('\n');
  if (team.lead.tools.includes('submit_plan')) {
    const engineers = targets.filter((a) => a.id !== team.lead.reviewAgent);
    parts.push(`Agents you can assign subtasks to in your plan (submit_plan):\n${list(engineers)}`);
    if (team.lead.reviewAgent) parts.push(`Once every subtask is done, \`${team.lead.reviewAgent}\` reviews the change; if it asks for changes, the engineers owning the files address them (at most ${team.lead.reviewRounds ?? 1} round${(team.lead.reviewRounds ?? 1) === 1 ? '' : 's'}). You get the verdict with your plan's result.`);
  } else {
    if (targets.length > 0) parts.push(`Agents you can delegate to with the Task tool:\n${list(targets)}`);
    if (team.lead.reviewAgent) parts.push(`Before your final answer, delegate to \`${team.lead.reviewAgent}\` to review the other agents' work, and address what it finds.`);
  }
  return parts.join('\n\n');
}

/** How the lead's opening message introduces the input workspace's files (the offline lead reads them back). */
export const WORKSPACE_FILES_HEADING = 'Workspace files';
/** At most this many workspace paths are listed in the lead's opening message (the rest are counted). */
const MAX_LISTED_FILES = 500;
/** Version control's and installed dependencies' files: counted, never listed (they crowded the project's out). */
const UNLISTED = /(^|\/)(\.git|node_modules)\//;

/**
 * The lead's opening message: the task, then the files of the codebase it starts from (if any):
 * every file when they fit (`.git/` and `node_modules/` only counted); past MAX_LISTED_FILES the
 * directories two levels deep with what they hold, then the shallowest files first — so a large
 * repository shows its whole shape, not the first 500 paths in order.
 */
export function leadOpening(prompt: string, files: readonly { path: string; bytes: number }[] | null): string {
  if (!files) return prompt;
  const project = files.filter((f) => !UNLISTED.test(f.path));
  const unlisted = files.length - project.length;
  const sections: string[] = [];
  let shown = project;
  if (project.length > MAX_LISTED_FILES) {
    const dirs = new Map<string, { files: number; bytes: number }>();
    for (const f of project) {
      const parts = f.path.split('/').slice(0, -1);
      for (let depth = 1; depth <= Math.min(2, parts.length); depth++) {
        const d = `${parts.slice(0, depth).join('/')}/`;
        const t = dirs.get(d) ?? { files: 0, bytes: 0 };
        dirs.set(d, { files: t.files + 1, bytes: t.bytes + f.bytes });
      }
    }
    sections.push(`Directories (two levels; each with the files under it):\n${[...dirs].sort(([a], [b]) => (a < b ? -1 : 1)).slice(0, MAX_LISTED_FILES).map(([d, t]) => `  ${d}: ${t.files} files, ${t.bytes} bytes`).join('\n')}`);
    const depth = (p: string): number => p.split('/').length;
    shown = [...project].sort((a, b) => depth(a.path) - depth(b.path) || (a.path < b.path ? -1 : 1)).slice(0, MAX_LISTED_FILES).sort((a, b) => (a.path < b.path ? -1 : 1));
  }
  const listed = shown.map((f) => `- ${f.path} (${f.bytes} bytes)`);
  const rest = project.length - shown.length;
  const more = [rest > 0 ? `… and ${rest} more files, deeper (the directories below count them)` : '', unlisted > 0 ? `… and ${unlisted} files under .git/ and node_modules/, not listed` : ''].filter(Boolean);
  return `${prompt}\n\n${WORKSPACE_FILES_HEADING} (${files.length}, the codebase this task starts from):\n${[...listed, ...more].join('\n')}${sections.length > 0 ? `\n\n${sections.join('\n\n')}` : ''}`;
}
