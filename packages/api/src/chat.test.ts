import { describe, expect, it } from 'vitest';
import { chatTitle, parseSse, toChatStreamEvent } from './chat.ts';

describe('parseSse', () => {
  it('parses frames as chunks arrive, keeping an incomplete one for the next chunk; comments and retry are skipped', () => {
    const stream = 'retry: 2000\n\nevent: chat\ndata: {"chatId":"c"}\n\n: heartbeat\n\nevent: delta\ndata: {"text":"Hel"}\n\nevent: delta\ndata: {"text":"lo"}\n\nid: 7\nevent: message\ndata: {"a":\ndata: 1}\n\n';
    const frames = [];
    let rest = '';
    for (let i = 0; i < stream.length; i += 7) {
      const parsed = parseSse(rest + stream.slice(i, i + 7));
      frames.push(...parsed.frames);
      rest = parsed.rest;
    }
    expect(rest).toBe('');
    expect(frames).toEqual([
      { event: 'chat', data: '{"chatId":"c"}', id: null },
      { event: 'delta', data: '{"text":"Hel"}', id: null },
      { event: 'delta', data: '{"text":"lo"}', id: null },
      { event: 'message', data: '{"a":\n1}', id: '7' },
    ]);
    expect(toChatStreamEvent(frames[1]!)).toEqual({ event: 'delta', data: { text: 'Hel' } });
    expect(toChatStreamEvent({ event: 'TaskSubmitted', data: '{}', id: null })).toBeNull();
  });

  it('CRLF line ends too', () => {
    expect(parseSse('event: delta\r\ndata: {"text":"x"}\r\n\r\n').frames).toEqual([{ event: 'delta', data: '{"text":"x"}', id: null }]);
  });
});

describe('chatTitle', () => {
  it('the first message on one line, cut at 80 characters', () => {
    expect(chatTitle('  What is\n\nNATS?  ')).toBe('What is NATS?');
    expect(chatTitle('x'.repeat(100))).toBe(`${'x'.repeat(79)}…`);
  });
});
