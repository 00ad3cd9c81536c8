import { digestJson } from '@baton/domain';
import { loadTeams } from './config.ts';
import type { ApprovalRule } from './policy.ts';

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
  /** Lead only: an agent that reviews subagents' work (delegated to like any other). */
  reviewAgent?: string;
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

export const DEFAULT_MODEL = 'claude-sonnet-4-5';

/** The teams shipped in config/teams (research, bench), loaded once. Services load BATON_TEAMS_DIR instead. */
export const builtinTeams: Readonly<Record<string, TeamDefinition>> = loadTeams();

/** A team's config version: a digest of its definition, pinned in TaskStarted. */
export function configVersion(team: TeamDefinition): string {
  return `sha256:${digestJson(team).slice(0, 16)}`;
}

export function findAgent(team: TeamDefinition, agentType: string): AgentDefinition | undefined {
  return team.lead.id === agentType ? team.lead : team.agents[agentType];
}
