/**
 * The team a form shows: the one picked, else the gateway's default (GET /v1/teams' `default`,
 * BATON_DEFAULT_TEAM), else the first configured; '' before the teams are loaded (the task is
 * sent without one, and the gateway's default applies). A deployment without a `research` team
 * had its forms stuck on it: every task refused as an unknown team.
 */
export function startingTeam(picked: string | null, defaultTeam: string | null, teams: readonly { id: string }[]): string {
  return picked ?? defaultTeam ?? teams[0]?.id ?? '';
}
