import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stackTest } from '@baton/testing';
import { describe, expect } from 'vitest';
import { renderApiReference, type OpenApiDocument } from './api-reference.ts';
import { testGateway } from './test-gateway.ts';

const DOC = path.resolve(import.meta.dirname, '../../../docs/api.md');

describe('docs/api.md', () => {
  stackTest('is the reference generated from the OpenAPI document the gateway serves (UPDATE_API_DOCS=1 writes it)', async ({ pg, nats }) => {
    const app = await testGateway(pg, nats);
    const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json() as OpenApiDocument;
    const rendered = renderApiReference(doc);
    if (process.env.UPDATE_API_DOCS === '1') writeFileSync(DOC, rendered);
    expect(rendered).toMatch(/### `POST \/v1\/tasks`/);
    expect(rendered).toMatch(/\| `body.prompt` \| string \| yes \|/);
    expect(readFileSync(DOC, 'utf8'), 'docs/api.md is out of date: run UPDATE_API_DOCS=1 pnpm exec vitest run services/gateway/src/api-reference.int.test.ts').toBe(rendered);
  });
});
