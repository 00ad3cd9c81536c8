import { chownSync, closeSync, constants, fchownSync, lstatSync, mkdirSync, openSync, readdirSync, writeSync, type Dirent, type Stats } from 'node:fs';
import { chown, lstat, mkdir, open, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { pathCharacterProblem } from '@baton/domain';

/** The components of a path relative to a workspace root; absolute paths, `..`, NUL and backslashes are refused. */
export function resolveRelative(rel: string): string[] {
  if (rel.includes('\0')) throw new WorkspacePathError(rel, 'contains a NUL byte');
  if (path.isAbsolute(rel)) throw new WorkspacePathError(rel, 'absolute paths are not allowed; use a path relative to the workspace');
  // A backslash is a character of a name on this system, not a separator: a path that holds one would name another file than it seems to.
  if (rel.includes('\\')) throw new WorkspacePathError(rel, "contains a backslash: directories are separated by '/'");
  const parts = rel.split(/\/+/).filter((p) => p !== '' && p !== '.');
  if (parts.some((p) => p === '..')) throw new WorkspacePathError(rel, "'..' is not allowed");
  return parts;
}

/**
 * A name no workspace path can carry (the domain's `pathCharacterProblem`: a control character, a
 * backslash, a bidirectional control). A file or directory so named, made by a command, is left
 * out of every walk (never synced, listed or kept), like a link.
 */
export const unnameable = (name: string): boolean => pathCharacterProblem(name) !== null;

/** A path as a walk shows it: as it is, or as a JSON string when it holds what cannot be shown on one line. */
export const shownPath = (p: string): string => (pathCharacterProblem(p) ? JSON.stringify(p) : p);

/** A file's first maxBytes as text, saying so when the file is longer (every provider's `read`). */
export function textOf(bytes: Buffer, size: number, maxBytes: number): string {
  const text = bytes.subarray(0, maxBytes).toString('utf8');
  return size > maxBytes ? `${text}\n[truncated: file is ${size} bytes, showing the first ${maxBytes}]` : text;
}

/** What a file system error code means, said without a path. */
const FS_ERRORS: Record<string, string> = {
  ENOENT: 'no such file or directory',
  ENOTDIR: 'a part of the path is a file, not a directory',
  EISDIR: 'is a directory, not a file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  ELOOP: 'is a symbolic link (never followed)',
  ENAMETOOLONG: 'the name is too long',
  ENOSPC: 'no space left in the workspace',
  EDQUOT: 'the workspace is over its disk quota',
};

export class WorkspacePathError extends Error {
  constructor(p: string, why: string) {
    super(`path '${p}' is not allowed: ${why}`);
    this.name = new.target.name;
  }
}

/**
 * A per-agent workspace directory. Every path a tool names is resolved inside it: absolute
 * paths, `..` and symlinks (anywhere on the path) are refused, and the final open uses
 * O_NOFOLLOW, so a link planted by the agent is never followed by host-side code.
 * Commands run confined (bubblewrap) with this directory as their only writable place; the
 * host-side code here is what file tools use, and it never trusts what a command left behind.
 */
export class Workspace {
  readonly root: string;
  /** The sandbox user: files written host-side are handed to it, so commands can change them. */
  private readonly owner: { uid: number; gid: number } | null;
  constructor(root: string, opts: { owner?: { uid: number; gid: number } | null } = {}) {
    this.root = path.resolve(root);
    this.owner = opts.owner ?? null;
  }

  async ensure(): Promise<void> {
    await mkdir(this.root, { recursive: true });
    await this.own(this.root);
  }

  /** Remove everything in the workspace (the directory itself stays). */
  async clear(): Promise<void> {
    for (const e of await readdir(this.root)) await rm(path.join(this.root, e), { recursive: true, force: true });
  }

  private async own(abs: string): Promise<void> {
    if (this.owner) await chown(abs, this.owner.uid, this.owner.gid);
  }

  /** Create the directories of a path one by one (each checked not to be a link), handing them to the owner. */
  private async mkdirs(absDir: string): Promise<void> {
    const rel = path.relative(this.root, absDir);
    for await (const { cur, st } of this.components(absDir, false)) {
      if (st && !st.isDirectory()) throw new WorkspacePathError(rel, `'${path.relative(this.root, cur)}' is a file, not a directory`);
      if (!st) {
        // Another write may be creating the same directory at this moment: that is fine.
        const made = await mkdir(cur).then(() => true, (e: NodeJS.ErrnoException) => (e.code === 'EEXIST' ? false : Promise.reject(e)));
        if (made) await this.own(cur);
        else if (!(await lstat(cur)).isDirectory()) throw new WorkspacePathError(rel, `'${path.relative(this.root, cur)}' is not a directory`);
      }
    }
  }

  /**
   * Each component of a path below the root, with what is on disk there (null: nothing);
   * a symbolic link anywhere is refused. Stops at the first missing component if asked.
   */
  private async *components(abs: string, stopAtMissing: boolean): AsyncGenerator<{ cur: string; st: Stats | null }> {
    const rel = path.relative(this.root, abs);
    let cur = this.root;
    for (const part of rel.split(path.sep).filter(Boolean)) {
      cur = path.join(cur, part);
      const st = await lstat(cur).catch((e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? null : Promise.reject(e)));
      if (st?.isSymbolicLink()) throw new WorkspacePathError(rel, 'it goes through a symbolic link');
      if (!st && stopAtMissing) return;
      yield { cur, st };
    }
  }

  /**
   * A file system error, told by the workspace-relative path: the host's path of the workspace
   * (a temp dir, the task's id) is nobody's business, least of all the model's, which reads it.
   */
  private told<T>(rel: string, op: () => Promise<T>): Promise<T> {
    return op().catch((err: unknown) => {
      if (err instanceof WorkspacePathError) throw err;
      const code = (err as NodeJS.ErrnoException).code;
      const why = code ? FS_ERRORS[code] : undefined;
      if (why) throw Object.assign(new Error(`${rel}: ${why}`, { cause: err }), { code }); // the code kept: callers may tell a missing file apart
      throw new Error((err as Error).message.split(`${this.root}/`).join('').split(this.root).join('.'), { cause: err });
    });
  }

  /** Resolve a relative path inside the workspace, refusing escapes. Does not touch the disk. */
  resolve(rel: string): string {
    return path.join(this.root, ...resolveRelative(rel));
  }

  /** Refuse if any existing component of the path (below the root) is a symlink. */
  private async assertNoLinks(abs: string): Promise<void> {
    for await (const _ of this.components(abs, true)) {
      // components() throws on a link; nothing else to check
    }
  }

  /** A file's content; `mode`: exactly these permission bits after (else 0644 for a new file, an existing one keeps its own). */
  write(rel: string, content: string | Uint8Array, mode?: number): Promise<'created' | 'modified'> {
    return this.told(rel, () => this.writeAt(rel, content, mode));
  }

  private async writeAt(rel: string, content: string | Uint8Array, mode: number | undefined): Promise<'created' | 'modified'> {
    const abs = this.resolve(rel);
    await this.assertNoLinks(abs);
    await this.mkdirs(path.dirname(abs));
    const was = await lstat(abs).catch(() => null);
    // A named pipe, socket or device a command left at the path is replaced, never opened: opening
    // a pipe nobody reads blocks (a thread of the runner's, for good), a device is not the workspace's.
    // (A directory stays: the open below fails with EISDIR.)
    if (was && !was.isFile() && !was.isDirectory()) await rm(abs, { force: true });
    // O_NONBLOCK besides: should one appear in between, the open fails instead of waiting.
    const fh = await open(abs, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW | constants.O_NONBLOCK, (mode ?? 0o644) & 0o777);
    try {
      if (!(await fh.stat()).isFile()) throw new WorkspacePathError(rel, 'not a regular file');
      await fh.writeFile(content);
      // open's mode is for a file it creates (and the umask takes from it): set it outright.
      if (mode !== undefined) await fh.chmod(mode & 0o777);
      if (this.owner) await fh.chown(this.owner.uid, this.owner.gid);
    } finally {
      await fh.close();
    }
    return was ? 'modified' : 'created';
  }

  async read(rel: string, maxBytes = 1_000_000): Promise<string> {
    const { bytes, size } = await this.readBytes(rel, maxBytes);
    return textOf(bytes, size, maxBytes);
  }

  /** Up to maxBytes of a regular file (never through a link), with its full size and mode. */
  readBytes(rel: string, maxBytes = 50_000_000): Promise<{ bytes: Buffer; size: number; mode: number }> {
    return this.told(rel, () => this.readBytesAt(rel, maxBytes));
  }

  private async readBytesAt(rel: string, maxBytes: number): Promise<{ bytes: Buffer; size: number; mode: number }> {
    const abs = this.resolve(rel);
    await this.assertNoLinks(abs);
    const fh = await open(abs, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const st = await fh.stat();
      if (!st.isFile()) throw new WorkspacePathError(rel, 'not a regular file');
      const buf = Buffer.alloc(Math.min(st.size, maxBytes));
      const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
      return { bytes: buf.subarray(0, bytesRead), size: st.size, mode: st.mode & 0o777 };
    } finally {
      await fh.close();
    }
  }

  /**
   * Every regular file under a directory (relative paths, sorted), never descending through a
   * link; at most `limit` entries (the walk says when it stopped early).
   */
  walk(rel = '.', limit = 10_000, opts: { skipDirs?: ReadonlySet<string> } = {}): Promise<{ files: WalkedFile[]; truncated: boolean; skipped: SkippedEntry[] }> {
    return this.told(rel, () => this.walkAt(rel, limit, opts));
  }

  private async walkAt(rel: string, limit: number, opts: { skipDirs?: ReadonlySet<string> }): Promise<{ files: WalkedFile[]; truncated: boolean; skipped: SkippedEntry[] }> {
    const start = this.resolve(rel);
    await this.assertNoLinks(start);
    const files: WalkedFile[] = [];
    const skipped: SkippedEntry[] = [];
    const skip = (abs: string, why: string): void => {
      if (skipped.length < MAX_SKIPPED_REPORTED) skipped.push({ path: shownPath(abs.slice(this.root.length + 1)), why });
    };
    const stack = [start];
    // Synchronous stat calls, yielding to the event loop every 2,000: ~20x cheaper than a
    // promise per file (the walk is the cost of every sync), without stalling other jobs.
    let sinceYield = 0;
    while (stack.length > 0) {
      const dir = stack.pop() as string;
      let entries: Dirent[];
      try {
        entries = readdirSync(dir, { withFileTypes: true });
      } catch (e) {
        // Gone meanwhile, or deeper than a path may be long (no path could name what is inside): nothing to walk.
        if (['ENOENT', 'ENOTDIR', 'ENAMETOOLONG'].includes((e as NodeJS.ErrnoException).code ?? '')) continue;
        throw e;
      }
      for (const e of entries) {
        const abs = path.join(dir, e.name);
        const problem = pathCharacterProblem(e.name);
        if (problem) {
          skip(abs, `${problem.replace(/^the path/, 'its name')}${e.isDirectory() ? ', and it is a directory: nothing in it is kept' : ''}`);
          continue;
        }
        if (e.isDirectory()) {
          if (!opts.skipDirs?.has(e.name)) stack.push(abs);
          continue;
        }
        if (!e.isFile()) {
          // links, sockets, devices: never followed, never copied
          skip(abs, e.isSymbolicLink() ? 'a symbolic link (links are never kept)' : 'not a regular file (a fifo, socket or device)');
          continue;
        }
        let st: Stats | undefined;
        try {
          st = lstatSync(abs, { throwIfNoEntry: false });
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENAMETOOLONG') continue; // as for a directory
          throw err;
        }
        if (!st?.isFile()) continue;
        files.push({ path: abs.slice(this.root.length + 1), size: st.size, mode: st.mode & 0o777, changedMs: st.ctimeMs });
        if (files.length >= limit) return { files: files.sort(byPath), truncated: true, skipped };
        if (++sinceYield >= 2000) {
          sinceYield = 0;
          await new Promise((r) => setImmediate(r));
        }
      }
    }
    return { files: files.sort(byPath), truncated: false, skipped };
  }

  /**
   * Fill an emptied workspace with stored files (a resume). Nothing runs in the sandbox while
   * this happens and the directory was just cleared, so it uses plain synchronous calls —
   * still creating each file with O_EXCL|O_NOFOLLOW, so nothing already there is followed —
   * yielding to the event loop every 500 files.
   */
  async restore(files: readonly { path: string; content: Uint8Array; mode: number }[]): Promise<void> {
    const made = new Set<string>([this.root]);
    let n = 0;
    for (const f of files) {
      const abs = this.resolve(f.path);
      const dirs: string[] = [];
      for (let d = path.dirname(abs); !made.has(d); d = path.dirname(d)) dirs.unshift(d);
      for (const d of dirs) {
        try {
          mkdirSync(d);
          if (this.owner) chownSync(d, this.owner.uid, this.owner.gid);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || !lstatSync(d).isDirectory()) throw e;
        }
        made.add(d);
      }
      const fd = openSync(abs, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, f.mode & 0o777);
      try {
        writeSync(fd, f.content);
        if (this.owner) fchownSync(fd, this.owner.uid, this.owner.gid);
      } finally {
        closeSync(fd);
      }
      if (++n % 500 === 0) await new Promise((r) => setImmediate(r));
    }
  }

  /**
   * Remove a file, or a directory with everything in it; a missing one is fine. A link on the
   * way is refused; a link as the last component is removed itself, never what it points to
   * (nor is any link inside a removed directory followed).
   */
  async remove(rel: string): Promise<void> {
    if (resolveRelative(rel).length === 0) throw new WorkspacePathError(rel, 'the workspace itself cannot be removed');
    const abs = this.resolve(rel);
    await this.assertNoLinks(path.dirname(abs));
    await rm(abs, { force: true, recursive: true });
  }

  list(rel = '.'): Promise<string[]> {
    return this.told(rel, async () => {
      const abs = this.resolve(rel);
      await this.assertNoLinks(abs);
      const entries = await readdir(abs, { withFileTypes: true });
      return entries.map((e) => (e.isDirectory() ? `${e.name}/` : e.isSymbolicLink() ? `${e.name}@` : e.name)).sort();
    });
  }
}

/** An entry a walk left out: its path (as a JSON string when its name cannot be shown as it is) and why. */
export interface SkippedEntry {
  path: string;
  why: string;
}

/** The most entries a walk names as left out (`skipped`). */
export const MAX_SKIPPED_REPORTED = 50;

export interface WalkedFile {
  path: string;
  size: number;
  mode: number;
  /**
   * When the file last changed, as far as the provider can tell: locally its status-change time
   * (ctime — a command can set a file's modification time back, `touch -r`, but not that), on
   * E2B its modification time. Size, mode and this tell a changed file from an unchanged one.
   */
  changedMs: number;
}

const byPath = (a: WalkedFile, b: WalkedFile): number => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);
