export * from './subjects.ts';
export * from './messages.ts';
export * from './topology.ts';
export * from './consumer.ts';
export { Relay, relayStatus, type RelayOptions } from './relay.ts';
export { connectNats, drainNats } from './connect.ts';
export { deadLetterRecorder } from './dead-letters.ts';
export { BatchPublisher, isStoreFailure, PublishError, STREAM_STORE_FAILED, type BatchPublisherOptions, type OutMessage } from './publisher.ts';
export { Diagnostics, diagnostics, requestDiagnostics, serveDiagnostics } from './diagnostics.ts';
