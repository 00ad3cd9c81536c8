import type { TeamInfo } from './api.ts';

/** Pick a configured team (until the teams are loaded, the current choice is the only option). */
export function TeamSelect({ label, value, onChange, teams }: { label: string; value: string; onChange: (team: string) => void; teams: TeamInfo[] }) {
  return (
    <select aria-label={label} value={value} onChange={(e) => onChange(e.target.value)}>
      {/* No team yet (no default on this gateway): the person picks one. */}
      {value === '' && (
        <option value="" disabled>
          choose a team
        </option>
      )}
      {(teams.length ? teams : value ? [{ id: value }] : []).map((t) => (
        <option key={t.id} value={t.id}>
          {t.id}
        </option>
      ))}
    </select>
  );
}

/** The task option "approve the plan" (requirePlanApproval). */
export function ApprovePlan({ checked, onChange }: { checked: boolean; onChange: (on: boolean) => void }) {
  return (
    <label>
      <input type="checkbox" checked={checked} onChange={(e) => onChange(e.target.checked)} /> approve the plan
    </label>
  );
}
