import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { claimNamespace, createDb, ensureDatabase, migrateToLatest } from '@baton/db';
import { deleteNamespace, freshDatabase, newNamespace, pgTest, waitFor, withDatabase } from '@baton/testing';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { dropDatabase } from './procs.ts';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const run = promisify(execFile);

describe('start-up with a bad team config', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it.each(['gateway', 'orchestrator', 'sandbox-runner'])('%s refuses to start, naming every problem (exit 78)', async (service) => {
    const dir = await mkdtemp(path.join(tmpdir(), 'baton-badteams-'));
    dirs.push(dir);
    await mkdir(path.join(dir, 'research'));
    await writeFile(path.join(dir, 'research', 'team.json'), JSON.stringify({ id: 'research', lead: 'lead', agents: [], colour: 'red' }));
    await writeFile(path.join(dir, 'research', 'lead.json'), JSON.stringify({ id: 'lead', name: 'L', model: 'm', prompt_file: 'lead.md', tools: ['teleport'] }));
    const err = await run(process.execPath, [path.join(ROOT, 'services', service, 'src', 'main.ts')], {
      env: { ...process.env, BATON_TEAMS_DIR: dir, DATABASE_URL: inject('databaseUrl'), NATS_URL: inject('natsUrl'), LOG_LEVEL: 'info' },
      timeout: 30_000,
    }).then(() => null, (e: { code: number; stdout: string }) => e);
    expect(err?.code).toBe(78);
    expect(err?.stdout).toMatch(/research\/team\.json: \(file\): unknown field 'colour'/);
  });

  it.each(['gateway', 'orchestrator', 'sandbox-runner', 'notifier'])('%s with an invalid environment exits 78 (not restarted by baton up), naming every bad variable', async (service) => {
    const err = await run(process.execPath, [path.join(ROOT, 'services', service, 'src', 'main.ts')], {
      env: { ...process.env, DATABASE_URL: 'mysql://nope', LOG_LEVEL: 'loud', NATS_URL: inject('natsUrl') },
      timeout: 30_000,
    }).then(() => null, (e: { code: number; stderr: string }) => e);
    expect(err?.code).toBe(78);
    expect(err?.stderr).toMatch(/invalid configuration:\n {2}- DATABASE_URL: must be a postgres:\/\/ URL\n {2}- LOG_LEVEL: /);
  });

  it('settings whose default is unsafe are refused empty, and a runner told to use E2B without a key, or given a workspace root it cannot write under, is refused, each exit 78 naming the variable (not restarted for ever behind a stack trace)', async () => {
    const start = (service: string, env: Record<string, string>) =>
      run(process.execPath, [path.join(ROOT, 'services', service, 'src', 'main.ts')], { env: { ...process.env, DATABASE_URL: inject('databaseUrl'), NATS_URL: inject('natsUrl'), ...env }, timeout: 30_000 }).then(
        () => null,
        (e: { code: number; stderr: string }) => e,
      );
    const gateway = await start('gateway', { BATON_API_KEYS: '', PORT: '0' });
    expect(gateway?.code).toBe(78);
    expect(gateway?.stderr).toMatch(/BATON_API_KEYS: is set but empty; leave it out for its default, or give a value/);
    const noKeysFile = await start('gateway', { BATON_API_KEYS_FILE: '/nonexistent/baton-keys', PORT: '0' });
    expect(noKeysFile?.code).toBe(78);
    expect(noKeysFile?.stderr).toMatch(/BATON_API_KEYS_FILE: \/nonexistent\/baton-keys: cannot be read \(ENOENT\)/);
    const unknownDefault = await start('gateway', { BATON_DEFAULT_TEAM: 'reserch', PORT: '0' });
    expect(unknownDefault?.code).toBe(78);
    expect(unknownDefault?.stderr).toMatch(/BATON_DEFAULT_TEAM: 'reserch' is not a configured team \(configured: bench, engineering, research\)/);
    const notifier = await start('notifier', { WEBHOOK_SECRET: '', OPS_PORT: '0' });
    expect(notifier?.code).toBe(78);
    expect(notifier?.stderr).toMatch(/WEBHOOK_SECRET: is set but empty/);
    const runner = await start('sandbox-runner', { SANDBOX_PROVIDER: 'e2b', OPS_PORT: '0' });
    expect(runner?.code).toBe(78);
    expect(runner?.stderr).toMatch(/E2B_API_KEY: required when SANDBOX_PROVIDER=e2b/);
    // A workspace root it cannot write under would fail every agent while it reported ready.
    const unusable = await start('sandbox-runner', { SANDBOX_PROVIDER: 'local', WORKSPACE_ROOT: '/etc/passwd/workspaces', OPS_PORT: '0' });
    expect(unusable?.code).toBe(78);
    expect(unusable?.stderr).toMatch(/WORKSPACE_ROOT: cannot make workspaces under \/etc\/passwd\/workspaces: ENOTDIR/);
  });

  pgTest("a service of another namespace than the one its database belongs to refuses to start, exit 78 naming both (one had taken the relay's lock and published the other's events where nobody listened)", async ({ pg }) => {
    expect((await claimNamespace(pg.db.pool, 'owner1')).namespace).toBe('owner1');
    expect((await claimNamespace(pg.db.pool, 'other2')).namespace).toBe('owner1'); // the first claim holds
    for (const service of ['orchestrator', 'sandbox-runner', 'notifier', 'gateway']) {
      const err = await run(process.execPath, [path.join(ROOT, 'services', service, 'src', 'main.ts')], {
        env: { ...process.env, DATABASE_URL: pg.url, NATS_URL: inject('natsUrl'), BATON_NAMESPACE: 'other2', OPS_PORT: '0', PORT: '0', WORKSPACE_ROOT: path.join(tmpdir(), 'baton-ns-refused') },
        timeout: 60_000,
      }).then(() => null, (e: { code: number; stderr: string }) => e);
      expect(err?.code, service).toBe(78);
      expect(err?.stderr, service).toContain("BATON_NAMESPACE: 'other2', but DATABASE_URL's database belongs to namespace 'owner1' (the first service that ran on it claimed it)");
    }
    await deleteNamespace(inject('natsUrl'), 'other2');
  }, 240_000);

  it("two databases on one namespace: a worker on the second refuses to start while a worker of the first runs, exit 78 naming both deployment ids (their runners took each other's jobs, all ready), and takes the streams over once none runs", async () => {
    const namespace = newNamespace();
    const [first, second] = [await freshDatabase(), await freshDatabase()];
    const notifier = path.join(ROOT, 'services', 'notifier', 'src', 'main.ts');
    const env = (url: string) => ({ ...process.env, DATABASE_URL: url, NATS_URL: inject('natsUrl'), BATON_NAMESPACE: namespace, OPS_PORT: '0', LOG_LEVEL: 'info', LOG_PRETTY: 'false' });
    const start = (url: string) => {
      const child = spawn(process.execPath, [notifier], { env: env(url), stdio: ['ignore', 'pipe', 'pipe'] });
      const out = { text: '' };
      child.stdout.on('data', (b: Buffer) => (out.text += b.toString()));
      return { child, out, stop: async () => { if (child.exitCode === null) { child.kill('SIGTERM'); await once(child, 'exit'); } } };
    };
    const deploymentOf = async (db: typeof first) => (await db.db.pool.query<{ id: string }>('select deployment_id as id from deployment')).rows[0]?.id;
    try {
      const running = start(first.url);
      try {
        await waitFor(() => running.out.text.includes('notifier started'), { timeoutMs: 60_000, what: 'the first notifier to start' });
        const refused = await run(process.execPath, [notifier], { env: env(second.url), timeout: 60_000 }).then(() => null, (e: { code: number; stderr: string }) => e);
        expect(refused?.code).toBe(78);
        expect(refused?.stderr).toContain(
          `NATS stream BATON_EVENTS_${namespace.toUpperCase()} (BATON_NAMESPACE '${namespace}') belongs to another deployment whose services are running: it was made for the database whose deployment id is ${await deploymentOf(first)}, and DATABASE_URL's database has deployment id ${await deploymentOf(second)} (each database's is in its table deployment).`,
        );
      } finally {
        await running.stop();
      }
      // The first deployment gone (its database dropped, say): the second takes the streams over.
      const taking = start(second.url);
      try {
        await waitFor(() => taking.out.text.includes('notifier started'), { timeoutMs: 60_000, what: 'the second notifier to start' });
        expect(taking.out.text).toContain('taken over (deleted and re-created');
      } finally {
        await taking.stop();
      }
    } finally {
      await deleteNamespace(inject('natsUrl'), namespace);
      await first.drop();
      await second.drop();
    }
  }, 180_000);

  it('a worker started before the migrations opens its ops port at once: /healthz 200, /readyz 503 naming the step it waits on and why; ready once they are applied, without a restart', async () => {
    const namespace = newNamespace();
    const url = withDatabase(inject('databaseUrl'), `baton_t_${inject('runId')}_early`);
    await ensureDatabase(url);
    const child = spawn(process.execPath, [path.join(ROOT, 'services', 'notifier', 'src', 'main.ts')], {
      env: { ...process.env, DATABASE_URL: url, NATS_URL: inject('natsUrl'), BATON_NAMESPACE: namespace, OPS_PORT: '0', LOG_LEVEL: 'info', LOG_PRETTY: 'false' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out = { text: '' };
    child.stdout.on('data', (b: Buffer) => (out.text += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out.text += b.toString()));
    try {
      const port = await waitFor(() => Number(/"port":(\d+)[^\n]*"msg":"ops port/.exec(out.text)?.[1]) || null, { timeoutMs: 30_000, what: 'the ops port' });
      const get = async (p: string) => {
        const res = await fetch(`http://127.0.0.1:${port}${p}`);
        return { status: res.status, body: (await res.json()) as { status: string; checks?: Record<string, string> } };
      };
      expect(await get('/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
      const waiting = await waitFor(async () => {
        const r = await get('/readyz');
        return r.body.checks?.started?.includes('last try') ? r : null;
      }, { timeoutMs: 30_000, what: 'readiness naming the failed step' });
      expect(waiting.status).toBe(503);
      expect(waiting.body.checks?.started).toMatch(/^starting: claiming the database for this service's BATON_NAMESPACE \(last try: this database's schema is older than this code: run the migrations first/);
      expect(waiting.body.checks?.postgres).toMatch(/^no migration applied to this database: run the migrations first/);
      expect(out.text).not.toContain('notifier started');
      const db = createDb(url, { max: 1 });
      try {
        await migrateToLatest(db.kysely);
      } finally {
        await db.close();
      }
      const ready = await waitFor(async () => {
        const r = await get('/readyz');
        return r.status === 200 ? r : null;
      }, { timeoutMs: 60_000, what: 'ready once migrated' });
      expect(ready.body).toEqual({ status: 'ready', checks: { started: 'ok', postgres: 'ok', nats: 'ok' } });
      expect(out.text).toContain('notifier started');
    } finally {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await once(child, 'exit');
      }
      await deleteNamespace(inject('natsUrl'), namespace);
      await dropDatabase(url);
    }
  }, 120_000);

  it('a port already taken: the gateway (PORT) and a worker (OPS_PORT) say which and how to choose another, and exit 78; baton up stops instead of restarting for ever', async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as AddressInfo).port;
    const namespace = newNamespace();
    try {
      const start = (service: string, env: Record<string, string>) =>
        run(process.execPath, [path.join(ROOT, 'services', service, 'src', 'main.ts')], { env: { ...process.env, DATABASE_URL: inject('databaseUrl'), NATS_URL: inject('natsUrl'), BATON_NAMESPACE: namespace, ...env }, timeout: 30_000 }).then(
          () => null,
          (e: { code: number; stderr: string }) => e,
        );
      const gateway = await start('gateway', { PORT: String(port), HOST: '127.0.0.1' });
      expect(gateway?.code).toBe(78);
      expect(gateway?.stderr).toContain(`cannot listen on 127.0.0.1:${port}: the port is in use by another process (another Baton still running?). Stop what holds it, or choose another with PORT (baton up --port N).`);
      expect(gateway?.stderr).not.toMatch(/EADDRINUSE/);
      // A worker claims its database before it sets up the bus (and listens): one of its own.
      const own = await freshDatabase();
      const notifier = await start('notifier', { OPS_PORT: String(port), OPS_HOST: '127.0.0.1', DATABASE_URL: own.url }).finally(() => own.drop());
      expect(notifier?.code).toBe(78);
      expect(notifier?.stderr).toContain(`cannot listen on 127.0.0.1:${port}: the port is in use by another process (another Baton still running?). Stop what holds it, or choose another with OPS_PORT (0: any free port).`);

      const db = withDatabase(inject('databaseUrl'), `baton_t_${inject('runId')}_port`);
      const up = await run(process.execPath, ['packages/cli/src/main.ts', 'up', '--port', String(port)], { cwd: ROOT, env: { ...process.env, DATABASE_URL: db, NATS_URL: inject('natsUrl'), BATON_NAMESPACE: namespace, OPS_PORT: '0' }, timeout: 60_000 }).then(
        () => null,
        (e: { code: number; stdout: string }) => e,
      );
      expect(up?.code).toBe(1);
      expect(up?.stdout).toMatch(/gateway +.*cannot listen on 127\.0\.0\.1:\d+: the port is in use/);
      expect(up?.stdout).toMatch(/gateway exited \(code 78\) and cannot be restarted; stopping the others/);
      expect(up?.stdout).not.toMatch(/restarting in/);
      await dropDatabase(db);
    } finally {
      taken.close();
      await deleteNamespace(inject('natsUrl'), namespace);
    }
  });

  it('baton up with a configuration the services refuse stops everything and exits 1 instead of restarting them', async () => {
    const err = await run(process.execPath, ['packages/cli/src/main.ts', 'up', '--port', '0'], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: withDatabase(inject('databaseUrl'), `baton_t_${inject('runId')}_cfg`), NATS_URL: inject('natsUrl'), LOG_LEVEL: 'loud' },
      timeout: 60_000,
    }).then(() => null, (e: { code: number; stdout: string; stderr: string }) => e);
    expect(err?.code).toBe(1);
    expect(err?.stdout).toMatch(/exited \(code 78\) after [\d.]+ s: a configuration error, not restarted/);
    expect(err?.stdout).toMatch(/exited \(code 78\) and cannot be restarted; stopping the others/);
    expect(err?.stdout).not.toMatch(/restarting in/);
    await dropDatabase(withDatabase(inject('databaseUrl'), `baton_t_${inject('runId')}_cfg`));
  });
});
