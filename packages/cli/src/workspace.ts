import { isUtf8 } from 'node:buffer';
import { execFile, spawn } from 'node:child_process';
import { lstat, readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { REGENERATED_DIRS } from '@baton/domain';

const run = promisify(execFile);

/** What a directory's archive leaves out, at any depth: version control, installed dependencies and caches (the sandbox makes its own). */
export const WORKSPACE_EXCLUDES = ['.git', ...REGENERATED_DIRS];

/**
 * `baton submit --workspace <path>`: the input workspace as the API takes it in JSON. A `.tar.gz`
 * (or `.tgz`) is sent as it is; a directory is archived with the system's `tar`: in a git work
 * tree the files git would commit (tracked, and untracked ones `.gitignore` does not ignore — no
 * `.env`, no build output), else every file; WORKSPACE_EXCLUDES left out at any depth either way.
 * The gateway checks the archive (unsafe entries, limits) and says what is wrong.
 */
export async function workspaceFromPath(p: string): Promise<{ archiveBase64: string; name: string }> {
  const info = await stat(p).catch(() => null);
  if (!info) throw new Error(`--workspace: no such file or directory: ${p}`);
  const name = path.basename(path.resolve(p));
  if (info.isFile()) {
    if (!/\.(tar\.gz|tgz)$/i.test(p)) throw new Error(`--workspace: ${p} is a file but not a .tar.gz (give a directory, or a .tar.gz / .tgz archive)`);
    return { archiveBase64: (await readFile(p)).toString('base64'), name };
  }
  if (!info.isDirectory()) throw new Error(`--workspace: ${p} is neither a directory nor a .tar.gz`);
  const listed = await gitFiles(p);
  if (listed?.length === 0 && (await readdir(p)).some((e) => !WORKSPACE_EXCLUDES.includes(e))) {
    throw new Error(`--workspace: git would commit no file of ${p} (.gitignore ignores them all): archive the directory yourself and give the .tar.gz`);
  }
  // Listed by git: each file by name, nothing descended into (a name is bytes: one that is not UTF-8 goes as it is, for the gateway to refuse by name).
  const args = ['-czf', '-', ...WORKSPACE_EXCLUDES.map((x) => `--exclude=${x}`), '-C', p, ...(listed ? ['--no-recursion', '--null', '-T', '-'] : ['.'])];
  const archive = await tar(args, listed ? Buffer.concat(listed.flatMap((f) => [f, Buffer.from([0])])) : null).catch((err: Error) => {
    throw new Error(`--workspace: could not archive ${p} with tar: ${err.message}`);
  });
  return { archiveBase64: archive.toString('base64'), name: `${name}.tar.gz` };
}

/**
 * The files of a git work tree at `dir` as git would commit them (paths relative to `dir`, as
 * bytes), those on disk only (a tracked file deleted is not). A repository inside it — a
 * submodule, or one git only lists as a directory — is listed the same way by its own git (its own
 * `.gitignore`), never taken whole. Null when `dir` is in no work tree (every file is sent then);
 * git present but refusing (a repository it will not read) is an error, never a silent send of
 * everything.
 */
async function gitFiles(dir: string): Promise<Buffer[] | null> {
  const out = await run('git', ['-C', dir, 'ls-files', '-z', '--cached', '--others', '--exclude-standard', '--', '.'], { encoding: 'buffer', maxBuffer: 256 * 1024 * 1024 }).catch((err: Error & { code?: unknown; stderr?: Buffer }) => {
    if (err.code === 'ENOENT') return null; // no git on this machine
    const said = err.stderr?.toString().trim() ?? err.message;
    if (/not a git repository/i.test(said)) return null;
    throw new Error(`--workspace: git could not list the files of ${dir} (${said}); mend that, or archive the directory yourself and give the .tar.gz`);
  });
  if (!out) return null;
  const names = splitNul(out.stdout);
  const files: Buffer[] = [];
  for (const name of names) {
    const at = Buffer.concat([Buffer.from(`${dir}/`), name]);
    const st = await lstat(at).catch(() => null);
    if (!st) continue; // tracked, deleted from disk
    if (!st.isDirectory()) {
      files.push(name);
      continue;
    }
    // A repository of its own (a submodule, an untracked clone, listed as `nested/`): its files as
    // its git lists them. (A name that is not UTF-8 goes as it is: the gateway refuses it by name.)
    if (!isUtf8(at)) {
      files.push(name);
      continue;
    }
    const base = name.at(-1) === 0x2f ? name.subarray(0, -1) : name;
    for (const f of (await gitFiles(at.toString('utf8'))) ?? []) files.push(Buffer.concat([base, Buffer.from('/'), f]));
  }
  return files;
}

/** NUL-separated names, as bytes. */
function splitNul(b: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let from = 0;
  for (let i = b.indexOf(0); i !== -1; i = b.indexOf(0, from)) {
    if (i > from) out.push(b.subarray(from, i));
    from = i + 1;
  }
  if (from < b.length) out.push(b.subarray(from));
  return out;
}

/** Run tar with `input` on its stdin (or none); its stdout, or an error with its stderr. */
function tar(args: string[], input: Buffer | null): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn('tar', args, { stdio: [input ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on('data', (c: Buffer) => out.push(c));
    child.stderr?.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(Buffer.concat(err).toString().trim() || `tar exited with ${code}`))));
    if (input) child.stdin?.end(input);
  });
}
