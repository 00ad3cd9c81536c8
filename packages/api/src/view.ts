import type { InputWorkspace, PendingRequest, RecordedEvent, TaskState, TaskStatus } from '@baton/domain';

/** The task object of API.md, built from the folded state. */
export interface TaskView {
  id: string;
  status: TaskStatus;
  prompt: string;
  team: string;
  createdAt: string;
  updatedAt: string;
  version: number;
  requirePlanApproval: boolean;
  approvalTimeoutSeconds: number;
  metadata: Record<string, unknown>;
  forkedFrom: { taskId: string; atVersion: number } | null;
  /** The files the task started from (digest-pinned), or null. */
  workspace: InputWorkspace | null;
  pendingRequests: PendingRequestView[];
  agents: { id: string; type: string; status: string; turns: number; filesCreated: string[]; filesModified: string[]; usage: TaskView['usage']; summary?: string; error?: { code: string; message: string } }[];
  usage: { inputTokens: number; outputTokens: number; cacheReadTokens: number; cacheWriteTokens: number; costUsd: number };
  artifacts: { path: string; bytes: number; sha256: string; mediaType: string; agentId: string | null }[];
  result: { summary: string; reportPath?: string } | null;
  error: { code: string; message: string } | null;
}

/** A request as the API shows it: the state's own record (absent optional fields left out). */
export type PendingRequestView = PendingRequest;

export function toPendingRequestView(r: PendingRequest): PendingRequestView {
  if (r.kind === 'approval') {
    const { kind, requestId, agentId, toolUseId, toolName, input, inputDigest, plan, deadline, onTimeout, openedAt } = r;
    return { kind, requestId, agentId, toolUseId, toolName, input, inputDigest, plan, deadline, onTimeout, openedAt };
  }
  return {
    kind: 'clarification',
    requestId: r.requestId,
    agentId: r.agentId,
    toolUseId: r.toolUseId,
    questions: r.questions,
    context: r.context,
    ...(r.options ? { options: r.options } : {}),
    ...(r.deadline ? { deadline: r.deadline } : {}),
    openedAt: r.openedAt,
  };
}

export function toTaskView(s: TaskState): TaskView {
  if (s.status === 'none') throw new Error('toTaskView: the task does not exist');
  return {
    id: s.id,
    status: s.status,
    prompt: s.prompt,
    team: s.team,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    version: s.version,
    requirePlanApproval: s.requirePlanApproval,
    approvalTimeoutSeconds: s.approvalTimeoutSeconds,
    metadata: s.metadata,
    forkedFrom: s.forkedFrom,
    workspace: s.workspace,
    pendingRequests: Object.values(s.pendingRequests).map(toPendingRequestView),
    agents: Object.values(s.agents).map((a) => ({
      id: a.id,
      type: a.type,
      status: a.status,
      turns: a.turns,
      filesCreated: a.filesCreated,
      filesModified: a.filesModified,
      usage: { ...a.usage, costUsd: Math.round(a.usage.costUsd * 1e6) / 1e6 },
      ...(a.summary !== null ? { summary: a.summary } : {}),
      ...(a.error ? { error: a.error } : {}),
    })),
    usage: { ...s.usage, costUsd: Math.round(s.usage.costUsd * 1e6) / 1e6 },
    artifacts: s.artifacts.map(({ path, bytes, sha256, mediaType, agentId }) => ({ path, bytes, sha256, mediaType, agentId })),
    result: s.result ? { summary: s.result.summary, ...(s.result.reportPath ? { reportPath: s.result.reportPath } : {}) } : null,
    error: s.error,
  };
}

/** The event object of API.md. */
export interface EventView {
  id: string;
  type: string;
  taskId: string;
  streamId: string;
  version: number;
  position: number;
  recordedAt: string;
  data: unknown;
  metadata: unknown;
}

export function toEventView(e: RecordedEvent): EventView {
  return {
    id: e.id,
    type: e.type,
    taskId: e.taskId,
    streamId: e.streamId,
    version: e.version,
    position: Number(e.position),
    recordedAt: e.recordedAt.toISOString(),
    data: e.data,
    metadata: e.metadata,
  };
}
