export * from './model.ts';
export * from './tools.ts';
export * from './teams.ts';
export * from './conversation.ts';
export { OfflineModel, OFFLINE_LABEL } from './offline.ts';
export { approvalFor, askPerson, ApprovalPolicy, ApprovalRule, type ApprovalDecision } from './policy.ts';
export { AnthropicModel, modelFromConfig, RoutingModel, stopReasonOf, WEB_SEARCH_TOOL, type AnthropicModelOptions } from './anthropic.ts';
export { costUsd, PRICES, priceOf, type Price } from './prices.ts';
export { AgentFile, DEFAULT_TEAMS_DIR, loadTeams, loadTeamsOrExit, TeamConfigError, TeamFile } from './config.ts';
