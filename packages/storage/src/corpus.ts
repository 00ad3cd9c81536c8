import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { cutText } from '@baton/domain';
import type pg from 'pg';

/** What the offline web_search indexes: text, markdown and HTML. */
const INDEXED = /\.(md|markdown|txt|html?)$/i;
const SKIPPED_DIRS = new Set(['node_modules', '.git', '.tools', 'dist', 'coverage', '.pnpm-store']);
const MAX_DOC_BYTES = 2_000_000;
/**
 * How much of a document is indexed (its start): Postgres refuses a tsvector over 1 MiB, and a
 * text of about a megabyte of distinct words makes one — a single such file (a log, a dump) had
 * the runner retry indexing for ever, never ready.
 */
export const MAX_INDEXED_CHARS = 300_000;

export interface CorpusHit {
  /** The document's path in the corpus (its "URL" offline). */
  source: string;
  title: string;
  snippet: string;
  rank: number;
}

/** A document's title: its first markdown heading, its HTML <title>, or its file name. */
export function titleOf(file: string, text: string): string {
  const h = /^#{1,3}\s+(.+)$/m.exec(text) ?? /<title>([^<]+)<\/title>/i.exec(text);
  return cutText((h?.[1] ?? path.basename(file)).trim(), 300);
}

/** The readable text of a document (HTML tags, scripts and styles removed). */
export function plainText(file: string, text: string): string {
  if (!/\.html?$/i.test(file)) return text;
  return text
    .replace(/<(script|style)[^>]*>[\s\S]*?<\/\1>/gi, ' ')
    .replace(/<[^>]+>/g, ' ')
    .replace(/&nbsp;/g, ' ')
    .replace(/&amp;/g, '&')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/\s+/g, ' ');
}

async function* filesUnder(root: string, dir = root): AsyncGenerator<string> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    if (e.isDirectory()) {
      if (!SKIPPED_DIRS.has(e.name) && !e.name.startsWith('.')) yield* filesUnder(root, path.join(dir, e.name));
    } else if (e.isFile() && INDEXED.test(e.name)) {
      yield path.join(dir, e.name);
    }
  }
}

/**
 * Index a directory into the named corpus: new and changed documents are written, documents
 * gone from the directory are removed, unchanged ones are left alone (by digest). Idempotent;
 * replicas indexing at once converge. Returns what changed.
 */
export async function indexCorpus(pool: pg.Pool, corpus: string, dir: string): Promise<{ indexed: number; unchanged: number; removed: number }> {
  const root = path.resolve(dir);
  const { rows } = await pool.query('select path, digest from corpus_documents where corpus = $1', [corpus]);
  const known = new Map(rows.map((r) => [r.path as string, r.digest as string]));
  const seen = new Set<string>();
  const docs: { path: string; title: string; body: string; digest: string }[] = [];
  for await (const file of filesUnder(root)) {
    const st = await stat(file);
    if (st.size > MAX_DOC_BYTES) continue;
    const raw = await readFile(file, 'utf8');
    const rel = path.relative(root, file);
    seen.add(rel);
    const digest = createHash('sha256').update(raw).digest('hex');
    if (known.get(rel) === digest) continue;
    docs.push({ path: rel, title: titleOf(rel, raw), body: cutText(plainText(rel, raw), MAX_INDEXED_CHARS), digest });
  }
  const removed = [...known.keys()].filter((p) => !seen.has(p));
  if (docs.length > 0) {
    await pool.query(
      `insert into corpus_documents (corpus, path, title, body, digest)
       select $1, p, t, b, d from unnest($2::text[], $3::text[], $4::text[], $5::text[]) as x(p, t, b, d)
       on conflict (corpus, path) do update set title = excluded.title, body = excluded.body, digest = excluded.digest`,
      [corpus, docs.map((d) => d.path), docs.map((d) => d.title), docs.map((d) => d.body), docs.map((d) => d.digest)],
    );
  }
  if (removed.length > 0) await pool.query('delete from corpus_documents where corpus = $1 and path = any($2::text[])', [corpus, removed]);
  return { indexed: docs.length, unchanged: seen.size - docs.length, removed: removed.length };
}

/**
 * Full-text search of a corpus: any of the query's words matches (ranked by cover density, so
 * documents holding more of them, closer together, come first), with a highlighted snippet.
 */
export async function searchCorpus(pool: pg.Pool, corpus: string, query: string, limit = 5): Promise<CorpusHit[]> {
  const { rows } = await pool.query(
    `with q as (select nullif(replace(plainto_tsquery('english', $2)::text, '&', '|'), '')::tsquery as q)
     select path, title, ts_rank_cd(tsv, q.q) as rank,
            ts_headline('english', body, q.q, 'MaxWords=45, MinWords=20, MaxFragments=2, FragmentDelimiter=" … ", StartSel=«, StopSel=»') as snippet
       from corpus_documents, q
      where corpus = $1 and q.q is not null and tsv @@ q.q
      order by rank desc, path
      limit $3`,
    [corpus, query, limit],
  );
  return rows.map((r) => ({ source: r.path as string, title: r.title as string, snippet: (r.snippet as string).replace(/\s+/g, ' ').trim(), rank: Number(r.rank) }));
}
