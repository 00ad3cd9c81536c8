import type pg from 'pg';

/** Record team definitions by config version (idempotent: a version's definition never changes). */
export async function saveTeamConfigs(pool: pg.Pool, teams: readonly { version: string; teamId: string; definition: unknown }[]): Promise<void> {
  if (teams.length === 0) return;
  await pool.query(
    `insert into team_configs (version, team_id, definition)
     select v, t, d from unnest($1::text[], $2::text[], $3::jsonb[]) as x(v, t, d)
     on conflict (version) do nothing`,
    [teams.map((t) => t.version), teams.map((t) => t.teamId), teams.map((t) => JSON.stringify(t.definition))],
  );
}

/** The definition recorded for a config version, or null. */
export async function loadTeamConfig(pool: pg.Pool, version: string): Promise<unknown> {
  const { rows } = await pool.query('select definition from team_configs where version = $1', [version]);
  return rows[0]?.definition ?? null;
}
