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

export function renderApiReference(doc: OpenApiDocument): string {
  const lines = [
    '# HTTP API reference',
    '',
    `Generated from the gateway's OpenAPI document (${doc.info.title} ${doc.info.version}; served live at \`/docs\`, JSON at \`/docs/json\`) — do not edit by hand: \`UPDATE_API_DOCS=1 pnpm exec vitest run services/gateway/src/api-reference.int.test.ts\` writes it again.`,
    'Errors are `{ "error": { "code", "message", "details"? } }`, the message naming what is wrong (`body.prompt: …`); limits are in docs/limits.md; the README explains the flows. The statuses every route may answer besides its own:',
    '',
    '| status | codes | when |',
    '|---|---|---|',
    '| 400 | `validation_error`, `invalid_json`, `bad_multipart` | a parameter, header or body field is wrong (named), or a query parameter the route does not take |',
    '| 401 | `unauthorized` | no API key, or an unknown one (when the gateway has keys) |',
    '| 403 | `cross_site_request`, `host_not_allowed` | a write a browser marks as sent from another site; a Host the gateway does not serve |',
    '| 404 | `not_found`, `request_not_found` | no such task (or another tenant\'s), request, artifact, webhook |',
    '| 409 | `request_already_decided`, `task_final`, … | the state moved on: a request decided already (the message says how), a task that has ended |',
    '| 413 / 415 | `payload_too_large`, `workspace_too_large` / `unsupported_media_type` | a body or workspace over its limit; a body neither JSON nor multipart |',
    '| 422 | `illegal_transition`, `invalid_command`, `idempotency_key_reused`, `invalid_version`, `unknown_team` | well-formed but not allowed now (the message says why) |',
    '| 429 | `rate_limited`, `too_many_streams` | over the tenant\'s write rate or open streams: `Retry-After` says when to try again |',
    '| 503 | `unavailable` | Postgres or NATS is away: nothing was recorded, retry later |',
    '',
    '`POST /v1/tasks` and `POST /v1/tasks/:id/fork` take an `Idempotency-Key` header (1..255 characters): the same key and body answer the first request\'s task again (201, `idempotent-replayed: true`), another body is a 422 `idempotency_key_reused`.',
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
  return `${lines.join('\n').trimEnd()}\n`;
}
