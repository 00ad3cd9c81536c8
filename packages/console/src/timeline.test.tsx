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

  it("offers no fork from a task's final event or after it, and shows a fork's copied history at its source's times, marked as copied", () => {
    const events: EventView[] = [turn(1), turn(2), { ...turn(3), id: 'end', type: 'TaskCompleted', data: { summary: 'done' } }, { ...turn(4), id: 'mail', type: 'EmailSent', data: { emailId: 'm', accepted: ['a@example.com'] } }];
    const task = { id: taskId, version: 4, status: 'completed', agents: [], pendingRequests: [], artifacts: [] } as unknown as TaskView;
    const html = renderToStaticMarkup(<Timeline task={task} events={events} />);
    expect([...html.matchAll(/fork from here, version (\d+)/g)].map((m) => Number(m[1]))).toEqual([1, 2]);
    const copied = { ...turn(1), recordedAt: '2026-11-28T12:00:00.000Z', metadata: { copiedFrom: 'e0', copiedRecordedAt: '2026-11-28T09:30:00.000Z' } };
    const fork = renderToStaticMarkup(<Timeline task={{ ...task, version: 2, status: 'running' } as unknown as TaskView} events={[copied, turn(2)]} />);
    expect(fork).toContain('<time dateTime="2026-11-28T09:30:00.000Z">');
    expect(fork).toMatch(/<span class="badge">copied<\/span>/);
    expect(fork.match(/copied<\/span>/g)).toHaveLength(1);
  });
});

