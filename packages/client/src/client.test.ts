import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, BatonClient, UnreachableError } from './index.ts';

describe('BatonClient errors keep the server\'s words', () => {
  let server: Server;
  let url: string;
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url?.startsWith('/v1/tasks/t/approvals/')) {
        res.writeHead(409, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'request_already_decided', message: "request 'apr-1' was already decided: rejected: too broad" } }));
        return;
      }
      res.writeHead(502, { 'content-type': 'text/plain' }).end('bad gateway');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('an API refusal: its message, status and code', async () => {
    const err = await new BatonClient(url).reject('t', 'apr-1', 'no').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 409, code: 'request_already_decided', message: "request 'apr-1' was already decided: rejected: too broad", summary: 'HTTP 409 request_already_decided' });
  });
  it('a body that is not JSON is kept as text', async () => {
    await expect(new BatonClient(url).task('x')).rejects.toMatchObject({ status: 502, code: 'http_error', body: 'bad gateway' });
  });
  it('a gateway that does not answer: which URL', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as { port: number }).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const err = await new BatonClient(`http://127.0.0.1:${port}`).task('x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnreachableError);
    expect((err as Error).message).toMatch(new RegExp(`could not reach the Baton gateway at http://127.0.0.1:${port} \\(.*ECONNREFUSED`));
  });
});

const ev = (position: number, type: string) => `id: ${position}\nevent: ${type}\ndata: ${JSON.stringify({ id: `e${position}`, position, type, taskId: 't', data: {}, metadata: {} })}\n\n`;

describe('follow', () => {
  it('the stream is in commit order: an event whose position is lower than one shown already (its transaction began first, committed later) is shown, not dropped; a repeat is not; a reconnect resumes after the last one received', async () => {
    const asked: (string | undefined)[] = [];
    const server = createServer((req, res) => {
      asked.push(req.headers['last-event-id'] as string | undefined);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (asked.length === 1) res.end(`retry: 10\n\n${ev(4, 'TaskStarted')}${ev(6, 'ModelTurnRecorded')}${ev(5, 'SubagentDispatched')}${ev(5, 'SubagentDispatched')}event: shutdown\ndata: {}\n\n`);
      else res.end(ev(7, 'TaskCompleted'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const seen: number[] = [];
      await new BatonClient(`http://127.0.0.1:${(server.address() as { port: number }).port}`).follow('t', (e) => seen.push(e.position));
      expect(seen).toEqual([4, 6, 5, 7]);
      expect(asked).toEqual([undefined, '5']);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it("a gateway's shutdown frame is not an event: the stream reconnects after the last event it showed (Last-Event-ID), nothing shown twice", async () => {
    const asked: (string | undefined)[] = [];
    const server = createServer((req, res) => {
      asked.push(req.headers['last-event-id'] as string | undefined);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // First: two events, then the gateway goes away. Then: the rest, from where the client says it is.
      if (asked.length === 1) res.end(`retry: 10\n\n${ev(4, 'TaskStarted')}${ev(5, 'ModelTurnRecorded')}event: shutdown\ndata: {}\n\n`);
      else res.end(`${ev(6, 'TaskCompleted')}`);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const seen: number[] = [];
      await new BatonClient(`http://127.0.0.1:${(server.address() as { port: number }).port}`).follow('t', (e) => seen.push(e.position));
      expect(seen).toEqual([4, 5, 6]);
      expect(asked).toEqual([undefined, '5']);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('`event: end` (a stream resumed past the final event ends so at once) stops it: no reconnecting', async () => {
    let connections = 0;
    const server = createServer((_req, res) => {
      connections++;
      res.writeHead(200, { 'content-type': 'text/event-stream' }).end('retry: 10\n\nevent: end\ndata: {"reason":"final"}\n\n');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const states: string[] = [];
      await new BatonClient(`http://127.0.0.1:${(server.address() as { port: number }).port}`).follow('t', () => {}, { after: 9, onState: (s) => states.push(s) });
      expect(connections).toBe(1);
      expect(states).toEqual(['live']);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

describe('archive: the name the gateway gives, as a name only', () => {
  it('a file name, never a path or a control character, whatever Content-Disposition says', async () => {
    const names = [`attachment; filename="x"; filename*=UTF-8''..%2F..%2Fpwned.tgz`, `attachment; filename="ok.tar.gz"`, `attachment; filename*=UTF-8''%C3%BC.tar.gz`, `attachment; filename*=UTF-8''..`, `attachment; filename*=UTF-8''a%0Ab`, ''];
    let i = 0;
    const server = createServer((_req, res) => void res.writeHead(200, { 'content-type': 'application/gzip', ...(names[i] ? { 'content-disposition': names[i] } : {}) }).end('x'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const client = new BatonClient(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
      const got: string[] = [];
      for (i = 0; i < names.length; i++) got.push((await client.archive('12345678-aaaa')).name);
      expect(got).toEqual(['pwned.tgz', 'ok.tar.gz', 'ü.tar.gz', 'task-12345678.tar.gz', 'task-12345678.tar.gz', 'task-12345678.tar.gz']);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
