import { cutText, REJECTION } from '@baton/domain';
import { ModelRejectedError, type ModelClient, type ModelRequest, type ModelResponse } from './model.ts';
import { engineeringRoles } from './offline-engineering.ts';
import { call, calls, firstPrompt, has, OFFLINE_LABEL, oneLine, rejectedPlans, text, toolUseId, type Play } from './offline-script.ts';

export { OFFLINE_LABEL };

/**
 * The offline model: deterministic, no network, the same tool protocol as Claude. It plays
 * each built-in agent's role plausibly and labels everything it writes as offline. Used
 * whenever ANTHROPIC_API_KEY is unset, and by the benchmarks (where it answers instantly).
 */

export class OfflineModel implements ModelClient {
  readonly name = 'offline';
  /** Whatever model an agent's config names, this one answers. */
  servedModel(): string {
    return 'offline';
  }
  private readonly latencyMs: number;
  constructor(opts: { latencyMs?: number } = {}) {
    this.latencyMs = opts.latencyMs ?? 0;
  }

  async complete(req: ModelRequest): Promise<ModelResponse> {
    if (this.latencyMs > 0) await delay(this.latencyMs, req.signal);
    req.signal?.throwIfAborted();
    const turn = req.messages.filter((m) => m.role === 'assistant').length + 1;
    const play = roles[req.agentType];
    // An agent of a team of the user's own: nothing plausible to say — its run fails saying why,
    // rather than completing with an empty answer as if it had worked.
    if (!play) throw new ModelRejectedError(`no ANTHROPIC_API_KEY, and the offline model has no script for agent type '${req.agentType}' (it plays the shipped teams only: ${Object.keys(roles).join(', ')}): set ANTHROPIC_API_KEY to run this team`);
    const { content, stopReason } = play(req, turn);
    const inputChars = JSON.stringify(req.messages).length + req.system.length;
    const outputChars = JSON.stringify(content).length;
    return {
      content,
      stopReason,
      usage: { inputTokens: Math.ceil(inputChars / 4), outputTokens: Math.ceil(outputChars / 4), cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 },
      model: 'offline',
      offline: true,
    };
  }
}

function summaryOf(result: string | undefined): string {
  if (!result) return '';
  try {
    const parsed = JSON.parse(result) as { summary?: string };
    return parsed.summary ?? result;
  } catch {
    return result;
  }
}

const topicOf = (prompt: string): string => oneLine(prompt, 300);

const ADDRESS = /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g;
/** "…, and email it to ann@example.com": the clause that asks for the report to be mailed. */
const MAIL_CLAUSE = /[,;]?\s*(?:and\s+|then\s+)?(?:please\s+)?(?:e-?mail|mail|send)\b[^.;@()]{0,60}?\bto\s+[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}(?:\s*(?:,|and)\s*[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,})*/i;

/** The addresses a prompt asks the report to be mailed to ("… and mail it to ann@example.com"); none: not asked. */
export function mailRecipientsOf(prompt: string): string[] {
  const clause = MAIL_CLAUSE.exec(prompt)?.[0];
  return clause ? [...new Set(clause.match(ADDRESS) ?? [])] : [];
}

/** The prompt without its mailing clause: what to research. */
export const withoutMailClause = (prompt: string): string => prompt.replace(MAIL_CLAUSE, '').trim() || prompt;


const GENERIC = /\b(stuff|things?|something|anything|whatever|topics?|misc)\b/i;
/** Too vague to research: very short, or short and generic ("AI stuff"). */
export function isVague(text: string): boolean {
  const words = text.trim().split(/\s+/).filter(Boolean);
  return words.length < 3 || (words.length < 8 && GENERIC.test(text));
}

/** The answers part of an ask_user result ("Q: …\nA: …" pairs, or plain lines). */
function answersOf(result: string): string {
  const answers = [...result.matchAll(/^A: (.*)$/gm)].map((m) => m[1] ?? '');
  return (answers.length > 0 ? answers : [result]).join('; ').trim();
}

const MAX_CLARIFICATION_ROUNDS = 2;

/** "Compare A and B" / "A vs B": two subjects, researched in parallel (one researcher each). */
export function subjectsOf(topic: string): string[] {
  const m = /\bcompare\s+(.+?)\s+(?:and|with|to|vs\.?|versus)\s+(.+?)(?:[.;:!?]|$)/i.exec(topic) ?? /^(.+?)\s+(?:vs\.?|versus)\s+(.+?)(?:[.;:!?]|$)/i.exec(topic);
  return m ? [m[1]!.trim(), m[2]!.trim()] : [topic];
}

const researchLead: Play = (req, turn) => {
  const asked = firstPrompt(req.messages);
  const recipients = mailRecipientsOf(asked);
  const prompt = topicOf(withoutMailClause(asked));
  const history = calls(req.messages);
  const askedUser = history.filter((c) => c.name === 'ask_user' && c.result !== null);
  const clarified = askedUser.map((c) => answersOf(c.result ?? '')).filter((a) => !/did not answer before the deadline/.test(a));
  const baseTopic = clarified.length > 0 ? `${prompt} (clarified: ${clarified.join('; ')})` : prompt;
  // A rejected plan is re-planned with the person's reason (see rejectedPlans).
  const rejections = rejectedPlans(history, 'Task');
  if (rejections.stop !== null) return { content: [text(`${/^Nobody decided/.test(rejections.stop) ? 'Nobody decided on the plan before its deadline' : `The plan was rejected (${rejections.stop})`}. I will stop here rather than guess.`)], stopReason: 'end_turn' };
  const reasons = rejections.reasons;
  const topic = `${baseTopic}${reasons.length > 0 ? ` (revised after feedback: ${reasons.join('; ')})` : ''}`;
  const delegations = history.filter((c) => c.name === 'Task' && !rejections.calls.includes(c));
  const research = delegations.filter((c) => c.input.agent === 'researcher');
  const writing = delegations.filter((c) => c.input.agent === 'report-writer');
  if (research.length === 0) {
    // Vague request (asked before any plan was made): ask what, for whom and how deep; ask again if the answer is still vague.
    const needsAsking = reasons.length > 0 ? false : askedUser.length === 0 ? isVague(prompt) : askedUser.length < MAX_CLARIFICATION_ROUNDS && isVague(clarified.join(' ')) && clarified.length === askedUser.length;
    if (needsAsking) {
      const questions =
        askedUser.length === 0
          ? ['What exactly should the research cover?', 'Who is the report for?', 'How deep should it go: a one-page brief or a detailed report?']
          : ['Could you be more specific about the subject (a field, a product, a question)?'];
      return {
        content: [
          text(askedUser.length === 0 ? `"${prompt}" is too broad to research well; I need a few details first.` : 'The answer is still too broad to plan from.'),
          { type: 'tool_use', id: toolUseId(req.agentType, turn), name: 'ask_user', input: { questions, context: `The request was: "${prompt}"` } },
        ],
        stopReason: 'tool_use',
      };
    }
    const subjects = subjectsOf(topic);
    const revised = reasons.length > 0 ? `Revised plan, taking your feedback into account (${reasons.join('; ')}). ` : '';
    const plan =
      revised +
      (subjects.length > 1
        ? `Plan for "${topic}": 1) two researchers work in parallel, one on ${subjects.map((x) => `"${x}"`).join(', one on ')} (notes.md each); 2) the report writer compares them in report.md.`
        : `Plan for "${topic}": 1) the researcher gathers notes (notes.md); 2) the report writer turns them into report.md.`) +
      (recipients.length > 0 ? ` Then the email agent mails report.md to ${recipients.join(', ')}.` : '');
    const brief = (subject: string): string => (subjects.length > 1 ? `Research "${subject}" (one side of: ${topic}) and write notes.md.` : `Research this topic and write notes.md: ${topic}`);
    return {
      content: [
        text(plan),
        ...subjects.map((subject, i) => ({ type: 'tool_use' as const, id: toolUseId(req.agentType, turn, i), name: 'Task', input: { agent: 'researcher', description: `Gather notes${subjects.length > 1 ? ` on ${cutText(subject, 80)}` : ''}`, prompt: brief(subject) } })),
      ],
      stopReason: 'tool_use',
    };
  }
  if (writing.length === 0) {
    const summaries = research.map((c) => summaryOf(c.result ?? undefined)).join('\n\n');
    return {
      content: [
        text('The research is done. Next, the report writer writes the report.'),
        { type: 'tool_use', id: toolUseId(req.agentType, turn), name: 'Task', input: { agent: 'report-writer', description: 'Write the report', prompt: `Write report.md about: ${topic}\n\nResearch summary: ${summaries}` } },
      ],
      stopReason: 'tool_use',
    };
  }
  const last = writing[writing.length - 1];
  const written = `The report on "${topic}" is written (report.md). ${summaryOf(last?.result ?? undefined)}`;
  // Asked for the report by mail: the email agent sends it, through the task's outbox.
  const mailing = delegations.filter((c) => c.input.agent === 'email-agent');
  if (recipients.length > 0 && mailing.length === 0) {
    return {
      content: [
        text(`The report is written. Next, the email agent mails it to ${recipients.join(', ')}.`),
        { type: 'tool_use', id: toolUseId(req.agentType, turn), name: 'Task', input: { agent: 'email-agent', description: 'Mail the report', prompt: `Mail report.md to ${recipients.join(', ')}.\nSubject: Report: ${oneLine(topic, 200)}` } },
      ],
      stopReason: 'tool_use',
    };
  }
  const mailed = mailing.at(-1);
  const mail = mailed ? ` Mail: ${mailed.isError ? 'could not be sent: ' : ''}${summaryOf(mailed.result ?? undefined)}` : '';
  return { content: [text(`${written}${mail}`)], stopReason: 'end_turn' };
};

/** The email agent: reads the file its brief names, sends it with send_email (attached), and says what became of it. */
const emailAgent: Play = (req, turn) => {
  const brief = firstPrompt(req.messages);
  const history = calls(req.messages);
  const file = /\b([\w./-]+\.md)\b/.exec(brief)?.[1] ?? 'report.md';
  const reads = history.filter((c) => c.name === 'read_file');
  if (reads.length === 0 && has(req, 'read_file')) return { content: [text(`Reading ${file}.`), call(req, turn, 'read_file', { path: file })], stopReason: 'tool_use' };
  const sends = history.filter((c) => c.name === 'send_email');
  if (sends.length === 0) {
    const to = [...new Set(brief.match(ADDRESS) ?? [])];
    const subject = oneLine(/^Subject:\s*(.+)$/m.exec(brief)?.[1] ?? `Report: ${file}`, 300);
    const read = reads.find((r) => !r.isError && r.result);
    const body = read?.result ?? `${OFFLINE_LABEL} ${brief}`;
    const attach = read ? [String(read.input.path)] : [];
    if (to.length === 0) return { content: [text('The brief names no address to mail; nothing was sent.')], stopReason: 'end_turn' };
    return { content: [text(`Mailing ${file} to ${to.join(', ')}.`), call(req, turn, 'send_email', { to, subject, body, attach })], stopReason: 'tool_use' };
  }
  const last = sends.at(-1);
  const outcome = !last?.result ? 'nothing was sent' : last.isError || REJECTION.test(last.result) ? `not sent: ${last.result}` : last.result;
  return { content: [text(`Mail ${outcome}`)], stopReason: 'end_turn' };
};

/** A brief that asks the agent to check with the user ("ask me which sources …"). */
const CHECK_WITH_USER = /\b(ask me|check with me)\b/i;


/** The words of a brief worth searching for (the instructions around the subject dropped). */
export function searchQueryOf(brief: string): string {
  const subject = /"([^"]+)"/.exec(brief)?.[1] ?? brief.replace(/^.*?(?:write notes\.md|notes\.md)\s*:?\s*/i, '');
  return cutText(subject.replace(/\(clarified:[^)]*\)/g, ' ').replace(/[^\p{L}\p{N}\s-]/gu, ' ').replace(/\s+/g, ' ').trim(), 200) || cutText(brief, 200);
}

/** The search results of a web_search tool result, as (title, source, snippet). */
function hitsOf(result: string | null): { title: string; source: string; snippet: string }[] {
  if (!result) return [];
  return [...result.matchAll(/^\d+\. (.+)\n\s+source: (.+)\n\s+(.+)$/gm)].map((m) => ({ title: m[1] ?? '', source: m[2] ?? '', snippet: m[3] ?? '' }));
}

/** The researcher: (asks if the brief says so,) searches, writes notes.md with its sources, and sums up. */
const researcher: Play = (req, turn) => {
  const brief = topicOf(firstPrompt(req.messages));
  const history = calls(req.messages);
  const asks = history.filter((c) => c.name === 'ask_user');
  if (asks.length === 0 && CHECK_WITH_USER.test(brief) && has(req, 'ask_user')) {
    return {
      content: [
        text('The brief asks me to check a choice with you before I write.'),
        call(req, turn, 'ask_user', { questions: ['Which sources should the notes rely on?'], context: cutText(brief, 500), options: ['peer-reviewed papers', 'news and blogs', 'both'] }),
      ],
      stopReason: 'tool_use',
    };
  }
  const searches = history.filter((c) => c.name === 'web_search');
  if (searches.length === 0 && has(req, 'web_search')) {
    return { content: [text('Searching for sources first.'), call(req, turn, 'web_search', { query: searchQueryOf(brief), max_results: 5 })], stopReason: 'tool_use' };
  }
  const writes = history.filter((c) => c.name === 'write_file');
  if (writes.length === 0) {
    const guidance = asks.map((c) => (c.result ? answersOf(c.result) : '')).filter(Boolean);
    const hits = searches.flatMap((c) => hitsOf(c.result));
    const findings = hits.length
      ? hits.map((h) => `- **${h.title}** — ${h.snippet}\n  Source: \`${h.source}\``).join('\n')
      : '- Nothing relevant was found in the offline corpus.';
    const body = `# Research notes\n\n> Written by Baton's ${OFFLINE_LABEL}: it searched only the local offline corpus (no web access), and it quotes rather than reasons.\n\n## Brief\n\n${brief}\n${guidance.length ? `\n## Guidance from the user\n\n${guidance.map((g) => `- ${g}`).join('\n')}\n` : ''}\n## Findings\n\n${findings}\n\n## Sources\n\n${hits.length ? hits.map((h) => `- ${h.source}`).join('\n') : '- none'}\n`;
    return { content: [text('Writing notes.md.'), call(req, turn, 'write_file', { path: 'notes.md', content: body })], stopReason: 'tool_use' };
  }
  const failed = writes.some((r) => r.isError);
  const found = searches.flatMap((c) => hitsOf(c.result)).length;
  return { content: [text(failed ? `Could not write notes.md: ${writes.map((r) => r.result ?? '').join('; ')}` : `Wrote notes.md (${found} source${found === 1 ? '' : 's'} from the offline corpus) about: ${cutText(brief, 120)}`)], stopReason: 'end_turn' };
};

/** The report writer: finds the notes it was given, reads them, writes report.md from them, and sums up. */
const reportWriter: Play = (req, turn) => {
  const brief = topicOf(firstPrompt(req.messages));
  const history = calls(req.messages);
  const globbed = history.filter((c) => c.name === 'glob');
  if (globbed.length === 0 && has(req, 'glob')) {
    return { content: [text('Looking for the research notes in my workspace.'), call(req, turn, 'glob', { pattern: '**/notes.md' })], stopReason: 'tool_use' };
  }
  const noteFiles = globbed.flatMap((c) => (c.isError || !c.result || /^no files match/.test(c.result) ? [] : c.result.split('\n').filter((l) => l.endsWith('.md'))));
  const reads = history.filter((c) => c.name === 'read_file');
  if (reads.length === 0 && noteFiles.length > 0) {
    return { content: [text(`Reading ${noteFiles.join(', ')}.`), ...noteFiles.slice(0, 8).map((f, i) => call(req, turn, 'read_file', { path: f }, i))], stopReason: 'tool_use' };
  }
  const writes = history.filter((c) => c.name === 'write_file');
  if (writes.length === 0) {
    const notes = reads.filter((r) => !r.isError && r.result).map((r) => ({ file: String(r.input.path), text: r.result ?? '' }));
    const findings = notes.flatMap((n) => [...n.text.matchAll(/^- \*\*(.+?)\*\* — (.+)$/gm)].map((m) => `- ${m[1]}: ${m[2]} *(from ${n.file})*`));
    const sources = [...new Set(notes.flatMap((n) => [...n.text.matchAll(/^\s+Source: `(.+)`$/gm)].map((m) => m[1] ?? '')))];
    const body = `# Report\n\n> Written by Baton's ${OFFLINE_LABEL} from the research notes it was given; set ANTHROPIC_API_KEY for a real report.\n\n## Subject\n\n${brief}\n\n## Key findings\n\n${findings.length ? findings.join('\n') : '- The notes held no findings.'}\n\n## Sources\n\n${sources.length ? sources.map((x) => `- ${x}`).join('\n') : '- none'}\n\n## Method\n\nBuilt from ${notes.length ? notes.map((n) => n.file).join(', ') : 'the research summary alone'}.\n`;
    return { content: [text('Writing report.md.'), call(req, turn, 'write_file', { path: 'report.md', content: body })], stopReason: 'tool_use' };
  }
  const failed = writes.some((r) => r.isError);
  return { content: [text(failed ? `Could not write report.md: ${writes.map((r) => r.result ?? '').join('; ')}` : `Wrote report.md about: ${cutText(brief, 120)}`)], stopReason: 'end_turn' };
};

/** Bench lead: turns 1..9 call bench_step (turn 3 calls bench_gate, which may need approval); turn 10 finishes. */
const benchLead: Play = (req, turn) =>
  turn < 10
    ? { content: [{ type: 'tool_use', id: toolUseId(req.agentType, turn), name: turn === 3 ? 'bench_gate' : 'bench_step', input: { step: turn } }], stopReason: 'tool_use' }
    : { content: [text('bench done')], stopReason: 'end_turn' };

const roles: Record<string, Play> = {
  'research-lead': researchLead,
  researcher,
  'report-writer': reportWriter,
  'email-agent': emailAgent,
  'bench-lead': benchLead,
  ...engineeringRoles,
};

function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      reject(signal.reason);
    }, { once: true });
  });
}
