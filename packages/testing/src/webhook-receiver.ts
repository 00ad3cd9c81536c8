import { createServer } from 'node:http';

/** A webhook endpoint on loopback for tests: what it received, in order. */
export interface WebhookReceiver {
  /** Its URL, at `path` (default `/hook`). */
  url(path?: string): string;
  /** Each request's JSON body, in the order they came. */
  readonly bodies: unknown[];
  /** Each request's `webhook-id` header ('' when it had none), in the same order. */
  readonly ids: string[];
  /** The `type` of each body received. */
  types(): string[];
  close(): Promise<void>;
}

/** Start a local endpoint that takes webhooks: it answers 204 to each request and keeps its JSON body. */
export async function webhookReceiver(): Promise<WebhookReceiver> {
  const bodies: unknown[] = [];
  const ids: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      bodies.push(JSON.parse(body) as unknown);
      ids.push(String(req.headers['webhook-id'] ?? ''));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: (path = '/hook') => `http://127.0.0.1:${port}${path}`,
    bodies,
    ids,
    types: () => bodies.map((b) => (b as { type: string }).type),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
