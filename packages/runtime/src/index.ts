export * from './config.ts';
export * from './logger.ts';
export * from './shutdown.ts';
export { keyedSerial } from './keyed.ts';
