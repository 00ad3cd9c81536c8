import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_TEAMS_DIR } from '@baton/agents';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const run = promisify(execFile);
// No gateway anywhere: the check must not need one (a refused connection would fail these).
const env: NodeJS.ProcessEnv = { ...process.env, BATON_URL: 'http://127.0.0.1:9' };
delete env.BATON_TEAMS_DIR;
const baton = (args: string[], extra: Record<string, string> = {}) => run(process.execPath, ['packages/cli/src/main.ts', ...args], { cwd: ROOT, env: { ...env, ...extra } });

describe('baton teams --check (a teams directory checked before it is deployed, no Baton running)', () => {
  const dirs: string[] = [];
  const copy = (): string => {
    const d = mkdtempSync(path.join(tmpdir(), 'baton-teams-check-'));
    dirs.push(d);
    cpSync(DEFAULT_TEAMS_DIR, d, { recursive: true });
    return d;
  };
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('a good directory: each team described as `baton teams` would, then ok with the count', async () => {
    const { stdout } = await baton(['teams', '--check', copy()]);
    expect(stdout).toMatch(/^research — .*\n {2}lead \S+ \(.+, \d+ turns\): Task, ask_user; delegates to .*researcher/m);
    expect(stdout).toMatch(/^engineering — /m);
    expect(stdout).toMatch(/\nok: 3 teams in \/.*baton-teams-check-\w+\n$/);
  });

  it('without a directory: BATON_TEAMS_DIR, else the shipped teams', async () => {
    expect((await baton(['teams', '--check'])).stdout).toContain(`ok: 3 teams in ${DEFAULT_TEAMS_DIR}`);
    const d = copy();
    rmSync(path.join(d, 'bench'), { recursive: true });
    expect((await baton(['teams', '--check'], { BATON_TEAMS_DIR: d })).stdout).toContain(`ok: 2 teams in ${d}`);
  });

  it('a broken directory: every problem named, by file and field, exit 1', async () => {
    const d = copy();
    writeFileSync(path.join(d, 'research', 'team.json'), JSON.stringify({ id: 'research', description: 'r', lead: 'lead', agents: ['researcher', 'ghost'] }));
    writeFileSync(path.join(d, 'bench', 'stray.json'), '{}');
    const err = (await baton(['teams', '--check', d]).catch((e: unknown) => e)) as { code: number; stdout: string; stderr: string };
    expect(err.code).toBe(1);
    expect(err.stdout).toBe('');
    expect(err.stderr).toContain(`baton: invalid team config in ${d}:`);
    expect(err.stderr).toMatch(/research\/ghost\.json: /);
    expect(err.stderr).toMatch(/bench\/stray\.json: not an agent of team 'bench'/);
    const missing = (await baton(['teams', '--check', path.join(d, 'nowhere')]).catch((e: unknown) => e)) as { code: number; stderr: string };
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`${path.join(d, 'nowhere')}: no such directory`);
  });
});
