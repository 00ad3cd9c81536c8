import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { isConnectionError } from './crash-guard.ts';

describe('isConnectionError', () => {
  it('knows a lost or refused connection to Postgres or NATS, also as a cause or inside an AggregateError', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    for (const err of [
      new Error('Connection terminated unexpectedly'),
      new Error('Client has encountered a connection error and is not queryable'),
      new Error('timeout exceeded when trying to connect'),
      refused,
      Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }),
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
      Object.assign(new Error('the database system is starting up'), { code: '57P03' }),
      Object.assign(new Error('connection failure'), { code: '08006' }),
      Object.assign(new Error('closed connection'), { name: 'ClosedConnectionError' }),
      Object.assign(new Error('connection draining'), { name: 'DrainingConnectionError' }),
      new Error('could not append', { cause: refused }),
      new AggregateError([refused, refused], 'all attempts failed'),
    ]) {
      expect(isConnectionError(err), err.message).toBe(true);
    }
  });

  it('anything else is not one', () => {
    for (const err of [
      new Error('boom'),
      new TypeError("Cannot read properties of undefined (reading 'id')"),
      Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' }),
      Object.assign(new Error('permissions violation'), { name: 'PermissionViolationError' }),
      new AggregateError([new Error('boom'), Object.assign(new Error('x'), { code: 'ECONNREFUSED' })]),
      'a string',
      null,
      undefined,
    ]) {
      expect(isConnectionError(err), String(err)).toBe(false);
    }
  });
});

describe('installCrashGuards (in a process of its own)', () => {
  const runtime = path.join(import.meta.dirname, 'index.ts');
  const run = (rejectWith: string): Promise<{ code: number | null; out: string }> =>
    new Promise((resolve) => {
      const script = `
        import { createLogger, installCrashGuards } from ${JSON.stringify(runtime)};
        installCrashGuards(createLogger('guarded'));
        Promise.reject(${rejectWith});
        setTimeout(() => { console.log('STILL RUNNING'); process.exit(0); }, 300);
      `;
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d) => (out += String(d)));
      child.stderr.on('data', (d) => (out += String(d)));
      child.once('exit', (code) => resolve({ code, out }));
    });

  it('a rejection that only says a connection was lost is logged, and the process goes on', async () => {
    const { code, out } = await run(`Object.assign(new Error('Connection terminated unexpectedly'), {})`);
    expect(out).toMatch(/unhandled rejection from a lost connection; carrying on/);
    expect(out).toMatch(/STILL RUNNING/);
    expect(code).toBe(0);
  });

  it('any other unhandled rejection is fatal: logged, exit 1', async () => {
    const { code, out } = await run(`new TypeError('a bug')`);
    expect(out).toMatch(/"level":60.*unhandled rejection; exiting/);
    expect(out).not.toMatch(/STILL RUNNING/);
    expect(code).toBe(1);
  });
});
