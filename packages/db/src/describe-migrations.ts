/** What a migration run says it did (the migrate command, `baton up`). */
export function describeMigrations(applied: readonly string[], newer: readonly string[]): string {
  if (newer.length > 0) return `migrations: the database is past this code (${newer.join(', ')} applied by a later release): nothing to apply; this code runs on it (every migration adds)`;
  return applied.length ? `migrations applied: ${applied.join(', ')}` : 'migrations: already up to date';
}
