export * from './wait.ts';
export * from './fixtures.ts';
export * from './given.ts';
export { resolveInfra, withDatabase } from './infra.ts';
export * from './archives.ts';
export { deleteNamespace, namespaceStreams } from './namespaces.ts';
export * from './private-postgres.ts';
export * from './private-nats.ts';
export * from './tasks.ts';
