import { execFile } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** What a directory's archive leaves out: version control and installed dependencies (the sandbox installs its own). */
export const WORKSPACE_EXCLUDES = ['.git', 'node_modules'];

/**
 * `baton submit --workspace <path>`: the input workspace as the API takes it in JSON. A `.tar.gz`
 * (or `.tgz`) is sent as it is; a directory is archived with the system's `tar`, leaving out
 * WORKSPACE_EXCLUDES. The gateway checks the archive (unsafe entries, limits) and says what is wrong.
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
  const { stdout } = await run('tar', ['-czf', '-', ...WORKSPACE_EXCLUDES.map((x) => `--exclude=./${x}`), '-C', p, '.'], { encoding: 'buffer', maxBuffer: 256 * 1024 * 1024 }).catch((err: Error & { stderr?: Buffer }) => {
    throw new Error(`--workspace: could not archive ${p} with tar: ${err.stderr?.toString().trim() || err.message}`);
  });
  return { archiveBase64: stdout.toString('base64'), name: `${name}.tar.gz` };
}
