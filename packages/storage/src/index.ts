export { copyTaskFiles, storeArtifact, readArtifact, mediaTypeOf, type StoredArtifact } from './artifacts.ts';
export { indexCorpus, searchCorpus, plainText, titleOf, type CorpusHit } from './corpus.ts';
export { loadTeamConfig, saveTeamConfigs } from './team-configs.ts';
export { listDeliveries, recordDelivery, type DeliveryAttempt, type RecordedDelivery } from './deliveries.ts';
