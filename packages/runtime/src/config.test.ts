import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { tmpdir } from 'node:os';
import { commonEnv, ConfigError, durationMs, existingDirectory, loadConfig } from './config.ts';

describe('loadConfig', () => {
  const schema = z.object({ ...commonEnv, PORT: z.coerce.number().int().min(1).max(65535).default(8080) });
  it('applies defaults', () => {
    expect(loadConfig('svc', schema, {})).toMatchObject({ PORT: 8080, NATS_URL: 'nats://127.0.0.1:4222', BATON_NAMESPACE: '', LOG_PRETTY: false });
  });
  it('a variable set to nothing is not set (compose passes ${FOO:-} as an empty string)', () => {
    const withKey = schema.extend({ SOME_API_KEY: z.string().min(1).optional() });
    const c = loadConfig('svc', withKey, { PORT: '', SOME_API_KEY: '', BATON_NAMESPACE: '' });
    expect(c).toMatchObject({ PORT: 8080, BATON_NAMESPACE: '' });
    expect(c.SOME_API_KEY).toBeUndefined();
  });
  it('settings whose default is unsafe in production are refused empty (a blank Secret key must not open the API or sign with the development secret), each named', () => {
    const withSecrets = schema.extend({ BATON_API_KEYS: z.string().optional(), WEBHOOK_SECRET: z.string().optional() });
    let err: unknown;
    try {
      loadConfig('gateway', withSecrets, { BATON_API_KEYS: '', WEBHOOK_SECRET: ' ', DATABASE_URL: '', PORT: 'eighty', ANTHROPIC_API_KEY: '' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues.map((i) => i.split(':')[0]).sort()).toEqual(['BATON_API_KEYS', 'DATABASE_URL', 'PORT', 'WEBHOOK_SECRET']);
    expect((err as ConfigError).message).toMatch(/BATON_API_KEYS: is set but empty; leave it out for its default, or give a value/);
    expect(loadConfig('gateway', withSecrets, {}).BATON_API_KEYS).toBeUndefined(); // left out: the default
    expect(loadConfig('gateway', schema, { WEBHOOK_SECRET: '' }).PORT).toBe(8080); // another service's setting: not this one's to refuse
  });
  it('a duration is at least its minimum (0 would be a busy loop or a timeout that fails everything) and at most what a timer holds', () => {
    const timed = z.object({ HEARTBEAT_MS: durationMs(15_000), LATENCY_MS: durationMs(0, 0) });
    expect(loadConfig('svc', timed, {})).toEqual({ HEARTBEAT_MS: 15_000, LATENCY_MS: 0 });
    expect(loadConfig('svc', timed, { LATENCY_MS: '0', HEARTBEAT_MS: '100' })).toEqual({ HEARTBEAT_MS: 100, LATENCY_MS: 0 });
    for (const [value, message] of [['0', 'must be at least 100 ms'], ['3000000000', 'must be at most 2147483647 ms'], ['1.5', 'must be a whole number of milliseconds']]) {
      expect(() => loadConfig('svc', timed, { HEARTBEAT_MS: value })).toThrow(`HEARTBEAT_MS: ${message}`);
    }
  });
  it('a directory whose files are read (examples, a corpus) must exist: a misspelt one is named at start, not an empty list (or a corpus index emptied) later', () => {
    const dirs = z.object({ BATON_EXAMPLES_DIR: existingDirectory().default(tmpdir()) });
    expect(loadConfig('gateway', dirs, {}).BATON_EXAMPLES_DIR).toBe(tmpdir());
    expect(() => loadConfig('gateway', dirs, { BATON_EXAMPLES_DIR: '/nonexistent/examples' })).toThrow('BATON_EXAMPLES_DIR: no such directory (it must exist when the service starts)');
    expect(() => loadConfig('gateway', dirs, { BATON_EXAMPLES_DIR: '/etc/passwd' })).toThrow(/no such directory/);
  });
  it('lists every problem, by variable, in one error', () => {
    let err: unknown;
    try {
      loadConfig('gateway', schema, { PORT: 'eighty', DATABASE_URL: 'mysql://x', BATON_NAMESPACE: 'Has Spaces', LOG_LEVEL: 'loud' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const e = err as ConfigError;
    expect(e.issues.map((i) => i.split(':')[0]).sort()).toEqual(['BATON_NAMESPACE', 'DATABASE_URL', 'LOG_LEVEL', 'PORT']);
    expect(e.message).toMatch(/^gateway: invalid configuration:\n {2}- /);
    expect(e.message).toMatch(/DATABASE_URL: must be a postgres:\/\/ URL/);
  });
  it('checks the OpenTelemetry variables with the rest (a service exits 78 naming them)', () => {
    let err: unknown;
    try {
      loadConfig('orchestrator', schema, { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_TRACES_SAMPLER: 'sometimes' });
    } catch (e) {
      err = e;
    }
    expect((err as ConfigError).issues.map((i) => i.split(':')[0]).sort()).toEqual(['OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_TRACES_SAMPLER']);
  });
});
