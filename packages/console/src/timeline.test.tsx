import type { EventView, TaskView } from '@baton/api';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { Timeline, TIMELINE_PAGE } from '../ui/Timeline.tsx';

const taskId = '0b7c3f3e-4a51-4f4e-9d55-2d8f6f1c0a11';
const turn = (i: number): EventView => ({
  id: `e${i}`, type: 'ModelTurnRecorded', taskId, streamId: `task-${taskId}`, version: i, position: i, recordedAt: '2026-11-28T10:00:00.000Z',
  data: { agentId: 'lead', turn: i, content: [{ type: 'text', text: `turn ${i}` }], stopReason: 'end_turn' }, metadata: {},
});

describe('Timeline', () => {
  it(`shows the newest ${TIMELINE_PAGE} entries of a long run and says how many earlier ones are not shown (20,000 events had made 140,000 nodes)`, () => {
    const events = Array.from({ length: 1200 }, (_, i) => turn(i + 1));
    const task = { id: taskId, version: 1200, status: 'completed', agents: [], pendingRequests: [], artifacts: [] } as unknown as TaskView;
    const html = renderToStaticMarkup(<Timeline task={task} events={events} />);
    expect(html.match(/<li /g)).toHaveLength(TIMELINE_PAGE);
    expect(html).toContain('700 earlier entries not shown');
    expect(html).toContain(`show ${TIMELINE_PAGE} earlier`);
    expect(html).toContain('turn 1200');
    expect(html).not.toContain('turn 700<');
    const short = renderToStaticMarkup(<Timeline task={task} events={events.slice(0, 10)} />);
    expect(short.match(/<li /g)).toHaveLength(10);
    expect(short).not.toContain('not shown');
  });
});
