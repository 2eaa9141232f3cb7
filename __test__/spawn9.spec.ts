// 2026.9 sessions_spawn options through the real addon (issue 14): sandbox: 'require' against
// the agents' sandbox modes, lightContext on the child's run, thread / mode: 'session' through
// the host's bindThread, and completionTarget: 'parent' (a private requester turn). The
// fine-grained cases run in cargo test with a fake host (src/orchestrate/spawn9_opts_tests.rs).
import { describe, expect, it } from 'vitest'

import type { AgentRunRequest } from '../index.js'
import { openMem, SessionTools, until } from './helpers'

const MAIN = { agentSessionKey: 'agent:main:main', agentChannel: 'discord', agentTo: 'channel:7' }
const REQUIRE = 'sessions_spawn sandbox="require" needs a sandboxed target runtime. Pick a sandboxed agentId or use sandbox="inherit".'
const SANDBOXED = 'Sandboxed sessions cannot spawn unsandboxed subagents. Set a sandboxed target agent or use the same agent runtime.'
const NO_THREAD =
  'thread=true is only available on channels that expose thread bindings (e.g. Discord threads, Slack threads, Telegram forum topics). This request is not running on a channel that can bind a subagent thread. Retry without thread=true, or re-run sessions_spawn from a channel that supports threads.'
const NO_SESSION_THREAD =
  'sessions_spawn(mode="session") is only available on channels that expose thread bindings (e.g. Discord threads, Slack threads, Telegram forum topics). This request is not running on a channel that can bind a subagent thread. Use mode="run" for one-shot subagent work.'

async function spawn(st: SessionTools, args: unknown, ctx: unknown = MAIN): Promise<any> {
  const r: any = await st.executeTool('sessions_spawn', args, ctx as any)
  return r.details
}

function host(requests: AgentRunRequest[]) {
  return async (req: AgentRunRequest) => {
    requests.push(req)
    return { reply: req.lane === 'subagent' ? 'child done' : 'ok' }
  }
}

const AGENTS = {
  agents: {
    ownership: 'explicit',
    defaults: { subagents: { allowAgents: ['*'] } },
    entries: { main: { default: true }, box: { sandbox: { mode: 'all' } } },
  },
}

describe('sessions_spawn options (2026.9)', () => {
  it('sandbox: require wants a sandboxed target agent; a sandboxed caller only spawns sandboxed children; a refusal names the agent as role', async () => {
    const requests: AgentRunRequest[] = []
    const st = await openMem(AGENTS, { contract: '2026.9', runAgent: host(requests) } as any)
    expect(await spawn(st, { task: 't', sandbox: 'require' })).toEqual({ status: 'forbidden', error: REQUIRE })
    expect((await spawn(st, { task: 't', sandbox: 'require', agentId: 'box' })).status).toBe('accepted')
    expect(await spawn(st, { task: 't', agentId: 'main' }, { ...MAIN, sandboxed: true })).toEqual({ status: 'forbidden', error: SANDBOXED, role: 'main' })
    await st.close()
  })

  it('lightContext reaches the child run request', async () => {
    const requests: AgentRunRequest[] = []
    const st = await openMem(null, { contract: '2026.9', runAgent: host(requests) } as any)
    await spawn(st, { task: 'light', lightContext: true })
    await until(() => requests.some((r) => r.lane === 'subagent'))
    expect(requests.find((r) => r.lane === 'subagent')!.lightContext).toBe(true)
    await st.close()
  })

  it('given no bindThread when a spawn asks for a thread then it is refused with the 2026.9 texts and leaves nothing behind', async () => {
    const st = await openMem(null, { contract: '2026.9', runAgent: host([]) } as any)
    const out = await spawn(st, { task: 't', thread: true, mode: 'run' })
    expect(out.error).toBe(NO_THREAD)
    expect(await st.getSession(out.childSessionKey)).toBeNull()
    expect((await spawn(st, { task: 't', thread: true })).error).toBe(NO_SESSION_THREAD)
    await st.close()
  })

  it('given bindThread when a session-mode child is spawned then it runs on the bound thread, delivers there itself and is not handed back', async () => {
    const requests: AgentRunRequest[] = []
    const binds: any[] = []
    const st = await openMem(null, {
      contract: '2026.9',
      runAgent: host(requests),
      bindThread: async (req: any) => {
        binds.push(req)
        if (req.label === 'nope') throw new Error('no permission')
        return { to: 'channel:99', threadId: '99' }
      },
    } as any)
    const out = await spawn(st, { task: 'stay around', thread: true, context: 'isolated' })
    expect(out).toMatchObject({ status: 'accepted', mode: 'session', expectsCompletionMessage: false, context: 'isolated' })
    expect(out.note).toMatch(/^The final reply is delivered directly to the bound thread.*persistent and remains available/)
    expect(binds[0]).toMatchObject({ childSessionKey: out.childSessionKey, mode: 'session', requesterSessionKey: 'agent:main:main', requester: { channel: 'discord', to: 'channel:7' } })
    await until(() => requests.some((r) => r.lane === 'subagent'))
    expect(requests.find((r) => r.lane === 'subagent')).toMatchObject({ deliver: true, channel: 'discord', to: 'channel:99', threadId: '99' })
    const run: any = await until(async () => (await st.listSubagentRuns()).find((r: any) => r.cleanupCompletedAt))
    expect(run.announce.status).toBe('skipped')
    expect(requests.filter((r) => r.lane === 'announce')).toEqual([])
    expect((await spawn(st, { task: 't', thread: true, label: 'nope', context: 'isolated' })).error).toBe('Thread bind failed: no permission')
    await st.close()
  })

  it('given a thread bound for a spawn when a later step fails then the binding is released through unbindThread', async () => {
    const unbinds: any[] = []
    const st = await openMem({ tools: { sessions_spawn: { attachments: { enabled: true } } } } as any, {
      contract: '2026.9',
      runAgent: host([]),
      bindThread: async () => ({ to: 'channel:99', threadId: '99' }),
      unbindThread: async (req: any) => void unbinds.push(req),
    } as any)
    const out = await spawn(st, { task: 't', thread: true, attachments: [{ name: 'a.md', content: 'abc' }] })
    expect(out.error).toBe('attachments_materialization_failed (no stageAttachments callback is configured)')
    expect(unbinds).toHaveLength(1)
    expect(unbinds[0]).toEqual({ targetSessionKey: unbinds[0].targetSessionKey, reason: 'session-delete' })
    expect(unbinds[0].targetSessionKey).toMatch(/^agent:main:subagent:/)
    expect(await st.getSession(unbinds[0].targetSessionKey)).toBeNull()
    await st.close()
  })

  it('given context fork to another agent then the spawn answers an error naming the child, and leaves nothing behind', async () => {
    const st = await openMem(AGENTS as any, { contract: '2026.9', runAgent: host([]) } as any)
    const out = await spawn(st, { task: 't', context: 'fork', agentId: 'box' })
    expect(out).toEqual({
      status: 'error',
      error: 'context="fork" currently requires the same target agent as the requester; use context="isolated" for cross-agent spawns.',
      childSessionKey: out.childSessionKey,
      role: 'box',
    })
    expect(out.childSessionKey).toMatch(/^agent:box:subagent:/)
    expect(await st.getSession(out.childSessionKey)).toBeNull()
    await st.close()
  })

  it('given completionTarget parent when the child ends then the requester gets a private turn delivered nowhere', async () => {
    const requests: AgentRunRequest[] = []
    const st = await openMem(null, { contract: '2026.9', runAgent: host(requests) } as any)
    expect((await spawn(st, { task: 't', completionTarget: 'parent' })).error).toBe(
      'Private completion requires an existing requester session. Retry from an active session.',
    )
    await st.upsertSession('agent:main:main', { sessionId: 's-main' })
    const out = await spawn(st, { task: 'quiet work', completionTarget: 'parent' })
    expect(out).toMatchObject({ status: 'accepted', completionTarget: 'parent', mode: 'run', expectsCompletionMessage: true })
    await until(() => requests.some((r) => r.lane === 'announce'))
    const turn = requests.find((r) => r.lane === 'announce')!
    expect(turn.deliver).toBe(false)
    expect(turn.channel).toBeUndefined()
    expect(turn.message).toContain('Process this result privately.')
    await st.close()
  })
})

describe('sessions_spawn attachments (2026.9)', () => {
  const ON = { tools: { sessions_spawn: { attachments: { enabled: true } } } }
  const FILE = [{ name: 'notes.md', content: 'YWJj', encoding: 'base64', mimeType: 'text/markdown' }]

  it('given attachments switched off when a spawn carries one then it is forbidden with the gateway text', async () => {
    const st = await openMem(null, { contract: '2026.9', runAgent: host([]) } as any)
    expect(await spawn(st, { task: 't', attachments: FILE })).toEqual({
      status: 'forbidden',
      error: 'attachments are disabled for sessions_spawn (enable tools.sessions_spawn.attachments.enabled)',
    })
    await st.close()
  })

  it('given stageAttachments when a spawn carries files then the host gets them decoded once, the child sees their paths and the spawn a receipt', async () => {
    const requests: AgentRunRequest[] = []
    const staged: any[] = []
    const st = await openMem(ON, {
      contract: '2026.9',
      runAgent: host(requests),
      stageAttachments: async (req: any) => {
        staged.push(req)
        return { dir: `/var/stage/${req.attachmentId}` }
      },
    } as any)
    const out = await spawn(st, { task: 'read it', attachments: FILE })
    expect(out.status).toBe('accepted')
    const id = staged[0].attachmentId
    expect(staged[0].files).toEqual([
      { name: 'notes.md', mimeType: 'text/markdown', bytes: 3, sha256: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad', contentBase64: 'YWJj' },
    ])
    expect(out.attachments).toEqual({ count: 1, totalBytes: 3, files: [{ name: 'notes.md', bytes: 3, sha256: staged[0].files[0].sha256 }], relDir: `.openclaw/attachments/${id}` })
    await until(() => requests.some((r) => r.lane === 'subagent'))
    expect(requests.find((r) => r.lane === 'subagent')!.extraSystemPrompt).toContain(`<untrusted-text>\n/var/stage/${id}/notes.md\n</untrusted-text>`)
    expect(await spawn(st, { task: 't', attachments: [{ name: '../x', content: 'a' }] })).toEqual({ status: 'error', error: 'attachments_invalid_name' })
    await st.close()
  })
})

describe('sessions_send watch (2026.9)', () => {
  it('given watch: true when a human later writes in the target then the watcher gets a session.changed notice to queue', async () => {
    const events: any[] = []
    const st = await openMem(null, { contract: '2026.9', runAgent: host([]), onEvent: (ev: any) => events.push(ev) } as any)
    const target = 'agent:main:whatsapp:dm:+1555'
    const r: any = await st.executeTool('sessions_send', { sessionKey: target, message: 'watch this', timeoutSeconds: 0, watch: true }, { agentSessionKey: 'agent:main:main' })
    expect(r.details.watched).toBe(true)
    await st.appendMessages(target, [{ role: 'user', content: 'a human writes' }])
    const notice = await until(() => events.find((e) => e.type === 'session.changed'))
    expect(notice).toMatchObject({
      sessionKey: 'agent:main:main',
      targetSessionKey: target,
      sequence: 1,
      lastSeenSequence: 0,
      wake: true,
      text: `Session "${target}" changed (other actor). Reconcile before acting: session_status sessionKey "${target}" changesSince 0.`,
    })
    // a second change before the watcher's turn took the notice in still reports change 0
    await st.appendMessages(target, [{ role: 'user', content: 'and again' }])
    const second = await until(() => events.filter((e) => e.type === 'session.changed')[1])
    expect([second.sequence, second.lastSeenSequence]).toEqual([2, 0])
    // the host hands the notice to the watcher's turn: acknowledged, and change 2 is told again
    expect(await st.acknowledgeWatchNotices('agent:main:main', [target])).toEqual({ acknowledged: 1, followUps: 1 })
    const follow = await until(() => events.filter((e) => e.type === 'session.changed')[2])
    expect(follow).toMatchObject({ sessionKey: 'agent:main:main', targetSessionKey: target, sequence: 2, lastSeenSequence: 1 })
    expect(follow.text).toMatch(/changesSince 1\.$/)
    expect(await st.acknowledgeWatchNotices('agent:main:main', [target])).toEqual({ acknowledged: 1, followUps: 0 })
    await expect(st.acknowledgeWatchNotices('agent:main:main', 'x' as any)).rejects.toMatchObject({ code: 'INVALID_REQUEST' })
    await st.close()
  })
})
