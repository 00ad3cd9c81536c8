import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { describe, expect, inject, it } from 'vitest';
import { newNamespace } from './fixtures.ts';
import { deleteNamespace, namespaceStreams } from './namespaces.ts';

describe('test namespaces on the shared NATS server', () => {
  it("newNamespace carries the run's id, so the run's teardown can find what its tests left", () => {
    const ns = newNamespace();
    expect(ns).toMatch(new RegExp(`^t${inject('runId')}[0-9a-f]{6}$`));
    expect(ns.length).toBeLessThanOrEqual(20);
    expect(newNamespace()).not.toBe(ns);
  });

  it('deleteNamespace deletes every stream (with its consumers) and KV bucket of that namespace, and nothing of another', async () => {
    const nc = await connect({ servers: inject('natsUrl') });
    const mine = newNamespace();
    const other = newNamespace();
    try {
      const jsm = await jetstreamManager(nc);
      for (const ns of [mine, other]) {
        const suffix = ns.toUpperCase();
        await jsm.streams.add({ name: `BATON_EVENTS_${suffix}`, subjects: [`${ns}.baton.events.>`] });
        await jsm.streams.add({ name: `BATON_JOBS_${suffix}`, subjects: [`${ns}.baton.jobs.>`] });
        await jsm.consumers.add(`BATON_EVENTS_${suffix}`, { durable_name: 'orchestrator-task-events', ack_policy: 'explicit' as never });
        // A KV bucket is a stream named KV_<bucket> (what @nats-io/kv would create).
        await jsm.streams.add({ name: `KV_views_${ns}`, subjects: [`$KV.views_${ns}.>`], max_msgs_per_subject: 1 });
      }
      const of = async (ns: string) => (await namespaceStreams(jsm, (s) => s === ns)).sort();
      expect(await of(mine)).toEqual([`BATON_EVENTS_${mine.toUpperCase()}`, `BATON_JOBS_${mine.toUpperCase()}`, `KV_views_${mine}`]);

      expect((await deleteNamespace(inject('natsUrl'), mine)).sort()).toEqual([`BATON_EVENTS_${mine.toUpperCase()}`, `BATON_JOBS_${mine.toUpperCase()}`, `KV_views_${mine}`]);
      expect(await of(mine)).toEqual([]);
      expect(await of(other)).toHaveLength(3); // untouched

      expect(await deleteNamespace(nc, other)).toHaveLength(3); // with a connection of the caller's, left open
      expect(await of(other)).toEqual([]);
      expect(nc.isClosed()).toBe(false);
    } finally {
      await deleteNamespace(nc, mine);
      await deleteNamespace(nc, other);
      await nc.close();
    }
  });
});
