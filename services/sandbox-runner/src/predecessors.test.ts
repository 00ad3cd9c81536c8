import { describe, expect, it } from 'vitest';
import { defaultRunnerId, isPredecessor, pidAlive } from './predecessors.ts';

describe('isPredecessor: which live leases an earlier process of this runner left behind', () => {
  const alive = (pid: number) => pid === 200; // pid 200 runs here, the rest are gone
  const byDefault = { runnerId: defaultRunnerId('node-7', 300), explicit: false, host: 'node-7' };

  it('under the default id (host-pid): this host, a pid that is gone; or the very same id (a container restarted with its pid)', () => {
    expect(isPredecessor('node-7-100', byDefault, alive)).toBe(true);
    expect(isPredecessor('node-7-300', byDefault, alive)).toBe(true);
    // Another runner beside this one, still running: not touched.
    expect(isPredecessor('node-7-200', byDefault, alive)).toBe(false);
    // Other hosts, names that only look alike, explicit ids of others.
    expect(isPredecessor('node-77-100', byDefault, alive)).toBe(false);
    expect(isPredecessor('node-7-a', byDefault, alive)).toBe(false);
    expect(isPredecessor('node-7-', byDefault, alive)).toBe(false);
    expect(isPredecessor('node-7-0100', byDefault, alive)).toBe(false);
    expect(isPredecessor('runner-a', byDefault, alive)).toBe(false);
  });

  it('under RUNNER_ID: only that id (it names one runner, whatever its pid)', () => {
    const named = { runnerId: 'runner-a', explicit: true, host: 'node-7' };
    expect(isPredecessor('runner-a', named, alive)).toBe(true);
    expect(isPredecessor('node-7-100', named, alive)).toBe(false);
    expect(isPredecessor('runner-b', named, alive)).toBe(false);
  });

  it('pidAlive: this process is, a pid past the kernel limit is not', () => {
    expect(pidAlive(process.pid)).toBe(true);
    expect(pidAlive(2 ** 22 + 1)).toBe(false);
  });
});
