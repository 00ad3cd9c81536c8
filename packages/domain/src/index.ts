import './messages.ts'; // zod's messages, in plain words, for every schema (set once)
export * from './content.ts';
export * from './events.ts';
export * from './state.ts';
export * from './errors.ts';
export * from './commands.ts';
export { evolve, fold, rejectionText, REJECTION } from './evolve.ts';
export { decide } from './decide.ts';
export { upcast, UnknownSchemaVersionError } from './upcast.ts';
export * from './replay.ts';
export * from './fork.ts';
export * from './ids.ts';
export * from './text.ts';
export * from './budget.ts';

import { decide } from './decide.ts';
import { evolve } from './evolve.ts';
import { initialState } from './state.ts';
/** The task decider: `{ decide, evolve, initialState }`. */
export const taskDecider = { decide, evolve, initialState } as const;
export * from './plan.ts';
export * from './acceptance.ts';
export * from './schedule.ts';
export { planOutcome } from './evolve.ts';
export * from './chat.ts';
export * from './email.ts';
export { plainMessage } from './messages.ts';
