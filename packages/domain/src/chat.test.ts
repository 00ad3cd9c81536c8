import { describe, expect, it } from 'vitest';
import { chatTaskPrompt, chatTurns, foldChat, type ChatState, type NewChatEvent, type RecordedChatEvent } from './chat.ts';

const CHAT = '00000000-0000-4000-8000-000000000001';
const usage = { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0.001 };
let n = 0;
const id = () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`;

/** A chat folded from events (each recorded a second after the one before). */
function chat(...events: Omit<NewChatEvent, 'id'>[]): ChatState {
  const recorded = events.map((e, i) => ({ ...e, id: id(), chatId: CHAT, version: i + 1, recordedAt: new Date(Date.UTC(2025, 0, 1, 0, 0, i)), metadata: {} }) as RecordedChatEvent);
  return foldChat(CHAT, recorded);
}
const started = { type: 'ChatStarted', data: { tenantId: 't', team: 'research', startedBy: 'me' } } as const;
const user = (text: string) => ({ type: 'UserMessageRecorded', data: { text, author: 'me' } }) as const;
const reply = (text: string) => ({ type: 'AssistantReplyRecorded', data: { inReplyTo: CHAT, text, model: 'm', offline: false, usage, stopReason: 'end_turn', durationMs: 3 } }) as const;
const failed = { type: 'AssistantReplyFailed', data: { inReplyTo: CHAT, error: { code: 'model_error', message: 'boom' }, durationMs: 1 } } as const;

describe('chat state', () => {
  it('folds messages, failures, tasks and usage in order', () => {
    const s = chat(started, user('hi'), reply('hello'), user('again'), failed, reply('ok'), { type: 'ChatTaskStarted', data: { taskId: CHAT, team: 'research', afterMessageId: CHAT, leftOut: 0, startedBy: 'me' } });
    expect(s).toMatchObject({ tenantId: 't', team: 'research', version: 7, createdAt: '2025-01-01T00:00:00.000Z', updatedAt: '2025-01-01T00:00:06.000Z' });
    expect(s.messages.map((m) => [m.role, m.text, m.error?.code ?? null])).toEqual([['user', 'hi', null], ['assistant', 'hello', null], ['user', 'again', null], ['assistant', '', 'model_error'], ['assistant', 'ok', null]]);
    expect(s.usage).toEqual({ ...usage, inputTokens: 20, outputTokens: 10, costUsd: 0.002 });
    expect(s.tasks).toHaveLength(1);
  });
});

describe('chatTurns (what the model reads)', () => {
  it('alternates, joins consecutive messages of one role, leaves out failed replies', () => {
    expect(chatTurns(chat(started, user('a'), failed, user('b'), reply('c'), user('d')), 1000)).toEqual([
      { role: 'user', text: 'a\n\nb' },
      { role: 'assistant', text: 'c' },
      { role: 'user', text: 'd' },
    ]);
  });

  it('the messages a refused request carried (model_refused) are left out of the turns that follow — the one it answered and the unanswered ones joined to it; one whose reply failed otherwise is joined to the next', () => {
    const refusedReply = (inReplyTo: string) => ({ type: 'AssistantReplyFailed', data: { inReplyTo, error: { code: 'model_refused', message: '400 prompt is too long' }, durationMs: 1 } }) as const;
    const answer = (inReplyTo: string, text: string) => ({ ...reply(text), data: { ...reply(text).data, inReplyTo } }) as const;
    const failedFor = (inReplyTo: string) => ({ ...failed, data: { ...failed.data, inReplyTo } }) as const;
    // Ids are given in order by `chat`: the n-th event gets the n-th id after the ones used so far.
    const ids = (k: number) => `00000000-0000-4000-8000-${String(n + k).padStart(12, '0')}`;
    const a = chat(started, user('hi'), answer(ids(2), 'hello'), user('too long for the model'), refusedReply(ids(4)), user('and now?'));
    expect(chatTurns(a, 1000)).toEqual([{ role: 'user', text: 'hi' }, { role: 'assistant', text: 'hello' }, { role: 'user', text: 'and now?' }]);
    // The message the model cannot take failed first for another reason (a 500): it was joined to the next, whose request was refused — both are left out.
    const b = chat(started, user('hi'), answer(ids(2), 'hello'), user('POISON'), failedFor(ids(4)), user('what about this'), refusedReply(ids(6)), user('and now?'));
    expect(chatTurns(b, 1000)).toEqual([{ role: 'user', text: 'hi' }, { role: 'assistant', text: 'hello' }, { role: 'user', text: 'and now?' }]);
    // A 500 alone: the message stays, read with the next.
    const c = chat(started, user('are you there?'), failedFor(ids(2)), user('hello again'));
    expect(chatTurns(c, 1000)).toEqual([{ role: 'user', text: 'are you there?\n\nhello again' }]);
  });

  it('over the limit: the oldest turns go first, the newest stays (even alone over it), and it starts with the person', () => {
    const s = chat(started, user('1'.repeat(50)), reply('2'.repeat(50)), user('3'.repeat(50)), reply('4'.repeat(50)), user('5'.repeat(50)));
    expect(chatTurns(s, 160).map((t) => t.text[0])).toEqual(['3', '4', '5']);
    expect(chatTurns(s, 110).map((t) => t.text[0])).toEqual(['5']); // '4…' alone would start with the assistant
    expect(chatTurns(s, 10).map((t) => t.text[0])).toEqual(['5']);
  });
});

describe('chatTaskPrompt (action mode)', () => {
  it('one message: the prompt is the message', () => {
    expect(chatTaskPrompt(CHAT, chat(started, user('Research NATS')))).toMatchObject({ prompt: 'Research NATS', leftOut: 0 });
  });

  it('the last user message is the request; the conversation follows, the request marked where it was said', () => {
    const s = chat(started, user('I like queues'), reply('Queues are nice.'), user('Research NATS'), failed, reply('Sure.'));
    const p = chatTaskPrompt(CHAT, s)!;
    expect(p.prompt).toBe(
      `Research NATS\n\n---\nThis task was started from a chat (${CHAT}). The conversation so far, oldest first; [the request above] marks where the request was said.\n\n` +
        'User: I like queues\n\nAssistant: Queues are nice.\n\nUser: [the request above]\n\nAssistant: Sure.',
    );
    expect(p).toMatchObject({ requestMessageId: s.messages[2]!.id, afterMessageId: s.messages[4]!.id, leftOut: 0 });
  });

  it('within the limit: the newest messages whole, the next older one cut at its end (saying how much), the older ones left out (and counted); a newest message too long alone is cut too', () => {
    const s = chat(started, user('a'.repeat(300)), reply('b'.repeat(300)), user('c'.repeat(300)), reply('d'.repeat(300)), user('request'));
    const p = chatTaskPrompt(CHAT, s, 1200)!;
    expect(p.prompt.length).toBeLessThanOrEqual(1200);
    expect(p.leftOut).toBe(1);
    expect(p.prompt).toContain('The 1 oldest message is left out to keep this prompt within 1200 characters.');
    expect(p.prompt).toMatch(/\n\nAssistant: b+ … \[\d+ characters cut to fit the prompt limit\]\n\nUser: c{300}\n\nAssistant: d{300}\n\nUser: \[the request above\]$/);
    expect(p.prompt).not.toContain('a'.repeat(10));
    // Too little room left for a useful part of the next older message: it is left out whole.
    const tight = chatTaskPrompt(CHAT, chat(started, user('a'.repeat(300)), reply('b'.repeat(300)), user('c'.repeat(300)), reply('d'.repeat(300)), user('request')), 1000)!;
    expect(tight.leftOut).toBe(2);
    expect(tight.prompt).not.toMatch(/characters cut/);
    const long = chat(started, user('q'), reply('r'.repeat(5000)), user('request'));
    const cut = chatTaskPrompt(CHAT, long, 1000)!;
    expect(cut.prompt.length).toBeLessThanOrEqual(1000);
    expect(cut.prompt).toMatch(/Assistant: r+ … \[\d+ characters cut to fit the prompt limit\]\n\nUser: \[the request above\]$/);
    expect(cut.leftOut).toBe(1);
    const last = chat(started, user('request'), reply('r'.repeat(5000)));
    const cutLast = chatTaskPrompt(CHAT, last, 1000)!;
    expect(cutLast.prompt.length).toBeLessThanOrEqual(1000);
    expect(cutLast.prompt).toMatch(/Assistant: r+ … \[\d+ characters cut to fit the prompt limit\]$/);
    expect(cutLast.leftOut).toBe(1);
  });

  it('counts characters as the prompt limit does (code points): a request of 10,000 emoji leaves room for about 10,000 characters of context', () => {
    const emoji = '\u{1F600}'.repeat(10_000); // 20,000 UTF-16 units, 10,000 characters
    const s = chat(started, user('x'.repeat(9800)), reply('An answer of some length. '.repeat(14)), user(emoji));
    const p = chatTaskPrompt(CHAT, s)!;
    const chars = [...p.prompt].length;
    expect(chars).toBeLessThanOrEqual(20_000);
    expect(chars).toBeGreaterThan(19_500); // the room is used, not thrown away
    expect(p.prompt.startsWith(emoji)).toBe(true);
    expect(p.prompt).toContain(`Assistant: ${'An answer of some length. '.repeat(14).trim()}`);
    expect(p.prompt).toMatch(/User: x+ … \[\d+ characters cut to fit the prompt limit\]/);
    expect(p.leftOut).toBe(0);
    // A cut never splits an emoji.
    const older = chatTaskPrompt(CHAT, chat(started, user('\u{1F600}'.repeat(9900)), reply('ok'), user(emoji)))!;
    expect(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(older.prompt)).toBe(false);
    expect(older.prompt).toMatch(/User: \u{1F600}+ … \[\d+ characters cut to fit the prompt limit\]/u);
    expect([...older.prompt].length).toBeLessThanOrEqual(20_000);
  });

  it('nothing said: null', () => {
    expect(chatTaskPrompt(CHAT, chat(started))).toBeNull();
  });
});
