import { describe, expect, it } from 'vitest';
import { chatRequest } from './chat.ts';
import { OFFLINE_LABEL } from './offline-script.ts';
import { OfflineChatModel, offlineChatReply, streamedWords } from './offline-chat.ts';
import { builtinTeams } from './teams.ts';

const research = builtinTeams.research!;
const request = (texts: string[]) => chatRequest(research, texts.map((text, i) => ({ role: i % 2 === 0 ? ('user' as const) : ('assistant' as const), text })), { maxTokens: 100 });

describe('the offline chat model', () => {
  it('streams a deterministic, labelled reply word by word; the pieces are the reply', async () => {
    const model = new OfflineChatModel();
    const pieces: string[] = [];
    const res = await model.stream(request(['What is event sourcing?']), (d) => pieces.push(d));
    const text = (res.content[0] as { text: string }).text;
    expect(text.startsWith(`${OFFLINE_LABEL} `)).toBe(true);
    expect(text).toContain('"What is event sourcing?"');
    expect(text).toContain('the research team');
    expect(pieces.join('')).toBe(text);
    expect(pieces.length).toBe(text.split(' ').length);
    expect(res).toMatchObject({ model: 'offline', offline: true, stopReason: 'end_turn', usage: { costUsd: 0 } });
    expect(res.usage.outputTokens).toBe(Math.ceil(text.length / 4));
    // Deterministic: the same conversation, the same reply.
    expect((await model.stream(request(['What is event sourcing?']), () => {})).content).toEqual(res.content);
    expect(offlineChatReply(request(['first', 'ok', 'second']))).toContain('This conversation began with "first"; you have said 2 things so far.');
  });

  it('an abort stops it: no reply', async () => {
    const abort = new AbortController();
    const model = new OfflineChatModel({ wordDelayMs: 5 });
    const pieces: string[] = [];
    const pending = model.stream({ ...request(['hello there']), signal: abort.signal }, (d) => {
      pieces.push(d);
      if (pieces.length === 2) abort.abort(new Error('gone'));
    });
    await expect(pending).rejects.toThrow('gone');
    expect(pieces).toHaveLength(2);
  });

  it('streamedWords keeps every character', () => {
    expect(streamedWords('  a  b\nc ')).toEqual(['  ', 'a  ', 'b\n', 'c ']);
    expect(streamedWords('')).toEqual([]);
  });
});
