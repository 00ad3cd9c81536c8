import { randomUUID } from 'node:crypto';
import { OfflineModel } from '@baton/agents';
import { createDb, EventStore, handleCommand } from '@baton/event-store';
import { silentLogger } from '@baton/runtime';
import { advanceTask } from './lead.ts';
const db = createDb('postgres://postgres@127.0.0.1:5432/baton_bench', { max: 4 });
const store = new EventStore(db.pool);
const deps = { store, model: new OfflineModel(), now: () => new Date(), log: silentLogger() };
// wrap pool.query to count & time
let nq = 0, tq = 0;
const orig = db.pool.query.bind(db.pool);
(db.pool as any).query = async (...a: any[]) => { const t = performance.now(); nq++; try { return await (orig as any)(...a); } finally { tq += performance.now() - t; } };
for (let r = 0; r < 5; r++) {
  const id = randomUUID();
  await handleCommand(store, id, { type: 'SubmitTask', prompt: 'b', team: 'bench', requirePlanApproval: false, approvalTimeoutSeconds: 600, webhook: null, metadata: {}, tenantId: 'd', requestHash: null, forkedFrom: null });
  nq = 0; tq = 0;
  const t = performance.now();
  await advanceTask(deps, id);
  const total = performance.now() - t;
  console.log(`advance: ${total.toFixed(2)} ms, queries ${nq} taking ${tq.toFixed(2)} ms`);
}
await db.close();
