import { execFile, spawn } from 'node:child_process';
import { lstat, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** What a directory's archive leaves out, at any depth: version control and installed dependencies (the sandbox installs its own). */
export const WORKSPACE_EXCLUDES = ['.git', 'node_modules'];

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
  const args = ['-czf', '-', ...WORKSPACE_EXCLUDES.map((x) => `--exclude=${x}`), '-C', p, ...(listed ? ['--null', '-T', '-'] : ['.'])];
  const archive = await tar(args, listed ? Buffer.from(listed.map((f) => `${f}\0`).join('')) : null).catch((err: Error) => {
    throw new Error(`--workspace: could not archive ${p} with tar: ${err.message}`);
  });
  return { archiveBase64: archive.toString('base64'), name: `${name}.tar.gz` };
}

/**
 * The files of a git work tree at `dir` as git would commit them (relative to `dir`), those on
 * disk only (a tracked file deleted is not); null when `dir` is not in a work tree or git is missing.
 */
async function gitFiles(dir: string): Promise<string[] | null> {
  const out = await run('git', ['-C', dir, 'ls-files', '-z', '--cached', '--others', '--exclude-standard', '--', '.'], { encoding: 'buffer', maxBuffer: 256 * 1024 * 1024 }).catch(() => null);
  if (!out) return null;
  const files = [...new Set(out.stdout.toString('utf8').split('\0').filter((f) => f !== ''))];
  const present = await Promise.all(files.map((f) => lstat(path.join(dir, f)).then(() => true, () => false)));
  return files.filter((_, i) => present[i]);
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
