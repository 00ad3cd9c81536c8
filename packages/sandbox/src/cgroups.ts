import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Per-sandbox cgroups, when the runner may make them (root, a writable memory and/or pids
 * controller, cgroup v1 or v2): the sandbox's processes together are held to its memory limit
 * (RLIMIT_AS only caps each process) and its process count (RLIMIT_NPROC counts per user).
 * Absent → the prlimit limits alone apply; nothing fails.
 */
export class Cgroups {
  /** Controller → the directory under which sandbox cgroups are made. */
  private readonly bases: { controller: 'memory' | 'pids'; dir: string; v2: boolean }[];
  private constructor(bases: Cgroups['bases']) {
    this.bases = bases;
  }

  /** What this process may use, found by trying (null when nothing is usable). */
  static detect(): Cgroups | null {
    if (process.getuid?.() !== 0) return null;
    let lines: string[];
    try {
      lines = readFileSync('/proc/self/cgroup', 'utf8').trim().split('\n');
    } catch {
      return null;
    }
    const own = new Map(lines.map((l) => l.split(':')).map(([, ctl, p]) => [ctl ?? '', p ?? '/']));
    const bases: Cgroups['bases'] = [];
    const v1 = (ctl: 'memory' | 'pids'): void => {
      const p = own.get(ctl);
      if (p !== undefined && probe(path.join('/sys/fs/cgroup', ctl, p))) bases.push({ controller: ctl, dir: path.join('/sys/fs/cgroup', ctl, p), v2: false });
    };
    v1('memory');
    v1('pids');
    const unified = own.get('');
    if (bases.length === 0 && unified !== undefined && existsSync('/sys/fs/cgroup/cgroup.controllers')) {
      const dir = path.join('/sys/fs/cgroup', unified);
      const enabled = (() => {
        try {
          return readFileSync(path.join(dir, 'cgroup.subtree_control'), 'utf8');
        } catch {
          return '';
        }
      })();
      for (const ctl of ['memory', 'pids'] as const) if (enabled.includes(ctl) && probe(dir)) bases.push({ controller: ctl, dir, v2: true });
    }
    return bases.length > 0 ? new Cgroups(bases) : null;
  }

  /** Which limits are enforced this way. */
  get controllers(): string[] {
    return this.bases.map((b) => b.controller);
  }

  /** Make (or reset) the sandbox's cgroups with its limits; returns the directories its commands join. */
  create(name: string, limits: { memoryMb: number; processes: number }): string[] {
    const dirs = new Set<string>();
    for (const b of this.bases) {
      const dir = path.join(b.dir, `baton-${name}`);
      mkdirSync(dir, { recursive: true });
      if (b.controller === 'memory') {
        const bytes = String(limits.memoryMb * 1024 * 1024);
        writeFileSync(path.join(dir, b.v2 ? 'memory.max' : 'memory.limit_in_bytes'), bytes);
        if (b.v2) tryWrite(path.join(dir, 'memory.swap.max'), '0');
        else tryWrite(path.join(dir, 'memory.memsw.limit_in_bytes'), bytes);
      } else {
        writeFileSync(path.join(dir, 'pids.max'), String(limits.processes));
      }
      dirs.add(dir);
    }
    return [...dirs];
  }

  /**
   * Remove the sandbox's cgroups. A killed sandbox's processes take a moment to leave (the pid
   * namespace dies asynchronously), so a busy cgroup is retried for a few seconds.
   */
  async remove(name: string): Promise<void> {
    for (const b of this.bases) {
      const dir = path.join(b.dir, `baton-${name}`);
      for (let attempt = 0; attempt < 40; attempt++) {
        try {
          rmdirSync(dir);
          break;
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EBUSY') break; // gone already, or not ours to remove
          await new Promise((r) => setTimeout(r, 50 * Math.min(attempt + 1, 4)));
        }
      }
    }
  }
}

function probe(dir: string): boolean {
  const p = path.join(dir, `baton-probe-${process.pid}`);
  try {
    mkdirSync(p);
    rmdirSync(p);
    return true;
  } catch {
    return false;
  }
}

function tryWrite(file: string, value: string): void {
  try {
    writeFileSync(file, value);
  } catch {
    // the knob is absent (no swap accounting): the memory limit still holds
  }
}
