import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The console's built files, which the gateway serves at `/`. The browser app's sources are in
 * `ui/`; `ensureConsoleBuilt()` builds them with Vite when they changed since the last build (a
 * stamp of their digest is kept in dist/), so `infra/baton up` and the tests always serve the
 * console of the sources checked out, with no extra step.
 */
export const CONSOLE_ROOT = fileURLToPath(new URL('..', import.meta.url));
export const CONSOLE_DIST = path.join(CONSOLE_ROOT, 'dist');
const STAMP = path.join(CONSOLE_DIST, '.sources-digest');
const SOURCES = ['ui', 'index.html', 'vite.config.ts', 'package.json'];

/** The digest of the console's sources (what a build is of). */
export function sourcesDigest(root = CONSOLE_ROOT): string {
  const h = createHash('sha256');
  const walk = (rel: string): void => {
    const abs = path.join(root, rel);
    if (!existsSync(abs)) return;
    if (statSync(abs).isDirectory()) {
      for (const name of readdirSync(abs).sort()) walk(path.join(rel, name));
      return;
    }
    h.update(rel).update('\0').update(readFileSync(abs)).update('\0');
  };
  for (const s of SOURCES) walk(s);
  return h.digest('hex');
}

/** True when dist/ holds a build of the current sources. */
export function consoleIsBuilt(): boolean {
  return existsSync(path.join(CONSOLE_DIST, 'index.html')) && existsSync(STAMP) && readFileSync(STAMP, 'utf8') === sourcesDigest();
}

/** Build the console if its sources changed since the last build; returns whether it built. */
export function ensureConsoleBuilt(log: (line: string) => void = () => {}): boolean {
  if (consoleIsBuilt()) return false;
  log('building the web console (vite build)');
  const vite = path.join(CONSOLE_ROOT, 'node_modules', 'vite', 'bin', 'vite.js');
  const r = spawnSync(process.execPath, [vite, 'build', '--logLevel', 'warn'], { cwd: CONSOLE_ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) throw new Error(`the console build failed (vite exited ${String(r.status ?? r.signal)})`);
  writeFileSync(STAMP, sourcesDigest());
  return true;
}
