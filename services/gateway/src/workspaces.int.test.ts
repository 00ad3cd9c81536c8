import { randomBytes, randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createDb } from '@baton/db';
import { handleCommand } from '@baton/event-store';
import { parseWorkspaceArchive, readWorkspace, storeArtifact, workspaceDigest, type WorkspaceLimits } from '@baton/storage';
import { pgTest as test, tarGz, waitFor, type PgFixture } from '@baton/testing';
import type { FastifyInstance } from 'fastify';
import { afterAll, describe, expect } from 'vitest';
import { testGateway } from './test-gateway.ts';

const tempDirs: string[] = [];
afterAll(async () => {
  for (const d of tempDirs) await rm(d, { recursive: true, force: true });
});

/** Examples in a temp directory (the repository's examples/ is not ours to depend on). */
async function examplesDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'baton-gw-examples-'));
  tempDirs.push(dir);
  await mkdir(path.join(dir, 'hello-app/src'), { recursive: true });
  await writeFile(path.join(dir, 'hello-app/README.md'), '# Hello\n');
  await writeFile(path.join(dir, 'hello-app/src/index.ts'), "export const hello = 'world';\n");
  await mkdir(path.join(dir, 'broken'), { recursive: true });
  await symlink('/etc/hostname', path.join(dir, 'broken/escape'));
  return dir;
}

const LIMITS: WorkspaceLimits = { maxArchiveBytes: 64 * 1024, maxBytes: 256 * 1024, maxFiles: 50 };

function gateway(pg: PgFixture, opts: { examples?: string; apiKeys?: Map<string, string> } = {}): Promise<FastifyInstance> {
  return testGateway(pg, null, { ...(opts.apiKeys ? { apiKeys: opts.apiKeys } : {}), ...(opts.examples ? { examplesDir: opts.examples } : {}), workspaceLimits: LIMITS });
}



const project = (): Promise<Buffer> => tarGz([{ name: './README.md', content: '# App\n' }, { name: './src/app.ts', content: 'export const a = 1;\n' }, { name: './bin/run', content: '#!/bin/sh\n', mode: 0o755 }]);

function form(task: unknown, archive: Buffer | null, fileName = 'project.tar.gz'): FormData {
  const f = new FormData();
  f.append('task', typeof task === 'string' ? task : JSON.stringify(task));
  if (archive) f.append('workspace', new Blob([new Uint8Array(archive)], { type: 'application/gzip' }), fileName);
  return f;
}

const count = async (pg: PgFixture, sql: string): Promise<number> => (await pg.db.pool.query(sql)).rows[0].n as number;

describe('POST /v1/tasks with a workspace', () => {
  test('JSON with a base64 archive: stored before the task, recorded by digest in TaskSubmitted and shown in the view', async ({ pg }) => {
    const app = await gateway(pg);
    const archive = await project();
    const res = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'Fix the bug', workspace: { archiveBase64: archive.toString('base64'), name: 'app.tar.gz' } } });
    expect(res.statusCode).toBe(201);
    const digest = workspaceDigest(await parseWorkspaceArchive(archive));
    expect(res.json().workspace).toEqual({ digest, source: 'upload', name: 'app.tar.gz', files: 3, bytes: 6 + 20 + 10 });
    const events = (await app.inject({ method: 'GET', url: `/v1/tasks/${res.json().id}/events` })).json().items;
    expect(events[0]).toMatchObject({ type: 'TaskSubmitted', data: { workspace: { digest, source: 'upload', name: 'app.tar.gz', files: 3, bytes: 36 } } });
    const files = await readWorkspace(pg.db.pool, digest);
    expect(files?.map((f) => [f.path, f.mode])).toEqual([['README.md', 0o644], ['bin/run', 0o755], ['src/app.ts', 0o644]]);
    // Without a workspace, nothing changes.
    const plain = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x' } });
    expect(plain.json().workspace).toBeNull();
  });

  test('multipart/form-data: a task field and a workspace file part (inject and real HTTP); the same files give the same digest', async ({ pg }) => {
    const app = await gateway(pg);
    const archive = await project();
    const res = await app.inject({ method: 'POST', url: '/v1/tasks', payload: form({ prompt: 'Fix the bug', requirePlanApproval: false }, archive) });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ prompt: 'Fix the bug', requirePlanApproval: false, workspace: { digest: workspaceDigest(await parseWorkspaceArchive(archive)), source: 'upload', name: 'project.tar.gz', files: 3 } });
    // The same files packed in another order (and with directory entries) are the same workspace.
    const reordered = await tarGz([{ name: 'bin/', type: 'directory' }, { name: 'bin/run', content: '#!/bin/sh\n', mode: 0o755 }, { name: 'src/app.ts', content: 'export const a = 1;\n' }, { name: 'README.md', content: '# App\n' }]);
    const again = await app.inject({ method: 'POST', url: '/v1/tasks', payload: form({ prompt: 'again' }, reordered, 'other.tgz') });
    expect(again.json().workspace).toMatchObject({ digest: res.json().workspace.digest, name: 'other.tgz' });
    expect(await count(pg, 'select count(*)::int as n from input_workspaces')).toBe(1);
    // Over a socket, as `curl -F 'task={…};type=application/json' -F workspace=@p.tar.gz` sends it.
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const boundary = '----baton-test-boundary';
      const body = Buffer.concat([
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="task"\r\nContent-Type: application/json\r\n\r\n${JSON.stringify({ prompt: 'over HTTP' })}\r\n`),
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="workspace"; filename="p.tar.gz"\r\nContent-Type: application/gzip\r\n\r\n`),
        archive,
        Buffer.from(`\r\n--${boundary}--\r\n`),
      ]);
      const http = await fetch(`http://127.0.0.1:${(app.server.address() as { port: number }).port}/v1/tasks`, { method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${boundary}` }, body });
      expect(http.status).toBe(201);
      expect(((await http.json()) as { workspace: { digest: string; name: string } }).workspace).toMatchObject({ digest: res.json().workspace.digest, name: 'p.tar.gz' });
    } finally {
      await app.close();
    }
  });

  test('multipart errors name the field: missing or invalid task, bad JSON, extra parts, a workspace given twice, an oversized file', async ({ pg }) => {
    const app = await gateway(pg);
    const archive = await project();
    const send = (f: FormData) => app.inject({ method: 'POST', url: '/v1/tasks', payload: f });
    const noTask = new FormData();
    noTask.append('workspace', new Blob([new Uint8Array(archive)]), 'p.tgz');
    expect((await send(noTask)).json().error).toMatchObject({ code: 'validation_error', message: expect.stringMatching(/^task: missing/) });
    const bad = await send(form({ prompt: '', surprise: 1 }, archive));
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details.map((x: { field: string }) => x.field).sort()).toEqual(['task', 'task.prompt']);
    expect((await send(form('{"prompt": ', archive))).json().error).toMatchObject({ code: 'invalid_json', message: expect.stringMatching(/^task: /) });
    const extra = form({ prompt: 'x' }, archive);
    extra.append('other', 'y');
    expect((await send(extra)).json().error).toMatchObject({ code: 'validation_error', message: expect.stringMatching(/^multipart: /) });
    const twoFiles = form({ prompt: 'x' }, archive);
    twoFiles.append('workspace', new Blob([new Uint8Array(archive)]), 'again.tgz');
    expect((await send(twoFiles)).statusCode).toBe(400);
    const wrongFile = form({ prompt: 'x' }, null);
    wrongFile.append('code', new Blob([new Uint8Array(archive)]), 'p.tgz');
    expect((await send(wrongFile)).json().error.message).toMatch(/unexpected file part 'code'/);
    const twice = await send(form({ prompt: 'x', workspace: { example: 'hello-app' } }, archive));
    expect(twice.json().error).toMatchObject({ code: 'validation_error', message: expect.stringMatching(/^task\.workspace: /) });
    const big = await send(form({ prompt: 'x' }, Buffer.alloc(LIMITS.maxArchiveBytes + 1, 1)));
    expect(big.statusCode).toBe(413);
    expect(big.json().error).toMatchObject({ code: 'workspace_too_large', message: 'workspace: the archive is larger than 64 KiB' });
    // A body that is not well-formed multipart (cut short, no boundary): a 400 saying so, not a 500.
    const raw = (contentType: string, payload: string) => app.inject({ method: 'POST', url: '/v1/tasks', headers: { 'content-type': contentType }, payload });
    for (const [contentType, payload] of [
      ['multipart/form-data; boundary=xyz', '--xyz\r\nContent-Disposition: form-data; name="task"\r\n\r\n{"prompt":"cut"}'],
      ['multipart/form-data', 'garbage'],
      ['multipart/form-data; boundary=xyz', 'garbage'],
    ]) {
      const res = await raw(contentType as string, payload as string);
      expect(res.statusCode, payload).toBe(400);
      expect(res.json().error).toMatchObject({ code: 'bad_multipart', message: expect.stringMatching(/^multipart: the body is not well-formed multipart\/form-data \(.+\); the form has a 'task' field/) });
    }
    // Without a file part the form is just the JSON body.
    expect((await send(form({ prompt: 'no files' }, null))).json()).toMatchObject({ prompt: 'no files', workspace: null });
    expect(await count(pg, `select count(*)::int as n from events where type = 'TaskSubmitted'`)).toBe(1);
    expect(await count(pg, 'select count(*)::int as n from input_workspaces')).toBe(0);
  });

  test('an example from the configured directory; GET /v1/examples lists them; an unknown example is a 400 naming the configured ones', async ({ pg }) => {
    const app = await gateway(pg, { examples: await examplesDir() });
    const list = await app.inject({ method: 'GET', url: '/v1/examples' });
    expect(list.json()).toEqual({
      items: [
        { name: 'broken', files: 0, bytes: 0, error: expect.stringMatching(/'escape': symbolic link to '\/etc\/hostname' — links out/) },
        { name: 'hello-app', files: 2, bytes: 8 + 30, error: null },
      ],
    });
    const res = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'Say hello', workspace: { example: 'hello-app' } } });
    expect(res.statusCode).toBe(201);
    expect(res.json().workspace).toMatchObject({ source: 'example', name: 'hello-app', files: 2, bytes: 38 });
    expect((await readWorkspace(pg.db.pool, res.json().workspace.digest))?.map((f) => f.path)).toEqual(['README.md', 'src/index.ts']);
    const unknown = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', workspace: { example: 'nope' } } });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().error).toMatchObject({ code: 'validation_error', message: "body.workspace.example: unknown example 'nope'; configured: broken, hello-app" });
    const broken = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', workspace: { example: 'broken' } } });
    expect(broken.statusCode).toBe(400);
    expect(broken.json().error).toMatchObject({ code: 'invalid_workspace', details: [{ entry: 'escape', message: expect.stringMatching(/links out/) }] });
    const badName = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', workspace: { example: '../etc' } } });
    expect(badName.json().error.message).toMatch(/body\.workspace\.example: must be an example name/);
    expect(Object.keys((await app.inject({ method: 'GET', url: '/docs/json' })).json().paths)).toEqual(expect.arrayContaining(['/v1/examples', '/v1/tasks/{id}/diff', '/v1/tasks/{id}/archive']));
    // A missing examples directory: no examples.
    const none = await gateway(pg);
    expect((await none.inject({ method: 'GET', url: '/v1/examples' })).json()).toEqual({ items: [] });
  });

  test('refused workspaces: 400 invalid_workspace naming every entry, 413 when too large, 400 naming the field for a bad body; nothing recorded', async ({ pg }) => {
    const app = await gateway(pg);
    const submit = (workspace: unknown) => app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', workspace } });
    const b64 = (b: Buffer) => b.toString('base64');
    const unsafe = await submit({ archiveBase64: b64(await tarGz([{ name: 'ok.txt', content: 'ok' }, { name: '../evil', content: 'x' }, { name: 'link', type: 'symlink', linkname: '/etc/passwd' }, { name: 'tty', type: 'character-device' }])) });
    expect(unsafe.statusCode).toBe(400);
    expect(unsafe.json().error).toMatchObject({ code: 'invalid_workspace', message: expect.stringMatching(/^invalid workspace archive: 3 entries refused — '\.\.\/evil': .*'link': .*links out.*'tty': /) });
    expect(unsafe.json().error.details).toEqual([
      { entry: '../evil', message: expect.stringMatching(/'\.\.' component/) },
      { entry: 'link', message: expect.stringMatching(/symbolic link to '\/etc\/passwd' — links out of the workspace/) },
      { entry: 'tty', message: expect.stringMatching(/character-device/) },
    ]);
    expect((await submit({ archiveBase64: b64(Buffer.from('just some text')) })).json().error).toMatchObject({ code: 'invalid_workspace', message: expect.stringMatching(/not a gzip file/) });
    const compressed = await submit({ archiveBase64: b64(Buffer.alloc(LIMITS.maxArchiveBytes + 1, 7)) });
    expect(compressed.statusCode).toBe(413);
    expect(compressed.json().error).toMatchObject({ code: 'workspace_too_large', message: expect.stringMatching(/the archive is 65537 bytes/) });
    const inflated = await submit({ archiveBase64: b64(await tarGz([{ name: 'zeros.bin', content: Buffer.alloc(LIMITS.maxBytes + 1) }])) });
    expect(inflated.statusCode).toBe(413);
    expect(inflated.json().error).toMatchObject({ code: 'workspace_too_large', details: [{ entry: 'zeros.bin', message: "the workspace's files add up to more than 256 KiB" }] });
    const many = await submit({ archiveBase64: b64(await tarGz(Array.from({ length: LIMITS.maxFiles + 1 }, (_, i) => ({ name: `f${i}`, content: '' })))) });
    expect(many.statusCode).toBe(413);
    expect(many.json().error.message).toBe('the workspace has more than 50 files');
    const cases: [unknown, RegExp][] = [
      [{}, /body\.workspace: give exactly one of example or archiveBase64/],
      [{ example: 'hello-app', archiveBase64: 'AAAA' }, /body\.workspace: give exactly one/],
      [{ example: 'hello-app', name: 'n' }, /body\.workspace\.name: goes with archiveBase64 only/],
      [{ archiveBase64: 'not base64!' }, /body\.workspace\.archiveBase64: must be base64/],
      [{ archiveBase64: 'AAAA', extra: 1 }, /body\.workspace/],
      ['a string', /body\.workspace/],
    ];
    for (const [workspace, message] of cases) {
      const res = await submit(workspace);
      expect(res.statusCode, JSON.stringify(workspace)).toBe(400);
      expect(res.json().error).toMatchObject({ code: 'validation_error', message: expect.stringMatching(message) });
    }
    expect(await count(pg, 'select count(*)::int as n from events')).toBe(0);
    expect(await count(pg, 'select count(*)::int as n from input_workspaces')).toBe(0);
  });

  test('the larger body limit and multipart are the submit route\'s only: other routes keep the default limit and answer 415 to a form', async ({ pg }) => {
    const app = await gateway(pg);
    const archive = await tarGz([{ name: 'noise', content: randomBytes(60_000) }]);
    expect(archive.length).toBeGreaterThan(50_000); // base64 of it is over the 64 KiB default limit
    const ok = await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', workspace: { archiveBase64: archive.toString('base64') } } });
    expect(ok.statusCode).toBe(201);
    const cancel = await app.inject({ method: 'POST', url: `/v1/tasks/${ok.json().id}/cancel`, payload: { reason: 'r'.repeat(70_000) } });
    expect(cancel.statusCode).toBe(413);
    // multipart/form-data is for submitting only.
    const multipartCancel = await app.inject({ method: 'POST', url: `/v1/tasks/${ok.json().id}/cancel`, payload: form({ reason: 'r' }, null) });
    expect(multipartCancel.statusCode).toBe(415);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${ok.json().id}` })).json().status).toBe('pending');
  });

  test('Idempotency-Key covers the workspace by digest: the same files (JSON or multipart) replay, other files or none are 422', async ({ pg }) => {
    const app = await gateway(pg);
    const archive = await project();
    const headers = { 'idempotency-key': 'ws-key-1' };
    const first = await app.inject({ method: 'POST', url: '/v1/tasks', headers, payload: { prompt: 'Fix it', workspace: { archiveBase64: archive.toString('base64'), name: 'project.tar.gz' } } });
    expect(first.statusCode).toBe(201);
    const viaForm = await app.inject({ method: 'POST', url: '/v1/tasks', headers, payload: form({ prompt: 'Fix it' }, archive, 'project.tar.gz') });
    expect(viaForm.statusCode).toBe(201);
    expect(viaForm.headers['idempotent-replayed']).toBe('true');
    expect(viaForm.json().id).toBe(first.json().id);
    const other = await tarGz([{ name: 'README.md', content: '# Another app\n' }]);
    const changed = await app.inject({ method: 'POST', url: '/v1/tasks', headers, payload: { prompt: 'Fix it', workspace: { archiveBase64: other.toString('base64'), name: 'project.tar.gz' } } });
    expect(changed.statusCode).toBe(422);
    expect(changed.json().error.code).toBe('idempotency_key_reused');
    expect((await app.inject({ method: 'POST', url: '/v1/tasks', headers, payload: { prompt: 'Fix it' } })).statusCode).toBe(422);
    // A replay stores nothing new: only the first request's workspace is there.
    expect(await count(pg, 'select count(*)::int as n from input_workspaces')).toBe(1);
    expect(await count(pg, `select count(*)::int as n from events where type = 'TaskSubmitted'`)).toBe(1);
  });
});

describe('GET /v1/tasks/:id/diff and forks', () => {
  /** Record an artifact as an agent would: bytes in storage, then ArtifactStored in the log. */
  async function artifact(pg: PgFixture, taskId: string, file: string, content: string): Promise<void> {
    const stored = await storeArtifact(pg.db.pool, { taskId, path: file, agentId: null, content: Buffer.from(content) });
    await handleCommand(pg.store, taskId, { type: 'StoreArtifact', agentId: null, path: stored.path, bytes: stored.bytes, sha256: stored.sha256, mediaType: stored.mediaType });
  }

  test('the change as text/x-diff and as JSON; empty when nothing changed; without a workspace, against empty; tenant-scoped; ?at=N: the change, artifacts and files as they stood then (410 when a version is not kept); a fork has the same digest and diff', async ({ pg }) => {
    const app = await gateway(pg, { apiKeys: new Map([['key-tenant-a-0123456789', 'a'], ['key-tenant-b-0123456789', 'b']]) });
    const auth = { authorization: 'Bearer key-tenant-a-0123456789' };
    const archive = await project();
    const task = (await app.inject({ method: 'POST', url: '/v1/tasks', headers: auth, payload: { prompt: 'Fix', workspace: { archiveBase64: archive.toString('base64') } } })).json();
    const untouched = await app.inject({ method: 'GET', url: `/v1/tasks/${task.id}/diff`, headers: auth });
    expect(untouched.statusCode).toBe(200);
    expect(untouched.headers['content-type']).toBe('text/x-diff; charset=utf-8');
    expect(untouched.body).toBe('');

    await artifact(pg, task.id, 'src/app.ts', 'export const a = 2;\n');
    await artifact(pg, task.id, 'CHANGELOG.md', '- a is 2\n');
    const text = await app.inject({ method: 'GET', url: `/v1/tasks/${task.id}/diff`, headers: auth });
    expect(text.headers['content-type']).toBe('text/x-diff; charset=utf-8');
    expect(text.body).toBe(
      [
        'diff --git a/CHANGELOG.md b/CHANGELOG.md',
        'new file mode 100644',
        '--- /dev/null',
        '+++ b/CHANGELOG.md',
        '@@ -0,0 +1,1 @@',
        '+- a is 2',
        'diff --git a/src/app.ts b/src/app.ts',
        '--- a/src/app.ts',
        '+++ b/src/app.ts',
        '@@ -1,1 +1,1 @@',
        '-export const a = 1;',
        '+export const a = 2;',
        '',
      ].join('\n'),
    );
    const json = await app.inject({ method: 'GET', url: `/v1/tasks/${task.id}/diff?format=json`, headers: auth });
    expect(json.headers['content-type']).toMatch(/^application\/json/);
    expect(json.json()).toEqual({
      files: [
        { path: 'CHANGELOG.md', status: 'added', additions: 1, deletions: 0, binary: false, oldMode: null, newMode: '100644' },
        { path: 'src/app.ts', status: 'modified', additions: 1, deletions: 1, binary: false, oldMode: '100644', newMode: '100644' },
      ],
      patch: text.body,
    });
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${task.id}/diff?format=xml`, headers: auth })).json().error.message).toMatch(/query\.format/);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${task.id}/diff`, headers: { authorization: 'Bearer key-tenant-b-0123456789' } })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${randomUUID()}/diff`, headers: auth })).statusCode).toBe(404);

    // No workspace: the artifacts are all additions.
    const bare = (await app.inject({ method: 'POST', url: '/v1/tasks', headers: auth, payload: { prompt: 'Write' } })).json();
    await artifact(pg, bare.id, 'report.md', '# Report\n');
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${bare.id}/diff?format=json`, headers: auth })).json().files).toEqual([{ path: 'report.md', status: 'added', additions: 1, deletions: 0, binary: false, oldMode: null, newMode: '100644' }]);

    // ?at=N: the change, the list and each file as they stood after version N, after a later rewrite.
    const version = (await app.inject({ method: 'GET', url: `/v1/tasks/${task.id}`, headers: auth })).json().version as number;
    const listedThen = (await app.inject({ method: 'GET', url: `/v1/tasks/${task.id}/artifacts`, headers: auth })).json().items;
    await artifact(pg, task.id, 'src/app.ts', 'export const a = 3;\n');
    const get = (url: string) => app.inject({ method: 'GET', url: `/v1/tasks/${task.id}${url}`, headers: auth });
    expect((await get('/diff')).body).toContain('+export const a = 3;');
    expect((await get(`/diff?at=${version}`)).body).toBe(text.body);
    expect((await get(`/diff?at=${version}&format=json`)).json().patch).toBe(text.body);
    expect((await get(`/artifacts?at=${version}`)).json().items).toEqual(listedThen);
    const then = await get(`/artifacts/src/app.ts?at=${version}`);
    expect([then.statusCode, then.body, then.headers.etag]).toEqual([200, 'export const a = 2;\n', `"${listedThen.find((a: { path: string }) => a.path === 'src/app.ts').sha256}"`]);
    expect((await get('/artifacts/src/app.ts')).body).toBe('export const a = 3;\n');
    expect((await get(`/artifacts?at=1`)).json().items).toEqual([]);
    // Before an agent wrote it, src/app.ts was only a file of the input workspace: the 404 says where those are.
    expect((await get(`/artifacts/src/app.ts?at=1`)).json().error.message).toBe(`artifact 'src/app.ts' of task ${task.id} at version 1 not found (artifacts are the files its agents wrote; the files it started from are in GET /v1/tasks/${task.id}/archive?at=1)`);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${bare.id}/artifacts/src/app.ts`, headers: auth })).json().error.message).toBe(`artifact 'src/app.ts' of task ${bare.id} not found`);
    expect((await get(`/diff?at=1`)).body).toBe('');
    const beyond = await get(`/artifacts?at=${version + 100}`);
    expect([beyond.statusCode, beyond.json().error.message]).toEqual([404, `the task stream has no version ${version + 100} (it is at version ${version + 1})`]);
    expect((await get('/artifacts?at=first')).json().error.message).toMatch(/query\.at/);
    expect((await get('/diff?at=0')).json().error.message).toMatch(/query\.at/);
    for (const at of ['0', '-1', 'x', '1.5']) expect((await get(`/diff?at=${at}`)).json().error.message).toBe('query.at: must be a whole number, 1 or more');
    for (const at of ['99999999999999999999', '9007199254740992']) expect((await get(`/diff?at=${at}`)).json().error.message).toBe('query.at: must be a whole number, 1 or more (at most 9007199254740991)');
    expect((await get(`/diff?at=0000000000000000000${version}`)).body).toBe(text.body); // leading zeros: the value counts
    // A fork copies TaskSubmitted (so the digest) and the artifacts its history names: the same change.
    const fork = await app.inject({ method: 'POST', url: `/v1/tasks/${task.id}/fork`, headers: auth, payload: { atVersion: version } });
    expect(fork.statusCode).toBe(201);
    expect(fork.json().id).not.toBe(task.id);
    expect(fork.json().workspace).toEqual(task.workspace);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${fork.json().id}/diff`, headers: auth })).body).toBe(text.body);
    // Forked before the artifacts: the same input, no change yet.
    const early = await app.inject({ method: 'POST', url: `/v1/tasks/${task.id}/fork`, headers: auth, payload: { atVersion: 1 } });
    expect(early.json().workspace).toEqual(task.workspace);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${early.json().id}/diff`, headers: auth })).body).toBe('');

    // A version whose bytes are not kept (replaced before every version was kept) is gone, and says so.
    await pg.db.pool.query(`delete from artifact_versions where task_id = $1 and content = $2`, [task.id, Buffer.from('export const a = 2;\n')]);
    const gone = await get(`/artifacts/src/app.ts?at=${version}`);
    expect([gone.statusCode, gone.json().error.code]).toEqual([410, 'version_not_kept']);
    expect(gone.json().error.message).toMatch(/artifact 'src\/app.ts' of task .*: the version recorded \(sha256 [0-9a-f]{12}…\) is not kept/);
    expect((await get(`/diff?at=${version}`)).statusCode).toBe(410);

  });

  test('GET /v1/tasks/:id/archive: the task\'s tree as a .tar.gz (the input with the agents\' files over it, modes kept) that the system tar extracts and an upload reads back as the same files; ?at=N as it stood then; tenant-scoped; 410 when a version is not kept', async ({ pg }) => {
    const app = await gateway(pg, { apiKeys: new Map([['key-tenant-a-0123456789', 'a'], ['key-tenant-b-0123456789', 'b']]) });
    const auth = { authorization: 'Bearer key-tenant-a-0123456789' };
    const task = (await app.inject({ method: 'POST', url: '/v1/tasks', headers: auth, payload: { prompt: 'Fix', workspace: { archiveBase64: (await project()).toString('base64') } } })).json();
    const get = (url: string, headers = auth) => app.inject({ method: 'GET', url: `/v1/tasks/${task.id}${url}`, headers });
    const files = async (res: { rawPayload: Buffer }) => (await parseWorkspaceArchive(res.rawPayload)).map((f) => ({ path: f.path, mode: f.mode, content: f.content.toString() }));
    const input = [
      { path: 'README.md', mode: 0o644, content: '# App\n' },
      { path: 'bin/run', mode: 0o755, content: '#!/bin/sh\n' },
      { path: 'src/app.ts', mode: 0o644, content: 'export const a = 1;\n' },
    ];
    const untouched = await get('/archive');
    expect([untouched.statusCode, untouched.headers['content-type'], untouched.headers['content-disposition']]).toEqual([200, 'application/gzip', `attachment; filename="task-${task.id.slice(0, 8)}.tar.gz"; filename*=UTF-8''task-${task.id.slice(0, 8)}.tar.gz`]);
    expect(await files(untouched)).toEqual(input);

    await artifact(pg, task.id, 'src/app.ts', 'export const a = 2;\n');
    await artifact(pg, task.id, 'docs/CHANGELOG.md', '- a is 2\n');
    const version = (await get('')).json().version as number;
    const tree = [...input.slice(0, 2), { path: 'docs/CHANGELOG.md', mode: 0o644, content: '- a is 2\n' }, { path: 'src/app.ts', mode: 0o644, content: 'export const a = 2;\n' }].sort((a, b) => (a.path < b.path ? -1 : 1));
    const changed = await get('/archive');
    expect(await files(changed)).toEqual(tree);
    // The system's tar reads it too: directories made, modes kept.
    const dir = await mkdtemp(path.join(tmpdir(), 'baton-gw-archive-'));
    tempDirs.push(dir);
    await writeFile(path.join(dir, 'task.tar.gz'), changed.rawPayload);
    await mkdir(path.join(dir, 'out'));
    execFileSync('tar', ['-xzf', path.join(dir, 'task.tar.gz'), '-C', path.join(dir, 'out')]);
    expect(await readFile(path.join(dir, 'out/docs/CHANGELOG.md'), 'utf8')).toBe('- a is 2\n');
    expect((await stat(path.join(dir, 'out/bin/run'))).mode & 0o777).toBe(0o755);
    // Uploaded again, it is a new task's workspace whose change is empty: the tree, byte for byte.
    const again = (await app.inject({ method: 'POST', url: '/v1/tasks', headers: auth, payload: { prompt: 'Go on', workspace: { archiveBase64: changed.rawPayload.toString('base64') } } })).json();
    expect(again.workspace).toMatchObject({ files: 4, source: 'upload' });
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${again.id}/diff`, headers: auth })).body).toBe('');
    expect(await files(await app.inject({ method: 'GET', url: `/v1/tasks/${again.id}/archive`, headers: auth }))).toEqual(tree);

    // ?at=N: as it stood then, after a later rewrite; named with its version.
    await artifact(pg, task.id, 'src/app.ts', 'export const a = 3;\n');
    expect((await files(await get('/archive'))).find((f) => f.path === 'src/app.ts')?.content).toBe('export const a = 3;\n');
    const then = await get(`/archive?at=${version}`);
    expect(then.headers['content-disposition']).toBe(`attachment; filename="task-${task.id.slice(0, 8)}-v${version}.tar.gz"; filename*=UTF-8''task-${task.id.slice(0, 8)}-v${version}.tar.gz`);
    expect(await files(then)).toEqual(tree);
    expect(await files(await get('/archive?at=1'))).toEqual(input);
    for (const at of ['0', 'x']) expect((await get(`/archive?at=${at}`)).json().error.message).toBe('query.at: must be a whole number, 1 or more');
    expect((await get(`/archive?at=${version + 100}`)).statusCode).toBe(404);
    expect((await get('/archive?format=zip')).json().error.message).toMatch(/format/);
    // Another tenant's task, or none, is not found.
    expect((await get('/archive', { authorization: 'Bearer key-tenant-b-0123456789' })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: `/v1/tasks/${randomUUID()}/archive`, headers: auth })).statusCode).toBe(404);
    // No workspace: the agents' files alone.
    const bare = (await app.inject({ method: 'POST', url: '/v1/tasks', headers: auth, payload: { prompt: 'Write' } })).json();
    expect(await files(await app.inject({ method: 'GET', url: `/v1/tasks/${bare.id}/archive`, headers: auth }))).toEqual([]);
    await artifact(pg, bare.id, 'report.md', '# Report\n');
    expect(await files(await app.inject({ method: 'GET', url: `/v1/tasks/${bare.id}/archive`, headers: auth }))).toEqual([{ path: 'report.md', mode: 0o644, content: '# Report\n' }]);
    // A file's name in Content-Disposition: plain ASCII for old clients, the exact name in filename* (quotes cannot break out).
    await artifact(pg, bare.id, 'notes/ü名 "q".md', 'x');
    const named = await app.inject({ method: 'GET', url: `/v1/tasks/${bare.id}/artifacts/notes/${encodeURIComponent('ü名 "q".md')}`, headers: auth });
    expect([named.statusCode, named.headers['content-disposition']]).toEqual([200, `inline; filename="__ _q_.md"; filename*=UTF-8''%C3%BC%E5%90%8D%20%22q%22.md`]);
    expect([named.headers['x-content-type-options'], named.headers['content-security-policy']]).toEqual(['nosniff', "default-src 'none'; sandbox"]);
    // A file an agent turned into a directory: the later one wins, and the archive is one tar (and an upload) takes.
    await artifact(pg, task.id, 'src/app.ts/index.ts', 'export const a = 4;\n');
    const reshaped = await files(await get('/archive'));
    expect(reshaped.map((f) => f.path)).toEqual(['README.md', 'bin/run', 'docs/CHANGELOG.md', 'src/app.ts/index.ts']);
    expect((await get('/diff?format=json')).json().files.filter((f: { path: string }) => f.path.startsWith('src/'))).toEqual([
      { path: 'src/app.ts', status: 'deleted', additions: 0, deletions: 1, binary: false, oldMode: '100644', newMode: null },
      { path: 'src/app.ts/index.ts', status: 'added', additions: 1, deletions: 0, binary: false, oldMode: null, newMode: '100644' },
    ]);
    // A version whose bytes are not kept is gone, and says so (before any byte is sent).
    await pg.db.pool.query(`delete from artifact_versions where task_id = $1 and content = $2`, [task.id, Buffer.from('export const a = 2;\n')]);
    const gone = await get(`/archive?at=${version}`);
    expect([gone.statusCode, gone.json().error.code]).toEqual([410, 'version_not_kept']);
  });
});

describe('bulk transfers', () => {
  test('uploads stuck in Postgres never hold every connection of the pool: all but two at most, and the other requests go on', async ({ pg }) => {
    const small = createDb(pg.url, { max: 3 }); // bulkLimit(3): one bulk transfer at a time
    const app = await testGateway({ db: small, store: pg.store }, null, { workspaceLimits: LIMITS });
    const holder = await pg.db.pool.connect();
    try {
      const id = (await app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'plain' } })).json().id as string;
      // Every upload's transaction waits on this lock, holding whatever connection it has.
      await holder.query('begin');
      await holder.query('lock table input_workspaces in exclusive mode');
      const uploads = [0, 1, 2].map(async (i) => {
        const archive = await tarGz([{ name: './f.txt', content: `file ${i}\n` }]);
        return app.inject({ method: 'POST', url: '/v1/tasks', payload: { prompt: 'x', workspace: { archiveBase64: archive.toString('base64'), name: `w${i}.tgz` } } });
      });
      const waiting = (): Promise<number> => count(pg, `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like 'insert into input_workspaces %'`);
      await waitFor(async () => (await waiting()) >= 1, { what: 'an upload waiting on the lock' });
      // A request that needs the pool (the task's load) is served while the uploads wait.
      let read: number | null = null;
      void app.inject({ method: 'GET', url: `/v1/tasks/${id}` }).then((r) => (read = r.statusCode));
      await waitFor(() => read !== null, { what: 'a task read while the uploads wait' });
      expect(read).toBe(200);
      expect(await waiting()).toBe(1);
      await holder.query('commit');
      expect((await Promise.all(uploads)).map((r) => r.statusCode)).toEqual([201, 201, 201]);
      expect(await count(pg, 'select count(*)::int as n from input_workspaces')).toBe(3);
    } finally {
      await holder.query('rollback').catch(() => {});
      holder.release();
      await app.close();
      await small.close();
    }
  });
});
