import { describe, expect, it } from 'vitest';
import { digestJson } from '@baton/domain';
import { approvalFor, ApprovalPolicy, askPerson } from './policy.ts';
import { allTools } from './tools.ts';

const task = (requirePlanApproval: boolean) => ({ requirePlanApproval });
const Task = allTools.Task!;
const write = allTools.write_file!;
const ask = allTools.ask_user!;
const mail = allTools.send_email!;

describe('approval policy', () => {
  it('default: delegation needs approval when the task asks for plan approval; nothing else does', () => {
    expect(approvalFor(undefined, task(true), 'research-lead', Task)).toEqual({ required: true, onTimeout: 'reject' });
    expect(approvalFor(undefined, task(false), 'research-lead', Task).required).toBe(false);
    expect(approvalFor(undefined, task(true), 'researcher', write).required).toBe(false);
  });
  it('rules per tool, per agent and per agent+tool; the most specific wins', () => {
    const rules = ApprovalPolicy.parse([
      { tool: 'write_file', require: 'always' },
      { agent: 'report-writer', tool: 'write_file', require: 'never' },
      { agent: 'research-lead', require: 'never' },
      { tool: 'Task', require: 'always', onTimeout: 'approve' },
    ]);
    expect(approvalFor(rules, task(false), 'researcher', write)).toEqual({ required: true, onTimeout: 'reject' });
    expect(approvalFor(rules, task(false), 'report-writer', write).required).toBe(false);
    expect(approvalFor(rules, task(false), 'research-lead', Task)).toEqual({ required: true, onTimeout: 'approve' }); // tool rule beats agent rule
  });
  it('send_email needs approval by default, whatever the task says; a team may waive it for the tool or the agent', () => {
    expect(approvalFor(undefined, task(false), 'email-agent', mail)).toEqual({ required: true, onTimeout: 'reject' });
    expect(approvalFor(ApprovalPolicy.parse([{ tool: 'send_email', require: 'never' }]), task(true), 'email-agent', mail).required).toBe(false);
    expect(approvalFor(ApprovalPolicy.parse([{ agent: 'email-agent', require: 'never' }]), task(true), 'email-agent', mail).required).toBe(false);
    expect(approvalFor(ApprovalPolicy.parse([{ agent: 'researcher', require: 'never' }]), task(true), 'email-agent', mail).required).toBe(true);
  });
  it('ask_user never needs approval; a bad rule is rejected naming the field', () => {
    expect(approvalFor([{ require: 'always', onTimeout: 'reject' }], task(true), 'researcher', ask).required).toBe(false);
    expect(() => ApprovalPolicy.parse([{ tool: 'x', require: 'sometimes' }])).toThrow(/require/);
    expect(() => ApprovalPolicy.parse([{ tool: 'x', require: 'always', typo: 1 }])).toThrow(/typo/);
  });
  it('askPerson: ask_user opens a clarification with its parsed questions; any other tool an approval of its exact input', () => {
    const base = { requestId: 'r', agentId: 'a', deadline: '2026-01-01T00:00:00.000Z', plan: 'the plan', onTimeout: 'approve' as const };
    expect(askPerson({ ...base, tool: ask, call: { id: 't1', name: 'ask_user', input: { questions: ['Q?'] } }, parsed: { questions: ['Q?'], context: '' } })).toEqual({
      type: 'RequestClarification', requestId: 'r', agentId: 'a', toolUseId: 't1', questions: ['Q?'], context: '', deadline: base.deadline,
    });
    const input = { path: 'a.md', content: 'x' };
    expect(askPerson({ ...base, tool: write, call: { id: 't2', name: 'write_file', input }, parsed: input })).toEqual({
      type: 'RequestApproval', requestId: 'r', agentId: 'a', toolUseId: 't2', toolName: 'write_file', input, inputDigest: digestJson(input), plan: 'the plan', deadline: base.deadline, onTimeout: 'approve',
    });
  });
});
