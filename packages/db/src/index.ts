export { claimNamespace, createDb, type DeploymentClaim, migrateToLatest, migrationFailedForGood, MigrationsMismatchError, type MigrationOutcome, schemaReady, SchemaNotReadyError, type Db, type DbOptions } from './db.ts';
export { ensureDatabase } from './admin.ts';
export { describeRebase, rebaseRestoredLog, restoredLogProblem, type LogRebase } from './restored-log.ts';
export { WATCH_SINCE_LAG_S, WEBHOOK_ENDPOINTS_CHANNEL, type Database } from './schema.ts';
export { inTransaction, withSessionLock } from './transaction.ts';
export { describeMigrations } from './describe-migrations.ts';
