/**
 * docs/api.md, generated from the gateway's OpenAPI document (what /docs serves): every route
 * with its summary, parameters, body fields and answers. Pure; the test keeps the file current.
 */
type Schema = { type?: string | string[]; properties?: Record<string, Schema>; required?: string[]; items?: Schema; enum?: unknown[]; description?: string; anyOf?: Schema[]; oneOf?: Schema[]; default?: unknown; minimum?: number; maximum?: number; exclusiveMinimum?: number | boolean; exclusiveMaximum?: number | boolean; minLength?: number; maxLength?: number; format?: string; const?: unknown; not?: Schema };
type Operation = { summary?: string; tags?: string[]; parameters?: { name: string; in: string; required?: boolean; schema?: Schema; description?: string }[]; requestBody?: { content?: Record<string, { schema?: Schema }> }; responses?: Record<string, { description?: string }> };
export interface OpenApiDocument {
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

function typeOf(s: Schema | undefined): string {
  if (!s) return 'any';
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' \\| ');
  const alts = s.anyOf ?? s.oneOf;
  if (alts) return alts.map(typeOf).join(' \\| ');
  const t = Array.isArray(s.type) ? s.type.join(' \\| ') : (s.type ?? 'any');
  if (t === 'array') return `${typeOf(s.items)}[]`;
  if (t === 'object' && s.properties) return 'object';
  return s.format ? `${t} (${s.format})` : t;
}

function limits(s: Schema | undefined): string {
  if (!s) return '';
  const parts: string[] = [];
  if (s.minLength !== undefined || s.maxLength !== undefined) parts.push(`${s.minLength ?? 0}..${s.maxLength ?? '∞'} chars`);
  // A bound the value may not equal is written as such (`above 0`, not `0..`); JSON Schema spells it
  // as a number of its own (2019+) or as `true` beside minimum/maximum (draft 4).
  const bound = (exclusive: number | boolean | undefined, inclusive: number | undefined): { value: number; exclusive: boolean } | null =>
    typeof exclusive === 'number' ? { value: exclusive, exclusive: true } : inclusive !== undefined ? { value: inclusive, exclusive: exclusive === true } : null;
  const low = bound(s.exclusiveMinimum, s.minimum);
  const high = bound(s.exclusiveMaximum, s.maximum);
  if (low?.exclusive || high?.exclusive) parts.push([low && `${low.exclusive ? 'above' : 'at least'} ${low.value}`, high && `${high.exclusive ? 'below' : 'at most'} ${high.value}`].filter(Boolean).join(', '));
  else if (low || high) parts.push(`${low?.value ?? '−∞'}..${high?.value ?? '∞'}`);
  if (s.default !== undefined) parts.push(`default ${JSON.stringify(s.default)}`);
  return parts.join(', ');
}

/** The fields of an object schema, nested ones by dotted path (two levels deep). */
function fields(s: Schema | undefined, prefix = '', depth = 0): string[] {
  if (!s?.properties) return [];
  const out: string[] = [];
  for (const [name, p] of Object.entries(s.properties)) {
    const path = `${prefix}${name}`;
    const req = s.required?.includes(name) ? 'yes' : '';
    const notes = [p.description, limits(p)].filter(Boolean).join('; ').replace(/\|/g, '\\|').replace(/\n/g, ' ');
    out.push(`| \`${path}\` | ${typeOf(p)} | ${req} | ${notes} |`);
    if (depth < 2) out.push(...fields(p.type === 'array' ? p.items : p, `${path}${p.type === 'array' ? '[]' : ''}.`, depth + 1));
  }
  return out;
}

export function renderApiReference(doc: OpenApiDocument, shapes: readonly ResponseShape[] = []): string {
  const lines = [
    '# HTTP API reference',
    '',
    `Generated from the gateway's OpenAPI document (${doc.info.title} ${doc.info.version}; served live at \`/docs\`, JSON at \`/docs/json\`) — do not edit by hand: \`UPDATE_API_DOCS=1 pnpm exec vitest run services/gateway/src/api-reference.int.test.ts\` writes it again.`,
    'With API keys on (`BATON_API_KEYS`, README "Config"), every `/v1` request sends `Authorization: Bearer <api key>`; the key names the tenant, and a task of another tenant is a 404. The answers\' bodies are under "Response shapes" at the end.',
    '',
    'Errors are `{ "error": { "code", "message", "details"? } }`, the message naming what is wrong (`body.prompt: …`); limits are in docs/limits.md; the README explains the flows. `details` is a list of `{ field, message }` for a `validation_error` (one per field), of `{ entry, message }` for an `invalid_workspace` (one per archive entry), and an object of the facts for the others that have it (`task_final`: `{ command, status }`). The statuses every route may answer besides its own:',
    '',
    '| status | codes | when |',
    '|---|---|---|',
    '| 400 | `validation_error`, `invalid_json`, `bad_multipart` | a parameter, header or body field is wrong (named), or a query parameter the route does not take |',
    '| 401 | `unauthorized` | no API key, or an unknown one (when the gateway has keys) |',
    '| 403 | `cross_site_request`, `host_not_allowed` | a write a browser marks as sent from another site; a Host the gateway does not serve |',
    '| 404 | `not_found`, `request_not_found` | no such task (or another tenant\'s), request, artifact, webhook |',
    '| 409 | `request_already_decided`, `task_final`, … | the state moved on: a request decided already (the message says how, by whom and when; `details`: `{requestId, decision, decidedBy, decidedAt}`), a task that has ended |',
    '| 413 / 415 | `payload_too_large`, `workspace_too_large` / `unsupported_media_type` | a body or workspace over its limit; a body neither JSON nor multipart |',
    '| 422 | `illegal_transition`, `invalid_command`, `idempotency_key_reused`, `invalid_version`, `unknown_team` | well-formed but not allowed now (the message says why); `unknown_team`: verify, for a task whose team is no longer configured (a submit naming an unknown team is a 400 `validation_error` on `body.team`) |',
    '| 429 | `rate_limited`, `too_many_streams` | over the tenant\'s write rate or open streams: `Retry-After` says when to try again |',
    '| 503 | `unavailable` | Postgres or NATS is away: nothing was recorded, retry later |',
    '',
    '`POST /v1/tasks` and `POST /v1/tasks/:id/fork` take an `Idempotency-Key` header (1..255 characters): the same key and body answer the first request\'s task again (201, `idempotent-replayed: true`), another body is a 422 `idempotency_key_reused`. A decision (`…/approvals/:requestId`, `…/answers/:requestId`) takes one too: sent again with the key it was recorded with and the same decision, it is answered as made (200, `idempotent-replayed: true`, nothing recorded); the key with another decision is a 422 `idempotency_key_reused`; without it (another person, another click) a decided request is a 409 `request_already_decided` naming how, by whom and when. So a client that lost an answer can send the request again: `@baton/client` does, under a key of its own for each submit, fork and decision.',
    '',
    'Pages: `GET /v1/tasks` answers `{ items, nextCursor }` — pass `nextCursor` as `?cursor=` for the next page, null on the last; `GET /v1/tasks/:id/events` (JSON) answers `{ items, next }` — pass `next` as `?after=`, null when the page is the last of what is committed now.',
    '',
    'Event streams (`Accept: text/event-stream`, docs/limits.md for their caps): a task\'s events come as `id: <position>` / `event: <type>` / `data: <the event, as in the JSON list>` frames after a `retry: 2000` line; resume with `Last-Event-ID` (or `?after=`) set to the last `id` seen. The stream ends with `event: end` (`data: {"reason":"final"}`) after the task\'s final event, and says `event: shutdown` when the gateway stops (reconnect); comment lines (`: heartbeat`) keep it open. The task list\'s stream sends `event: ready` first, then `event: task` with a list item each time one of your tasks changes.',
    '',
    'An event\'s `version` is its place in its own stream (`streamId`): `task-<id>` for the task\'s transitions, `agent-<id>-<agent>` for an agent\'s steps. The versions `?at=N`, `/state?at=N` and a fork\'s `atVersion` take are the task stream\'s: take N from an event whose `streamId` is `task-<id>`.',
    '',
    'An approval\'s `inputDigest` is the SHA-256 (hex) of its input as canonical JSON: objects\' keys sorted by UTF-16 code unit, no white space, strings as JavaScript\'s `JSON.stringify` writes them (characters outside ASCII as themselves, not `\\u` escapes), numbers in JavaScript\'s shortest form. In Python: `hashlib.sha256(json.dumps(input, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()` — the same for inputs whose keys are ASCII and whose numbers are integers.',
    '',
  ];
  const byTag = new Map<string, string[]>();
  for (const [path, ops] of Object.entries(doc.paths).sort(([a], [b]) => a.localeCompare(b))) {
    for (const method of METHODS) {
      const op = ops[method];
      if (!op) continue;
      const out: string[] = [`### \`${method.toUpperCase()} ${path}\``, ''];
      if (op.summary) out.push(op.summary, '');
      // A parameter whose schema refuses every value (`not: {}`: a route that takes no query refuses `?at=`, naming where to ask) is not one it takes.
      const params = (op.parameters ?? []).filter((p) => p.schema?.not === undefined).map((p) => `| \`${p.name}\` (${p.in}) | ${typeOf(p.schema)} | ${p.required ? 'yes' : ''} | ${[p.description ?? p.schema?.description, limits(p.schema)].filter(Boolean).join('; ').replace(/\|/g, '\\|')} |`);
      const body = op.requestBody?.content?.['application/json']?.schema;
      const bodyFields = fields(body, 'body.');
      if (params.length + bodyFields.length > 0) out.push('| field | type | required | notes |', '|---|---|---|---|', ...params, ...bodyFields, '');
      const responses = Object.entries(op.responses ?? {}).map(([code, r]) => `${code}${r.description && r.description !== 'Default Response' ? ` ${r.description}` : ''}`);
      if (responses.length > 0) out.push(`Answers: ${responses.join(' · ')}`, '');
      const tag = op.tags?.[0] ?? 'other';
      byTag.set(tag, [...(byTag.get(tag) ?? []), ...out]);
    }
  }
  for (const [tag, out] of [...byTag.entries()].sort(([a], [b]) => a.localeCompare(b))) lines.push(`## ${tag}`, '', ...out);
  if (shapes.length > 0) lines.push(...renderResponseShapes(shapes));
  return `${lines.join('\n').trimEnd()}\n`;
}

/** A response's JSON as the docs show it: each field (nested by dotted path, two levels) with the JSON types it was seen with. */
export interface ResponseShape {
  /** What it is, e.g. "A task (`GET /v1/tasks/:id`, and every decision's answer)". */
  title: string;
  /** Real answers of that shape (several: a field null in one is an object in another). */
  samples: unknown[];
}

const jsonType = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

/** Field path → the JSON types seen there, each field after its parent, in first-seen order (array items under `path[]`). */
function shapeFields(samples: readonly unknown[]): Map<string, Set<string>> {
  type Node = { types: Set<string>; children: Map<string, Node> };
  const root: Node = { types: new Set(), children: new Map() };
  const walk = (v: unknown, node: Node, depth: number): void => {
    node.types.add(jsonType(v));
    if (depth > 3 || v === null || typeof v !== 'object') return;
    const child = (name: string): Node => node.children.get(name) ?? node.children.set(name, { types: new Set(), children: new Map() }).get(name)!;
    if (Array.isArray(v)) for (const x of v) walk(x, child('[]'), depth + 1);
    else for (const [k, x] of Object.entries(v)) walk(x, child(k), depth + 1);
  };
  for (const s of samples) walk(s, root, 0);
  const out = new Map<string, Set<string>>();
  const list = (node: Node, path: string): void => {
    for (const [name, c] of node.children) {
      const p = name === '[]' ? `${path}[]` : path ? `${path}.${name}` : name;
      out.set(p, c.types);
      list(c, p);
    }
  };
  list(root, '');
  return out;
}

/** The "Response shapes" section: one table per shape, from real answers. */
export function renderResponseShapes(shapes: readonly ResponseShape[]): string[] {
  const out = ['## Response shapes', '', 'The fields of the main answers, with the JSON types they take — generated from real answers (the recorded runs in `packages/agents/src/fixtures/runs/`, folded as the gateway folds them): the TypeScript types are `@baton/api`\'s. A field absent from a table is never sent; `null` means "none" (not yet, or not for this task), and a field shown as `null` alone is one the recorded runs never set (the README says what it holds).', ''];
  for (const s of shapes) {
    out.push(`### ${s.title}`, '', '| field | types |', '|---|---|');
    for (const [path, types] of shapeFields(s.samples)) out.push(`| \`${path}\` | ${[...types].join(' \\| ')} |`);
    out.push('');
  }
  return out;
}
