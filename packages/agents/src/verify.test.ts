import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { recordAs, type RecordedEvent } from '@baton/domain';
import { describe, expect, it } from 'vitest';
import { builtinTeams, type TeamDefinition } from './teams.ts';
import { verifyRun } from './verify.ts';

/** The corpus: real runs recorded from the four services (packages/cli/src/record-corpus.ts). */
const DIR = path.join(import.meta.dirname, 'fixtures', 'runs');
type ApiEvent = { id: string; type: string; taskId: string; streamId: string; version: number; position: number; recordedAt: string; data: unknown; metadata: Record<string, unknown> };
const load = (name: string): RecordedEvent[] =>
  (JSON.parse(readFileSync(path.join(DIR, `${name}.json`), 'utf8')) as ApiEvent[]).map((e) =>
    recordAs(e as Parameters<typeof recordAs>[0], { taskId: e.taskId, streamId: e.streamId, version: e.version, position: BigInt(e.position), recordedAt: new Date(e.recordedAt) }),
  );
const teamOf = (events: RecordedEvent[]): TeamDefinition => {
  const first = events[0];
  if (first?.type !== 'TaskSubmitted') throw new Error('a run starts with TaskSubmitted');
  return builtinTeams[first.data.team] as TeamDefinition;
};

describe('verify: the current code makes the recorded runs again, decision for decision', () => {
  const runs = readdirSync(DIR).filter((f) => f.endsWith('.json')).map((f) => f.replace(/\.json$/, ''));
  it('has a corpus of real runs', () => {
    expect(runs).toEqual(expect.arrayContaining(['research-approved', 'research-compare-questions', 'research-rejected-replanned', 'research-budget-raised', 'engineering-reviewed']));
  });
  for (const name of runs) {
    it(`${name}: identical`, () => {
      const events = load(name);
      const res = verifyRun(events, teamOf(events));
      expect(res).toMatchObject({ identical: true, events: events.length });
      expect(res.checked).toBeGreaterThan(3);
    });
  }
});

describe('verify: a changed decision is caught at the first event it changes', () => {
  const research = builtinTeams.research as TeamDefinition;

  it('an approval policy that no longer asks: the recorded request is the divergence', () => {
    const events = load('research-approved');
    const noApprovals: TeamDefinition = { ...research, approvals: [{ tool: 'Task', require: 'never', onTimeout: 'reject' }] };
    const res = verifyRun(events, noApprovals);
    expect(res).toMatchObject({ identical: false, at: { type: 'ApprovalRequested' }, recorded: expect.stringMatching(/^ApprovalRequested apr-lead-\S+: lead asks to call Task/), decided: [expect.stringMatching(/^SubagentDispatched researcher-1 \(researcher\)/)] });
    const first = events.find((e) => e.type === 'ApprovalRequested');
    expect(res.identical === false && res.at.position).toBe(Number(first?.position));
  });

  it('a researcher that may no longer search: the code now refuses the call that ran', () => {
    const events = load('research-approved');
    const researcher = research.agents.researcher as TeamDefinition['agents'][string];
    const res = verifyRun(events, { ...research, agents: { ...research.agents, researcher: { ...researcher, tools: researcher.tools.filter((t) => t !== 'web_search') } } });
    expect(res).toMatchObject({ identical: false, at: { type: 'ToolResultsRecorded' }, decided: [expect.stringMatching(/refuses web_search .*not available to this agent/)] });
  });

  it("a brief worded differently past what a line shows: the report says where the texts part (the field, the character, both sides)", () => {
    const events = load('engineering-reviewed');
    // The review's brief as an older release worded it: one word changed far into it.
    const review = events.find((e) => e.type === 'SubagentDispatched' && e.data.role === 'review');
    if (review?.type !== 'SubagentDispatched') throw new Error('the run has a review');
    const at = review.data.prompt.indexOf('asked:');
    expect(at).toBeGreaterThan(200); // past what `recorded`/`now` show
    const older = review.data.prompt.slice(0, at) + 'task:' + review.data.prompt.slice(at + 'asked:'.length);
    const res = verifyRun(events.map((e) => (e === review ? { ...review, data: { ...review.data, prompt: older } } : e)), teamOf(events));
    expect(res).toMatchObject({ identical: false, at: { type: 'SubagentDispatched', position: Number(review.position) } });
    if (res.identical) return;
    expect(res.recorded.slice(0, 150)).toBe(res.decided[0]?.slice(0, 150)); // a line shows no difference…
    expect(res.difference).toMatch(new RegExp(`^prompt differs at character ${at + 1} of ${older.length}: recorded ".*task: .*", now ".*asked: .*"$`)); // …this does
    // A brief that was the same with more at its end: said so (not "differs at character n+1 of n").
    const longer = verifyRun(events.map((e) => (e === review ? { ...review, data: { ...review.data, prompt: `${review.data.prompt} 👍` } } : e)), teamOf(events));
    expect(!longer.identical && longer.difference).toMatch(new RegExp(`^prompt: recorded goes on after the ${Array.from(review.data.prompt).length} characters both have: recorded ".* 👍", now ".*"$`));
  });

  it('a plan split differently: the recorded plan is the divergence', () => {
    const events = load('engineering-reviewed');
    const plan = events.find((e) => e.type === 'PlanRecorded');
    const tampered = events.map((e) => (e === plan && e.type === 'PlanRecorded' ? { ...e, data: { ...e.data, maxReviewRounds: e.data.maxReviewRounds + 1 } } : e));
    const res = verifyRun(tampered, teamOf(events));
    expect(res).toMatchObject({ identical: false, at: { type: 'PlanRecorded', position: Number(plan?.position) }, decided: [expect.stringMatching(/^PlanRecorded: backend → backend-engineer \[api\/\*\*\] ".+", frontend → frontend-engineer \[web\/\*\*\] ".+"; reviewed by reviewer, at most 1 round of changes$/)] });
    // The two sides read differently: what differs is in the words.
    if (res.identical) throw new Error('identical');
    expect(res.recorded).toMatch(/at most 2 rounds of changes$/);
  });

  it("a lower turn limit: the model turn past it is the divergence (the lead's, a researcher's)", () => {
    const events = load('research-approved');
    const leadTurns = events.filter((e) => e.type === 'ModelTurnRecorded' && e.data.agentId === 'lead').length;
    expect(leadTurns).toBeGreaterThan(2);
    const capped = verifyRun(events, { ...research, lead: { ...research.lead, maxTurns: 2 } });
    expect(capped).toMatchObject({ identical: false, at: { type: 'ModelTurnRecorded', streamId: expect.stringMatching(/^task-/) }, decided: ['asks no model turn 3: lead is at its limit of 2 turns (it ends here)'] });
    const researcher = research.agents.researcher as TeamDefinition['agents'][string];
    const short = verifyRun(events, { ...research, agents: { ...research.agents, researcher: { ...researcher, maxTurns: 1 } } });
    expect(short).toMatchObject({ identical: false, at: { type: 'ModelTurnRecorded' }, decided: ['asks no model turn 2: researcher-1 is at its limit of 1 turns (it ends here)'] });
  });

  it('a task that failed at the lead\'s turn limit, checked with a higher one: the failure is the divergence; with the same one, identical', () => {
    const events = load('research-approved');
    // The run cut after the lead's second turn's results (its next turn due), then failed at a limit of 2.
    const lead = events.filter((e) => e.type === 'ToolResultsRecorded' && e.data.agentId === 'lead');
    const cut = events.slice(0, events.indexOf(lead[1] as RecordedEvent) + 1);
    const last = cut.filter((e) => e.streamId === cut[0]!.streamId).at(-1) as RecordedEvent;
    const failed = recordAs({ id: '00000000-0000-4000-8000-00000000f00d', type: 'TaskFailed', data: { code: 'max_turns', message: 'the lead reached its limit of 2 turns' } } as Parameters<typeof recordAs>[0], { taskId: last.taskId, streamId: last.streamId, version: last.version + 1, position: BigInt(Number(events.at(-1)!.position) + 1), recordedAt: last.recordedAt });
    const run = [...cut, failed];
    expect(verifyRun(run, { ...research, lead: { ...research.lead, maxTurns: 2 } })).toMatchObject({ identical: true, ended: true });
    expect(verifyRun(run, research)).toMatchObject({ identical: false, at: { type: 'TaskFailed' }, decided: [`does not fail the task here: the lead has used 2 of its ${research.lead.maxTurns} turns`] });
    // The run cut before its end: identical so far, and said to be unfinished.
    expect(verifyRun(cut, research)).toMatchObject({ identical: true, ended: false });
  });

  it("a narrower file scope: the write it now refuses is the divergence; a wider one: a refusal the run's own configuration recorded, which the code would now run", () => {
    const events = load('engineering-reviewed');
    const engineering = teamOf(events);
    const backend = engineering.agents['backend-engineer'] as TeamDefinition['agents'][string];
    const narrow: TeamDefinition = { ...engineering, agents: { ...engineering.agents, 'backend-engineer': { ...backend, fileScope: { allowed: ['api/src/**'], blocked: [] } } } };
    const refusal = "'api/inventory.backend.test.ts' is outside this agent's file scope (writes allowed: api/src/**)";
    expect(verifyRun(events, narrow)).toMatchObject({ identical: false, at: { type: 'ToolResultsRecorded' }, decided: [`refuses write_file (toolu_offline_backendengineer_2_0): ${refusal}`] });
    // The run as the narrow configuration made it (the write refused), checked with the wider one it has now.
    const write = events.find((e) => e.type === 'ToolResultsRecorded' && e.data.results.some((r) => r.toolUseId === 'toolu_offline_backendengineer_2_0'));
    if (write?.type !== 'ToolResultsRecorded') throw new Error('the run writes the test');
    const refused = { ...write, data: { ...write.data, results: write.data.results.map((r) => (r.toolUseId === 'toolu_offline_backendengineer_2_0' ? { ...r, content: refusal, isError: true } : r)) } };
    const asMade = events.map((e) => (e === write ? refused : e));
    expect(verifyRun(asMade, engineering, narrow)).toMatchObject({ identical: false, at: { type: 'ToolResultsRecorded', position: Number(write.position) }, decided: ['runs write_file (toolu_offline_backendengineer_2_0) instead of refusing it as recorded'] });
    // Without the run's own configuration, the tool's error is an input like any other.
    expect(verifyRun(asMade, engineering, null)).toMatchObject({ identical: true });
  });

  it('a delegation the team can no longer make: the code now refuses the call (not "nothing here")', () => {
    const events = load('research-approved');
    const { 'report-writer': _gone, ...agents } = research.agents;
    const lead = { ...research.lead, delegatesTo: (research.lead.delegatesTo ?? []).filter((a) => a !== 'report-writer') };
    const res = verifyRun(events, { ...research, agents, lead });
    expect(res.identical).toBe(false);
    if (res.identical) return;
    expect(res.decided.join('\n')).toMatch(/^refuses Task \(\S+\): .*report-writer/);
  });
});

