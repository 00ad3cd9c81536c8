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

/**
 * The workspace packages the bundle takes code from (`@baton/client`, `@baton/api` and what they
 * depend on), as paths relative to the console: their `src` and `package.json`. A change there
 * changes the bundle as much as one in `ui/` does.
 */
export function workspaceSources(root = CONSOLE_ROOT): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  const visit = (pkgDir: string, withDev: boolean): void => {
    const pkg = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8')) as { dependencies?: Record<string, string>; devDependencies?: Record<string, string> };
    const names = Object.keys({ ...pkg.dependencies, ...(withDev ? pkg.devDependencies : {}) }).filter((n) => n.startsWith('@baton/'));
    for (const name of names.sort()) {
      if (seen.has(name)) continue;
      seen.add(name);
      const dir = path.join(root, '..', name.slice('@baton/'.length));
      if (!existsSync(path.join(dir, 'package.json'))) continue;
      out.push(path.relative(root, path.join(dir, 'src')), path.relative(root, path.join(dir, 'package.json')));
      visit(dir, false);
    }
  };
  visit(root, true); // the console's own dev dependencies too: `@baton/api`'s functions are bundled
  return out;
}

/** The digest of the console's sources (what a build is of): its own and its workspace dependencies'. */
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
  for (const s of [...SOURCES, ...workspaceSources(root)]) walk(s);
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
