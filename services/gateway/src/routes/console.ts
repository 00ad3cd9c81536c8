import { existsSync } from 'node:fs';
import path from 'node:path';
import { CONSOLE_DIST, consoleIsBuilt } from '@baton/console';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.ts';

/**
 * The web console (packages/console, React + Vite) as built files at `/`: index.html (never
 * cached: it names the current assets) and the content-hashed assets under /assets (cached for
 * good). The top-level files get one route each, registered at start — no catch-all at `/`, so
 * unknown paths stay the API's 404 —, and `/assets/*` is looked up when asked for: a console
 * rebuilt while the gateway runs (a pull, then `infra/baton cli`, rebuilds it) names new
 * assets, which must not 404 until a restart. Not built (a checkout nobody ran
 * `infra/baton setup` in): `/` says how, in a 503.
 */
export const consoleRoutes = (d: Pick<GatewayDeps, 'log'>, dist: string = CONSOLE_DIST) => async (app: FastifyInstance) => {
  if (!existsSync(path.join(dist, 'index.html'))) {
    d.log.warn({ dist }, 'the web console is not built: / answers 503 (run infra/baton setup, or node packages/console/src/build.ts)');
    app.get('/', { schema: { hide: true } }, async (_req, reply) =>
      reply.status(503).type('text/html; charset=utf-8').send('<!doctype html><title>Baton</title><p>The web console is not built. Run <code>infra/baton setup</code> (or <code>node packages/console/src/build.ts</code>) and restart the gateway. The API is up: <a href="/docs">/docs</a>.</p>'),
    );
    return;
  }
  if (dist === CONSOLE_DIST && !consoleIsBuilt()) d.log.warn('the web console was built from older sources than these (run infra/baton setup to rebuild it)');
  await app.register(fastifyStatic, {
    root: dist,
    prefix: '/',
    wildcard: false,
    globIgnore: ['assets/**'],
    index: ['index.html'],
    schemaHide: true,
    setHeaders: (reply) => reply.header('cache-control', 'no-cache'),
  });
  await app.register(fastifyStatic, {
    root: path.join(dist, 'assets'),
    prefix: '/assets/',
    wildcard: true,
    decorateReply: false,
    schemaHide: true,
    setHeaders: (reply) => reply.header('cache-control', 'public, max-age=31536000, immutable'),
  });
};
