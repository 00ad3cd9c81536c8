import type { ColumnType, Generated } from 'kysely';

/** Kysely table types, kept in one place. */
export interface EventsTable {
  global_position: ColumnType<string, never, never>;
  stream_id: string;
  stream_version: number;
  task_id: string;
  event_id: string;
  type: string;
  schema_version: number;
  data: ColumnType<unknown, string, never>;
  metadata: ColumnType<unknown, string, never>;
  recorded_at: ColumnType<Date, never, never>;
  transaction_id: ColumnType<string, never, never>;
}

export interface TasksTable {
  id: string;
  tenant_id: string;
  status: string;
  team: string;
  title: string;
  created_at: ColumnType<Date, string, string>;
  updated_at: ColumnType<Date, string, string>;
  version: number;
  pending_requests: ColumnType<unknown, string, string>;
  next_deadline: ColumnType<Date | null, string | null, string | null>;
  /**
   * Set while the task has work no person holds: the watchdog's index (migration 006). It may
   * lag the task's last event by up to WATCH_SINCE_LAG_S (the append keeps it while it lags less).
   */
  watch_since: ColumnType<Date | null, string | null | undefined, string | null>;
  /** The task a fork was copied from (migration 008). */
  forked_from: ColumnType<string | null, string | null | undefined, string | null>;
  /** The version of `forked_from` the fork was copied at (migration 020). */
  forked_at_version: ColumnType<number | null, number | null | undefined, number | null>;
}

export interface ProcessorCheckpointsTable {
  processor_id: string;
  transaction_id: string;
  global_position: string;
  updated_at: Generated<Date>;
}

export interface DeadLettersTable {
  id: Generated<string>;
  consumer: string;
  subject: string;
  stream_sequence: string;
  /** When the stream stored the message (null for rows recorded before migration 014). */
  stored_at: Date | null;
  deliveries: number;
  payload: string;
  error: string;
  recorded_at: Generated<Date>;
}

export interface WebhookDeliveriesTable {
  id: Generated<string>;
  task_id: string;
  event_id: string;
  webhook_id: string;
  type: string;
  url: string;
  attempt: number;
  status_code: number | null;
  ok: boolean;
  error: string | null;
  duration_ms: number;
  attempted_at: Generated<Date>;
  /** webhook | email (009). */
  channel: Generated<'webhook' | 'email'>;
  /** The person's redelivery this attempt answered (010). */
  redelivery_id: string | null;
  /** The tenant endpoint it went to; null: the task's own webhook, or a mail (012). */
  endpoint_id: string | null;
  /** The notifiers try the message no more after it (016). */
  given_up: Generated<boolean>;
}

/** One mail per (task, moment, recipient), claimed before it is sent (009; docs/email.md). */
export interface MailSendsTable {
  task_id: string;
  mail_key: string;
  recipient: string;
  message_id: string;
  state: 'sending' | 'sent' | 'retry' | 'failed' | 'unknown';
  attempts: Generated<number>;
  holder: string | null;
  lease_until: Date | null;
  last_error: string | null;
  updated_at: Generated<Date>;
}

/** An input workspace's header row: one per distinct set of files (content-addressed). */
export interface InputWorkspacesTable {
  digest: string;
  files: number;
  /** bigint: pg returns it as a string. */
  bytes: ColumnType<string, number, never>;
  created_at: Generated<Date>;
}

export interface InputWorkspaceFilesTable {
  digest: string;
  path: string;
  /** Permission bits only (`& 0o777`). */
  mode: number;
  content: Buffer;
}

/** A chat's event (chat mode, migration 007): one stream per chat, append-only. */
export interface ChatEventsTable {
  global_position: ColumnType<string, never, never>;
  chat_id: string;
  version: number;
  tenant_id: string;
  event_id: string;
  type: string;
  data: ColumnType<unknown, string, never>;
  metadata: ColumnType<unknown, string, never>;
  recorded_at: ColumnType<Date, never, never>;
}

export interface Database {
  events: EventsTable;
  tasks: TasksTable;
  processor_checkpoints: ProcessorCheckpointsTable;
  dead_letters: DeadLettersTable;
  webhook_deliveries: WebhookDeliveriesTable;
  mail_sends: MailSendsTable;
  input_workspaces: InputWorkspacesTable;
  input_workspace_files: InputWorkspaceFilesTable;
  chat_events: ChatEventsTable;
}

/**
 * How far `tasks.watch_since` may lag the task's last event, in seconds. While a task keeps
 * having work no person holds, an append moves the column forward only once it is this far
 * behind, so a lead's steps change no indexed column of its row and Postgres updates it in
 * place (HOT). Whoever asks "idle for longer than X?" of the column asks it of X plus this lag:
 * a busy task never looks idle early, and an idle one is seen at most this much late.
 */
export const WATCH_SINCE_LAG_S = 1;

/**
 * The channel a change to `webhook_endpoints` is announced on (a statement trigger, migration
 * 012): the relay LISTENs, so the first endpoint of a tenant applies to the very next transition
 * it relays (it decides per transition whether the notifier is told at all).
 */
export const WEBHOOK_ENDPOINTS_CHANNEL = 'baton_webhook_endpoints';
