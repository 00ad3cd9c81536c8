import { describe, expect, it } from 'vitest';
import { parseFrame, readSse } from './sse.ts';

describe('server-sent events', () => {
  it('parses a frame: event, id, data lines joined; comments skipped', () => {
    expect(parseFrame(': heartbeat\nid: 7\nevent: TaskStarted\ndata: {"a":1}')).toEqual({ id: '7', event: 'TaskStarted', data: '{"a":1}' });
    expect(parseFrame('data: a\ndata: b')).toEqual({ id: null, event: 'message', data: 'a\nb' });
  });
  it('reads frames split across chunks and CRLF line ends', async () => {
    const chunks = ['id: 1\r\ndata: {"x"', ':1}\r\n\r\n: hb\n\nid: 2\ndata: 2\n', '\n'];
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        for (const ch of chunks) c.enqueue(new TextEncoder().encode(ch));
        c.close();
      },
    });
    const frames: unknown[] = [];
    await readSse(body, (f) => frames.push(f));
    expect(frames).toEqual([{ id: '1', event: 'message', data: '{"x":1}' }, { id: null, event: 'message', data: '' }, { id: '2', event: 'message', data: '2' }]);
  });
});
