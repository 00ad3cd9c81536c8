import { constants } from 'node:fs';
import { lstat, mkdir, open, readdir } from 'node:fs/promises';
import path from 'node:path';

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
 * (The bubblewrap-confined provider arrives with the sandbox issue; these checks stay.)
 */
export class Workspace {
  readonly root: string;
  constructor(root: string) {
    this.root = path.resolve(root);
  }

  async ensure(): Promise<void> {
    await mkdir(this.root, { recursive: true });
  }

  /** Resolve a relative path inside the workspace, refusing escapes. Does not touch the disk. */
  resolve(rel: string): string {
    if (rel.includes('\0')) throw new WorkspacePathError(rel, 'contains a NUL byte');
    if (path.isAbsolute(rel)) throw new WorkspacePathError(rel, 'absolute paths are not allowed; use a path relative to the workspace');
    const parts = rel.split(/[\\/]+/).filter((p) => p !== '' && p !== '.');
    if (parts.some((p) => p === '..')) throw new WorkspacePathError(rel, "'..' is not allowed");
    return path.join(this.root, ...parts);
  }

  /** Refuse if any existing component of the path (below the root) is a symlink. */
  private async assertNoLinks(abs: string): Promise<void> {
    const rel = path.relative(this.root, abs);
    let cur = this.root;
    for (const part of rel.split(path.sep).filter(Boolean)) {
      cur = path.join(cur, part);
      const st = await lstat(cur).catch((e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? null : Promise.reject(e)));
      if (!st) return;
      if (st.isSymbolicLink()) throw new WorkspacePathError(rel, 'it goes through a symbolic link');
    }
  }

  async write(rel: string, content: string): Promise<'created' | 'modified'> {
    const abs = this.resolve(rel);
    await this.assertNoLinks(abs);
    await mkdir(path.dirname(abs), { recursive: true });
    await this.assertNoLinks(abs);
    const existed = await lstat(abs).then(() => true, () => false);
    const fh = await open(abs, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o644);
    try {
      await fh.writeFile(content, 'utf8');
    } finally {
      await fh.close();
    }
    return existed ? 'modified' : 'created';
  }

  async read(rel: string, maxBytes = 1_000_000): Promise<string> {
    const abs = this.resolve(rel);
    await this.assertNoLinks(abs);
    const fh = await open(abs, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      const st = await fh.stat();
      if (!st.isFile()) throw new WorkspacePathError(rel, 'not a regular file');
      const buf = Buffer.alloc(Math.min(st.size, maxBytes));
      await fh.read(buf, 0, buf.length, 0);
      const text = buf.toString('utf8');
      return st.size > maxBytes ? `${text}\n[truncated: file is ${st.size} bytes, showing the first ${maxBytes}]` : text;
    } finally {
      await fh.close();
    }
  }

  async list(rel = '.'): Promise<string[]> {
    const abs = this.resolve(rel);
    await this.assertNoLinks(abs);
    const entries = await readdir(abs, { withFileTypes: true });
    return entries.map((e) => (e.isDirectory() ? `${e.name}/` : e.isSymbolicLink() ? `${e.name}@` : e.name)).sort();
  }
}
