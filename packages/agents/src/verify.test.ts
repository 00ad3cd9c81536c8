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
});
