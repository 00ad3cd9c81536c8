import type { TaskChangeView } from '@baton/api';
import { listExamples, taskChange, taskTree, workspaceArchive } from '@baton/storage';
import type { ZodTypeProvider } from '@fastify/type-provider-zod';
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps } from '../deps.ts';
import { AtQuery, DiffQuery, TaskIdParams } from './schemas.ts';
import { contentDisposition, versionGone, visibleStateAt } from './tasks.ts';

/** Workspaces: the examples a task can start from, and a task's change against its input. */
export const workspaceRoutes = (d: GatewayDeps) => async (app: FastifyInstance) => {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.get('/v1/examples', { schema: { tags: ['workspaces'], summary: 'Example projects a task can start from (workspace: { example })' } }, async () => {
    return { items: await listExamples(d.examplesDir, d.workspaceLimits) };
  });

  // The task's change: its input workspace (empty without one) overlaid with its artifacts, against the input.
  r.get('/v1/tasks/:id/diff', { schema: { params: TaskIdParams, querystring: DiffQuery, tags: ['workspaces'], summary: "The task's change against its input workspace, as a unified diff (?format=json: per-file summary and the patch; ?at=N: the change as it stood after version N of the task stream)" } }, async (req, reply) => {
    const state = await visibleStateAt(d, req, req.params.id, req.query.at);
    const change = await taskChange(d.pool, state).catch(versionGone);
    if (req.query.format === 'json') return change satisfies TaskChangeView;
    return reply.type('text/x-diff; charset=utf-8').send(change.patch);
  });

  // The task's tree as a .tar.gz: what a person takes away (or uploads again as a new task's workspace).
  r.get('/v1/tasks/:id/archive', { schema: { params: TaskIdParams, querystring: AtQuery, tags: ['workspaces'], summary: "The task's files as a .tar.gz: its input workspace with the agents' files over it (?at=N: as they stood after version N of the task stream)" } }, async (req, reply) => {
    const state = await visibleStateAt(d, req, req.params.id, req.query.at);
    const { tree } = await taskTree(d.pool, state).catch(versionGone);
    const name = `task-${state.id.slice(0, 8)}${req.query.at === undefined ? '' : `-v${req.query.at}`}.tar.gz`;
    return reply
      .type('application/gzip')
      .header('content-disposition', contentDisposition('attachment', name))
      .send(workspaceArchive(tree, new Date(state.updatedAt)));
  });
};
