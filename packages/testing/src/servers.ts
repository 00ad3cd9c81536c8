/**
 * Private Postgres and NATS servers, with nothing else of the test kit (no vitest): what a
 * fault-injecting script outside the test runner may import (`@baton/testing/servers`).
 */
export * from './private-postgres.ts';
export * from './private-nats.ts';
