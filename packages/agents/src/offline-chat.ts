import { setImmediate as nextTurn } from 'node:timers/promises';
import type { ModelRequest, ModelResponse, StreamingModel } from './model.ts';
import { OFFLINE_LABEL, oneLine } from './offline-script.ts';

/**
 * The offline model's chat replies (chat mode with no API key): deterministic, no network,
 * labelled `[offline model]`, streamed word by word. It cannot think, so it says so, restates what
 * it was asked, and points to what Baton can do with the conversation: turn it into a task.
 */
export class OfflineChatModel implements StreamingModel {
  readonly name = 'offline';
  private readonly wordDelayMs: number;
  constructor(opts: { wordDelayMs?: number } = {}) {
    this.wordDelayMs = opts.wordDelayMs ?? 0;
  }

  async stream(req: ModelRequest, onText: (delta: string) => void): Promise<ModelResponse> {
    const text = offlineChatReply(req);
    for (const word of streamedWords(text)) {
      // Each word is its own write, after the event loop has had a turn (or the configured delay).
      await (this.wordDelayMs > 0 ? wait(this.wordDelayMs, req.signal) : nextTurn());
      req.signal?.throwIfAborted();
      onText(word);
    }
    const inputChars = JSON.stringify(req.messages).length + req.system.length;
    return {
      content: [{ type: 'text', text }],
      stopReason: 'end_turn',
      usage: { inputTokens: Math.ceil(inputChars / 4), outputTokens: Math.ceil(text.length / 4), cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0 },
      model: 'offline',
      offline: true,
    };
  }
}

/** The pieces a text is streamed in: each word with the whitespace after it (joined, they are the text). */
export function streamedWords(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [];
}

const said = (m: ModelRequest['messages'][number]): string => (typeof m.content === 'string' ? m.content : m.content.map((b) => ('text' in b && typeof b.text === 'string' ? b.text : '')).join(' '));

/** The offline reply to a chat request: a function of the conversation (and the team its system prompt names) only. */
export function offlineChatReply(req: ModelRequest): string {
  const asked = req.messages.filter((m) => m.role === 'user');
  const last = oneLine(said(asked[asked.length - 1] ?? { role: 'user', content: '' }), 160);
  const team = /the '([^']+)' team/.exec(req.system)?.[1] ?? 'research';
  const first = asked.length > 1 ? ` This conversation began with "${oneLine(said(asked[0] as ModelRequest['messages'][number]), 80)}"; you have said ${asked.length} things so far.` : '';
  return (
    `${OFFLINE_LABEL} I am the offline model: no API key is set, so I cannot really answer "${last}" (with ANTHROPIC_API_KEY set, Claude replies here).` +
    `${first} What I can do: turn this conversation into a task, and the ${team} team will work on your last request with the conversation as its context.`
  );
}

function wait(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      reject(signal.reason as Error);
    }, { once: true });
  });
}
