/**
 * The team a form shows: the one picked, else the gateway's default (GET /v1/teams' `default`,
 * BATON_DEFAULT_TEAM); with neither, none — the person picks one (a first team taken silently had
 * sent tasks to the benchmark team), and a task sent so is asked for its team by the gateway.
 * A deployment without a `research` team had its forms stuck on it: every task refused.
 */
export function startingTeam(picked: string | null, defaultTeam: string | null): string {
  return picked ?? defaultTeam ?? '';
}
