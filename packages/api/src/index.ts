export * from './view.ts';
export * from './webhook-url.ts';
export * from './chat.ts';
export * from './diff.ts';
export * from './http.ts';
export * from './text.ts';
