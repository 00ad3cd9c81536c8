import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BatonClient, type TaskSummary } from '@baton/client';
import { waitFor } from '@baton/testing';
import { describe, expect, it } from 'vitest';
import { LIST_CATCH_UP_MARGIN_MS, listTasks, type ListOptions } from './list.ts';

const task = (id: string, status: string, version: number, updatedAt: string): TaskSummary => ({ id, status, prompt: `task ${id}`, team: 'research', createdAt: '2026-11-26T20:00:00.000Z', updatedAt, version, pendingRequests: [], forkedFrom: null });

/** `baton list --follow` against a local server standing in for the gateway: what it prints, and how to stop it. */
async function following(server: Server, opts: Omit<ListOptions, 'follow' | 'signal'>): Promise<{ out: string[]; errors: string[]; stop: () => Promise<void> }> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const out: string[] = [];
  const errors: string[] = [];
  const ctl = new AbortController();
  const api = new BatonClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  const done = listTasks(api, { ...opts, follow: true, signal: ctl.signal }, { log: (l) => out.push(l), error: (l) => errors.push(l) });
  return { out, errors, stop: () => (ctl.abort(), done) };
}

/** A gateway that lists `listed` and, once the list has been read, sends `changes` on the stream; `lists` holds each list request's query. */
function listThenChanges(listed: TaskSummary[], changes: TaskSummary[]): { server: Server; lists: string[] } {
  const lists: string[] = [];
  const server = createServer((req, res) => {
    if ((req.headers.accept ?? '').includes('text/event-stream')) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: ready\ndata: {}\n\n');
      const send = setInterval(() => {
        if (lists.length === 0) return;
        clearInterval(send);
        res.write(changes.map((t) => `event: task\ndata: ${JSON.stringify(t)}\n\n`).join(''));
      }, 5);
      req.on('close', () => clearInterval(send));
      return;
    }
    lists.push(new URL(req.url ?? '/', 'http://x').search);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items: listed, nextCursor: null }));
  });
  return { server, lists };
}

describe('baton list --follow', () => {
  it('lists once the stream is ready, prints each change (with --status, a task that leaves it, not its steps after); after a drop it reads what changed meanwhile (any status, since the newest change seen less a margin) and prints only what is new', async () => {
    // Changes stamped by the server's clock, a little ahead of this one's.
    const at = (s: number): string => new Date(Date.now() + 60_000 + s * 1000).toISOString();
    const a3 = task('a', 'awaiting_input', 3, at(0));
    const a4 = task('a', 'running', 4, at(1));
    const b2 = task('b', 'awaiting_input', 2, at(2)); // opened its request while the stream was down
    const c5 = task('c', 'completed', 5, at(3)); // never awaiting_input here: not printed
    const a5 = task('a', 'running', 5, at(4)); // a's change after it left awaiting_input: not printed
    const lists: string[] = [];
    let streams = 0;
    const open: ServerResponse[] = [];
    const server = createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      if ((req.headers.accept ?? '').includes('text/event-stream')) {
        streams++;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        if (streams === 1) {
          // Ready; then a change, once the list has been read; then the connection drops.
          res.write('event: ready\ndata: {}\n\n');
          const sendChange = setInterval(() => {
            if (lists.length === 0) return;
            clearInterval(sendChange);
            res.end(`event: task\ndata: ${JSON.stringify(a4)}\n\n`);
          }, 5);
        } else {
          res.write('event: ready\ndata: {}\n\n');
          open.push(res);
        }
        return;
      }
      lists.push(u.search);
      const items = u.searchParams.has('updatedAfter') ? [a5, c5, b2, a4] : [a3];
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items, nextCursor: null }));
    });
    const { out, errors, stop } = await following(server, { status: 'awaiting_input', limit: 50 });
    try {
      await waitFor(() => out.some((l) => l.startsWith('b  ')), { what: 'the task that changed while the stream was down' });
      await stop();
      expect(out.map((l) => l.split('  ').slice(0, 2).join(' '))).toEqual(['a awaiting_input', 'following changes (Ctrl-C stops)…', 'a running', 'b awaiting_input']);
      expect(errors).toEqual(['(the stream dropped: reconnecting…)']);
      // The list as asked; the catch-up: every status, since the newest change seen (a4's) less the margin.
      const since = new Date(Date.parse(a4.updatedAt) - LIST_CATCH_UP_MARGIN_MS).toISOString();
      expect(lists).toEqual(['?status=awaiting_input&limit=50', `?updatedAfter=${encodeURIComponent(since)}&limit=200`]);
    } finally {
      for (const r of open) r.end();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('--search: the list asks for it; of the changes the stream brings, only tasks whose prompt contains it are printed', async () => {
    const at = new Date().toISOString();
    const listed = { ...task('a', 'running', 2, at), prompt: 'A report on vector databases' };
    const matching = { ...task('b', 'awaiting_input', 3, at), prompt: 'Compare VECTOR search engines' };
    const other = { ...task('c', 'running', 4, at), prompt: 'Something else' };
    const { server, lists } = listThenChanges([listed], [other, matching]);
    const { out, stop } = await following(server, { search: 'vector', limit: 50 });
    try {
      await waitFor(() => out.some((l) => l.startsWith('b  ')), { what: 'the matching change' });
      await stop();
      expect(out.map((l) => l.split('  ')[0])).toEqual(['a', 'following changes (Ctrl-C stops)…', 'b']);
      expect(lists).toEqual(['?search=vector&limit=50']);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('--status: changes come merged (the stream sends a task\'s latest summary), so a task that came back to the status and left again shows as another change of its open requests: printed; its steps after are not', async () => {
    const at = new Date().toISOString();
    const req = (n: number) => Array.from({ length: n }, (_, i) => ({ requestId: `clr-${i}`, kind: 'clarification', agentId: `r-${i}`, openedAt: at }));
    const listed = { ...task('a', 'awaiting_input', 3, at), pendingRequests: req(2) } as TaskSummary;
    const changes = [
      { ...task('a', 'running', 5, at), pendingRequests: req(1) }, // one answered: it leaves the status
      // (back to awaiting_input at v8, merged away) …
      { ...task('a', 'running', 9, at), pendingRequests: req(0) }, // the last answered: it leaves again
      { ...task('a', 'running', 12, at), pendingRequests: req(0) }, // a step: not printed
      { ...task('a', 'completed', 15, at), pendingRequests: req(0) }, // its end: a change of status
    ];
    let listedOnce = false;
    const server = createServer((r, res) => {
      if ((r.headers.accept ?? '').includes('text/event-stream')) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: ready\ndata: {}\n\n');
        const send = setInterval(() => {
          if (!listedOnce) return;
          clearInterval(send);
          res.write(changes.map((c) => `event: task\ndata: ${JSON.stringify(c)}\n\n`).join(''));
        }, 5);
        r.on('close', () => clearInterval(send));
        return;
      }
      listedOnce = true;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items: [listed], nextCursor: null }));
    });
    const { out, stop } = await following(server, { status: 'awaiting_input', limit: 50 });
    try {
      await waitFor(() => out.some((l) => l.startsWith('a  completed')), { what: 'the end' });
      await stop();
      expect(out.map((l) => l.split('  ').slice(0, 2).join(' ') + (l.includes('open request') ? ` ${/\((\d) open/.exec(l)?.[1] ?? '1'}` : ''))).toEqual(['a awaiting_input 2', 'following changes (Ctrl-C stops)…', 'a running 1', 'a running', 'a completed']);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it("a stream the gateway refuses for now (429, too many open streams) is said, in the gateway's words, and asked again no sooner than its Retry-After", async () => {
    const asked: number[] = [];
    const server = createServer((req, res) => {
      if ((req.headers.accept ?? '').includes('text/event-stream')) {
        asked.push(performance.now());
        if (asked.length === 1) {
          res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' }).end(JSON.stringify({ error: { code: 'too_many_streams', message: 'at most 3 open event streams per tenant; close one or retry later' } }));
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: ready\ndata: {}\n\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items: [], nextCursor: null }));
    });
    const { out, errors, stop } = await following(server, { limit: 50 });
    try {
      await waitFor(() => out.includes('following changes (Ctrl-C stops)…'), { what: 'the stream, asked again' });
      await stop();
      expect(errors).toEqual(['(the gateway refused the stream: at most 3 open event streams per tenant; close one or retry later (HTTP 429 too_many_streams); trying again in 1 s)']);
      expect(asked).toHaveLength(2);
      expect(asked[1]! - asked[0]!).toBeGreaterThanOrEqual(990); // Retry-After: 1, not the 100 ms a drop waits
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it("--forks-of: the list asks for that task's forks, and of the changes that come only its forks are printed", async () => {
    const src = '0b9f4c1e-2d3a-4b5c-8d7e-6f5a4b3c2d1e';
    const at = (s: number): string => new Date(Date.now() + 60_000 + s * 1000).toISOString();
    const old = { ...task('f1', 'completed', 4, at(0)), forkedFrom: { taskId: src, atVersion: 3 } };
    const unrelated = task('x', 'running', 2, at(1));
    const otherFork = { ...task('y', 'running', 2, at(2)), forkedFrom: { taskId: 'another', atVersion: 1 } };
    const fresh = { ...task('f2', 'running', 2, at(3)), forkedFrom: { taskId: src, atVersion: 5 } };
    const { server, lists } = listThenChanges([old], [unrelated, otherFork, fresh]);
    const { out, stop } = await following(server, { forksOf: src.toUpperCase(), limit: 50 });
    try {
      await waitFor(() => out.some((l) => l.startsWith('f2 ')), { what: 'the new fork printed' });
      await stop();
      expect(lists[0]).toBe(`?forkedFrom=${src.toUpperCase()}&limit=50`);
      expect(out.map((l) => l.split('  ')[0])).toEqual(['f1', 'following changes (Ctrl-C stops)…', 'f2']);
      expect(out[0]).toMatch(new RegExp(`fork of ${src} at v3`));
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('--follow with --stuck is refused, saying why', async () => {
    await expect(listTasks(new BatonClient('http://127.0.0.1:9'), { stuck: true, follow: true, limit: 50 }, { log: () => {}, error: () => {} })).rejects.toThrow(/a task becomes stuck by not changing/);
  });
});
