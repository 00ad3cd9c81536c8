export * from './view.ts';
export * from './webhook-url.ts';
export * from './chat.ts';
