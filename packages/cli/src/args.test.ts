import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));

/** Runs the CLI against no gateway at all: an argument it refuses never gets as far as a request. */
const baton = (...args: string[]) =>
  new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile(process.execPath, [MAIN, ...args], { env: { ...process.env, BATON_URL: 'http://127.0.0.1:9' } }, (err, _stdout, stderr) => resolve({ code: typeof err?.code === 'number' ? err.code : 0, stderr }));
  });

describe('arguments the CLI refuses before asking the gateway, naming the option', () => {
  const task = '00000000-0000-4000-8000-000000000001';
  it.each([
    [['replay', task, '--at', 'abc'], "--at must be a version of the task stream (1 or more, at most 15 digits), got 'abc'"],
    [['fork', task, '--at', '0'], "--at must be a version of the task stream (1 or more, at most 15 digits), got '0'"],
    [['list', '--search', ' '], '--search needs some text to look for'],
    [['submit', 'x', '--budget-tokens', '1.5'], "--budget-tokens must be a whole number of 1 or more, got '1.5'"],
    [['submit', 'x', '--timeout', 'abc'], "--timeout must be a whole number of 1 or more, got 'abc'"],
    [['approve', task, 'budget-1', '--tokens', '0'], "--tokens must be a whole number of 1 or more, got '0'"],
    [['events', task, '--after', '-1'], "--after must be a position in the log (0 or more, at most 15 digits), got '-1'"],
    [['events', task, '--limit', '0'], "--limit must be a whole number of 1 or more, got '0'"],
    [['replay', task, '--at', '99999999999999999999'], "--at must be a version of the task stream (1 or more, at most 15 digits), got '99999999999999999999'"],
  ])('%j', async (args, message) => {
    const r = await baton(...args);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(message);
    expect(r.stderr).not.toMatch(/ECONNREFUSED|fetch failed|cannot reach/i);
  });
});

describe('an artifact path the URL would fold into another route is refused before any request', () => {
  it.each([['../etc/passwd'], ['a/./b'], ['/abs'], ['a//b']])('%s', async (file) => {
    const r = await baton('artifact', '00000000-0000-4000-8000-000000000001', file);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`'${file}' is not an artifact path: artifact paths are relative, with no empty, '.' or '..' segment`);
    expect(r.stderr).not.toMatch(/ECONNREFUSED|fetch failed|cannot reach|no route/i);
  });
});

describe('the help', () => {
  it('says where the commands go and where the key comes from (BATON_URL, BATON_API_KEY)', async () => {
    const stdout = await new Promise<string>((resolve) => execFile(process.execPath, [MAIN, '--help'], (_err, out) => resolve(out)));
    expect(stdout).toMatch(/Environment:\n {2}BATON_URL +the gateway the commands talk to \(default http:\/\/127\.0\.0\.1:8080\)\n {2}BATON_API_KEY +the API key/);
  });
});

describe("what the gateway says reaches the terminal as text", () => {
  it('escape sequences in an answer (a model could write them) are not passed to the terminal', async () => {
    const { createServer } = await import('node:http');
    const server = createServer((_req, res) => res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'not_found', message: 'no \u001b]0;pwned\u0007task \u001b[2Jhere' } })));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      const stderr = await new Promise<string>((resolve) => execFile(process.execPath, [MAIN, 'status', '00000000-0000-4000-8000-000000000001'], { env: { ...process.env, BATON_URL: url } }, (_err, _out, err) => resolve(err)));
      expect(stderr).toContain('no task here');
      expect(stderr).not.toContain('\u001b');
      expect(stderr).not.toContain('\u0007');
    } finally {
      server.close();
    }
  });
});
