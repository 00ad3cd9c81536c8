export { ArtifactPathHeldError, ArtifactVersionNotKeptError, copyTaskFiles, storeArtifact, readArtifact, readArtifactVersion, mediaTypeOf, type StoredArtifact } from './artifacts.ts';
export { indexCorpus, searchCorpus, plainText, titleOf, type CorpusHit } from './corpus.ts';
export { loadTeamConfig, saveTeamConfigs } from './team-configs.ts';
export { claimRedeliveries, findDelivery, finishRedelivery, listDeliveries, recordDelivery, recordNextAttempt, requestRedelivery, targetSettled, type ClaimedRedelivery, type DeliveryAttempt, type RecordedDelivery } from './deliveries.ts';
export {
  DEFAULT_WORKSPACE_LIMITS,
  EXAMPLE_NAME,
  MAX_WORKSPACE_PATH,
  UnknownExampleError,
  WorkspaceArchiveError,
  listExamples,
  loadExample,
  parseWorkspaceArchive,
  readWorkspace,
  storeWorkspace,
  taskChange,
  taskTree,
  workspaceArchive,
  workspaceDigest,
  workspaceManifest,
  type ExampleSummary,
  type StoredWorkspace,
  type TaskFiles,
  type WorkspaceFile,
  type WorkspaceLimits,
  type WorkspaceManifestEntry,
  type WorkspaceProblem,
} from './workspaces.ts';
export { diffWorkspaces, type FileChange, type WorkspaceDiff } from './diff.ts';
export {
  WATCHDOG_HOLDER,
  acquireLease,
  dropLeases,
  expireLeasesOf,
  leaseOf,
  leasesOfTask,
  liveLeaseHolders,
  noteRedispatch,
  recordStream,
  recordedStreams,
  releaseLease,
  renewLease,
  unfinishedTasks,
  watchCandidates,
  type Lease,
  type WatchCandidate,
} from './leases.ts';
export { claimMail, MailClaimLostError, mailInFlight, mailSends, mailSendState, markHandingOver, recordMailResend, settleMail, type MailClaim, type MailKey } from './mail.ts';
export { createEndpoint, createEndpointUnderCap, deleteEndpoint, findEndpoint, listEndpoints, rotateEndpointSecret, tenantEndpoint, tenantsWithEndpoints, updateEndpoint, validSecrets, type WebhookEndpoint } from './webhook-endpoints.ts';
