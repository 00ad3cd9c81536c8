import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';

/*
 * The README and the docs are read by someone who cloned the repository and has nothing else:
 * every link and every `docs/…` a page names resolves inside the repository, anchors included.
 */

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const SKIP = new Set(['node_modules', '.git', '.tools', 'dist', '.bench', 'coverage']);

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    if (SKIP.has(f)) return [];
    const p = path.join(dir, f);
    if (statSync(p).isDirectory()) return markdownFiles(p);
    return f.endsWith('.md') ? [p] : [];
  });
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
const slug = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/[^\p{L}\p{N}\s-]/gu, '')
    .replace(/\s/g, '-');

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => slug(m[1]!)));
}

/** Everything wrong with one markdown file's links: `target: why` lines. */
function brokenLinks(file: string, source = readFileSync(file, 'utf8')): string[] {
  const text = source.replace(/```[\s\S]*?```/g, '');
  const problems: string[] = [];
  for (const m of text.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    const target = m[1]!;
    if (/^(https?:|mailto:)/.test(target)) continue;
    const [p, anchor] = target.split('#') as [string, string | undefined];
    const resolved = p === '' ? file : path.resolve(path.dirname(file), decodeURIComponent(p));
    if (!resolved.startsWith(ROOT)) problems.push(`${target}: outside the repository`);
    else if (!existsSync(resolved)) problems.push(`${target}: no such file`);
    else if (anchor && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor)) problems.push(`${target}: no heading #${anchor}`);
  }
  // Paths named in the text (`docs/x.md`, infra/…) exist too.
  for (const m of text.matchAll(/(?<![\w./-])((?:docs|infra|config|examples)\/[\w./-]*[\w])/g)) {
    const named = m[1]!;
    if (named.includes('*')) continue;
    if (!existsSync(path.join(ROOT, named))) problems.push(`${named}: named in the text, not in the repository`);
  }
  if (text.includes('../shared')) problems.push('../shared: a path outside the repository');
  return problems;
}

describe('the README and docs link only to what the repository holds', () => {
  const files = markdownFiles(ROOT);

  test('there are pages to check', () => {
    expect(files.map((f) => path.relative(ROOT, f))).toEqual(expect.arrayContaining(['README.md', 'docs/observability.md', 'docs/architecture.md', 'docs/api.md', 'docs/benchmarks.md']));
  });

  test.each(files.map((f) => [path.relative(ROOT, f), f]))('%s', (_name, file) => {
    expect(brokenLinks(file)).toEqual([]);
  });

  test('a broken link, a missing anchor, a path outside and a missing named file are caught', () => {
    const page = path.join(ROOT, 'docs/page.md');
    const text = '[a](nothing.md) [b](observability.md#no-such-heading) [c](observability.md#what-tracing-costs) [d](../../elsewhere.md) ![e](images/trace-research-run.png) see docs/nope.md and ../shared/x';
    expect(brokenLinks(page, text)).toEqual([
      'nothing.md: no such file',
      'observability.md#no-such-heading: no heading #no-such-heading',
      '../../elsewhere.md: outside the repository',
      'docs/nope.md: named in the text, not in the repository',
      '../shared: a path outside the repository',
    ]);
    expect(slug('`baton verify` and `POST /v1/tasks/:id/verify`')).toBe('baton-verify-and-post-v1tasksidverify');
  });
});
