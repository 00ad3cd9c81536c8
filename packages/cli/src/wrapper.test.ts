import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const WRAPPER = fileURLToPath(new URL('../../../infra/baton', import.meta.url));

describe('infra/baton cli', () => {
  it("runs in the caller's directory: a relative --workspace is the caller's, not the repository's", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'baton-wrapper-'));
    mkdirSync(path.join(dir, 'proj'));
    writeFileSync(path.join(dir, 'proj', 'a.ts'), 'export const a = 1;\n');
    const seen: string[] = [];
    let body = '';
    const server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url} ${(req.headers['content-type'] ?? '').split(';')[0]}`);
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'validation_error', message: 'stop here' } })));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      const out = await new Promise<{ code: number; stderr: string }>((resolve) => {
        execFile(WRAPPER, ['cli', 'submit', 'x', '--team', 'engineering', '--workspace', 'proj'], { cwd: dir, env: { ...process.env, BATON_URL: url } }, (err, _stdout, stderr) =>
          resolve({ code: typeof err?.code === 'number' ? err.code : 0, stderr }),
        );
      });
      // The archive was made from <dir>/proj and sent; the fake gateway's refusal is what is printed.
      expect(out.stderr).toContain('stop here');
      expect(out.code).not.toBe(0);
      expect(seen).toEqual(['POST /v1/tasks application/json']);
      expect(JSON.parse(body)).toMatchObject({ prompt: 'x', team: 'engineering', workspace: { name: 'proj.tar.gz', archiveBase64: expect.any(String) } });
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
