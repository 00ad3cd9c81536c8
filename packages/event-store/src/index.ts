export * from './store.ts';
export * from './errors.ts';
export * from './tasks.ts';
export * from './read-models.ts';
export { createDb, migrateToLatest, queriesIssued, type Db } from './db.ts';
export { ensureDatabase } from './admin.ts';
export type { Database } from './schema.ts';
export { keepActive, TaskCache } from './task-cache.ts';
export { GroupCommitter, appendBatch } from './group-commit.ts';
