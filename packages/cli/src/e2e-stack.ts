import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BatonClient } from '@baton/client';
import { deleteNamespace, newNamespace } from '@baton/testing';
import { inject } from 'vitest';
import { launch, prepareDatabase, type Launched } from './launcher.ts';
import { dropDatabase, freePort, freshDatabase, waitReady } from './procs.ts';

/** The four services as processes for an end-to-end test: its own database, NATS names and workspaces. */
export interface E2eStack {
  url: string;
  dbUrl: string;
  workspaces: string;
  namespace: string;
  /** A client of the gateway (with the key, if one was given). */
  api: BatonClient;
  services: Launched;
  /** Stop the services and delete what the stack made (database, streams, workspaces). */
  stop(): Promise<void>;
}

/**
 * Start the services for a test file (in `beforeAll`): the offline model (no ANTHROPIC_API_KEY),
 * warn-level logs with errors echoed, and whatever `env` adds (it is given the gateway's URL).
 */
export async function startE2eStack(name: string, o: { env?: (ctx: { url: string }) => NodeJS.ProcessEnv; apiKey?: string } = {}): Promise<E2eStack> {
  const dbUrl = await freshDatabase(inject('databaseUrl'), `baton_t_${inject('runId')}_${name}${randomBytes(3).toString('hex')}`);
  await prepareDatabase(dbUrl, () => {});
  const workspaces = await mkdtemp(path.join(tmpdir(), `baton-${name}-`));
  const namespace = newNamespace();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const { ANTHROPIC_API_KEY: _key, ...env } = process.env; // the offline model plays every role
  // A service that refuses its configuration (exit 78, not restarted): said now, not after the 60 s wait for readiness.
  let refused: (err: Error) => void = () => {};
  const gaveUp = new Promise<never>((_, reject) => (refused = reject));
  gaveUp.catch(() => {});
  const services = launch({
    onExit: (e) => {
      if (e.restartInMs === null && e.code === 78) refused(new Error(`${e.name} of the ${name} stack refused its configuration (exit 78; its FATAL line is above): the stack is not ready`));
    },
    env: { ...env, DATABASE_URL: dbUrl, NATS_URL: inject('natsUrl'), BATON_NAMESPACE: namespace, PORT: String(port), WORKSPACE_ROOT: workspaces, LOG_LEVEL: 'warn', ...o.env?.({ url }) },
    write: (l) => (/ERROR|FATAL/.test(l) ? console.error(l) : undefined),
    color: false,
  });
  const api = new BatonClient(url, o.apiKey);
  const stop = async (): Promise<void> => {
    await services.stop('SIGTERM');
    await deleteNamespace(inject('natsUrl'), namespace);
    await rm(workspaces, { recursive: true, force: true });
    await dropDatabase(dbUrl);
  };
  try {
    await Promise.race([waitReady(api), gaveUp]);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url,
    dbUrl,
    workspaces,
    namespace,
    api,
    services,
    stop,
  };
}
