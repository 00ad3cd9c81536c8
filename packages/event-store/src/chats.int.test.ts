import { randomUUID } from 'node:crypto';
import type { NewChatEvent } from '@baton/domain';
import { pgTest as test } from '@baton/testing';
import { describe, expect } from 'vitest';
import { appendChatEvents, listChats, loadChat, recordChat } from './chats.ts';
import { ConcurrencyError } from './errors.ts';

const started = (tenantId = 'default'): NewChatEvent => ({ id: randomUUID(), type: 'ChatStarted', data: { tenantId, team: 'research', startedBy: 'me' } });
const said = (text: string): NewChatEvent => ({ id: randomUUID(), type: 'UserMessageRecorded', data: { text, author: 'me' } });

describe('chat_events', () => {
  test('appends at the expected version, reads back folded; a stale version is a ConcurrencyError and writes nothing', async ({ pg }) => {
    const chatId = randomUUID();
    const first = await appendChatEvents(pg.db.pool, chatId, 'default', 0, [started(), said('hello')]);
    expect(first.map((e) => [e.version, e.type])).toEqual([[1, 'ChatStarted'], [2, 'UserMessageRecorded']]);
    await expect(appendChatEvents(pg.db.pool, chatId, 'default', 1, [said('stale')])).rejects.toBeInstanceOf(ConcurrencyError);
    await expect(appendChatEvents(pg.db.pool, chatId, 'default', 5, [said('ahead')])).rejects.toBeInstanceOf(ConcurrencyError);
    const { state, events } = await loadChat(pg.db.pool, chatId);
    expect(events).toHaveLength(2);
    expect(state).toMatchObject({ tenantId: 'default', team: 'research', version: 2, messages: [{ role: 'user', text: 'hello' }] });
    // Nothing of a chat is in the task log.
    expect((await pg.db.pool.query('select count(*)::int as n from events')).rows[0].n).toBe(0);
  });

  test('two appends at one version: one wins, the other conflicts; recordChat re-reads and lands after it', async ({ pg }) => {
    const chatId = randomUUID();
    await appendChatEvents(pg.db.pool, chatId, 'default', 0, [started()]);
    const results = await Promise.allSettled([1, 2, 3, 4].map((i) => appendChatEvents(pg.db.pool, chatId, 'default', 1, [said(`racer ${i}`)])));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(results.filter((r) => r.status === 'rejected').every((r) => (r as PromiseRejectedResult).reason instanceof ConcurrencyError)).toBe(true);
    const recorded = await Promise.all([1, 2, 3].map((i) => recordChat(pg.db.pool, chatId, (_s, newId) => [{ id: newId(), type: 'UserMessageRecorded', data: { text: `retried ${i}`, author: 'me' } }])));
    expect(recorded.map((r) => r.recorded[0]!.version).sort()).toEqual([3, 4, 5]);
    expect((await loadChat(pg.db.pool, chatId)).state.version).toBe(5);
  });

  test('data is validated before it is written (the field named); rows cannot be changed or deleted', async ({ pg }) => {
    const chatId = randomUUID();
    await expect(appendChatEvents(pg.db.pool, chatId, 'default', 0, [{ id: randomUUID(), type: 'UserMessageRecorded', data: { text: '', author: 'me' } }])).rejects.toThrow(/text/);
    await recordChat(pg.db.pool, chatId, (_s, newId) => [{ ...started(), id: newId() }]);
    await expect(pg.db.pool.query('update chat_events set type = $1', ['X'])).rejects.toThrow(/append-only/);
    await expect(pg.db.pool.query('delete from chat_events')).rejects.toThrow(/append-only/);
    await expect(recordChat(pg.db.pool, randomUUID(), () => [said('no chat')])).rejects.toThrow(/first event must be ChatStarted/);
  });

  test('listChats: a tenant\'s chats, the most recently active first', async ({ pg }) => {
    const [a, b, other] = [randomUUID(), randomUUID(), randomUUID()];
    await appendChatEvents(pg.db.pool, a, 't1', 0, [started('t1'), said('first chat')]);
    await appendChatEvents(pg.db.pool, other, 't2', 0, [started('t2'), said('not yours')]);
    await appendChatEvents(pg.db.pool, b, 't1', 0, [started('t1'), said('second chat')]);
    await appendChatEvents(pg.db.pool, a, 't1', 2, [said('back to the first')]);
    const { items: rows, nextCursor } = await listChats(pg.db.pool, 't1', 10);
    expect(rows.map((r) => [r.id, r.firstMessage, r.messages, r.version])).toEqual([[a, 'first chat', 2, 3], [b, 'second chat', 1, 2]]);
    expect(nextCursor).toBeNull();
    const first = await listChats(pg.db.pool, 't1', 1);
    expect(first.items.map((r) => r.id)).toEqual([a]);
    const second = await listChats(pg.db.pool, 't1', 1, first.nextCursor!);
    expect(second).toMatchObject({ items: [expect.objectContaining({ id: b })], nextCursor: null });
  });

  test('listChats pages through every chat once, also chats whose last activity falls in the same millisecond (the cursor keeps microseconds)', async ({ pg }) => {
    const tenant = `t-${randomUUID()}`;
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const id = randomUUID();
      ids.push(id);
      await appendChatEvents(pg.db.pool, id, tenant, 0, [started(tenant), said(`chat ${i}`)]);
    }
    // Their times a few microseconds apart, all within one millisecond.
    await pg.db.pool.query(`alter table chat_events disable trigger user`);
    try {
      await pg.db.pool.query(`update chat_events set recorded_at = '2026-11-28T10:00:00.123Z'::timestamptz + make_interval(secs => (array_position($2::uuid[], chat_id) * 7) / 1e6) where tenant_id = $1`, [tenant, ids]);
    } finally {
      await pg.db.pool.query(`alter table chat_events enable trigger user`);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const page = await listChats(pg.db.pool, tenant, 2, cursor);
      seen.push(...page.items.map((r) => r.id));
      if (!page.nextCursor) break;
      cursor = page.nextCursor;
    }
    expect(seen).toEqual([...ids].reverse());
  });
});
