// The 2026.9 orchestration tools through the real addon (issue 14): sessions_yield (persisted,
// resumed when the claimed children have delivered, across a restart) and subagents (list, wait,
// cancel, the ownership refusals, task ids stable across a restart). The fine-grained cases run in
// cargo test with a fake host (src/orchestrate/yields_tests.rs, tasks_tests.rs).
import path from 'node:path'
import { describe, expect, it } from 'vitest'

import type { AgentRunRequest, SessionToolsEvent } from '../index.js'
import { openMem, SessionTools, tmpDir, track, until } from './helpers'

const MAIN = { agentSessionKey: 'agent:main:main', agentChannel: 'whatsapp', agentTo: '+15550001' }
const CONTEXT_LINE = '[Context: The previous turn ended intentionally via sessions_yield while waiting for a follow-up event.]'
const NO_CLAIM =
  'No pending child completion is owned by this turn. If the assigned work is complete, return its result normally. An unfinished subagent waiting for an incoming continuation must explicitly set waitFor: "message".'

/** A host whose child runs wait until `release()` unless their task says `quick`. */
function gatedHost(requests: AgentRunRequest[]) {
  let open!: () => void
  const gate = new Promise<void>((r) => (open = r))
  const runAgent = async (req: AgentRunRequest) => {
    requests.push(req)
    if (req.lane === 'subagent' && !req.message.includes('quick')) await gate
    return { reply: req.lane === 'subagent' ? 'child done' : 'ok' }
  }
  return { runAgent, release: () => open() }
}

async function tool(st: SessionTools, name: string, args: unknown, ctx: unknown = MAIN): Promise<any> {
  const r: any = await st.executeTool(name, args, ctx as any)
  return r.details
}

async function open9(extra: Record<string, unknown> = {}) {
  return openMem(null, { contract: '2026.9', ...extra } as any)
}

describe('sessions_yield (2026.9)', () => {
  it('refuses with the gateway texts: waitFor, no session, no claim, cron, no runAgent, deferred', async () => {
    const requests: AgentRunRequest[] = []
    const st = await open9({ runAgent: gatedHost(requests).runAgent })
    expect(await tool(st, 'sessions_yield', { waitFor: 'children' })).toEqual({ status: 'error', error: 'waitFor must be "message" when provided.' })
    expect(await tool(st, 'sessions_yield', {}, {})).toEqual({ status: 'error', error: 'No session context' })
    expect(await tool(st, 'sessions_yield', {})).toEqual({ status: 'error', error: NO_CLAIM })
    expect((await tool(st, 'sessions_yield', {}, { agentSessionKey: 'agent:main:cron:nightly' })).error).toMatch(/^Isolated automation turns cannot use sessions_yield/)
    expect(await tool(st, 'sessions_yield', {}, { ...MAIN, hasUnobservedAsyncToolResults: true })).toEqual({
      status: 'deferred',
      message: 'Earlier async tool results are still being delivered. Finish this response to receive them, then yield again only if external work still requires waiting.',
    })
    expect(await tool(st, 'sessions_yield', { waitFor: 'message' }, { agentSessionKey: 'agent:main:subagent:a' })).toEqual({ status: 'yielded' })
    const bare = await open9()
    expect(await tool(bare, 'sessions_yield', {})).toEqual({ status: 'error', error: 'Yield not supported in this context' })
  })

  it('given two children when the turn yields then each completion reaches the requester and one resume turn follows with the private message', async () => {
    const requests: AgentRunRequest[] = []
    const host = gatedHost(requests)
    const events: SessionToolsEvent[] = []
    const st = await open9({ runAgent: host.runAgent, onEvent: (e: SessionToolsEvent) => void events.push(e) })
    await st.sessionsSpawn({ task: 'first' }, MAIN)
    await st.sessionsSpawn({ task: 'second' }, MAIN)
    expect(await tool(st, 'sessions_yield', { message: 'compare both', acknowledgment: 'Working on it.' })).toEqual({
      status: 'yielded',
      acknowledgment: 'Working on it.',
    })
    const again = await tool(st, 'sessions_yield', {})
    expect(again.status).toBe('already_pending')
    expect(again.pendingChildren).toHaveLength(2)
    expect(again.pendingChildren[0]).toMatchObject({ state: 'running', wakeArmed: true })
    expect(again.message).toMatch(/^An earlier turn of this session already yielded for 2 child sessions whose completion is still pending: /)

    host.release()
    const resume = await until(() => requests.find((r) => r.message.endsWith(CONTEXT_LINE)))
    expect(resume.message).toBe(`compare both\n\n${CONTEXT_LINE}`)
    expect(resume).toMatchObject({ sessionKey: 'agent:main:main', channel: 'whatsapp', to: '+15550001', deliver: true })
    const onRequester = requests.filter((r) => r.sessionKey === 'agent:main:main')
    expect(onRequester.at(-1)).toBe(resume)
    expect(onRequester).toHaveLength(3) // two completions, then the resume
    await until(() => events.some((e) => e.type === 'session.resumed'))
    expect(events.filter((e) => e.type === 'session.yielded')).toHaveLength(1)
  })

  it('given a yield waiting when the store closes then the next open delivers the interrupted child and resumes the requester', async () => {
    const db = path.join(tmpDir(), 'sessions.db')
    const first: AgentRunRequest[] = []
    const st1 = await SessionTools.open({ path: db, contract: '2026.9', runAgent: gatedHost(first).runAgent } as any)
    await st1.sessionsSpawn({ task: 'long job' }, MAIN)
    expect((await tool(st1, 'sessions_yield', { message: 'carry on' })).status).toBe('yielded')
    await st1.close()

    const second: AgentRunRequest[] = []
    track(await SessionTools.open({ path: db, contract: '2026.9', runAgent: async (req: AgentRunRequest) => (second.push(req), { reply: 'ok' }) } as any))
    const resume = await until(() => second.find((r) => r.message.endsWith(CONTEXT_LINE)))
    expect(resume.message).toBe(`carry on\n\n${CONTEXT_LINE}`)
    expect(second.filter((r) => r.lane === 'announce' && r.message.includes('long job'))).toHaveLength(1)
  })
})

describe('subagents (2026.9)', () => {
  it('lists the tree with stable task ids, waits, and cancels without announcing', async () => {
    const requests: AgentRunRequest[] = []
    const host = gatedHost(requests)
    const aborted: string[][] = []
    const st = await open9({ runAgent: host.runAgent, abortRun: (runId: string, reason: string) => void aborted.push([runId, reason]) })
    const slow: any = await st.sessionsSpawn({ task: 'index the repo', label: 'indexer' }, MAIN)
    const quick: any = await st.sessionsSpawn({ task: 'quick check' }, MAIN)
    await until(async () => (await st.listSubagentRuns()).some((r: any) => r.runId === quick.runId && r.announce.status === 'delivered'))

    const list = await tool(st, 'subagents', {})
    expect(list).toMatchObject({ status: 'ok', action: 'list', requesterSessionKey: 'agent:main:main', callerSessionKey: 'agent:main:main', callerIsSubagent: false, total: 2, taskTotal: 2 })
    expect(list.tasks.map((t: any) => [t.status, t.deliveryStatus]).sort()).toEqual([
      ['completed', 'delivered'],
      ['running', 'pending'],
    ])
    expect(list.text).toMatch(/^active subagents:\n1\. indexer \(model n\/a, .+\) running - index the repo\n\nrecent \(last 30m\):\n2\. quick check /)
    const slowTask = list.tasks.find((t: any) => t.label === 'indexer').taskId

    const t0 = await tool(st, 'subagents', { action: 'wait', taskIds: [slowTask], timeoutSeconds: 0 })
    expect(t0).toMatchObject({ status: 'ok', action: 'wait', reason: 'timeout', completed: [], attention: [] })
    expect((await tool(st, 'subagents', { action: 'wait', taskIds: [slowTask, 'nope'], timeoutSeconds: 0 })).unavailable).toEqual(['nope'])
    expect((await tool(st, 'subagents', { action: 'wait', taskIds: Array.from({ length: 33 }, (_, i) => `t${i}`) })).error).toBe(
      'subagents wait supports at most 32 taskIds.',
    )
    expect(await tool(st, 'subagents', { action: 'bogus' })).toEqual({ status: 'error', error: 'Unsupported action.' })
    expect(await tool(st, 'subagents', { action: 'cancel', taskId: slowTask }, { agentSessionKey: 'agent:main:other' })).toEqual({
      status: 'forbidden',
      error: 'Task outside session tree.',
    })

    expect(await tool(st, 'subagents', { action: 'cancel', taskId: slowTask })).toEqual({ status: 'cancelled', taskId: slowTask, found: true, cancelled: true })
    expect(await st.waitRun(slow.runId, { timeoutMs: 2000 })).toMatchObject({ status: 'error', error: 'Cancelled by operator.' })
    await until(() => aborted.length === 1)
    expect(aborted[0]).toEqual([slow.runId, 'Cancelled by operator.'])
    host.release()
    await new Promise((r) => setTimeout(r, 100))
    expect(requests.filter((r) => r.lane === 'announce' && r.message.includes('index the repo'))).toHaveLength(0)
    expect((await tool(st, 'subagents', { action: 'cancel', taskId: slowTask })).reason).toBe('Task is already terminal.')
    const after = await tool(st, 'subagents', {})
    expect(after.tasks.find((t: any) => t.taskId === slowTask)).toMatchObject({ status: 'cancelled', error: 'Cancelled by operator.' })
  })

  it('given a cancel made while the child ran when the store is reopened then the task keeps its id and status and nothing is announced', async () => {
    const db = path.join(tmpDir(), 'sessions.db')
    const st1 = await SessionTools.open({ path: db, contract: '2026.9', runAgent: gatedHost([]).runAgent } as any)
    const child: any = await st1.sessionsSpawn({ task: 'slow' }, MAIN)
    const id = (await tool(st1, 'subagents', {})).tasks[0].taskId
    expect((await tool(st1, 'subagents', { action: 'cancel', taskId: id })).status).toBe('cancelled')
    await st1.close()

    const second: AgentRunRequest[] = []
    const st2 = track(await SessionTools.open({ path: db, contract: '2026.9', runAgent: async (req: AgentRunRequest) => (second.push(req), { reply: 'ok' }) } as any))
    await new Promise((r) => setTimeout(r, 200))
    const list = await tool(st2, 'subagents', {})
    expect(list.tasks).toEqual([expect.objectContaining({ taskId: id, status: 'cancelled' })])
    expect(second).toHaveLength(0)
    expect((await st2.listSubagentRuns()).find((r: any) => r.runId === child.runId).announce.status).toBe('skipped')
  })

  it('exists only under the 2026.9 contract', async () => {
    const st = await openMem()
    await expect(st.executeTool('subagents', {}, MAIN)).rejects.toMatchObject({ code: 'INVALID_REQUEST' })
    const names = (await open9()).toolDefinitions(MAIN).map((d: any) => d.name)
    expect(names).toEqual(expect.arrayContaining(['sessions_yield', 'subagents']))
    expect(st.toolDefinitions(MAIN).map((d: any) => d.name)).not.toContain('subagents')
  })
})
