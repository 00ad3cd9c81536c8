export * from './view.ts';
export * from './webhook-url.ts';
