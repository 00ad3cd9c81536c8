import { rejectionText, type ContentBlock } from '@baton/domain';
import { describe, expect, it } from 'vitest';
import type { ModelMessage } from './model.ts';
import { isVague, mailRecipientsOf, OfflineModel, searchQueryOf, subjectsOf, withoutMailClause } from './offline.ts';
import { WORKSPACE_FILES_HEADING } from './teams.ts';
import { allTools, toolSpec } from './tools.ts';

const specs = (...names: string[]) => names.map((n) => toolSpec(allTools[n]!));

const model = new OfflineModel();
const lead = (messages: ModelMessage[]) => model.complete({ agentType: 'research-lead', model: 'm', system: '', messages, tools: [], maxTokens: 100 });
const toolUses = (content: ContentBlock[]) => content.filter((b): b is Extract<ContentBlock, { type: 'tool_use' }> => b.type === 'tool_use' && 'id' in b);
/** The conversation after the lead's turn, with `result` as the answer to its one tool call. */
const answered = (history: ModelMessage[], content: ContentBlock[], result: string): ModelMessage[] => [
  ...history,
  { role: 'assistant', content },
  { role: 'user', content: toolUses(content).map((t) => ({ type: 'tool_result' as const, tool_use_id: t.id, content: result })) },
];

describe('offline research lead', () => {
  it('a vague prompt: it asks what, for whom and how deep; after a clear answer it plans with it', async () => {
    const start: ModelMessage[] = [{ role: 'user', content: 'AI stuff' }];
    const t1 = await lead(start);
    expect(toolUses(t1.content)).toEqual([expect.objectContaining({ name: 'ask_user', input: expect.objectContaining({ questions: expect.arrayContaining([expect.stringMatching(/cover/), expect.stringMatching(/for\?/), expect.stringMatching(/deep/)]) }) })]);
    const t2 = await lead(answered(start, t1.content, 'Q: What exactly should the research cover?\nA: safety evaluations of large language models\n\nQ: Who is the report for?\nA: engineering managers'));
    const [task] = toolUses(t2.content);
    expect(task).toMatchObject({ name: 'Task', input: { agent: 'researcher' } });
    expect(String(task?.input.prompt)).toMatch(/safety evaluations of large language models/);
  });

  it('multi-round: a still-vague answer makes it ask again, at most twice in all', async () => {
    const start: ModelMessage[] = [{ role: 'user', content: 'stuff' }];
    const t1 = await lead(start);
    const h1 = answered(start, t1.content, 'A: things');
    const t2 = await lead(h1);
    expect(toolUses(t2.content)[0]).toMatchObject({ name: 'ask_user', input: { questions: [expect.stringMatching(/more specific/)] } });
    const t3 = await lead(answered(h1, t2.content, 'A: whatever'));
    expect(toolUses(t3.content)[0]).toMatchObject({ name: 'Task' });
  });

  it('a clear prompt proceeds with no question; "compare A and B" delegates to two researchers at once', async () => {
    expect(toolUses((await lead([{ role: 'user', content: 'Research the history of event sourcing in banking systems' }])).content).map((t) => t.name)).toEqual(['Task']);
    const both = toolUses((await lead([{ role: 'user', content: 'Compare PostgreSQL and MySQL for analytics workloads' }])).content);
    expect(both.map((t) => t.input.prompt)).toEqual([expect.stringMatching(/"PostgreSQL"/), expect.stringMatching(/"MySQL for analytics workloads"/)]);
  });

  it('a rejected plan is revised with the reason; one the deadline rejected, or a fourth rejection, ends the run', async () => {
    const start: ModelMessage[] = [{ role: 'user', content: 'Research the history of event sourcing' }];
    const t1 = await lead(start);
    const h2 = answered(start, t1.content, 'The user rejected the plan: too broad');
    const t2 = await lead(h2);
    expect(t2.stopReason).toBe('tool_use');
    expect(JSON.stringify(t2.content)).toMatch(/Revised plan, taking your feedback into account \(too broad\)/);
    expect(t2.content.find((b) => b.type === 'tool_use')).toMatchObject({ name: 'Task', input: { agent: 'researcher', prompt: expect.stringMatching(/revised after feedback: too broad/) } });
    const timedOut = await lead(answered(start, t1.content, rejectionText('the plan', null)));
    expect(timedOut.stopReason).toBe('end_turn');
    let h = h2;
    let t = t2;
    for (const reason of ['no', 'still no', 'stop']) {
      h = answered(h, t.content, `The user rejected the plan: ${reason}`);
      t = await lead(h);
    }
    expect(t.stopReason).toBe('end_turn');
    expect(JSON.stringify(t.content)).toMatch(/rejected the plan: stop/);
  });
});

describe('offline research lead, asked to mail the report', () => {
  /** The lead's run with every delegation answered by `results` in turn. */
  const runLead = async (prompt: string, results: string[]) => {
    let h: ModelMessage[] = [{ role: 'user', content: prompt }];
    const turns = [];
    for (const r of [...results, null]) {
      const t = await lead(h);
      turns.push(t);
      if (r === null || t.stopReason !== 'tool_use') break;
      h = answered(h, t.content, r);
    }
    return turns;
  };
  const done = (summary: string) => JSON.stringify({ summary, filesCreated: [], filesModified: [], success: true });

  it('delegates to the email agent once the report is written, naming the recipients; the research brief leaves the mailing out', async () => {
    const turns = await runLead('Research the history of event sourcing and email it to ann@example.com', [done('notes'), done('report'), done('Mail queued as x')]);
    const delegated = turns.flatMap((t) => toolUses(t.content)).map((t) => t.input);
    expect(delegated.map((i) => i.agent)).toEqual(['researcher', 'report-writer', 'email-agent']);
    expect(String(delegated[0]?.prompt)).not.toMatch(/ann@example\.com|email/);
    expect(String(delegated[2]?.prompt)).toMatch(/^Mail report\.md to ann@example\.com\.\nSubject: Report: Research the history of event sourcing$/);
    expect(JSON.stringify(turns[0]?.content)).toMatch(/Then the email agent mails report\.md to ann@example\.com/);
    expect(turns.at(-1)?.stopReason).toBe('end_turn');
    expect(JSON.stringify(turns.at(-1)?.content)).toMatch(/Mail: Mail queued as x/);
  });

  it('without a mailing clause it ends after the report, as before', async () => {
    const turns = await runLead('Research the history of event sourcing', [done('notes'), done('report')]);
    expect(turns.flatMap((t) => toolUses(t.content)).map((t) => t.input.agent)).toEqual(['researcher', 'report-writer']);
    expect(turns.at(-1)?.stopReason).toBe('end_turn');
  });

  it('a rejected mailing is re-planned with the reason', async () => {
    const turns = await runLead('Research event sourcing, then mail the report to ann@example.com', [done('notes'), done('report'), 'The user rejected the plan: not yet']);
    const last = toolUses(turns.at(-1)?.content ?? [])[0];
    expect(last).toMatchObject({ name: 'Task', input: { agent: 'email-agent', prompt: expect.stringMatching(/revised after feedback: not yet/) } });
  });

  it('mailRecipientsOf / withoutMailClause', () => {
    expect(mailRecipientsOf('Research X and mail it to a@example.com and b.c@example.org.')).toEqual(['a@example.com', 'b.c@example.org']);
    expect(mailRecipientsOf('Research X; e-mail the report to a@example.com')).toEqual(['a@example.com']);
    expect(mailRecipientsOf('Research how email works (ask a@example.com)')).toEqual([]);
    expect(withoutMailClause('Research X and mail it to a@example.com')).toBe('Research X');
  });
});

describe('offline email agent', () => {
  const agent = (messages: ModelMessage[]) => model.complete({ agentType: 'email-agent', model: 'm', system: '', messages, tools: specs('read_file', 'send_email'), maxTokens: 100 });
  it('reads the file, sends it as the body with the file attached, then says what became of it', async () => {
    const start: ModelMessage[] = [{ role: 'user', content: 'Mail report.md to ann@example.com.\nSubject: Report: event sourcing' }];
    const t1 = await agent(start);
    expect(toolUses(t1.content)).toEqual([expect.objectContaining({ name: 'read_file', input: { path: 'report.md' } })]);
    const h1 = answered(start, t1.content, '# Report\n\nFindings.');
    const t2 = await agent(h1);
    expect(toolUses(t2.content)).toEqual([expect.objectContaining({ name: 'send_email', input: { to: ['ann@example.com'], subject: 'Report: event sourcing', body: '# Report\n\nFindings.', attach: ['report.md'] } })]);
    expect(allTools.send_email!.input.safeParse(toolUses(t2.content)[0]?.input).success).toBe(true);
    const t3 = await agent(answered(h1, t2.content, 'queued as 1234'));
    expect(t3).toMatchObject({ stopReason: 'end_turn' });
    expect(JSON.stringify(t3.content)).toMatch(/Mail queued as 1234/);
    const rejected = await agent(answered(h1, t2.content, 'The user rejected this call (send_email): wrong person'));
    expect(JSON.stringify(rejected.content)).toMatch(/not sent: The user rejected this call \(send_email\): wrong person/);
  });
});

describe('offline engineering lead', () => {
  const engLead = (messages: ModelMessage[]) => model.complete({ agentType: 'engineering-lead', model: 'm', system: 'Delegate to `backend-engineer` and `frontend-engineer`.', messages, tools: specs('submit_plan'), maxTokens: 100 });
  it('a rejected plan is submitted again, revised with the reason', async () => {
    const start: ModelMessage[] = [{ role: 'user', content: `Add a low-stock report\n\n${WORKSPACE_FILES_HEADING}\n- api/stock.ts\n- web/app.ts` }];
    const t1 = await engLead(start);
    expect(toolUses(t1.content)[0]).toMatchObject({ name: 'submit_plan', input: { subtasks: [{ id: 'backend' }, { id: 'frontend' }] } });
    const t2 = await engLead(answered(start, t1.content, 'The user rejected the plan: keep the API unchanged'));
    const plan = toolUses(t2.content)[0];
    expect(plan).toMatchObject({ name: 'submit_plan', input: { summary: expect.stringMatching(/Revised after your feedback: keep the API unchanged/) } });
    expect(JSON.stringify(plan?.input)).toMatch(/the api\/ side.*Revised after your feedback: keep the API unchanged/);
    const t3 = await engLead(answered(start, t1.content, rejectionText('the plan', null)));
    expect(t3.stopReason).toBe('end_turn');
  });
});

describe('offline engineer', () => {
  const engineer = (messages: ModelMessage[]) => model.complete({ agentType: 'backend-engineer', model: 'm', system: '', messages, tools: specs('glob', 'read_file', 'write_file', 'run_tests'), maxTokens: 100 });
  const brief = (locks: string) => `You are doing subtask 'report' of this plan: p\nYour subtask: a report\nFile locks — the only paths you may create, change or delete: ${locks}. A write anywhere else is refused.`;
  /** The conversation after each of the engineer's turns, each tool call answered with the next result. */
  async function run(start: ModelMessage[], results: string[]) {
    let history = start;
    const turns: ContentBlock[][] = [];
    for (const r of [...results, '']) {
      const t = await engineer(history);
      turns.push(t.content);
      if (t.stopReason !== 'tool_use') break;
      history = answered(history, t.content, r);
    }
    return turns.map((c) => toolUses(c).map((u) => `${u.name} ${String(u.input.pattern ?? u.input.path ?? '')}`.trim()));
  }

  it('a glob that matched nothing ("no files match …") is no file: it creates its own module, test-first', async () => {
    expect(await run([{ role: 'user', content: brief('api/**') }], ['no files match *.ts', 'ok', 'FAIL', 'ok', 'PASS'])).toEqual([['glob *.ts'], ['write_file api/report.report.test.ts'], ['run_tests api/report.report.test.ts'], ['write_file api/report.ts'], ['run_tests'], []]);
  });

  it('a lock on one file: it changes that file (no room for a test file), then runs the suite', async () => {
    expect(await run([{ role: 'user', content: brief('api/inventory.ts') }], ['api/inventory.ts\napi/other.ts', 'export const x = 1;', 'ok', 'PASS'])).toEqual([['glob *.ts'], ['read_file api/inventory.ts'], ['write_file api/inventory.ts'], ['run_tests'], []]);
  });
});

describe('offline researcher', () => {
  const researcher = (messages: ModelMessage[]) => model.complete({ agentType: 'researcher', model: 'm', system: '', messages, tools: specs('web_search', 'write_file', 'ask_user'), maxTokens: 100 });
  it('asks first when the brief says to check with the user, then searches, then writes notes with the answer and the sources', async () => {
    const start: ModelMessage[] = [{ role: 'user', content: 'Research Rust async runtimes; ask me which sources to use' }];
    const t1 = await researcher(start);
    expect(toolUses(t1.content)[0]).toMatchObject({ name: 'ask_user' });
    const h1 = answered(start, t1.content, 'Q: Which sources should the notes rely on?\nA: peer-reviewed papers');
    const t2 = await researcher(h1);
    expect(toolUses(t2.content)[0]).toMatchObject({ name: 'web_search', input: { query: expect.stringMatching(/Rust async runtimes/) } });
    const t3 = await researcher(answered(h1, t2.content, 'Results for "x" (offline corpus):\n\n1. Tokio guide\n   source: docs/tokio.md\n   Tokio is an **async** runtime'));
    expect(toolUses(t3.content)[0]).toMatchObject({ name: 'write_file', input: { path: 'notes.md', content: expect.stringMatching(/peer-reviewed papers[\s\S]*\*\*Tokio guide\*\* — Tokio is an \*\*async\*\* runtime\n {2}Source: `docs\/tokio.md`/) } });
  });
  it('searchQueryOf keeps the subject of a brief', () => {
    expect(searchQueryOf('Research this topic and write notes.md: durable execution (clarified: for engineers)')).toBe('durable execution');
    expect(searchQueryOf('Research "NATS JetStream" (one side of: compare X and Y) and write notes.md.')).toBe('NATS JetStream');
  });
});

describe('offline report writer', () => {
  it('finds the notes, reads them, and writes report.md from their findings and sources', async () => {
    const writer = (messages: ModelMessage[]) => model.complete({ agentType: 'report-writer', model: 'm', system: '', messages, tools: specs('glob', 'read_file', 'write_file'), maxTokens: 100 });
    const start: ModelMessage[] = [{ role: 'user', content: 'Write report.md about: durable execution' }];
    const t1 = await writer(start);
    expect(toolUses(t1.content)).toEqual([expect.objectContaining({ name: 'glob', input: { pattern: '**/notes.md' } })]);
    const h1 = answered(start, t1.content, 'notes.md\nresearcher-2/notes.md');
    const t2 = await writer(h1);
    expect(toolUses(t2.content).map((t) => t.input.path)).toEqual(['notes.md', 'researcher-2/notes.md']);
    const notes = '## Findings\n\n- **Event log** — state is rebuilt from events\n  Source: `README.md`\n';
    const h2 = [...h1, { role: 'assistant' as const, content: t2.content }, { role: 'user' as const, content: toolUses(t2.content).map((t) => ({ type: 'tool_result' as const, tool_use_id: t.id, content: notes })) }];
    const t3 = await writer(h2);
    const [write] = toolUses(t3.content);
    expect(write).toMatchObject({ name: 'write_file', input: { path: 'report.md' } });
    expect(String(write?.input.content)).toMatch(/- Event log: state is rebuilt from events \*\(from notes\.md\)\*[\s\S]*## Sources\n\n- README\.md/);
  });
});

describe('heuristics', () => {
  it('isVague', () => {
    expect(isVague('AI stuff')).toBe(true);
    expect(isVague('databases')).toBe(true);
    expect(isVague('The history of the Rust borrow checker')).toBe(false);
  });
  it('subjectsOf', () => {
    expect(subjectsOf('Compare Go and Rust.')).toEqual(['Go', 'Rust']);
    expect(subjectsOf('Kafka vs NATS')).toEqual(['Kafka', 'NATS']);
    expect(subjectsOf('The history of SQL')).toEqual(['The history of SQL']);
  });
});

describe('the offline model and a team of your own', () => {
  it('an agent type it has no script for is refused, saying why (before: it answered "I have no offline script" and its run completed as if it had worked)', async () => {
    const err = await model.complete({ agentType: 'support-lead', model: 'm', system: '', messages: [{ role: 'user', content: 'triage this' }], tools: [], maxTokens: 100 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'ModelRejectedError', code: 'model_error', message: expect.stringMatching(/^no ANTHROPIC_API_KEY, and the offline model has no script for agent type 'support-lead' \(it plays the shipped teams only: research-lead, .*\): set ANTHROPIC_API_KEY to run this team$/) });
  });
});
