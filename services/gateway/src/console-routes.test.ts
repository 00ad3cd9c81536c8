import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Fastify from 'fastify';
import { silentLogger } from '@baton/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { consoleRoutes } from './routes/console.ts';

describe('the console files', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });

  it('serves a console rebuilt while the gateway runs: its new index.html and the new assets it names (not a 404 until a restart)', async () => {
    const dist = await mkdtemp(path.join(tmpdir(), 'baton-console-'));
    dirs.push(dist);
    await mkdir(path.join(dist, 'assets'));
    await writeFile(path.join(dist, 'index.html'), '<script src="/assets/index-old.js"></script>');
    await writeFile(path.join(dist, 'assets', 'index-old.js'), 'old()');
    const app = Fastify();
    await app.register(consoleRoutes({ log: silentLogger() }, dist));
    await app.ready();
    try {
      expect((await app.inject({ method: 'GET', url: '/assets/index-old.js' })).body).toBe('old()');
      // The rebuild: a new index.html naming a new content-hashed asset.
      await writeFile(path.join(dist, 'index.html'), '<script src="/assets/index-new.js"></script>');
      await writeFile(path.join(dist, 'assets', 'index-new.js'), 'fresh()');
      const page = await app.inject({ method: 'GET', url: '/' });
      expect(page.body).toContain('/assets/index-new.js');
      expect(page.headers['cache-control']).toBe('no-cache');
      const asset = await app.inject({ method: 'GET', url: '/assets/index-new.js' });
      expect(asset.statusCode).toBe(200);
      expect(asset.body).toBe('fresh()');
      expect(asset.headers['content-type']).toMatch(/javascript/);
      expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect((await app.inject({ method: 'GET', url: '/assets/missing.js' })).statusCode).toBe(404);
      expect((await app.inject({ method: 'GET', url: '/elsewhere.js' })).statusCode).toBe(404); // no catch-all at /
    } finally {
      await app.close();
    }
  });
});
