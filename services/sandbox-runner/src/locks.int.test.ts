import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileAccessViolation, writeRefusal, type WritePolicy } from '@baton/agents';
import { DEFAULT_LIMITS, findBwrap, LocalSandboxProvider, type Sandbox } from '@baton/sandbox';
import { pgTest as test } from '@baton/testing';
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect } from 'vitest';
import { runTool, type ToolEnv } from './tools.ts';

/**
 * File locks and file scope: the only paths an agent may create, change or delete — through the
 * file tools (refused before they run) and through what a command leaves behind (undone after).
 */
let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'baton-locks-'));
});
afterEach(async () => rm(root, { recursive: true, force: true }));

const TOOLS = ['write_file', 'read_file', 'edit_file', 'run_command', 'run_tests'];
let n = 0;
const call = (name: string, input: Record<string, unknown>) => ({ type: 'tool_use' as const, id: `t${++n}`, name, input });
const canRun = findBwrap() !== null;

async function sandbox(pool: pg.Pool): Promise<Sandbox> {
  const sbx = await new LocalSandboxProvider({ root, pool }).open({ taskId: randomUUID(), agentId: 'backend', network: false, env: {}, limits: DEFAULT_LIMITS, attempt: 1 });
  for (const [p, c] of Object.entries({ 'api/stock.ts': 'export const a = 1;\n', 'web/view.ts': 'export const v = 1;\n', 'web/old.ts': 'old\n', 'package.json': '{}\n' })) await sbx.files.write(p, c);
  return sbx;
}

/** A tool call as the runner makes it: the policy's pre-check, then the tool (with the policy for commands). */
async function run(env: ToolEnv, name: string, input: Record<string, unknown>) {
  const c = call(name, input);
  const refused = env.policy ? fileAccessViolation(env.policy, name, input) : null;
  if (refused) return { toolUseId: c.id, toolName: name, content: refused, isError: true };
  return runTool(c, TOOLS, env);
}

describe('file locks and file scope', () => {
  const locked: WritePolicy = { scope: { allowed: [], blocked: ['.git/**'] }, locks: ['api/**'] };

  test('a file tool writing outside the locks is refused with the path and the locks; `..` spellings are normalised first', async ({ pg }) => {
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool), policy: locked };
    expect(await run(env, 'write_file', { path: 'web/view.ts', content: 'x' })).toMatchObject({ isError: true, content: "'web/view.ts' is outside this subtask's file locks (api/**)" });
    expect(await run(env, 'edit_file', { path: 'api/../web/view.ts', old_string: 'v', new_string: 'w' })).toMatchObject({ isError: true, content: "'web/view.ts' is outside this subtask's file locks (api/**)" });
    expect(await run(env, 'write_file', { path: './api//new.ts', content: 'ok' })).toMatchObject({ isError: false, files: { created: ['api/new.ts'], modified: [] } });
    expect(await run(env, 'write_file', { path: '../escape.ts', content: 'x' })).toMatchObject({ isError: true, content: expect.stringMatching(/'\.\.' is not allowed/) });
    // Reading outside the locks is fine; reading what the scope blocks is not.
    expect(await run(env, 'read_file', { path: 'web/view.ts' })).toMatchObject({ isError: false, content: 'export const v = 1;\n' });
    expect(await run(env, 'read_file', { path: '.git/config' })).toMatchObject({ isError: true, content: "'.git/config' is outside this agent's file scope (blocked: .git/**)" });
    expect(await env.sandbox.files.read('web/view.ts')).toBe('export const v = 1;\n');
  });

  test('file_scope on its own: blocked globs refuse every file tool, allowed globs bound writes; locks never widen the scope', () => {
    const scope: WritePolicy = { scope: { allowed: ['**/*.md'], blocked: ['secrets/**'] }, locks: null };
    expect(fileAccessViolation(scope, 'write_file', { path: 'notes.md' })).toBeNull();
    expect(fileAccessViolation(scope, 'write_file', { path: 'a/b.md' })).toBeNull();
    expect(fileAccessViolation(scope, 'write_file', { path: 'run.sh' })).toBe("'run.sh' is outside this agent's file scope (writes allowed: **/*.md)");
    expect(fileAccessViolation(scope, 'read_file', { path: 'secrets/key.md' })).toBe("'secrets/key.md' is outside this agent's file scope (blocked: secrets/**)");
    expect(fileAccessViolation(scope, 'read_file', { path: 'run.sh' })).toBeNull();
    expect(writeRefusal({ scope: scope.scope, locks: ['docs/**'] }, 'docs/x.ts')).toBe("'docs/x.ts' is outside this agent's file scope (writes allowed: **/*.md)");
    expect(writeRefusal({ scope: scope.scope, locks: ['docs/**'] }, 'other/x.md')).toBe("'other/x.md' is outside this subtask's file locks (docs/**)");
    expect(writeRefusal({ locks: [] }, 'a.ts')).toBe("'a.ts' is outside this subtask's file locks (none: it may not change files)");
    expect(writeRefusal({ locks: ['docs/**'] }, 'docs/a/b.ts')).toBeNull();
    // Inside .git, whatever a lock's glob matches and for an agent with no policy at all.
    for (const [policy, p] of [[{ locks: ['{.git,src}/**'] }, '.git/hooks/post-checkout'], [{ locks: ['.*/**'] }, '.Git/config'], [{ locks: null }, 'vendor/lib/.git/HEAD'], [{ locks: ['.*/**'] }, '.g\u200cit/hooks/pre-commit'], [{ locks: ['.*/**'] }, '.git./hooks/x'], [{ locks: ['.*/**'] }, '.git /hooks/x']] as const) {
      expect(writeRefusal(policy, p)).toBe(`'${p}' is inside .git (version control's own state, not the project): no agent's file tools change it`);
    }
    expect(fileAccessViolation({ locks: null }, 'write_file', { path: './.git/hooks/pre-push' })).toMatch(/^'\.git\/hooks\/pre-push' is inside \.git/);
    expect(fileAccessViolation({ locks: null }, 'read_file', { path: '.git/HEAD' })).toBeNull();
    expect(writeRefusal({ locks: ['.github/**'] }, '.github/workflows/ci.yml')).toBeNull();
  });

  test.runIf(canRun)('a command that changes files outside the locks has each change undone and reported; its changes inside are kept', async ({ pg }) => {
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool), policy: locked };
    const r = await run(env, 'run_command', { command: 'echo changed > web/view.ts; echo new > web/new.ts; rm web/old.ts; echo ok > api/ok.ts; echo more >> api/stock.ts' });
    expect(r.isError).toBe(false);
    expect(r.files).toEqual({ created: ['api/ok.ts'], modified: ['api/stock.ts'] });
    expect(r.content).toMatch(/\[reverted: the command changed files outside what this agent may change \(.*file locks \(api\/\*\*\)\): /);
    expect(r.content).toMatch(/modified web\/view\.ts \(restored\)/);
    expect(r.content).toMatch(/created web\/new\.ts \(removed\)/);
    expect(r.content).toMatch(/deleted web\/old\.ts \(restored\)/);
    const files = (await env.sandbox.files.walk()).files.map((f) => f.path);
    expect(files).toEqual(['api/ok.ts', 'api/stock.ts', 'package.json', 'web/old.ts', 'web/view.ts']);
    expect(await env.sandbox.files.read('web/view.ts')).toBe('export const v = 1;\n');
    expect(await env.sandbox.files.read('web/old.ts')).toBe('old\n');
    expect(await env.sandbox.files.read('api/stock.ts')).toBe('export const a = 1;\nmore\n');
  });

  test.runIf(canRun)("what tools make again (a venv, bytecode, pytest's cache) is neither reverted nor reported; a long list of reverted files names the first 20 and counts the rest (a venv outside the locks had made a 68,000-character result)", async ({ pg }) => {
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool), policy: locked };
    const caches = await run(env, 'run_command', { command: 'mkdir -p .pytest_cache/v api/__pycache__ .venv/bin && echo x > .pytest_cache/v/nodeids && echo c > api/__pycache__/m.pyc && echo a > .venv/bin/activate && echo ok > api/ok.py' });
    expect(caches).toMatchObject({ isError: false, files: { created: ['api/ok.py'], modified: [] } });
    expect(caches.content).not.toMatch(/reverted/);
    expect(await env.sandbox.files.read('.pytest_cache/v/nodeids')).toBe('x\n');
    const many = await run(env, 'run_command', { command: 'mkdir -p build && for i in $(seq 1 45); do echo $i > build/f$i.txt; done' });
    expect(many.content).toMatch(/\[reverted: the command changed files outside what this agent may change \(.*\): created build\/f1\.txt \(removed\); .*; and 25 more\]/);
    expect((many.content.match(/\(removed\)/g) ?? []).length).toBe(20);
    expect((await env.sandbox.files.walk()).files.some((f) => f.path.startsWith('build/'))).toBe(false);
  });

  test.runIf(canRun)('a file moved from inside the locks to outside is put back where it was (the copy outside removed, the deletion inside kept: it was lost); a move within them stays', async ({ pg }) => {
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool), policy: locked };
    const r = await run(env, 'run_command', { command: 'mkdir -p web/api && mv api/stock.ts web/api/stock.ts' });
    expect(r.files).toEqual({ created: [], modified: [] }); // before: deleted: ['api/stock.ts']
    expect(r.content).toContain('created web/api/stock.ts (removed)');
    expect(r.content).toContain('moved api/stock.ts to web/api/stock.ts (put back at api/stock.ts)');
    expect(await env.sandbox.files.read('api/stock.ts')).toBe('export const a = 1;\n');
    const inside = await run(env, 'run_command', { command: 'mv api/stock.ts api/moved.ts' });
    expect(inside.files).toEqual({ created: ['api/moved.ts'], modified: [], deleted: ['api/stock.ts'] });
  });

  test.runIf(canRun)("a chmod outside the locks is undone (the file's mode put back); one inside is the agent's change", async ({ pg }) => {
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool), policy: locked };
    await env.sandbox.files.write('web/run.sh', '#!/bin/sh\n', 0o755);
    const r = await run(env, 'run_command', { command: 'chmod +x web/view.ts && chmod -x web/run.sh && chmod +x api/stock.ts' });
    expect(r.files).toEqual({ created: [], modified: ['api/stock.ts'] });
    expect(r.content).toMatch(/modified web\/run\.sh \(restored\)/);
    expect(r.content).toMatch(/modified web\/view\.ts \(restored\)/);
    const modes = Object.fromEntries((await env.sandbox.files.walk()).files.map((f) => [f.path, f.mode]));
    expect(modes).toMatchObject({ 'web/view.ts': 0o644, 'web/run.sh': 0o755, 'api/stock.ts': 0o755 }); // before: reported restored, the mode left changed
  });

  test.runIf(canRun)('a directory or a link left where a file outside the locks was is removed and the file restored; every other change is still undone, and the allowed ones reported', async ({ pg }) => {
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool), policy: locked };
    // package.json sorts before web/: once its undoing stopped the rest (web/old.ts stayed deleted, api/ok.ts unreported).
    const r = await run(env, 'run_command', { command: 'rm package.json && mkdir package.json && rm web/view.ts && ln -s /etc/hostname web/view.ts && rm web/old.ts && echo ok > api/ok.ts' });
    expect(r.files).toEqual({ created: ['api/ok.ts'], modified: [] });
    expect(r.content).toMatch(/deleted package\.json \(restored\)/);
    expect(r.content).toMatch(/deleted web\/old\.ts \(restored\)/);
    expect(r.content).toMatch(/deleted web\/view\.ts \(restored\)/);
    expect((await env.sandbox.files.walk()).files.map((f) => f.path)).toEqual(['api/ok.ts', 'api/stock.ts', 'package.json', 'web/old.ts', 'web/view.ts']);
    expect(await env.sandbox.files.read('web/view.ts')).toBe('export const v = 1;\n');
  });

  test.runIf(canRun)('symlink tricks: a link inside the locks pointing out is never written through by the file tools, and a command writing through it is undone', async ({ pg }) => {
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool), policy: locked };
    await run(env, 'run_command', { command: 'ln -s ../web api/link && ln -s ../package.json api/pkg.json' });
    expect(await run(env, 'write_file', { path: 'api/link/view.ts', content: 'pwned' })).toMatchObject({ isError: true, content: expect.stringMatching(/symbolic link/) });
    expect(await run(env, 'write_file', { path: 'api/pkg.json', content: 'pwned' })).toMatchObject({ isError: true, content: expect.stringMatching(/symbolic link|not allowed/) });
    const r = await run(env, 'run_command', { command: 'echo pwned > api/link/view.ts; echo pwned > api/pkg.json' });
    expect(r.content).toMatch(/modified web\/view\.ts \(restored\)/);
    expect(r.content).toMatch(/modified package\.json \(restored\)/);
    expect(await env.sandbox.files.read('web/view.ts')).toBe('export const v = 1;\n');
    expect(await env.sandbox.files.read('package.json')).toBe('{}\n');
  });

  test.runIf(canRun)('run_tests: only the tests under a path, and the counts recorded with the result', async ({ pg }) => {
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool), policy: locked, testCommand: 'printf " Tests  1 failed | 2 passed (3)\\n"; echo "args: $*" >&2; exit 1; :' };
    const r = await run(env, 'run_tests', { path: "api/it's.test.ts" });
    expect(r).toMatchObject({ isError: true, tests: { passed: 2, failed: 1, skipped: 0 } });
    expect(r.content).toMatch(/^tests failed: 2 passed, 1 failed \(vitest\)\n\$ .* 'api\/it'\\''s\.test\.ts'\n/);
  });
});
