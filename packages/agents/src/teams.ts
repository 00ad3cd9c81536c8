import { digestJson } from '@baton/domain';
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

const researchTeam: TeamDefinition = {
  id: 'research',
  description: 'A lead research coordinator delegating to a web researcher and a report writer.',
  lead: {
    id: 'research-lead',
    name: 'Research coordinator',
    model: DEFAULT_MODEL,
    prompt:
      'You coordinate a research task. If the request is too vague to research well (no clear subject, audience or depth), ask the user with ask_user first. Plan the work, then delegate with the Task tool: first to `researcher` to gather notes, then to `report-writer` to write report.md. When the report exists, answer with a short summary.',
    tools: ['Task', 'ask_user'],
    maxTurns: 20,
    maxTokens: 4096,
    delegatesTo: ['researcher', 'report-writer'],
  },
  agents: {
    researcher: {
      id: 'researcher',
      name: 'Web researcher',
      model: DEFAULT_MODEL,
      prompt: 'You research a topic and write your findings as notes.md in your workspace, with sources. If the brief asks you to check a choice with the user, use ask_user. Finish with a one-paragraph summary.',
      tools: ['write_file', 'read_file', 'list_directory', 'ask_user'],
      maxTurns: 10,
      maxTokens: 4096,
    },
    'report-writer': {
      id: 'report-writer',
      name: 'Report writer',
      model: DEFAULT_MODEL,
      prompt: 'You write a clear, well-structured markdown report named report.md from the research you are given. Finish with a one-paragraph summary.',
      tools: ['write_file', 'read_file', 'list_directory'],
      maxTurns: 10,
      maxTokens: 8192,
    },
  },
};

/** The benchmark team of ../shared/BENCHMARKS.md: a lead that makes 10 model turns with a trivial local tool. */
const benchTeam: TeamDefinition = {
  id: 'bench',
  description: 'Benchmark workload: the lead makes 10 model turns, each recorded durably.',
  lead: {
    id: 'bench-lead',
    name: 'Benchmark lead',
    model: 'offline-instant',
    prompt: 'Call bench_step for steps 1 to 9 (step 3 through bench_gate, which a person approves), then finish.',
    tools: ['bench_step', 'bench_gate'],
    maxTurns: 12,
    maxTokens: 256,
  },
  agents: {},
  approvals: [{ tool: 'bench_gate', require: 'when_plan_approval', onTimeout: 'reject' }],
};

export const builtinTeams: Readonly<Record<string, TeamDefinition>> = { research: researchTeam, bench: benchTeam };

/** A team's config version: a digest of its definition, pinned in TaskStarted. */
export function configVersion(team: TeamDefinition): string {
  return `sha256:${digestJson(team).slice(0, 16)}`;
}

export function findAgent(team: TeamDefinition, agentType: string): AgentDefinition | undefined {
  return team.lead.id === agentType ? team.lead : team.agents[agentType];
}
