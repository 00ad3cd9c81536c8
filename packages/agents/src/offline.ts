import type { ContentBlock, StopReason } from '@baton/domain';
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

/** Tool results the agent has received, in order. */
function toolResults(messages: ModelMessage[]): { content: string; isError: boolean }[] {
  const out: { content: string; isError: boolean }[] = [];
  for (const m of messages) {
    if (m.role === 'user' && Array.isArray(m.content)) {
      for (const b of m.content) if (b.type === 'tool_result') out.push({ content: b.content, isError: b.is_error === true });
    }
  }
  return out;
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

const researchLead: Play = (req, turn) => {
  const topic = topicOf(firstPrompt(req.messages));
  const results = toolResults(req.messages);
  const last = results[results.length - 1];
  if (last && /^The user rejected the plan/.test(last.content)) {
    return { content: [text(`The plan was rejected (${last.content}). I will stop here rather than guess.`)], stopReason: 'end_turn' };
  }
  const delegations = results.length;
  if (delegations === 0) {
    return {
      content: [
        text(`Plan for "${topic}": 1) the researcher gathers notes (notes.md); 2) the report writer turns them into report.md.`),
        { type: 'tool_use', id: toolUseId(req.agentType, turn), name: 'Task', input: { agent: 'researcher', description: 'Gather notes', prompt: `Research this topic and write notes.md: ${topic}` } },
      ],
      stopReason: 'tool_use',
    };
  }
  if (delegations === 1) {
    return {
      content: [
        text('The research is done. Next, the report writer writes the report.'),
        {
          type: 'tool_use',
          id: toolUseId(req.agentType, turn),
          name: 'Task',
          input: { agent: 'report-writer', description: 'Write the report', prompt: `Write report.md about: ${topic}\n\nResearch summary: ${summaryOf(last?.content)}` },
        },
      ],
      stopReason: 'tool_use',
    };
  }
  return { content: [text(`The report on "${topic}" is written (report.md). ${summaryOf(last?.content)}`)], stopReason: 'end_turn' };
};

const writerRole =
  (file: 'notes.md' | 'report.md'): Play =>
  (req, turn) => {
    const brief = topicOf(firstPrompt(req.messages));
    if (turn === 1) {
      const body =
        file === 'notes.md'
          ? `# Research notes\n\n> Written by Baton's ${OFFLINE_LABEL}: it cannot search the web, so these notes only restate the brief.\n\n## Brief\n\n${brief}\n\n## Findings\n\n- No sources consulted (offline).\n`
          : `# Report\n\n> Written by Baton's ${OFFLINE_LABEL}; set ANTHROPIC_API_KEY for a real report.\n\n## Subject\n\n${brief}\n\n## Summary\n\nThis report was assembled offline from the research summary it was given.\n`;
      return {
        content: [text(`Writing ${file}.`), { type: 'tool_use', id: toolUseId(req.agentType, turn), name: 'write_file', input: { path: file, content: body } }],
        stopReason: 'tool_use',
      };
    }
    const results = toolResults(req.messages);
    const failed = results.some((r) => r.isError);
    return { content: [text(failed ? `Could not write ${file}: ${results.map((r) => r.content).join('; ')}` : `Wrote ${file} about: ${brief.slice(0, 120)}`)], stopReason: 'end_turn' };
  };

/** Bench lead: steps 1..9 call bench_step; turn 10 finishes. */
const benchLead: Play = (req, turn) =>
  turn < 10
    ? { content: [{ type: 'tool_use', id: toolUseId(req.agentType, turn), name: 'bench_step', input: { step: turn } }], stopReason: 'tool_use' }
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
