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
    // Each route's success status as it answers it (not 200 for all).
    const answered = (method: string, route: string) => Object.keys((doc.paths as Record<string, Record<string, { responses?: object }>>)[route]?.[method]?.responses ?? {});
    expect(answered('post', '/v1/tasks')).toEqual(['201']);
    expect(answered('post', '/v1/tasks/{id}/fork')).toEqual(['201']);
    expect(answered('post', '/v1/chats/{id}/task')).toEqual(['201']);
    expect(answered('post', '/v1/webhooks')).toEqual(['201']);
    expect(answered('delete', '/v1/webhooks/{webhookId}')).toEqual(['204']);
    expect(answered('post', '/v1/tasks/{id}/deliveries/{deliveryId}/redeliver')).toEqual(['202']);
    expect(answered('get', '/v1/tasks/{id}')).toEqual(['200']);
    expect(readFileSync(DOC, 'utf8'), 'docs/api.md is out of date: run UPDATE_API_DOCS=1 pnpm exec vitest run services/gateway/src/api-reference.int.test.ts').toBe(rendered);
  });
});
