import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';

/**
 * A local fake of Anthropic's Messages API that streams (`"stream": true` → server-sent events:
 * message_start, content_block_start, ping, content_block_delta per piece of text,
 * content_block_stop, message_delta with the stop reason and output tokens, message_stop), for
 * tests that drive the real @anthropic-ai/sdk. Each request takes the next queued script; the
 * server records what was sent and how each stream ended.
 */
export interface StreamScript {
  /** The text, in the pieces it is streamed in. */
  deltas: string[];
  model?: string;
  stopReason?: string;
  usage?: { input_tokens: number; output_tokens: number; cache_read_input_tokens?: number; cache_creation_input_tokens?: number };
  /** Stop before the delta at this index until `release` is called (the test acts meanwhile). */
  holdAt?: number;
  /** Cut the connection after sending this many deltas (a stream that breaks). */
  dropAfter?: number;
  /** End the response cleanly after this many deltas, without the message's end (message_delta, message_stop). */
  endAfter?: number;
  /** Answer with this status and an error body instead of a stream. */
  status?: number;
}

export interface ServedStream {
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
  /** Deltas written. */
  sent: number;
  /** The client went away before the stream's end. */
  closedByClient: boolean;
  /** message_stop was written. */
  finished: boolean;
}

export interface FakeMessagesApi {
  baseURL: string;
  queue(script: StreamScript): void;
  served: ServedStream[];
  /** Whether a stream is held at its `holdAt` now. */
  readonly holding: boolean;
  /** Let a held stream go on. */
  release(): void;
  close(): Promise<void>;
}

const sse = (res: ServerResponse, event: string, data: unknown): boolean => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);

export async function fakeMessagesApi(): Promise<FakeMessagesApi> {
  const scripts: StreamScript[] = [];
  const served: ServedStream[] = [];
  let held: (() => void) | null = null;
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const record: ServedStream = { headers: req.headers, body: JSON.parse(raw) as Record<string, unknown>, sent: 0, closedByClient: false, finished: false };
      served.push(record);
      res.on('close', () => {
        if (!res.writableFinished) record.closedByClient = true;
      });
      const s = scripts.shift();
      if (!s || s.status) {
        res.writeHead(s?.status ?? 500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'api_error', message: s ? 'scripted failure' : 'no stream queued' } }));
        return;
      }
      void play(s, res, record);
    });
  });

  async function play(s: StreamScript, res: ServerResponse, record: ServedStream): Promise<void> {
    const usage = { input_tokens: 100, output_tokens: 1, cache_read_input_tokens: 0, cache_creation_input_tokens: 0, ...s.usage };
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'request-id': `req_${served.length}` });
    const model = s.model ?? 'claude-sonnet-4-5-20250929';
    sse(res, 'message_start', { type: 'message_start', message: { id: `msg_${served.length}`, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } });
    sse(res, 'content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
    sse(res, 'ping', { type: 'ping' });
    for (const [i, text] of s.deltas.entries()) {
      if (i === s.holdAt) await new Promise<void>((r) => (held = r));
      if (s.dropAfter !== undefined && i >= s.dropAfter) {
        res.destroy();
        return;
      }
      if (s.endAfter !== undefined && i >= s.endAfter) {
        res.end();
        return;
      }
      if (res.destroyed) return;
      sse(res, 'content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } });
      record.sent++;
      await new Promise((r) => setImmediate(r));
    }
    if (res.destroyed) return;
    sse(res, 'content_block_stop', { type: 'content_block_stop', index: 0 });
    sse(res, 'message_delta', { type: 'message_delta', delta: { stop_reason: s.stopReason ?? 'end_turn', stop_sequence: null }, usage: { output_tokens: usage.output_tokens } });
    sse(res, 'message_stop', { type: 'message_stop' });
    record.finished = true;
    res.end();
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    baseURL: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    queue: (script) => void scripts.push(script),
    served,
    get holding() {
      return held !== null;
    },
    release: () => {
      const r = held;
      held = null;
      r?.();
    },
    close: async () => {
      held?.();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
