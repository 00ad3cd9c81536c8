export * from './tracing.ts';
export * from './metrics.ts';
export * from './ops-server.ts';
export * from './otlp-receiver.ts';
