import { sql, type Kysely } from 'kysely';

/**
 * When a mail's message began to go to the SMTP server (after DATA), recorded before its first
 * byte is sent. A holder that stops before then sent nothing: its mail is claimed again and sent,
 * not marked `unknown` (which stays for one that stopped after handing the message over). Rows
 * claimed before this column existed count as handed over (their old meaning).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table mail_sends add column if not exists handed_over_at timestamptz`.execute(db);
  await sql`update mail_sends set handed_over_at = updated_at where state = 'sending'`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table mail_sends drop column if exists handed_over_at`.execute(db);
}
