import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { indexCorpus, searchCorpus } from '@baton/storage';
import { DEFAULT_LIMITS, findBwrap, LocalSandboxProvider, type Sandbox } from '@baton/sandbox';
import { pgTest as test } from '@baton/testing';
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect } from 'vitest';
import { writeOver } from './subagent.ts';
import { applyEdit, MAX_RESULT_CHARS, runTool, truncate, type ToolEnv } from './tools.ts';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'baton-tools-'));
});
afterEach(async () => rm(root, { recursive: true, force: true }));

const ALL = ['write_file', 'read_file', 'list_directory', 'edit_file', 'glob', 'search_files', 'run_command', 'run_tests', 'web_search'];
let n = 0;
const call = (name: string, input: Record<string, unknown>) => ({ type: 'tool_use' as const, id: `t${++n}`, name, input });
async function sandbox(pool: pg.Pool): Promise<Sandbox> {
  return new LocalSandboxProvider({ root, pool }).open({ taskId: randomUUID(), agentId: 'engineer-1', network: false, env: {}, limits: DEFAULT_LIMITS, attempt: 1 });
}

describe('runner tools', () => {
  test('edit_file replaces exactly one occurrence (or all when asked) and says what is wrong otherwise', async ({ pg }) => {
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool) };
    await runTool(call('write_file', { path: 'src/a.ts', content: 'let x = 1;\nlet y = 1;\n' }), ALL, env);
    expect(await runTool(call('edit_file', { path: 'src/a.ts', old_string: '= 1', new_string: '= 2' }), ALL, env)).toMatchObject({ isError: true, content: expect.stringMatching(/occurs 2 times/) });
    expect(await runTool(call('edit_file', { path: 'src/a.ts', old_string: 'let y = 1', new_string: 'let y = 3' }), ALL, env)).toMatchObject({ isError: false, files: { created: [], modified: ['src/a.ts'] } });
    expect(await runTool(call('edit_file', { path: 'src/a.ts', old_string: '= ', new_string: '== ', replace_all: true }), ALL, env)).toMatchObject({ content: 'edited src/a.ts: replaced 2 occurrences' });
    expect(await env.sandbox.files.read('src/a.ts')).toBe('let x == 1;\nlet y == 3;\n');
    expect(await runTool(call('edit_file', { path: 'src/a.ts', old_string: 'nope', new_string: '' }), ALL, env)).toMatchObject({ isError: true, content: 'old_string was not found in src/a.ts' });
    expect(applyEdit('a$b', '$', '$$&', false, 'f').text).toBe('a$$&b'); // replacement patterns are not interpreted
  });

  test('read_file reads a long file a window at a time (offset, limit); a bad window is refused naming the field', async ({ pg }) => {
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool) };
    await env.sandbox.files.write('big.txt', Array.from({ length: 3000 }, (_, i) => `row ${i + 1}`).join('\n') + '\n');
    expect((await runTool(call('read_file', { path: 'big.txt' }), ALL, env)).content).toMatch(/^row 1\n[^]*\nrow 2000\n\[read_file: lines 1–2000 of 3000; read on with offset 2001\]$/);
    expect(await runTool(call('read_file', { path: 'big.txt', offset: 2999 }), ALL, env)).toMatchObject({ isError: false, content: 'row 2999\nrow 3000\n[read_file: lines 2999–3000 of 3000]' });
    expect(await runTool(call('read_file', { path: 'big.txt', offset: 0 }), ALL, env)).toMatchObject({ isError: true, content: expect.stringMatching(/offset/) });
    // Bytes that are not text say so first.
    await env.sandbox.files.write('latin1.txt', Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    expect((await runTool(call('read_file', { path: 'latin1.txt' }), ALL, env)).content).toBe('[not UTF-8 text: each byte that is not shows as U+FFFD; edit_file refuses it]\ncaf\ufffd\n');
    await env.sandbox.files.write('logo.bin', Buffer.from([0x89, 0x50, 0, 1]));
    expect((await runTool(call('read_file', { path: 'logo.bin' }), ALL, env)).content).toMatch(/^\[a binary file \(it has NUL bytes\): shown as UTF-8 text, which it is not\]\n/);
  });

  test.runIf(findBwrap() !== null)('a file under another Unicode spelling of an existing name (café composed / decomposed) is refused by write_file and not kept from a command: one name would be two files', async ({ pg }) => {
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool) };
    const nfc = 'docs/caf\u00e9.md';
    const nfd = 'docs/cafe\u0301.md';
    await runTool(call('write_file', { path: nfc, content: 'composed' }), ALL, env);
    expect(await runTool(call('write_file', { path: nfd, content: 'decomposed' }), ALL, env)).toMatchObject({ isError: true, content: `'${nfd}' is the existing '${nfc}' written in another Unicode normalization (NFD): one name would be two files; write '${nfc}'` });
    expect(await runTool(call('write_file', { path: nfc, content: 'again' }), ALL, env)).toMatchObject({ isError: false, files: { modified: [nfc] } });
    const r = await runTool(call('run_command', { command: `printf x > '${nfd}'; printf y > docs/other.md` }), ALL, env);
    expect(r.files).toEqual({ created: ['docs/other.md'], modified: [] });
    expect(r.content).toContain(`created ${nfd} (removed)`);
    expect((await env.sandbox.files.walk()).files.map((f) => f.path)).toEqual([nfc, 'docs/other.md']);
  });

  test('edit_file refuses a file that is not UTF-8, leaving every byte of it (it wrote U+FFFD over each byte it could not read)', async ({ pg }) => {
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool) };
    const latin1 = Buffer.from([0xff, 0xfe, 0x20, 0x6c, 0x61, 0x74, 0x69, 0x6e, 0x31, 0x20, 0xe9, 0x0a]); // "\xff\xfe latin1 \xe9\n"
    await env.sandbox.files.write('d/latin1.txt', latin1);
    expect(await runTool(call('edit_file', { path: 'd/latin1.txt', old_string: 'latin1', new_string: 'LATIN1' }), ALL, env)).toMatchObject({
      isError: true,
      content: 'd/latin1.txt is not UTF-8 text: edit_file would change bytes it was not asked to; change it with a command (run_command) instead',
    });
    expect((await env.sandbox.files.readBytes('d/latin1.txt')).bytes.equals(latin1)).toBe(true);
  });

  test('glob and search_files find files and lines; invalid input is an error result naming the field', async ({ pg }) => {
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool) };
    await runTool(call('write_file', { path: 'docs/guide.md', content: '# Guide\nDurable runs resume.\n' }), ALL, env);
    await runTool(call('write_file', { path: 'src/run.ts', content: 'export const durable = true;\n' }), ALL, env);
    expect((await runTool(call('glob', { pattern: '**/*.md' }), ALL, env)).content).toBe('docs/guide.md');
    expect((await runTool(call('search_files', { pattern: 'durable', ignore_case: true }), ALL, env)).content).toBe('docs/guide.md:2: Durable runs resume.\nsrc/run.ts:1: export const durable = true;');
    expect((await runTool(call('search_files', { pattern: 'durable', glob: '*.ts' }), ALL, env)).content).toBe('src/run.ts:1: export const durable = true;');
    expect(await runTool(call('search_files', { pattern: '(' }), ALL, env)).toMatchObject({ isError: true, content: expect.stringMatching(/invalid regular expression/) });
    expect(await runTool(call('glob', { patern: '*' }), ALL, env)).toMatchObject({ isError: true, content: expect.stringMatching(/invalid input for glob: pattern: /) });
  });

  test('web_search queries the offline corpus and cites each source', async ({ pg }) => {
    await indexCorpus(pg.db.pool, 'docs', path.resolve(import.meta.dirname, '../../..'));
    const env: ToolEnv = { sandbox: await sandbox(pg.db.pool), search: (q, k) => searchCorpus(pg.db.pool, 'docs', q, k) };
    const r = await runTool(call('web_search', { query: 'bubblewrap sandbox escape', max_results: 3 }), ALL, env);
    expect(r.isError).toBe(false);
    expect(r.content).toMatch(/^Results for "bubblewrap sandbox escape" \(offline corpus\):\n\n1\. .+\n {3}source: \S+\.md\n/);
    expect((await runTool(call('web_search', { query: 'zzyzx qqxq' }), ALL, env)).content).toMatch(/no results/);
  });

  test('a document too large for a full-text index (a megabyte of distinct words) is indexed by its start: indexing does not fail', async ({ pg }) => {
    const dir = path.join(root, 'corpus');
    await mkdir(dir);
    await writeFile(path.join(dir, 'huge.txt'), Array.from({ length: 150_000 }, (_, i) => `lexeme${i.toString(36)}x`).join(' '));
    await writeFile(path.join(dir, 'small.md'), '# Small\nconsensus protocols');
    expect((await stat(path.join(dir, 'huge.txt'))).size).toBeGreaterThan(1_500_000);
    expect(await indexCorpus(pg.db.pool, 'big', dir)).toMatchObject({ indexed: 2 });
    expect((await searchCorpus(pg.db.pool, 'big', 'lexeme0x')).map((h) => h.source)).toEqual(['huge.txt']);
    expect((await searchCorpus(pg.db.pool, 'big', 'consensus')).map((h) => h.source)).toEqual(['small.md']);
  });

  test('seeding lays files as the task\'s tree does: where a file and a directory of one name meet, the later wins (a file turned into a directory seeded nothing before)', async ({ pg }) => {
    const sbx = await sandbox(pg.db.pool);
    await sbx.files.write('api/types.ts', 'export type A = 1;\n'); // the input's file…
    await writeOver(sbx, 'api/types.ts/inner.ts', 'export type B = 2;\n'); // …an agent made a directory of
    await sbx.files.write('web/view/a.ts', 'a'); // a directory…
    await writeOver(sbx, 'web/view', 'now a file'); // …a later artifact made a file of
    expect((await sbx.files.walk()).files.map((f) => f.path)).toEqual(['api/types.ts/inner.ts', 'web/view']);
    expect(await sbx.files.read('web/view')).toBe('now a file');
  });

  test('truncation keeps 4,000 characters of the start and the end and says so', () => {
    const long = `${'a'.repeat(3000)}${'b'.repeat(3000)}`;
    const t = truncate(long);
    expect(t).toMatch(/^a{1000}\n\[output truncated: 6000 characters, showing the first 1000 and the last 3000\]\nb{3000}$/);
    expect(t.replace(/\n\[.*\]\n/, '').length).toBe(MAX_RESULT_CHARS);
    // Never half an emoji at either cut (it could not be recorded: the step was retried until the run failed).
    expect(truncate('😀'.repeat(3000)).isWellFormed()).toBe(true);
    expect(truncate(`a${'😀'.repeat(3000)}`).isWellFormed()).toBe(true);
  });

  describe.runIf(findBwrap() !== null)('commands (bubblewrap)', () => {
    test('run_command gives the exit code and output; run_tests adds pass/fail counts; a runaway command times out', async ({ pg }) => {
      const env: ToolEnv = { sandbox: await sandbox(pg.db.pool), testCommand: 'node --test' };
      await runTool(call('write_file', { path: 'math.test.mjs', content: "import test from 'node:test';\nimport assert from 'node:assert';\ntest('adds', () => assert.equal(1 + 1, 2));\ntest('fails', () => assert.equal(1 + 1, 3));\n" }), ALL, env);
      const ok = await runTool(call('run_command', { command: 'echo hi; echo oops >&2' }), ALL, env);
      expect(ok).toMatchObject({ isError: false, content: expect.stringMatching(/^exit code 0 \([\d.]+ s\)\n--- stdout ---\nhi\n\n--- stderr ---\noops\n$/) });
      // Colours and cursor moves are left out of what the model reads.
      const coloured = await runTool(call('run_command', { command: "printf '\\033[1m\\033[32m✓\\033[39m\\033[22m passed\\033[2K\\n' ; printf '\\033[31mred\\033[0m\\n' >&2" }), ALL, env);
      expect(coloured.content).toMatch(/^exit code 0 \([\d.]+ s\)\n--- stdout ---\n✓ passed\n\n--- stderr ---\nred\n$/);
      const tests = await runTool(call('run_tests', {}), ALL, env);
      expect(tests).toMatchObject({ isError: true, content: expect.stringMatching(/^tests failed: 1 passed, 1 failed \(node-spec\)\n\$ node --test\nexit code 1/) });
      // Tests that could not be run (the workspace could not be read around them) did not pass: a failed run, with the reason.
      const unreadable = { ...env.sandbox, files: { ...env.sandbox.files, walk: () => Promise.reject(new Error('src: the name is too long')) } };
      const notRun = await runTool(call('run_tests', {}), ALL, { ...env, sandbox: unreadable });
      expect(notRun).toMatchObject({ isError: true, tests: { passed: 0, failed: 1, skipped: 0 }, content: 'tests could not be run (counted as 1 failed): src: the name is too long\n$ node --test' });
      const slow = await runTool(call('run_command', { command: 'sleep 30', timeout_seconds: 1 }), ALL, env);
      expect(slow).toMatchObject({ isError: true, content: expect.stringMatching(/^timed out after 1 s: the command was killed/) });
      // Files a command makes or changes are reported like written ones (and so become artifacts).
      const made = await runTool(call('run_command', { command: 'echo report > out.md; mkdir -p node_modules/x && touch node_modules/x/i.js; echo more >> math.test.mjs' }), ALL, env);
      expect(made.files).toEqual({ created: ['out.md'], modified: ['math.test.mjs'] });
      // Dependencies (60,000 files under node_modules, an ordinary install) are not walked: the command's own change is still seen.
      const deps = await runTool(call('run_command', { command: 'mkdir -p node_modules/big && cd node_modules/big && seq 1 60000 | xargs touch && cd ../.. && echo again >> math.test.mjs', timeout_seconds: 120 }), ALL, env);
      expect([deps.content.slice(0, 11), deps.files]).toEqual(['exit code 0', { created: [], modified: ['math.test.mjs'] }]);
      // Past 50,000 files of the project's own, what one walk saw and the other did not is said to be unchecked — not reported as created or deleted.
      const many = await runTool(call('run_command', { command: 'mkdir -p data && cd data && seq 1 50001 | xargs touch', timeout_seconds: 120 }), ALL, env);
      expect([many.files, many.content]).toEqual([{ created: [], modified: [] }, expect.stringMatching(/\n\[the workspace has more than 50000 files besides dependencies: files created or deleted beyond those were not checked\]$/)]);
      await runTool(call('run_command', { command: 'rm -rf data' }), ALL, env);
      // An edit that keeps the size and sets the modification time back is a change all the same.
      const stealth = await runTool(call('run_command', { command: "touch -r math.test.mjs /tmp/when && sed -i 's/adds/sdda/' math.test.mjs && touch -r /tmp/when math.test.mjs" }), ALL, env);
      expect([stealth.content.slice(0, 11), stealth.files]).toEqual(['exit code 0', { created: [], modified: ['math.test.mjs'] }]);
      const loud = await runTool(call('run_command', { command: 'seq 1 100000' }), ALL, env);
      expect(loud.content).toMatch(/\[output truncated: \d+ characters, showing the first \d+ and the last \d+\]\n[\s\S]*100000\n$/);
      // Over 1 MB a stream keeps its start and its end (a test summary printed last survives), and a
      // long stderr no longer crowds out the end of stdout: each stream is cut to its own share.
      const both = await runTool(call('run_command', { command: 'seq 1 300000; seq 1 50000 >&2' }), ALL, env);
      expect(both.content).toMatch(/^exit code 0 \([\d.]+ s\)\n--- stdout ---\n1\n2\n[\s\S]*\n300000\n\n\[1988895 bytes in all\]\n--- stderr ---\n1\n[\s\S]*\n50000\n$/);
      expect(both.content.length).toBeLessThanOrEqual(4200);
      // A short stderr leaves its share to stdout (it took half, whatever it needed).
      const mostly = await runTool(call('run_command', { command: 'seq 1 100000; echo oops >&2' }), ALL, env);
      expect(mostly.content).toMatch(/\n100000\n\n--- stderr ---\noops\n$/);
      expect(/showing the first \d+ and the last (\d+)\]/.exec(mostly.content)?.[1]).toSatisfy((n: string) => Number(n) > 2500);
      // What a workspace cannot hold — a link, a fifo, a name with a line break (a directory so named with all in it) — is said, not dropped without a word.
      const odd = await runTool(call('run_command', { command: "ln -s /etc/hostname host-link && mkfifo pipe && printf x > \"$(printf 'two\\nlines.md')\" && mkdir \"$(printf 'dir\\tname')\" && touch \"$(printf 'dir\\tname')/in.md\" && echo kept > ok.md" }), ALL, env);
      expect(odd.files).toEqual({ created: ['ok.md'], modified: [] });
      const unkept = /\n\[not kept as the task's files \(never synced, listed or stored\): (.*)\]$/.exec(odd.content)?.[1]?.split('; ').sort();
      expect(unkept).toEqual([
        '"dir\\tname" — its name contains a control character (U+0009, a tab), and it is a directory: nothing in it is kept',
        '"two\\nlines.md" — its name contains a control character (U+000A, a line break)',
        'host-link — a symbolic link (links are never kept)',
        'pipe — not a regular file (a fifo, socket or device)',
      ]);
      // Made before, they are not said again.
      expect((await runTool(call('run_command', { command: 'true' }), ALL, env)).content).not.toMatch(/not kept/);
    });
  });
});
