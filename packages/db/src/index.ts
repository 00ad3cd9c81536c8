export { claimNamespace, createDb, type DeploymentClaim, migrateToLatest, schemaReady, SchemaNotReadyError, type Db, type DbOptions } from './db.ts';
export { ensureDatabase } from './admin.ts';
export { describeRebase, rebaseRestoredLog, restoredLogProblem, type LogRebase } from './restored-log.ts';
export { WATCH_SINCE_LAG_S, WEBHOOK_ENDPOINTS_CHANNEL, type Database } from './schema.ts';
export { inTransaction, withSessionLock } from './transaction.ts';
