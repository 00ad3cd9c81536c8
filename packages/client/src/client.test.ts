import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ApiError, BatonClient, newIdempotencyKey, reconnectStreams, ReplyStreamLost, UnreachableError } from './index.ts';

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

describe('newIdempotencyKey', () => {
  it('a v4 UUID from getRandomValues (crypto.randomUUID is missing on a plain-HTTP page not on localhost), a new one each time', () => {
    const keys = Array.from({ length: 100 }, newIdempotencyKey);
    expect(keys.every((k) => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(k))).toBe(true);
    expect(new Set(keys).size).toBe(100);
  });
});

describe('a write whose connection is cut after it was sent', () => {
  /** A gateway whose first `cuts` answers to each path are a closed socket (the request read and, for all the client knows, recorded). */
  async function cutting(cuts: number, answer: (req: IncomingMessage, res: ServerResponse) => void) {
    const seen: { path: string; key: string | undefined }[] = [];
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        seen.push({ path: req.url ?? '', key: req.headers['idempotency-key'] as string | undefined });
        if (seen.filter((x) => x.path === req.url).length <= cuts) req.socket.destroy();
        else answer(req, res);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return { seen, url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
  }
  const task = (id: string) => JSON.stringify({ id, status: 'pending' });

  it('a submit is sent again under the same Idempotency-Key (its own, when none is given): one task, answered as a replay', async () => {
    const g = await cutting(1, (_req, res) => res.writeHead(201, { 'content-type': 'application/json', 'idempotent-replayed': 'true' }).end(task('t1')));
    try {
      const t = await new BatonClient(g.url).submit({ prompt: 'p' });
      expect(t).toMatchObject({ id: 't1', replayed: true });
      expect(g.seen).toHaveLength(2);
      expect(g.seen[0]!.key).toMatch(/^baton-client-[0-9a-f-]{36}$/);
      expect(g.seen[1]!.key).toBe(g.seen[0]!.key);
      await new BatonClient(g.url).fork('t1', 3, { idempotencyKey: 'mine' });
      expect(g.seen.filter((x) => x.path === '/v1/tasks/t1/fork').map((x) => x.key)).toEqual(['mine', 'mine']);
    } finally {
      await g.close();
    }
  });
  it('a decision is sent again under its own Idempotency-Key (answered as made); a write that is not safe to repeat says it may have been recorded', async () => {
    const g = await cutting(1, (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(task('t')));
    try {
      const api = new BatonClient(g.url);
      expect(await api.approve('t', 'apr-1')).toMatchObject({ id: 't' });
      expect(await api.answer('t', 'clr-1', 'yes')).toMatchObject({ id: 't' });
      expect(g.seen.map((x) => x.path)).toEqual(['/v1/tasks/t/approvals/apr-1', '/v1/tasks/t/approvals/apr-1', '/v1/tasks/t/answers/clr-1', '/v1/tasks/t/answers/clr-1']);
      // Each decision under a key of its own, the same when sent again.
      expect(g.seen.map((x) => x.key)).toEqual([g.seen[0]!.key, g.seen[0]!.key, g.seen[2]!.key, g.seen[2]!.key]);
      expect(new Set(g.seen.map((x) => x.key)).size).toBe(2);
      const err = await api.cancel('t').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UnreachableError);
      expect(err).toMatchObject({ maybeRecorded: true, message: expect.stringMatching(/^no answer from the Baton gateway at .* after the request was sent: it may have been recorded — look before sending it again$/) });
      expect(g.seen.filter((x) => x.path === '/v1/tasks/t/cancel')).toHaveLength(1);
    } finally {
      await g.close();
    }
  });
  it('cut every time: given up after two more tries, saying it may have been recorded', async () => {
    const g = await cutting(10, () => {});
    try {
      const err = await new BatonClient(g.url).reject('t', 'apr-1', 'no').catch((e: unknown) => e);
      expect(err).toMatchObject({ maybeRecorded: true });
      expect(g.seen).toHaveLength(3);
    } finally {
      await g.close();
    }
  });
});

const ev = (position: number, type: string) => `id: ${position}\nevent: ${type}\ndata: ${JSON.stringify({ id: `e${position}`, position, type, taskId: 't', data: {}, metadata: {} })}\n\n`;

describe('chat', () => {
  it('a reply stream that ends (cleanly, as a proxy may) or breaks before the reply is a ReplyStreamLost naming the chat; a whole one is not', async () => {
    let mode: 'ended' | 'broken' | 'whole' = 'ended';
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'x-chat-id': 'c-1' });
      res.write(`event: chat\ndata: ${JSON.stringify({ chatId: 'c-1', team: 'research', created: true, message: {} })}\n\nevent: delta\ndata: {"text":"I "}\n\n`);
      if (mode === 'ended') res.end();
      else if (mode === 'broken') setTimeout(() => res.socket?.destroy(), 20);
      else res.end(`event: message\ndata: ${JSON.stringify({ id: 'm', role: 'assistant', text: 'I know.' })}\n\n`);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const client = new BatonClient(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
    try {
      for (const m of ['ended', 'broken'] as const) {
        mode = m;
        const events: string[] = [];
        const err = await client.chat({ message: 'hi' }, (e) => events.push(e.event)).catch((e: unknown) => e);
        expect(err, m).toBeInstanceOf(ReplyStreamLost);
        expect((err as ReplyStreamLost).chatId).toBe('c-1');
        expect((err as Error).message).toMatch(/^the reply's stream ended before the reply did.*: the message was recorded in chat c-1, and the reply is recorded there once it is written/);
        expect(events).toEqual(['chat', 'delta']);
      }
      mode = 'whole';
      const events: string[] = [];
      await client.chat({ message: 'hi' }, (e) => events.push(e.event));
      expect(events).toEqual(['chat', 'delta', 'message']);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

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

  it('a stream silent past three of its heartbeats is taken for dead and reopened where it was (a phone whose connection died without a word showed "live" on a stale page); reconnectStreams() reopens at once', async () => {
    const asked: (string | undefined)[] = [];
    const held: ServerResponse[] = [];
    const server = createServer((req, res) => {
      asked.push(req.headers['last-event-id'] as string | undefined);
      res.writeHead(200, { 'content-type': 'text/event-stream', 'baton-heartbeat-ms': '40' });
      if (asked.length === 1) res.write(ev(4, 'TaskStarted')); // then nothing: not even a heartbeat (the connection died on the way)
      else if (asked.length === 2) {
        res.write(ev(5, 'ModelTurnRecorded')); // alive: a heartbeat on time, until reopened
        const beat = setInterval(() => res.write(': heartbeat\n\n'), 20);
        res.on('close', () => clearInterval(beat));
      }
      else res.end(ev(6, 'TaskCompleted'));
      held.push(res);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const seen: number[] = [];
      const states: string[] = [];
      const reasons: string[] = [];
      const following = new BatonClient(`http://127.0.0.1:${(server.address() as { port: number }).port}`).follow('t', (e) => seen.push(e.position), {
        onState: (s, r) => {
          states.push(s);
          if (r?.cause) reasons.push(r.cause.message);
        },
      });
      await vi.waitFor(() => expect(seen).toEqual([4, 5]), { timeout: 5000 });
      expect(reasons).toEqual(['nothing for 0.1 s, not even a heartbeat: the connection is taken for dead']);
      reconnectStreams('this device is back online');
      await following;
      expect(seen).toEqual([4, 5, 6]);
      expect(asked).toEqual([undefined, '4', '5']);
      expect(reasons).toEqual(['nothing for 0.1 s, not even a heartbeat: the connection is taken for dead', 'this device is back online']);
    } finally {
      for (const r of held) r.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it("a handler slower than three heartbeats does not cut a healthy stream (the watch is the connection's); a stream waiting to try again is woken by reconnectStreams()", async () => {
    let connections = 0;
    const server = createServer((_req, res) => {
      connections++;
      // The first: a 503 asking for 30 s — the stream waits that long unless woken.
      res.writeHead(connections === 1 ? 503 : 200, { 'content-type': 'text/event-stream', 'baton-heartbeat-ms': '20', ...(connections === 1 ? { 'retry-after': '30' } : {}) });
      if (connections === 1) return void res.end();
      res.end(`${ev(4, 'ModelTurnRecorded')}${ev(5, 'TaskCompleted')}`);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const seen: number[] = [];
      const states: string[] = [];
      const following = new BatonClient(`http://127.0.0.1:${(server.address() as { port: number }).port}`).follow(
        't',
        async (e) => {
          await new Promise((r) => setTimeout(r, 200)); // 10 heartbeats' time
          seen.push(e.position);
        },
        { onState: (s) => states.push(s) },
      );
      await vi.waitFor(() => expect(states).toEqual(['reconnecting']), { timeout: 5000 });
      reconnectStreams('back online');
      await following;
      expect(seen).toEqual([4, 5]);
      expect(connections).toBe(2);
      expect(states).toEqual(['reconnecting', 'live']);
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

describe('what an app builds on', () => {
  /** A server answering `handle`, with every request's method, URL and headers kept. */
  async function serve(handle: (req: IncomingMessage, res: ServerResponse, n: number) => void): Promise<{ url: string; seen: { method: string; url: string }[]; open: () => number; close: () => Promise<void> }> {
    const seen: { method: string; url: string }[] = [];
    let open = 0;
    const server = createServer((req, res) => {
      seen.push({ method: req.method ?? '', url: req.url ?? '' });
      open++;
      res.on('close', () => open--);
      handle(req, res, seen.length);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen, open: () => open, close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))) };
  }

  it('ids are encoded in paths: no id reaches another route (task("../webhooks") had listed the webhooks; a cancel had queued a redelivery)', async () => {
    const s = await serve((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    try {
      const b = new BatonClient(s.url);
      await b.task('../webhooks');
      await b.cancel('t/deliveries/1/redeliver#');
      await b.webhook('../tasks');
      expect(s.seen.map((r) => `${r.method} ${r.url}`)).toEqual(['GET /v1/tasks/..%2Fwebhooks', 'POST /v1/tasks/t%2Fdeliveries%2F1%2Fredeliver%23/cancel', 'GET /v1/webhooks/..%2Ftasks']);
      for (const id of ['..', '.', '']) await expect(b.task(id)).rejects.toThrow(`'${id}' is not an id`);
    } finally {
      await s.close();
    }
  });

  it("a 429's Retry-After is on the error; a text body is its message; a replayed submit says so", async () => {
    const s = await serve((req, res) => {
      if (req.url === '/v1/tasks' && req.headers['idempotency-key'] === 'k') return void res.writeHead(201, { 'content-type': 'application/json', 'idempotent-replayed': 'true' }).end('{"id":"t"}');
      if (req.url === '/v1/tasks') return void res.writeHead(201, { 'content-type': 'application/json' }).end('{"id":"u"}');
      if (req.url?.startsWith('/v1/tasks/t/diff')) return void res.writeHead(400, { 'content-type': 'text/plain' }).end('query.at: must be a whole number, 1 or more');
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '3' }).end(JSON.stringify({ error: { code: 'rate_limited', message: 'too many writes: retry in 3 s' } }));
    });
    try {
      const b = new BatonClient(s.url);
      await expect(b.cancel('t')).rejects.toMatchObject({ status: 429, code: 'rate_limited', retryAfterMs: 3000 });
      await expect(b.text('/v1/tasks/t/diff?at=x')).rejects.toMatchObject({ status: 400, message: 'query.at: must be a whole number, 1 or more' });
      expect(await b.submit({ prompt: 'p' }, { idempotencyKey: 'k' })).toEqual({ id: 't', replayed: true });
      expect(await b.submit({ prompt: 'p' })).toEqual({ id: 'u', replayed: false });
    } finally {
      await s.close();
    }
  });

  it("follow awaits the handler, one event at a time; what it throws ends the follow with it — not a reconnect that skipped the event", async () => {
    // The first stream ends after the final event; the second stays open (a task still waiting).
    const s = await serve((_req, res, n) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (n === 1) res.end(`${ev(1, 'TaskStarted')}${ev(2, 'ApprovalRequested')}${ev(3, 'TaskCompleted')}`);
      else res.write(`${ev(1, 'TaskStarted')}${ev(2, 'ApprovalRequested')}`);
    });
    try {
      const b = new BatonClient(s.url);
      const order: string[] = [];
      await b.follow('t', async (e) => {
        order.push(`start ${e.position}`);
        await new Promise((r) => setTimeout(r, 20));
        order.push(`end ${e.position}`);
      });
      expect(order).toEqual(['start 1', 'end 1', 'start 2', 'end 2', 'start 3', 'end 3']);
      const states: string[] = [];
      const failed = await b.follow('t', (e) => {
        if (e.type === 'ApprovalRequested') throw new Error('bug in my handler');
      }, { onState: (x) => states.push(x) }).catch((err: unknown) => err);
      expect((failed as Error).message).toBe('bug in my handler');
      expect(states).toEqual(['live']); // not 'reconnecting'
      expect(s.seen).toHaveLength(2); // one request per follow
      // The stream it gave up is closed (it had stayed open, counted against the tenant's streams, until the process ended).
      await vi.waitFor(() => expect(s.open()).toBe(0));
    } finally {
      await s.close();
    }
  });

  it('a live stream cut (the gateway killed) is a drop: reconnecting with cause null; one that cannot be opened says why', async () => {
    const s = await serve((_req, res, n) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (n === 1) {
        res.write(`retry: 10\n\n${ev(1, 'TaskStarted')}`);
        setTimeout(() => res.socket?.destroy(), 20); // cut mid-stream, as a kill -9 does
      } else res.end(ev(2, 'TaskCompleted'));
    });
    try {
      const causes: (Error | null | undefined)[] = [];
      const seen: number[] = [];
      await new BatonClient(s.url).follow('t', (e) => seen.push(e.position), { onState: (x, r) => x === 'reconnecting' && causes.push(r?.cause) });
      expect([seen, causes]).toEqual([[1, 2], [null]]);
    } finally {
      await s.close();
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

describe('a browser that knows it is offline', () => {
  it('sends nothing and says so (a phone had been told a write "may have been recorded")', async () => {
    const fetched = vi.fn();
    vi.stubGlobal('navigator', { onLine: false });
    vi.stubGlobal('fetch', fetched);
    try {
      const err = await new BatonClient('http://127.0.0.1:9').approve('t', 'apr-1').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UnreachableError);
      expect(err).toMatchObject({ maybeRecorded: false, message: 'this device is offline: nothing was sent to the Baton gateway — send it again once it is back online' });
      expect(fetched).not.toHaveBeenCalled();
    } finally {
      vi.unstubAllGlobals();
    }
  });
});
