import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_TEAMS_DIR, loadTeams, MAX_PROMPT_BYTES, TeamConfigError } from './config.ts';
import { configVersion, delegationTargets, leadSystemPrompt, TeamCatalog } from './teams.ts';

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});
const copyOfShipped = (): string => {
  const d = mkdtempSync(path.join(tmpdir(), 'baton-teams-'));
  dirs.push(d);
  cpSync(DEFAULT_TEAMS_DIR, d, { recursive: true });
  return d;
};
const problemsOf = (dir: string): string[] => {
  try {
    loadTeams(dir);
  } catch (err) {
    if (err instanceof TeamConfigError) return err.problems;
    throw err;
  }
  return [];
};

describe('teams from config files', () => {
  it('the shipped research team: a lead whose only delegation tool is Task, a researcher, a report writer and an email agent, prompts from markdown', () => {
    const { research, bench } = loadTeams();
    expect(research?.lead).toMatchObject({ id: 'research-lead', tools: ['Task', 'ask_user'], delegatesTo: ['researcher', 'report-writer', 'email-agent'] });
    expect(research?.agents['email-agent']?.tools).toEqual(['read_file', 'glob', 'list_directory', 'send_email']);
    expect(research?.approvals).toBeUndefined(); // send_email's own default (always) holds
    expect(research?.lead.prompt).toMatch(/delegate with the `Task` tool/);
    expect(research?.agents.researcher?.tools).toEqual(['web_search', 'write_file', 'read_file', 'list_directory', 'ask_user']);
    expect(research?.agents['report-writer']?.tools).toEqual(['read_file', 'write_file', 'glob', 'list_directory']);
    expect(bench?.approvals).toEqual([{ tool: 'bench_gate', require: 'when_plan_approval', onTimeout: 'reject' }]);
  });

  it("what a person gets wrong in a team's files is named, not a crash or silence: a link to nothing, a directory for a prompt, a prompt too large, a BOM, a hidden directory", () => {
    const dir = copyOfShipped();
    symlinkSync(path.join(dir, 'nowhere'), path.join(dir, 'oldteam')); // before: ENOENT from stat, a restart loop
    mkdirSync(path.join(dir, 'drafts'));
    mkdirSync(path.join(dir, '.git'));
    mkdirSync(path.join(dir, 'research', 'as-dir.md'));
    const researcher = path.join(dir, 'research', 'researcher.json');
    writeFileSync(researcher, `\ufeff${JSON.stringify({ id: 'researcher', name: 'R', model: 'm', prompt_file: 'as-dir.md', tools: ['web_search'] })}`); // a BOM: read past
    writeFileSync(path.join(dir, 'research', 'huge.md'), 'x'.repeat(MAX_PROMPT_BYTES + 1));
    writeFileSync(path.join(dir, 'research', 'report-writer.json'), JSON.stringify({ id: 'report-writer', name: 'W', model: 'm', prompt_file: 'huge.md', tools: ['write_file'] }));
    expect(problemsOf(dir).sort()).toEqual([
      'drafts/team.json: missing (every directory here is a team; move others out, or start their name with \'.\')',
      'oldteam: a symbolic link to nothing',
      "research/report-writer.json: prompt_file: 'huge.md' is 262145 bytes; at most 262144 (it is sent with every model call of the agent)",
      "research/researcher.json: prompt_file: 'as-dir.md': is a directory, not a file",
    ]);
  });

  it("a prompt file outside the team's directory is refused (../../etc/passwd was sent to the model)", () => {
    const dir = copyOfShipped();
    writeFileSync(path.join(dir, 'research', 'researcher.json'), JSON.stringify({ id: 'researcher', name: 'R', model: 'm', prompt_file: '../../../../etc/passwd', tools: ['web_search'] }));
    writeFileSync(path.join(dir, 'research', 'report-writer.json'), JSON.stringify({ id: 'report-writer', name: 'W', model: 'm', prompt_file: '/etc/hostname', tools: ['write_file'] }));
    expect(problemsOf(dir).sort()).toEqual([
      "research/report-writer.json: prompt_file: must be a file in the team's directory (no absolute path, no ..)",
      "research/researcher.json: prompt_file: must be a file in the team's directory (no absolute path, no ..)",
    ]);
  });

  it('a pipe for a prompt is named, not read (reading it hung the start for good); a link to nothing is said to be one; a team.json that is not JSON has the JSON files beside it checked as agents', () => {
    const dir = copyOfShipped();
    execFileSync('mkfifo', [path.join(dir, 'research', 'pipe.md')]);
    symlinkSync(path.join(dir, 'gone.md'), path.join(dir, 'research', 'dangling.md'));
    writeFileSync(path.join(dir, 'research', 'researcher.json'), JSON.stringify({ id: 'researcher', name: 'R', model: 'm', prompt_file: 'pipe.md', tools: ['web_search'] }));
    writeFileSync(path.join(dir, 'research', 'report-writer.json'), JSON.stringify({ id: 'report-writer', name: 'W', model: 'm', prompt_file: 'dangling.md', tools: ['write_file'] }));
    writeFileSync(path.join(dir, 'bench', 'team.json'), '{"id":"bench","lead":"bench-lead","agents":[],}');
    writeFileSync(path.join(dir, 'bench', 'bench-lead.json'), JSON.stringify({ id: 'bench-lead', name: 'B', model: 'm', prompt_file: 'bench-lead.md', tools: ['bogus_tool'] }));
    const problems = problemsOf(dir);
    expect(problems).toEqual([
      expect.stringMatching(/^bench\/team\.json: not valid JSON \([^\n]*\)$/),
      expect.stringMatching(/^bench\/bench-lead\.json: tools\.0: unknown tool 'bogus_tool'/),
      "research/researcher.json: prompt_file: 'pipe.md': is not a regular file (a pipe, socket or device)",
      "research/report-writer.json: prompt_file: 'dangling.md' is a symbolic link to nothing",
    ]);
  });

  it('a team.json that does not parse still has its agents checked; what would load and do nothing, or be ignored, is named', () => {
    const dir = copyOfShipped();
    writeFileSync(path.join(dir, 'research', 'team.json'), JSON.stringify({ id: 'research', lead: 'research-lead', agents: ['researcher', 'report-writer', 'email-agent'], approval: [] }));
    writeFileSync(path.join(dir, 'research', 'researcher.json'), JSON.stringify({ id: 'researcher', name: 'R', model: 'm', prompt_file: 'researcher.md', tool: ['web_search'] }));
    expect(problemsOf(dir)).toEqual(["research/team.json: (file): unknown field 'approval'", expect.stringMatching(/^research\/researcher\.json: tools: /), "research/researcher.json: (file): unknown field 'tool'"]);
    writeFileSync(path.join(dir, 'research', 'researcher.json'), JSON.stringify({ id: 'researcher', name: 'R', model: 'm', prompt_file: 'researcher.md', tools: ['web_search', 'write_file'], delegates_to: ['report-writer'] }));
    writeFileSync(
      path.join(dir, 'research', 'team.json'),
      JSON.stringify({
        id: 'research',
        lead: 'research-lead',
        agents: ['researcher', 'report-writer', 'email-agent', 'researcher'],
        approvals: [{ agent: 'researcher', tool: 'write_file', require: 'always' }, { agent: 'researcher', tool: 'write_file', require: 'never' }, { agent: 'report-writer', tool: 'send_email', require: 'always' }, { tool: 'ask_user', require: 'always' }],
      }),
    );
    writeFileSync(path.join(dir, 'bench', 'bench-lead.json'), JSON.stringify({ id: 'bench-lead', name: 'B', model: 'offline-bench', prompt_file: 'bench-lead.md', tools: ['Task'] }));
    expect(problemsOf(dir)).toEqual([
      "bench/bench-lead.json: delegates_to: a lead with 'Task' needs agents to delegate to (every delegation would be refused)",
      "research/team.json: agents.3: 'researcher' is listed twice",
      "research/researcher.json: delegates_to: only the lead's is read ('research-lead'); this agent is not the lead",
      'research/team.json: approvals.1: the same agent and tool as approvals.0 (only the first would ever apply)',
      "research/team.json: approvals.2: 'report-writer' has no tool 'send_email' (its tools: read_file, write_file, glob, list_directory)",
      "research/team.json: approvals.3.tool: 'ask_user' is never held for approval (it asks a person already)",
    ]);
  });

  it('a bad config stops loading with every problem named (file, field, what)', () => {
    const dir = copyOfShipped();
    const agent = path.join(dir, 'research', 'researcher.json');
    writeFileSync(agent, JSON.stringify({ id: 'researcher', name: 'R', model: 'm', prompt_file: 'missing.md', tools: ['web_search', 'teleport'], max_turns: 0 }));
    writeFileSync(path.join(dir, 'research', 'research-lead.json'), JSON.stringify({ id: 'research-lead', name: 'L', model: 'm', prompt_file: 'research-lead.md', tools: ['ask_user'], delegates_to: ['researcher', 'ghost'], colour: 'red' }));
    writeFileSync(path.join(dir, 'bench', 'team.json'), '{ not json');
    const problems = problemsOf(dir);
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/research\/researcher\.json: max_turns: must be at least 1$/),
        expect.stringMatching(/research\/researcher\.json: tools\.1: unknown tool 'teleport'/), // with the rest, not after it is mended
        "research/researcher.json: prompt_file: 'missing.md' does not exist",
        expect.stringMatching(/research\/research-lead\.json: \(file\): unknown field 'colour'$/),
        expect.stringMatching(/bench\/team\.json: not valid JSON/),
      ]),
    );
    // Once the shape is right, the cross-checks name what is wrong.
    writeFileSync(agent, JSON.stringify({ id: 'researcher', name: 'R', model: 'm', prompt_file: 'missing.md', tools: ['web_search', 'teleport'] }));
    writeFileSync(path.join(dir, 'research', 'research-lead.json'), JSON.stringify({ id: 'research-lead', name: 'L', model: 'm', prompt_file: 'research-lead.md', tools: ['ask_user'], delegates_to: ['researcher', 'ghost'] }));
    expect(problemsOf(dir)).toEqual(
      expect.arrayContaining([
        "research/researcher.json: tools.1: unknown tool 'teleport' (known: Task, submit_plan, submit_review, bench_step, bench_gate, ask_user, write_file, read_file, list_directory, edit_file, glob, search_files, run_command, run_tests, web_search, send_email)",
        "research/researcher.json: prompt_file: 'missing.md' does not exist",
        "research/research-lead.json: delegates_to.1: 'ghost' is not an agent of team 'research' (agents: researcher, report-writer, email-agent)",
        "research/research-lead.json: tools: a lead that delegates needs the 'Task' or the 'submit_plan' tool",
      ]),
    );
  });

  it('the shipped engineering team: a planning lead with a reviewer and one round of changes, engineers with a test command; only a lead delegates', () => {
    const { engineering } = loadTeams();
    expect(engineering?.lead).toMatchObject({ id: 'engineering-lead', tools: ['submit_plan', 'ask_user'], delegatesTo: ['backend-engineer', 'frontend-engineer'], reviewAgent: 'reviewer', reviewRounds: 1 });
    expect(engineering?.agents['backend-engineer']?.testCommand).toBeTruthy();
    expect(engineering?.agents.reviewer?.tools).toContain('submit_review');
    expect(engineering?.agents.reviewer?.tools).not.toContain('write_file');
    const dir = copyOfShipped();
    const file = path.join(dir, 'engineering', 'reviewer.json');
    writeFileSync(file, JSON.stringify({ id: 'reviewer', name: 'R', model: 'm', prompt_file: 'reviewer.md', tools: ['submit_plan', 'read_file'] }));
    expect(problemsOf(dir)).toContain("engineering/reviewer.json: tools: only the lead delegates ('Task', 'submit_plan')");
    // A reviewer that cannot record its review: every review would have ended review_missing.
    expect(problemsOf(dir)).toContain("engineering/reviewer.json: tools: the review agent ('review_agent' of engineering-lead) needs 'submit_review' — its verdict is recorded only by it");
    // An agent file team.json does not name (a typo in `agents`): it was never loaded, its mistakes unseen.
    writeFileSync(path.join(dir, 'engineering', 'python-engineer.json'), JSON.stringify({ id: 'python-engineer', name: 'P', model: 'm', prompt_file: 'engineer.md', tools: ['read_file'], testCommand: 'pytest' }));
    expect(problemsOf(dir)).toContain("engineering/python-engineer.json: not an agent of team 'engineering' (team.json's lead and agents do not name 'python-engineer'): list it there, or move the file out");
  });

  it('a review agent can be delegated to, and the lead is told the agents it can delegate to and to have the work reviewed', () => {
    const { research } = loadTeams();
    const reviewer = { ...research!.agents.researcher!, id: 'reviewer', name: 'Reviewer', tools: ['read_file', 'glob'] };
    const team = { ...research!, lead: { ...research!.lead, reviewAgent: 'reviewer' }, agents: { ...research!.agents, reviewer } };
    expect(delegationTargets(team.lead)).toEqual(['researcher', 'report-writer', 'email-agent', 'reviewer']);
    const prompt = leadSystemPrompt(team);
    expect(prompt).toMatch(/- `researcher`: Web researcher \(tools: web_search, write_file, read_file, list_directory, ask_user\)/);
    expect(prompt).toMatch(/- `reviewer`: Reviewer \(tools: read_file, glob\)/);
    expect(prompt).toMatch(/Before your final answer, delegate to `reviewer` to review/);
    expect(leadSystemPrompt(research!)).not.toMatch(/review the other agents/);
  });

  it('a run pinned to an older config version gets that version, not the current one', async () => {
    const { research } = loadTeams();
    const old = { ...research!, lead: { ...research!.lead, prompt: 'the old prompt' } };
    const stored = new Map([[configVersion(old), old as unknown]]);
    const catalog = new TeamCatalog({ research: research! }, async (v) => stored.get(v) ?? null);
    expect((await catalog.resolve('research', configVersion(old)))?.lead.prompt).toBe('the old prompt');
    expect(await catalog.resolve('research', configVersion(research!))).toBe(research);
    expect(await catalog.resolve('research')).toBe(research);
    expect(catalog.versions()).toEqual([{ version: configVersion(research!), teamId: 'research', definition: research }]);
  });

  it('a definition\'s config version is worked out once (every run pins it), and a changed copy has its own', () => {
    const { research } = loadTeams();
    let reads = 0;
    const team = { ...research!, get lead() { reads++; return research!.lead; } };
    const v = configVersion(team);
    expect(configVersion(team)).toBe(v);
    expect(reads).toBe(1);
    expect(v).toBe(configVersion(research!));
    expect(configVersion({ ...research!, lead: { ...research!.lead, prompt: 'another' } })).not.toBe(v);
  });
});
