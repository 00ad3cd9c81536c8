import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AnthropicModel, ModelStalledError } from './anthropic.ts';
import { ModelRejectedError, ModelUnavailableError } from './model.ts';
import type { ModelRequest } from './model.ts';
import { costUsd } from './prices.ts';

/**
 * A local fake of the Messages API, driven through the real @anthropic-ai/sdk: each test
 * queues replies; the server records what the SDK sent.
 */
type Reply = { status?: number; body: unknown; delayMs?: number; headers?: Record<string, string>; stallAfter?: number; cutAfter?: number; dropAfter?: number };
let server: Server;
let baseURL: string;
let replies: Reply[];
let seen: { headers: IncomingHttpHeaders; body: Record<string, unknown> }[];

beforeEach(async () => {
  replies = [];
  seen = [];
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      seen.push({ headers: req.headers, body: JSON.parse(raw) as Record<string, unknown> });
      const r = replies.shift() ?? { status: 500, body: { type: 'error', error: { type: 'api_error', message: 'no reply queued' } } };
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(r.status ?? 200, { 'content-type': 'application/json', ...r.headers });
        if (r.stallAfter !== undefined) return void res.write(JSON.stringify(r.body).slice(0, r.stallAfter)); // and nothing more
        if (r.cutAfter !== undefined) return void res.end(JSON.stringify(r.body).slice(0, r.cutAfter)); // ended early
        if (r.dropAfter !== undefined) return void res.write(JSON.stringify(r.body).slice(0, r.dropAfter), () => res.destroy()); // the connection lost mid-body
        res.end(JSON.stringify(r.body));
      };
      if (r.delayMs) setTimeout(send, r.delayMs);
      else send();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseURL = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterEach(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const message = (content: unknown[], stop: string, usage: Record<string, number> = {}) => ({
  id: 'msg_1',
  type: 'message',
  role: 'assistant',
  model: 'claude-sonnet-4-6-20260101',
  content,
  stop_reason: stop,
  stop_sequence: null,
  usage: { input_tokens: 100, output_tokens: 20, cache_read_input_tokens: 0, cache_creation_input_tokens: 0, ...usage },
});

const request = (over: Partial<ModelRequest> = {}): ModelRequest => ({
  agentType: 'researcher',
  model: 'claude-sonnet-4-6',
  system: 'You research.',
  messages: [{ role: 'user', content: 'Research NATS' }],
  tools: [
    { name: 'write_file', description: 'Write a file', input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } },
    { name: 'web_search', description: 'Search the web', input_schema: { type: 'object' } },
  ],
  maxTokens: 1024,
  ...over,
});

describe('AnthropicModel through the real SDK against a fake Messages API', () => {
  it('a tool round trip: tool_use out, tool_result back, with Bearer auth; web_search becomes the server tool', async () => {
    const model = new AnthropicModel({ apiKey: 'sk-test', baseURL, maxRetries: 0 });
    replies.push({ body: message([{ type: 'text', text: 'Writing.' }, { type: 'tool_use', id: 'toolu_1', name: 'write_file', input: { path: 'notes.md' } }], 'tool_use') });
    const first = await model.complete(request());
    expect(first).toMatchObject({ stopReason: 'tool_use', offline: false, model: 'claude-sonnet-4-6-20260101', content: [{ type: 'text' }, { type: 'tool_use', id: 'toolu_1', input: { path: 'notes.md' } }] });
    expect(seen[0]?.headers.authorization).toBe('Bearer sk-test');
    expect(seen[0]?.body).toMatchObject({ model: 'claude-sonnet-4-6', max_tokens: 1024, system: 'You research.', messages: [{ role: 'user', content: 'Research NATS' }] });
    expect(seen[0]?.body.tools).toEqual([
      { name: 'write_file', description: 'Write a file', input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } },
      { type: 'web_search_20250305', name: 'web_search', max_uses: 5 },
    ]);

    replies.push({ body: message([{ type: 'text', text: 'Done.' }], 'end_turn') });
    const second = await model.complete(request({
      messages: [
        { role: 'user', content: 'Research NATS' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'created notes.md' }] },
      ],
    }));
    expect(second.stopReason).toBe('end_turn');
    expect((seen[1]?.body.messages as unknown[])[2]).toEqual({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'created notes.md' }] });
  });

  it('529 (overloaded) then success: retried by the SDK with backoff', async () => {
    const model = new AnthropicModel({ apiKey: 'k', baseURL, maxRetries: 2 });
    replies.push({ status: 529, body: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }, headers: { 'retry-after-ms': '10' } });
    replies.push({ body: message([{ type: 'text', text: 'ok' }], 'end_turn') });
    expect((await model.complete(request())).content).toEqual([{ type: 'text', text: 'ok' }]);
    expect(seen.map((s) => s.headers['x-stainless-retry-count'])).toEqual(['0', '1']);
  });

  it('a request that takes longer than the timeout fails (and an aborted one stops at once)', async () => {
    const model = new AnthropicModel({ apiKey: 'k', baseURL, maxRetries: 0, timeoutMs: 200 });
    replies.push({ body: message([{ type: 'text', text: 'late' }], 'end_turn'), delayMs: 1500 });
    await expect(model.complete(request())).rejects.toThrow(/timed out/i);
    replies.push({ body: message([{ type: 'text', text: 'late' }], 'end_turn'), delayMs: 1500 });
    const abort = new AbortController();
    const pending = model.complete(request({ signal: abort.signal }));
    abort.abort();
    await expect(pending).rejects.toThrow(/abort/i);
  });

  it('an answer whose body stops arriving after its headers fails after the timeout, saying so (the SDK\'s own timer stops at the headers)', async () => {
    const model = new AnthropicModel({ apiKey: 'k', baseURL, maxRetries: 0, timeoutMs: 300 });
    replies.push({ body: message([{ type: 'text', text: 'never whole' }], 'end_turn'), stallAfter: 20 });
    const started = performance.now();
    await expect(model.complete(request())).rejects.toThrow(ModelStalledError);
    expect(performance.now() - started).toBeLessThan(5000); // not undici's 5 minutes
    // A body that keeps coming, slowly, is not cut: only silence counts. It takes longer than
    // the timeout in all, and no gap comes near it (a chunk every 50 ms against 1 s: a loaded
    // CI box once held a 100 ms interval past a 300 ms timeout).
    const steadyText = 'slow but steady, '.repeat(40);
    const slow = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const text = JSON.stringify(message([{ type: 'text', text: steadyText }], 'end_turn'));
      let i = 0;
      const t = setInterval(() => {
        res.write(text.slice(i, i + 30));
        i += 30;
        if (i >= text.length) {
          clearInterval(t);
          res.end();
        }
      }, 50);
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    try {
      const steady = new AnthropicModel({ apiKey: 'k', baseURL: `http://127.0.0.1:${(slow.address() as { port: number }).port}`, maxRetries: 0, timeoutMs: 1000 });
      const began = performance.now();
      expect((await steady.complete(request())).content).toEqual([{ type: 'text', text: steadyText }]);
      expect(performance.now() - began).toBeGreaterThan(1000);
    } finally {
      slow.closeAllConnections();
      await new Promise((r) => slow.close(r));
    }
  });

  it('an answer cut off before its end (its JSON ends early, or the connection closes mid-body) is asked again later (ModelUnavailableError), not blamed on the runner', async () => {
    const model = new AnthropicModel({ apiKey: 'k', baseURL, maxRetries: 0, timeoutMs: 5000 });
    replies.push({ body: message([{ type: 'text', text: 'half an answer' }], 'end_turn'), cutAfter: 30 });
    await expect(model.complete(request())).rejects.toThrow(ModelUnavailableError);
    replies.push({ body: message([{ type: 'text', text: 'half an answer' }], 'end_turn'), dropAfter: 30 });
    await expect(model.complete(request())).rejects.toThrow(/the model's answer was cut off before its end|could not answer/);
  });

  it('server web-search blocks are kept verbatim and sent back unchanged; usage and cost are recorded', async () => {
    const model = new AnthropicModel({ apiKey: 'k', baseURL, maxRetries: 0 });
    const blocks = [
      { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'NATS JetStream' } },
      { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: [{ type: 'web_search_result', url: 'https://docs.nats.io', title: 'JetStream', encrypted_content: 'abc', page_age: null }] },
      { type: 'text', text: 'JetStream is NATS persistence.', citations: [{ type: 'web_search_result_location', url: 'https://docs.nats.io', title: 'JetStream', encrypted_index: 'x', cited_text: 'persistence' }] },
    ];
    replies.push({ body: message(blocks, 'end_turn', { input_tokens: 2000, output_tokens: 300, cache_read_input_tokens: 1000, cache_creation_input_tokens: 500 }) });
    const res = await model.complete(request());
    expect(res.content).toEqual(blocks);
    expect(res.usage).toEqual({ inputTokens: 2000, outputTokens: 300, cacheReadTokens: 1000, cacheWriteTokens: 500, costUsd: (2000 * 3 + 300 * 15 + 1000 * 0.3 + 500 * 3.75) / 1e6 });
    replies.push({ body: message([{ type: 'text', text: 'ok' }], 'end_turn') });
    await model.complete(request({ messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: res.content }, { role: 'user', content: 'more' }] }));
    expect((seen[1]?.body.messages as { content: unknown }[])[1]?.content).toEqual(blocks);
  });

  it('a request the API refuses for good (400, 401, 403, …) is not asked again: ModelRejectedError, with the status, type and message', async () => {
    const model = new AnthropicModel({ apiKey: 'k', baseURL, maxRetries: 2 });
    replies.push({ status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: too large' } } });
    const err = await model.complete(request()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelRejectedError);
    expect((err as Error).message).toBe('the Messages API refused the request: 400 invalid_request_error: max_tokens: too large');
    expect(seen).toHaveLength(1);
  });

  it('a malformed response is rejected with the field named', async () => {
    const model = new AnthropicModel({ apiKey: 'k', baseURL, maxRetries: 0 });
    replies.push({ body: { ...message([], 'end_turn'), usage: { input_tokens: -1, output_tokens: 0 } } });
    await expect(model.complete(request())).rejects.toThrow(new ModelRejectedError("the model's answer could not be read: usage.input_tokens: must be at least 0"));
    replies.push({ body: message([{ type: 'tool_use', id: 'toolu_1', name: 'write_file', input: { path: 'a' } }, { type: 'tool_use', id: 'toolu_1', name: 'write_file', input: { path: 'b' } }], 'tool_use') });
    await expect(model.complete(request())).rejects.toThrow(new ModelRejectedError("the model's answer could not be read: content: two tool calls have the same id"));
    replies.push({ body: { ...message([], 'end_turn'), usage: { input_tokens: 9e15, output_tokens: 0 } } });
    await expect(model.complete(request())).rejects.toThrow(new ModelRejectedError("the model's answer could not be read: usage.input_tokens: must be at most 100000000"));
  });
});

describe('prices', () => {
  it('matches the longest model prefix; an unknown model costs 0', () => {
    const u = { inputTokens: 1_000_000, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
    expect(costUsd('claude-haiku-4-5-20251001', u)).toBe(1);
    expect(costUsd('claude-sonnet-4-5', u)).toBe(3);
    expect(costUsd('some-other-model', u)).toBe(0);
  });
});
