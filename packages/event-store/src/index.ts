export * from './store.ts';
export * from './errors.ts';
export * from './tasks.ts';
export * from './read-models.ts';
export { toTaskRow, type TaskRow } from './task-row.ts';
export { gatewayCachePolicy, keepUnfinished, servicesCachePolicy, TaskCache } from './task-cache.ts';
export { GroupCommitter } from './group-commit.ts';
export { appendBatch, type BatchItemResult } from './append.ts';
export { appendChatEvents, chatStreamId, listChats, loadChat, recordChat, type ChatSummaryRow, type LoadedChat, type RecordChatOptions } from './chats.ts';
