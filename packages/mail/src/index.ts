export * from './token.ts';
export * from './markdown.ts';
export * from './compose.ts';
export * from './plan.ts';
export * from './time.ts';
