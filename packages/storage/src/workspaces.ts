import { createHash } from 'node:crypto';
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import path from 'node:path';
import { pipeline, type Readable } from 'node:stream';
import { createGunzip, createGzip } from 'node:zlib';
import type pg from 'pg';
import { extract, pack, type Header } from 'tar-stream';
import { readArtifacts } from './artifacts.ts';
import { diffWorkspaces, type WorkspaceDiff } from './diff.ts';
import { inTransaction } from '@baton/db';
import { artifactMode, formatBytes, pathCharacterProblem, REGENERATED_DIRS } from '@baton/domain';

/**
 * Input workspaces: the files a task starts from. An upload (a .tar.gz) or a configured example
 * directory becomes a list of files, refused whole if any entry is unsafe; the list is stored
 * content-addressed by its digest, which `TaskSubmitted.workspace` records.
 */

/** One file of a workspace: a relative POSIX path, its permission bits, its bytes. */
export interface WorkspaceFile {
  path: string;
  mode: number;
  content: Buffer;
}

export interface WorkspaceLimits {
  /** The compressed archive (the upload itself). */
  maxArchiveBytes: number;
  /** The files' contents added up, counted while unpacking (a gzip bomb stops here). */
  maxBytes: number;
  /** Entries that are not directories. */
  maxFiles: number;
}

export const DEFAULT_WORKSPACE_LIMITS: Readonly<WorkspaceLimits> = Object.freeze({
  maxArchiveBytes: 10 * 1024 * 1024,
  maxBytes: 50 * 1024 * 1024,
  maxFiles: 5_000,
});

/** Longest path accepted, in characters. */
export const MAX_WORKSPACE_PATH = 1024;
/** The longest name (one component of a path) a workspace may hold, in UTF-8 bytes: Linux's NAME_MAX. */
export const MAX_NAME_BYTES = 255;

/** What an example's name must look like (it is also a directory name). */
export const EXAMPLE_NAME = /^[a-z0-9][a-z0-9_-]*$/;

export interface WorkspaceProblem {
  /** The entry as the archive (or the example directory) names it. */
  entry: string;
  message: string;
}

/**
 * A workspace that cannot be accepted: `invalid_workspace` (unsafe or unreadable entries, every
 * one listed in `problems`) or `workspace_too_large` (a limit was passed; unpacking stopped there).
 */
export class WorkspaceArchiveError extends Error {
  readonly code: 'invalid_workspace' | 'workspace_too_large';
  readonly problems: WorkspaceProblem[];
  constructor(code: WorkspaceArchiveError['code'], message: string, problems: WorkspaceProblem[] = [], options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.problems = problems;
  }
}

/** No example of that name in the examples directory; `known` lists the ones there are. */
export class UnknownExampleError extends Error {
  readonly example: string;
  readonly known: string[];
  constructor(example: string, known: string[]) {
    super(`unknown example '${example}'; configured: ${known.length > 0 ? known.join(', ') : '(none)'}`);
    this.name = new.target.name;
    this.example = example;
    this.known = known;
  }
}

const MESSAGE_PROBLEMS = 20;

function invalid(what: string, problems: WorkspaceProblem[]): WorkspaceArchiveError {
  // A name with a line break or a tab in it is shown escaped: the message stays one line.
  const listed = problems.slice(0, MESSAGE_PROBLEMS).map((p) => `${pathCharacterProblem(p.entry) ? JSON.stringify(p.entry) : `'${p.entry}'`}: ${p.message}`);
  const more = problems.length > MESSAGE_PROBLEMS ? `; and ${problems.length - MESSAGE_PROBLEMS} more (every one in the error's details)` : '';
  return new WorkspaceArchiveError('invalid_workspace', `${what}: ${problems.length} ${problems.length === 1 ? 'entry' : 'entries'} refused — ${listed.join('; ')}${more}`, problems);
}

const tooLarge = (message: string, entry?: string): WorkspaceArchiveError =>
  new WorkspaceArchiveError('workspace_too_large', message, entry === undefined ? [] : [{ entry, message }]);

/**
 * A path as stored: relative, '/'-separated, no '.' or empty components (a leading './' and
 * doubled slashes go). Returns a problem instead for an absolute path, any '..' component, a NUL
 * byte, another control character, a backslash or a bidirectional control (the domain's
 * `pathCharacterProblem`), a path over MAX_WORKSPACE_PATH characters, or a name (a component)
 * over MAX_NAME_BYTES bytes — no file system a sandbox runs on could hold it, so no agent could
 * ever start from the workspace.
 */
function cleanPath(raw: string): { path: string } | { problem: string } {
  const problem = pathCharacterProblem(raw);
  if (problem) return { problem };
  if (raw.length > MAX_WORKSPACE_PATH) return { problem: `the path is longer than ${MAX_WORKSPACE_PATH} characters` };
  if (raw.startsWith('/')) return { problem: 'absolute path (paths must be relative to the workspace root)' };
  const parts = raw.split('/');
  if (parts.includes('..')) return { problem: "the path has a '..' component (it could leave the workspace)" };
  const long = parts.find((p) => Buffer.byteLength(p, 'utf8') > MAX_NAME_BYTES);
  if (long !== undefined) return { problem: `a name in the path is ${Buffer.byteLength(long, 'utf8')} bytes long (UTF-8); a file or directory name may have at most ${MAX_NAME_BYTES}` };
  return { path: parts.filter((p) => p !== '' && p !== '.').join('/') };
}

/** Where a link's target lands, relative to the root; null when it leaves the workspace. */
function linkTarget(from: string, target: string, relativeToLink: boolean): string | null {
  if (target.startsWith('/')) return null;
  const joined = path.posix.normalize(relativeToLink ? path.posix.join(path.posix.dirname(from), target) : target);
  return joined === '..' || joined.startsWith('../') ? null : joined;
}

function linkProblem(kind: 'symbolic link' | 'hard link', from: string, target: string): string {
  const inside = linkTarget(from, target, kind === 'symbolic link') !== null;
  return `${kind} to '${target}' — ${inside ? 'points inside the workspace' : 'links out of the workspace'}; links are refused (workspaces never follow links)`;
}

/** Per-entry bookkeeping shared by the archive and directory readers. */
class Collector {
  readonly files: WorkspaceFile[] = [];
  readonly problems: WorkspaceProblem[] = [];
  private readonly seen = new Map<string, string>();
  private readonly dirs = new Map<string, string>();
  /** Each claimed path and directory, by its NFC form: how it was spelt first. */
  private readonly spellings = new Map<string, string>();
  count = 0;
  bytes = 0;
  readonly limits: WorkspaceLimits;
  constructor(limits: WorkspaceLimits) {
    this.limits = limits;
  }

  /** Count a non-directory entry against maxFiles (throws past it). */
  countEntry(entry: string): void {
    if (++this.count > this.limits.maxFiles) throw tooLarge(`the workspace has more than ${this.limits.maxFiles} files`, entry);
  }

  /** Count content bytes against maxBytes (throws past it). */
  countBytes(entry: string, n: number): void {
    this.bytes += n;
    if (this.bytes > this.limits.maxBytes) throw tooLarge(`the workspace's files add up to more than ${formatBytes(this.limits.maxBytes)}`, entry);
  }

  problem(entry: string, message: string): void {
    this.problems.push({ entry, message });
  }

  /**
   * Claim a path for a non-directory entry; a second claim is a duplicate — and so is a path that
   * is another's in a different Unicode normalization (`café` composed and decomposed: two
   * files that display as one).
   */
  claim(entry: string, p: string): string | null {
    const first = this.seen.get(p);
    if (first !== undefined) return `duplicate path (also given as '${first}')`;
    // Each of its directories and its own name: spelt one way only (`café/a.txt` and `café/b.txt`,
    // the directory's name composed in one and decomposed in the other, were two directories shown as one).
    const parts = p.split('/');
    for (let i = 1; i <= parts.length; i++) {
      const prefix = parts.slice(0, i).join('/');
      const spelt = this.spellings.get(prefix.normalize('NFC'));
      if (spelt !== undefined && spelt !== prefix) return `'${prefix}' is '${spelt}' in another Unicode normalization (NFC/NFD): the two would display as one`;
    }
    for (let i = 1; i <= parts.length; i++) {
      const prefix = parts.slice(0, i).join('/');
      this.spellings.set(prefix.normalize('NFC'), prefix);
    }
    this.seen.set(p, entry);
    return null;
  }

  directory(entry: string, p: string): void {
    if (p !== '' && !this.dirs.has(p)) this.dirs.set(p, entry);
  }

  /** Tree conflicts: a path that is a file and also a directory (of another entry, or explicitly). */
  checkTree(): void {
    for (const [p, entry] of this.seen) {
      const dir = this.dirs.get(p);
      if (dir !== undefined) this.problem(entry, `'${p}' is also given as a directory ('${dir}')`);
    }
    for (const [p, entry] of this.seen) {
      for (let i = p.indexOf('/'); i !== -1; i = p.indexOf('/', i + 1)) {
        const parent = this.seen.get(p.slice(0, i));
        if (parent !== undefined) this.problem(entry, `its parent '${p.slice(0, i)}' is a file ('${parent}'), not a directory`);
      }
    }
  }

  result(what: string): WorkspaceFile[] {
    this.checkTree();
    if (this.problems.length > 0) throw invalid(what, this.problems);
    return this.files.sort((a, b) => compare(a.path, b.path));
  }
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Unpack a .tar.gz upload into files, refusing it whole (WorkspaceArchiveError) if any entry is
 * unsafe: absolute paths, '..' components, NUL bytes, paths over 1024 characters, symbolic and
 * hard links (inside the workspace or out: workspaces never follow links), devices, fifos and
 * other entry types, duplicate paths and a file used as a directory. Every such entry is named;
 * nothing is silently dropped. Directories are implied by the files' paths and not kept. Limits
 * stop the unpacking as soon as they are passed, so a gzip bomb costs at most `maxBytes` (plus
 * tar headers) of inflation. Modes keep their permission bits (`& 0o777`; 0 → 0o644).
 */
export async function parseWorkspaceArchive(archive: Buffer, limits: Partial<WorkspaceLimits> = {}): Promise<WorkspaceFile[]> {
  const lim: WorkspaceLimits = { ...DEFAULT_WORKSPACE_LIMITS, ...limits };
  if (archive.length > lim.maxArchiveBytes) throw tooLarge(`the archive is ${archive.length} bytes; at most ${formatBytes(lim.maxArchiveBytes)} are accepted`);
  if (archive.length < 2 || archive[0] !== 0x1f || archive[1] !== 0x8b) {
    throw new WorkspaceArchiveError('invalid_workspace', 'not a gzip file: a workspace archive is a .tar.gz (tar -czf workspace.tar.gz -C <dir> .)');
  }
  const c = new Collector(lim);
  // The tar stream itself (headers, padding, directory entries) may add this much to the files.
  const streamCap = lim.maxBytes + (lim.maxFiles + 16) * 4096;
  await new Promise<void>((resolve, reject) => {
    const gunzip = createGunzip();
    const tar = extract();
    let done = false;
    const fail = (err: unknown): void => {
      if (done) return;
      done = true;
      gunzip.destroy();
      tar.destroy();
      reject(err);
    };
    let inflated = 0;
    gunzip.on('data', (chunk: Buffer) => {
      if (done) return;
      inflated += chunk.length;
      if (inflated > streamCap) return fail(tooLarge(`the archive unpacks to more than ${formatBytes(streamCap)} (files limited to ${formatBytes(lim.maxBytes)})`));
      if (!tar.write(chunk)) gunzip.pause();
    });
    tar.on('drain', () => gunzip.resume());
    gunzip.on('end', () => tar.end(null));
    gunzip.on('error', (err) => fail(new WorkspaceArchiveError('invalid_workspace', `not a valid gzip stream: ${err.message}`, [], { cause: err })));
    tar.on('error', (err) => fail(new WorkspaceArchiveError('invalid_workspace', `not a valid tar archive inside the gzip stream (${err.message})`, [], { cause: err })));
    tar.on('finish', () => {
      if (done) return;
      done = true;
      resolve();
    });
    tar.on('entry', (header: Header, stream, next) => {
      let entry: { path: string; mode: number; chunks: Buffer[] } | null;
      try {
        entry = onEntry(c, header);
      } catch (err) {
        stream.resume();
        return fail(err);
      }
      stream.on('data', (data: unknown) => {
        const chunk = data as Buffer;
        if (done) return;
        try {
          c.countBytes(header.name, chunk.length);
        } catch (err) {
          return fail(err);
        }
        entry?.chunks.push(chunk);
      });
      stream.on('end', () => {
        if (entry) c.files.push({ path: entry.path, mode: entry.mode, content: Buffer.concat(entry.chunks) });
        next();
      });
      stream.on('error', (err: Error) => fail(err));
    });
    gunzip.end(archive);
  });
  return c.result('invalid workspace archive');
}

/** Check one tar entry; returns where its bytes go when it is an acceptable file. */
function onEntry(c: Collector, header: Header): { path: string; mode: number; chunks: Buffer[] } | null {
  const raw = header.name;
  const cleaned = cleanPath(raw);
  const messages: string[] = 'problem' in cleaned ? [cleaned.problem] : [];
  const p = 'path' in cleaned ? cleaned.path : null;
  const type = header.type as string | null;
  if (type === 'directory') {
    if (messages.length > 0) c.problem(raw, messages.join('; '));
    else if (p !== null) c.directory(raw, p);
    return null;
  }
  c.countEntry(raw);
  if (p === '') messages.push('the path is empty');
  switch (type) {
    case 'file':
    case 'contiguous-file':
      break;
    case 'symlink':
      messages.push(linkProblem('symbolic link', p ?? raw, header.linkname ?? ''));
      break;
    case 'link':
      messages.push(linkProblem('hard link', p ?? raw, header.linkname ?? ''));
      break;
    case 'character-device':
    case 'block-device':
    case 'fifo':
      messages.push(`${type} entries are refused (only regular files and directories)`);
      break;
    default:
      messages.push(`unsupported entry type${type ? ` '${type}'` : ''} (only regular files and directories)`);
  }
  if (p !== null && p !== '') {
    const dup = c.claim(raw, p);
    if (dup) messages.push(dup);
  }
  if (messages.length > 0 || p === null) {
    c.problem(raw, messages.join('; '));
    return null;
  }
  return { path: p, mode: (header.mode & 0o777) || 0o644, chunks: [] };
}

const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

/**
 * The workspace's identity: sha256 over the JSON list of [path, mode, sha256(content)], sorted
 * by path (code-unit order). The same files give the same digest whatever the archive order.
 */
export function workspaceDigest(files: readonly WorkspaceFile[]): string {
  const list = files.map((f) => [f.path, f.mode, sha256(f.content)] as const).sort((a, b) => compare(a[0], b[0]));
  return sha256(JSON.stringify(list));
}

export interface StoredWorkspace {
  digest: string;
  files: number;
  bytes: number;
}

/** Rows per insert statement, and content bytes per statement. */
const INSERT_ROWS = 500;
const INSERT_BYTES = 8 * 1024 * 1024;

/**
 * Store a workspace's files under their digest, in one transaction. Content-addressed: storing
 * the same files again (or concurrently) writes nothing and returns the same digest.
 */
export async function storeWorkspace(pool: pg.Pool, files: readonly WorkspaceFile[]): Promise<StoredWorkspace> {
  const paths = new Set<string>();
  for (const f of files) {
    if (paths.has(f.path)) throw new Error(`storeWorkspace: duplicate path '${f.path}'`);
    paths.add(f.path);
  }
  const digest = workspaceDigest(files);
  const bytes = files.reduce((n, f) => n + f.content.length, 0);
  await inTransaction(pool, async (client) => {
    // A concurrent store of the same digest waits here for the other to commit, then does nothing.
    const created = await client.query('insert into input_workspaces (digest, files, bytes) values ($1, $2, $3) on conflict do nothing returning digest', [digest, files.length, bytes]);
    if (created.rowCount === 1) {
      let batch: WorkspaceFile[] = [];
      let batchBytes = 0;
      const flush = async (): Promise<void> => {
        if (batch.length === 0) return;
        const values: unknown[] = [];
        const rows = batch.map((f, i) => {
          values.push(f.path, f.mode, f.content);
          return `($1, $${i * 3 + 2}, $${i * 3 + 3}, $${i * 3 + 4})`;
        });
        await client.query(`insert into input_workspace_files (digest, path, mode, content) values ${rows.join(', ')}`, [digest, ...values]);
        batch = [];
        batchBytes = 0;
      };
      for (const f of files) {
        if (batch.length >= INSERT_ROWS || (batch.length > 0 && batchBytes + f.content.length > INSERT_BYTES)) await flush();
        batch.push(f);
        batchBytes += f.content.length;
      }
      await flush();
    }
  });
  return { digest, files: files.length, bytes };
}

/** A stored workspace's files, sorted by path; null if no workspace has that digest. */
export async function readWorkspace(pool: pg.Pool, digest: string): Promise<WorkspaceFile[] | null> {
  const head = await pool.query('select 1 from input_workspaces where digest = $1', [digest]);
  if (head.rowCount === 0) return null;
  const { rows } = await pool.query<{ path: string; mode: number; content: Buffer }>('select path, mode, content from input_workspace_files where digest = $1', [digest]);
  return rows.map((r) => ({ path: r.path, mode: r.mode, content: r.content })).sort((a, b) => compare(a.path, b.path));
}

export interface WorkspaceManifestEntry {
  path: string;
  mode: number;
  bytes: number;
}

/** A stored workspace's file tree without the contents (what a lead is shown); null if unknown. */
export async function workspaceManifest(pool: pg.Pool, digest: string): Promise<WorkspaceManifestEntry[] | null> {
  const head = await pool.query('select 1 from input_workspaces where digest = $1', [digest]);
  if (head.rowCount === 0) return null;
  const { rows } = await pool.query<{ path: string; mode: number; bytes: number }>('select path, mode, octet_length(content) as bytes from input_workspace_files where digest = $1', [digest]);
  return rows.sort((a, b) => compare(a.path, b.path));
}

/** Directories an example never includes (version control, installs and caches: not the project). */
const SKIPPED = new Set(['.git', ...REGENERATED_DIRS]);

interface WalkedFile {
  path: string;
  mode: number;
  size: number;
  abs: string;
}

/**
 * Every file under `root` with the archive's rules: links, sockets, fifos and devices are
 * refused (all named), node_modules and .git are skipped, the limits apply (sizes from lstat).
 */
async function walkExample(root: string, lim: WorkspaceLimits): Promise<{ files: WalkedFile[]; bytes: number }> {
  const c = new Collector(lim);
  const files: WalkedFile[] = [];
  const walk = async (dir: string, rel: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true });
    entries.sort((a, b) => compare(a.name, b.name));
    for (const e of entries) {
      if (SKIPPED.has(e.name)) continue;
      const p = rel === '' ? e.name : `${rel}/${e.name}`;
      const abs = path.join(dir, e.name);
      if (p.length > MAX_WORKSPACE_PATH) {
        c.problem(p, `the path is longer than ${MAX_WORKSPACE_PATH} characters`);
        continue;
      }
      if (e.isDirectory()) {
        await walk(abs, p);
        continue;
      }
      c.countEntry(p);
      if (e.isSymbolicLink()) {
        c.problem(p, linkProblem('symbolic link', p, await readlink(abs)));
      } else if (e.isFile()) {
        const st = await lstat(abs);
        c.countBytes(p, st.size);
        files.push({ path: p, mode: (st.mode & 0o777) || 0o644, size: st.size, abs });
      } else {
        c.problem(p, 'not a regular file (a socket, fifo or device); only regular files and directories');
      }
    }
  };
  await walk(root, '');
  if (c.problems.length > 0) throw invalid('invalid example', c.problems);
  return { files, bytes: c.bytes };
}

/** The example directories' names (valid names only, sorted); [] when the directory is missing. */
async function exampleNames(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return [];
    throw err;
  });
  // Every directory but hidden ones: one whose name is no example name is listed with that error, not skipped unsaid.
  return entries.filter((e) => e.isDirectory() && !e.name.startsWith('.')).map((e) => e.name).sort(compare);
}

export interface ExampleSummary {
  name: string;
  files: number;
  bytes: number;
  /** Why the example cannot be used (a link, a limit), or null. */
  error: string | null;
}

/**
 * The examples under `dir`: each directory `<dir>/<name>/` whose name matches EXAMPLE_NAME
 * (anything else there, such as a README, is not an example). An example that cannot be loaded
 * is still listed, with `error` saying why.
 */
export async function listExamples(dir: string, limits: Partial<WorkspaceLimits> = {}): Promise<ExampleSummary[]> {
  const lim: WorkspaceLimits = { ...DEFAULT_WORKSPACE_LIMITS, ...limits };
  const out: ExampleSummary[] = [];
  for (const name of await exampleNames(dir)) {
    if (!EXAMPLE_NAME.test(name)) {
      out.push({ name, files: 0, bytes: 0, error: `'${name}' is not an example name (lowercase letters, digits, '-' and '_', starting with a letter or a digit): rename the directory to offer it` });
      continue;
    }
    try {
      const { files, bytes } = await walkExample(path.join(dir, name), lim);
      out.push({ name, files: files.length, bytes, error: null });
    } catch (err) {
      if (!(err instanceof WorkspaceArchiveError)) throw err;
      out.push({ name, files: 0, bytes: 0, error: err.message });
    }
  }
  return out;
}

/** An example's files (UnknownExampleError if there is none of that name; WorkspaceArchiveError if it breaks the rules). */
export async function loadExample(dir: string, name: string, limits: Partial<WorkspaceLimits> = {}): Promise<WorkspaceFile[]> {
  const lim: WorkspaceLimits = { ...DEFAULT_WORKSPACE_LIMITS, ...limits };
  const root = path.join(dir, name);
  const isExample = EXAMPLE_NAME.test(name) && (await lstat(root).then((s) => s.isDirectory(), () => false));
  if (!isExample) throw new UnknownExampleError(name, (await exampleNames(dir)).filter((n) => EXAMPLE_NAME.test(n)));
  const { files } = await walkExample(root, lim);
  const out: WorkspaceFile[] = [];
  let bytes = 0;
  for (const f of files) {
    const content = await readFile(f.abs);
    // The file may have grown since the walk: the limit holds for what is actually read.
    bytes += content.length;
    if (bytes > lim.maxBytes) throw tooLarge(`the workspace's files add up to more than ${formatBytes(lim.maxBytes)}`, f.path);
    out.push({ path: f.path, mode: f.mode, content });
  }
  return out.sort((a, b) => compare(a.path, b.path));
}

/** What `taskChange` needs of a task (a TaskState fits). */
export interface TaskFiles {
  id: string;
  workspace: { digest: string } | null;
  artifacts: readonly { path: string; sha256: string; mode?: number }[];
  /** Paths agents deleted since (TaskState.deletedFiles): not in the tree. */
  deletedFiles: readonly string[];
}

/**
 * A task's tree — the input workspace's files (none without one) overlaid with the task's
 * recorded artifacts, each in the version and mode recorded — beside the input, both sorted by
 * path. An artifact recorded without a mode (before modes were kept) has the input file's, or
 * 0644 for a file the task created. Given the state at an earlier version, the tree as it stood then.
 */
export async function taskTree(pool: pg.Pool, task: TaskFiles): Promise<{ input: WorkspaceFile[]; tree: WorkspaceFile[] }> {
  let input: WorkspaceFile[] = [];
  if (task.workspace) {
    const files = await readWorkspace(pool, task.workspace.digest);
    if (!files) throw new Error(`input workspace ${task.workspace.digest} of task ${task.id} is not stored`);
    input = files;
  }
  const tree = new Map(input.map((f) => [f.path, f]));
  for (const p of task.deletedFiles) tree.delete(p);
  const modes = new Map(task.artifacts.map((a) => [a.path, a.mode]));
  for (const [p, content] of await readArtifacts(pool, task.id, task.artifacts)) {
    // In the order stored, the newer wins where a file and a directory of one name meet: a file
    // that became a directory (api/types.ts → api/types.ts/index.ts) is gone, and so is what was
    // under a directory that became a file — the tree stays one a file system (and tar) can hold.
    for (const k of [...tree.keys()]) if (p.startsWith(`${k}/`) || k.startsWith(`${p}/`)) tree.delete(k);
    tree.set(p, { path: p, mode: artifactMode(modes.get(p), tree.get(p)?.mode), content });
  }
  return { input, tree: [...tree.values()].sort((a, b) => compare(a.path, b.path)) };
}

/** A task's change: its tree (`taskTree`) diffed against its input workspace. */
export async function taskChange(pool: pg.Pool, task: TaskFiles): Promise<WorkspaceDiff> {
  const { input, tree } = await taskTree(pool, task);
  const contents = (files: readonly WorkspaceFile[]) => new Map(files.map((f) => [f.path, f.content]));
  const modes = (files: readonly WorkspaceFile[]) => new Map(files.map((f) => [f.path, f.mode]));
  return diffWorkspaces(contents(input), contents(tree), { before: modes(input), after: modes(tree) });
}

/**
 * Files as a gzip-compressed tar, streamed: a regular file entry per file (directories are implied
 * by the paths), each with its mode and the given modification time — the archive an upload
 * reads back (`parseWorkspaceArchive`) as the same files.
 */
export function workspaceArchive(files: readonly WorkspaceFile[], mtime: Date): Readable {
  const p = pack();
  void (async () => {
    for (const f of files) {
      await new Promise<void>((resolve, reject) => p.entry({ name: f.path, mode: f.mode, mtime, size: f.content.length, type: 'file' }, f.content, (err) => (err ? reject(err) : resolve())));
    }
    p.finalize();
  })().catch((err: unknown) => p.destroy(err as Error));
  const gz = createGzip();
  pipeline(p, gz, () => {}); // an error destroys the gzip stream too: the response is cut, not left hanging
  return gz;
}
