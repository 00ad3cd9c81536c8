import { CURRENT_SCHEMA_VERSION, type NewEvent } from '@baton/domain';

/** The NOTIFY channel an append signals on commit (the relay LISTENs). */
export const NOTIFY_CHANNEL = 'baton_events';

/**
 * How an append upserts the `tasks` read model: never moving it back to an older version.
 * Shared by single and batched appends.
 */
export const TASKS_UPSERT_CONFLICT = `on conflict (id) do update set
    status = excluded.status, team = excluded.team, title = excluded.title, updated_at = excluded.updated_at,
    version = excluded.version, pending_requests = excluded.pending_requests, next_deadline = excluded.next_deadline
  where tasks.version <= excluded.version`;

/** An event as its row stores it, the current schema version stamped in (every insert path writes this). */
export function storedColumns(e: NewEvent): { type: string; schemaVersion: number; data: string; metadata: string } {
  return { type: e.type, schemaVersion: CURRENT_SCHEMA_VERSION, data: JSON.stringify(e.data), metadata: JSON.stringify({ ...e.metadata, schemaVersion: CURRENT_SCHEMA_VERSION }) };
}
