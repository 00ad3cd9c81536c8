import { isToolUse, type ContentBlock, type StopReason } from '@baton/domain';
import type { ModelClient, ModelMessage, ModelRequest, ModelResponse } from './model.ts';

/**
 * The offline model: deterministic, no network, the same tool protocol as Claude. It plays
 * each built-in agent's role plausibly and labels everything it writes as offline. Used
 * whenever ANTHROPIC_API_KEY is unset, and by the benchmarks (where it answers instantly).
 */
export const OFFLINE_LABEL = '[offline model]';

export class OfflineModel implements ModelClient {
  readonly name = 'offline';
  private readonly latencyMs: number;
  constructor(opts: { latencyMs?: number } = {}) {
    this.latencyMs = opts.latencyMs ?? 0;
  }

  async complete(req: ModelRequest): Promise<ModelResponse> {
    if (this.latencyMs > 0) await delay(this.latencyMs, req.signal);
    req.signal?.throwIfAborted();
    const turn = req.messages.filter((m) => m.role === 'assistant').length + 1;
    const play = roles[req.agentType] ?? genericRole;
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

type Play = (req: ModelRequest, turn: number) => { content: ContentBlock[]; stopReason: StopReason };

const toolUseId = (agentType: string, turn: number, i = 0): string => `toolu_offline_${agentType.replace(/[^a-z0-9]/gi, '')}_${turn}_${i}`;
const text = (t: string): ContentBlock => ({ type: 'text', text: `${OFFLINE_LABEL} ${t}` });

function firstPrompt(messages: ModelMessage[]): string {
  const first = messages[0];
  if (!first || first.role !== 'user') return '';
  return typeof first.content === 'string' ? first.content : first.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
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

const topicOf = (prompt: string): string => prompt.replace(/\s+/g, ' ').trim().slice(0, 300);

/** The agent's tool calls paired with their results, in order (from the rebuilt conversation). */
function calls(messages: ModelMessage[]): { name: string; input: Record<string, unknown>; result: string | null; isError: boolean }[] {
  const out: { id: string; name: string; input: Record<string, unknown>; result: string | null; isError: boolean }[] = [];
  for (const m of messages) {
    if (m.role === 'assistant') {
      for (const b of m.content) if (isToolUse(b)) out.push({ id: b.id, name: b.name, input: b.input, result: null, isError: false });
    } else if (Array.isArray(m.content)) {
      for (const b of m.content) {
        const c = b.type === 'tool_result' ? out.find((x) => x.id === b.tool_use_id) : undefined;
        if (c && b.type === 'tool_result') {
          c.result = b.content;
          c.isError = b.is_error === true;
        }
      }
    }
  }
  return out;
}

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
  const prompt = topicOf(firstPrompt(req.messages));
  const history = calls(req.messages);
  const asked = history.filter((c) => c.name === 'ask_user' && c.result !== null);
  const clarified = asked.map((c) => answersOf(c.result ?? '')).filter((a) => !/did not answer before the deadline/.test(a));
  const topic = clarified.length > 0 ? `${prompt} (clarified: ${clarified.join('; ')})` : prompt;
  const delegations = history.filter((c) => c.name === 'Task');
  const rejected = delegations.find((c) => c.result && /^The user rejected the plan/.test(c.result));
  if (rejected) {
    return { content: [text(`The plan was rejected (${rejected.result}). I will stop here rather than guess.`)], stopReason: 'end_turn' };
  }
  const research = delegations.filter((c) => c.input.agent === 'researcher');
  const writing = delegations.filter((c) => c.input.agent === 'report-writer');
  if (research.length === 0) {
    // Vague request: ask what, for whom and how deep; ask again if the answer is still vague.
    const needsAsking = asked.length === 0 ? isVague(prompt) : asked.length < MAX_CLARIFICATION_ROUNDS && isVague(clarified.join(' ')) && clarified.length === asked.length;
    if (needsAsking) {
      const questions =
        asked.length === 0
          ? ['What exactly should the research cover?', 'Who is the report for?', 'How deep should it go: a one-page brief or a detailed report?']
          : ['Could you be more specific about the subject (a field, a product, a question)?'];
      return {
        content: [
          text(asked.length === 0 ? `"${prompt}" is too broad to research well; I need a few details first.` : 'The answer is still too broad to plan from.'),
          { type: 'tool_use', id: toolUseId(req.agentType, turn), name: 'ask_user', input: { questions, context: `The request was: "${prompt}"` } },
        ],
        stopReason: 'tool_use',
      };
    }
    const subjects = subjectsOf(topic);
    const plan =
      subjects.length > 1
        ? `Plan for "${topic}": 1) two researchers work in parallel, one on ${subjects.map((x) => `"${x}"`).join(', one on ')} (notes.md each); 2) the report writer compares them in report.md.`
        : `Plan for "${topic}": 1) the researcher gathers notes (notes.md); 2) the report writer turns them into report.md.`;
    const brief = (subject: string): string => (subjects.length > 1 ? `Research "${subject}" (one side of: ${topic}) and write notes.md.` : `Research this topic and write notes.md: ${topic}`);
    return {
      content: [
        text(plan),
        ...subjects.map((subject, i) => ({ type: 'tool_use' as const, id: toolUseId(req.agentType, turn, i), name: 'Task', input: { agent: 'researcher', description: `Gather notes${subjects.length > 1 ? ` on ${subject.slice(0, 80)}` : ''}`, prompt: brief(subject) } })),
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
  return { content: [text(`The report on "${topic}" is written (report.md). ${summaryOf(last?.result ?? undefined)}`)], stopReason: 'end_turn' };
};

/** A brief that asks the agent to check with the user ("ask me which sources …"). */
const CHECK_WITH_USER = /\b(ask me|check with me)\b/i;

const writerRole =
  (file: 'notes.md' | 'report.md'): Play =>
  (req, turn) => {
    const brief = topicOf(firstPrompt(req.messages));
    const history = calls(req.messages);
    const asks = history.filter((c) => c.name === 'ask_user');
    if (file === 'notes.md' && turn === 1 && CHECK_WITH_USER.test(brief)) {
      return {
        content: [
          text('The brief asks me to check a choice with you before I write.'),
          { type: 'tool_use', id: toolUseId(req.agentType, turn), name: 'ask_user', input: { questions: ['Which sources should the notes rely on?'], context: brief.slice(0, 500), options: ['peer-reviewed papers', 'news and blogs', 'both'] } },
        ],
        stopReason: 'tool_use',
      };
    }
    const writeTurn = asks.length + 1;
    if (turn === writeTurn) {
      const guidance = asks.map((c) => (c.result ? answersOf(c.result) : '')).filter(Boolean);
      const body =
        file === 'notes.md'
          ? `# Research notes\n\n> Written by Baton's ${OFFLINE_LABEL}: it cannot search the web, so these notes only restate the brief.\n\n## Brief\n\n${brief}\n${guidance.length ? `\n## Guidance from the user\n\n${guidance.map((g) => `- ${g}`).join('\n')}\n` : ''}\n## Findings\n\n- No sources consulted (offline).\n`
          : `# Report\n\n> Written by Baton's ${OFFLINE_LABEL}; set ANTHROPIC_API_KEY for a real report.\n\n## Subject\n\n${brief}\n\n## Summary\n\nThis report was assembled offline from the research summary it was given.\n`;
      return {
        content: [text(`Writing ${file}.`), { type: 'tool_use', id: toolUseId(req.agentType, turn), name: 'write_file', input: { path: file, content: body } }],
        stopReason: 'tool_use',
      };
    }
    const results = history.filter((c) => c.name === 'write_file');
    const failed = results.some((r) => r.isError);
    return { content: [text(failed ? `Could not write ${file}: ${results.map((r) => r.result ?? '').join('; ')}` : `Wrote ${file} about: ${brief.slice(0, 120)}`)], stopReason: 'end_turn' };
  };

/** Bench lead: turns 1..9 call bench_step (turn 3 calls bench_gate, which may need approval); turn 10 finishes. */
const benchLead: Play = (req, turn) =>
  turn < 10
    ? { content: [{ type: 'tool_use', id: toolUseId(req.agentType, turn), name: turn === 3 ? 'bench_gate' : 'bench_step', input: { step: turn } }], stopReason: 'tool_use' }
    : { content: [text('bench done')], stopReason: 'end_turn' };

const genericRole: Play = (req) => ({ content: [text(`I have no offline script for agent type '${req.agentType}'.`)], stopReason: 'end_turn' });

const roles: Record<string, Play> = {
  'research-lead': researchLead,
  researcher: writerRole('notes.md'),
  'report-writer': writerRole('report.md'),
  'bench-lead': benchLead,
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
