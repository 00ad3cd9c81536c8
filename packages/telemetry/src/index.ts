export * from './tracing.ts';
export * from './metrics.ts';
export * from './ops-server.ts';
