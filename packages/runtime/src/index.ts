export * from './config.ts';
export * from './logger.ts';
export * from './shutdown.ts';
export { installCrashGuards, isConnectionError } from './crash-guard.ts';
export { keyedCoalesced, keyedSerial, type Coalesced } from './keyed.ts';
export { setBounded } from './bounded.ts';
export { limiter } from './limiter.ts';
export { startOps, startTelemetry, within } from './observability.ts';
export { markStarted, startupCheck, startupStep, startupStepFailed } from './startup.ts';
