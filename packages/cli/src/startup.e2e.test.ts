import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';

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
    expect(err?.stdout).toMatch(/research\/team\.json: \(file\): Unrecognized key: \\"colour\\"/);
  });
});
