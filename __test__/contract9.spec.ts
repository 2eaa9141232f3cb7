// The 2026.9 contract (OPENCLAW-2026.9.md §1.1, §1.2, §1.5, §1.9, §2): the switch, config as
// 2026.9 writes it, visibility, sessions_list, sessions_history, agents_list and the tool
// definitions. One test per rule, with the gateway's exact texts.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'

import type { GatewayConfig } from '../index.js'
import { SessionTools, assistant, expectReject, expectThrowCode, openMem, tmpDir, toolResult, track, user } from './helpers'

const MAIN = { agentSessionKey: 'agent:main:main' }
const open9 = (config?: GatewayConfig | null) => openMem(config, { contract: '2026.9' })
const list = (st: SessionTools, params: Record<string, unknown> = {}, ctx: object = MAIN) =>
  st.sessionsList(params as any, ctx) as Promise<any>
const history = (st: SessionTools, params: Record<string, unknown>, ctx: object = MAIN) =>
  st.sessionsHistory(params as any, ctx) as Promise<any>
const keys = (r: any) => r.sessions.map((s: any) => s.key)
const at = (n: number) => Date.now() + 3_600_000 - n * 1000

const ROW_FIELDS = new Set([
  'key', 'sessionId', 'agentId', 'kind', 'channel', 'archived', 'pinned', 'label', 'createdActor', 'owner',
  'worktree', 'repositoryWorkspaceId', 'repository', 'execCwd', 'spawnedCwd', 'spawnedWorkspaceDir', 'projectId',
  'workspaceDir', 'group', 'displayName', 'derivedTitle', 'lastMessagePreview', 'parentSessionKey', 'updatedAt',
  'stateVersion', 'model', 'contextTokens', 'totalTokens', 'status', 'abortedLastRun', 'childSessions', 'messages',
])
const RESULT_FIELDS = new Set([
  'count', 'sessions', 'hasMore', 'nextOffset', 'limitApplied', 'truncationReason', 'enrichmentOmitted',
  'sessionLinkRule', 'visibility',
])
const HISTORY_FIELDS = new Set([
  'sessionKey', 'messages', 'truncated', 'droppedMessages', 'contentTruncated', 'contentRedacted', 'bytes',
  'sessionLinkRule', 'offset', 'nextOffset', 'hasMore', 'totalMessages', 'pendingInputs',
])

describe('the contract switch', () => {
  test('without a contract the engine answers as 2026.1', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:main', {})
    const r: any = await st.sessionsList({}, MAIN)
    expect(r.limitApplied).toBeUndefined()
    expect(r.sessions[0].key).toBe('main')
  })

  test('the 2026.9 label, agentId and search filters of sessions_list work under 2026.1 too', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:a', { label: 'alpha' })
    await st.upsertSession('agent:main:b', { displayName: 'Needle Room' })
    await st.upsertSession('agent:main:c', {})
    const keys1 = async (p: object) => ((await st.sessionsList(p as any, MAIN)) as any).sessions.map((s: any) => s.key)
    expect(await keys1({ label: 'alpha' })).toEqual(['agent:main:a'])
    expect(await keys1({ search: 'NEEDLE' })).toEqual(['agent:main:b'])
    expect(await keys1({ agentId: 'ops' })).toEqual([])
  })

  test('contract 2026.9 gives the 2026.9 listing', async () => {
    const st = await open9()
    await st.upsertSession('agent:main:main', {})
    const r = await list(st)
    expect(r.limitApplied).toBe(100)
    expect(r.hasMore).toBe(false)
    expect(r.sessions[0]).toMatchObject({ key: 'agent:main:main', agentId: 'main', kind: 'main', archived: false })
  })

  test('an unknown contract is refused with INVALID_CONFIG', async () => {
    await expectReject(
      SessionTools.open({ path: ':memory:', contract: '2026.5' as any }),
      'INVALID_CONFIG',
      "invalid contract: 2026.5 (use '2026.1' or '2026.9')",
    )
  })

  test('setConfig switches the contract, and keeps it when the option is omitted', async () => {
    const st = await openMem()
    st.setConfig(null, { contract: '2026.9' })
    expect((await list(st)).limitApplied).toBe(100)
    st.setConfig({ tools: { sessions: { visibility: 'agent' } } })
    expect((await list(st)).visibility.mode).toBe('agent')
    st.setConfig(null, { contract: '2026.1' })
    expect((await list(st)).limitApplied).toBeUndefined()
    expectThrowCode(() => st.setConfig(null, { contract: 'x' as any }), 'INVALID_CONFIG')
  })
})

describe('config as 2026.9 writes it', () => {
  test('agents.entries is the roster agents_list reads', async () => {
    const st = await open9({
      agents: {
        ownership: 'explicit',
        entries: { main: { name: 'Main', subagents: { allowAgents: ['*'] } }, research: { name: 'Research' } },
      },
    })
    const r: any = await st.agentsList(MAIN)
    expect(r.agents.map((a: any) => [a.id, a.name, a.configured])).toEqual([
      ['main', 'Main', true],
      ['research', 'Research', true],
    ])
  })

  test('a multi-agent roster without ownership is refused naming agents.ownership', async () => {
    await expectReject(
      open9({ agents: { entries: { a: {}, b: {} } } } as any),
      'INVALID_CONFIG',
      /^invalid config: agents\.ownership must be "explicit"/,
    )
  })

  test('tools.sessions.visibility outside self|tree|agent|all is refused naming the key', async () => {
    await expectReject(
      open9({ tools: { sessions: { visibility: 'spawned' } } } as any),
      'INVALID_CONFIG',
      'invalid config: tools.sessions.visibility must be one of "self", "tree", "agent", "all"',
    )
  })

  test('maxSpawnDepth outside 1-5 is refused naming the key', async () => {
    await expectReject(
      open9({ agents: { defaults: { subagents: { maxSpawnDepth: 6 } } } } as any),
      'INVALID_CONFIG',
      'invalid config: agents.defaults.subagents.maxSpawnDepth must be an integer from 1 to 5',
    )
  })

  test('agent-to-agent is on by default under 2026.9 and off under 2026.1', async () => {
    const st9 = await open9()
    await st9.appendMessages('agent:ops:main', [user('hello')])
    expect((await history(st9, { sessionKey: 'agent:ops:main' })).messages).toHaveLength(1)
    const st1 = await openMem()
    await st1.appendMessages('agent:ops:main', [user('hello')])
    expect(((await st1.sessionsHistory({ sessionKey: 'agent:ops:main' }, MAIN)) as any).status).toBe('forbidden')
  })
})

describe('visibility', () => {
  async function roster(config: GatewayConfig) {
    const st = await open9(config)
    await st.upsertSession('agent:main:main', { updatedAt: at(1) })
    await st.upsertSession('agent:main:telegram:direct:1', { updatedAt: at(2) })
    await st.upsertSession('agent:main:subagent:kid', { spawnedBy: 'agent:main:telegram:direct:1', updatedAt: at(3) })
    await st.upsertSession('agent:ops:main', { updatedAt: at(4) })
    return st
  }

  test('self shows only the requester and names the setting when refusing', async () => {
    const st = await roster({ tools: { sessions: { visibility: 'self' } } })
    expect(keys(await list(st))).toEqual(['agent:main:main'])
    expect(await history(st, { sessionKey: 'agent:main:telegram:direct:1' })).toEqual({
      status: 'forbidden',
      error: 'Session history visibility is restricted to the current session (tools.sessions.visibility=self).',
    })
  })

  test('tree from the main session covers every session of its agent', async () => {
    const st = await roster({ tools: { sessions: { visibility: 'tree' } } })
    expect(keys(await list(st))).toEqual(['agent:main:main', 'agent:main:telegram:direct:1', 'agent:main:subagent:kid'])
  })

  test('tree from another session shows itself and what it owns only', async () => {
    const st = await roster({ tools: { sessions: { visibility: 'tree' } } })
    const ctx = { agentSessionKey: 'agent:main:telegram:direct:1' }
    expect(keys(await list(st, {}, ctx))).toEqual(['agent:main:telegram:direct:1', 'agent:main:subagent:kid'])
    expect(await history(st, { sessionKey: 'agent:main:main' }, ctx)).toEqual({
      status: 'forbidden',
      error: 'Session history visibility is restricted to the current session tree (tools.sessions.visibility=tree).',
    })
  })

  test('agent hides other agents with the cross-agent text', async () => {
    const st = await roster({ tools: { sessions: { visibility: 'agent' } } })
    expect(keys(await list(st))).not.toContain('agent:ops:main')
    expect(await history(st, { sessionKey: 'agent:ops:main' })).toEqual({
      status: 'forbidden',
      error:
        'Session history visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access; use tools.agentToAgent to restrict permitted agent pairs.',
    })
  })

  test('all defers to tools.agentToAgent with its two texts', async () => {
    const off = await roster({ tools: { agentToAgent: { enabled: false } } })
    expect(await history(off, { sessionKey: 'agent:ops:main' })).toEqual({
      status: 'forbidden',
      error: 'Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.',
    })
    expect(keys(await list(off))).not.toContain('agent:ops:main')
    const narrow = await roster({ tools: { agentToAgent: { allow: ['main'] } } })
    expect(await history(narrow, { sessionKey: 'agent:ops:main' })).toEqual({
      status: 'forbidden',
      error: 'Agent-to-agent history denied by tools.agentToAgent.allow.',
    })
  })

  test('a sandboxed caller is clamped to tree and sees only what it spawned', async () => {
    const st = await roster({})
    const ctx = { agentSessionKey: 'agent:main:telegram:direct:1', sandboxed: true }
    const r = await list(st, {}, ctx)
    expect(keys(r)).toEqual(['agent:main:subagent:kid'])
    expect(r.visibility).toEqual({
      mode: 'tree',
      restricted: true,
      warning:
        'Session visibility is restricted (effective tools.sessions.visibility=tree: current session + own spawn subtree (sandbox: spawned sessions only)). Sessions outside that scope are omitted from results and count.',
    })
    expect(await history(st, { sessionKey: 'agent:main:main' }, ctx)).toEqual({
      status: 'forbidden',
      error: 'Session not visible from this sandboxed agent session: agent:main:main',
    })
  })

  test('incognito sessions are never visible', async () => {
    const st = await roster({})
    await st.upsertSession('agent:main:dashboard:incognito-abc', {})
    expect(keys(await list(st))).not.toContain('agent:main:dashboard:incognito-abc')
    expect(await history(st, { sessionKey: 'agent:main:dashboard:incognito-abc' })).toEqual({
      status: 'forbidden',
      error: 'Session not visible from session tools: agent:main:dashboard:incognito-abc',
    })
  })
})

describe('sessions_list 2026.9', () => {
  test('the row and the result are closed: no routing fields, no transcript path', async () => {
    const st = await open9()
    await st.upsertSession('agent:main:telegram:group:9', {
      chatType: 'group',
      channel: 'telegram',
      lastChannel: 'telegram',
      lastTo: '9',
      deliveryContext: { channel: 'telegram', to: '9' },
      thinkingLevel: 'high',
      sendPolicy: 'deny',
      model: 'm1',
      totalTokens: 5,
    })
    const r = await list(st)
    for (const k of Object.keys(r)) expect(RESULT_FIELDS.has(k), k).toBe(true)
    const row = r.sessions[0]
    for (const k of Object.keys(row)) expect(ROW_FIELDS.has(k), k).toBe(true)
    expect(row).toMatchObject({ kind: 'group', channel: 'telegram', model: 'm1', totalTokens: 5, pinned: false })
  })

  test('pages continue with nextOffset while hasMore, and limitApplied is capped at 200', async () => {
    const st = await open9()
    for (let i = 0; i < 5; i++) await st.upsertSession(`agent:main:s${i}`, { updatedAt: at(i) })
    const p1 = await list(st, { limit: 2 })
    expect([keys(p1), p1.hasMore, p1.nextOffset, p1.limitApplied]).toEqual([['agent:main:s0', 'agent:main:s1'], true, 2, 2])
    const p3 = await list(st, { limit: 2, offset: 4 })
    expect([keys(p3), p3.hasMore, p3.nextOffset]).toEqual([['agent:main:s4'], false, undefined])
    expect((await list(st, { limit: 5000 })).limitApplied).toBe(200)
  })

  test('label, agentId, search, archived, pinned, owner, creator, project, workspace and group filter the inventory', async () => {
    const st = await open9()
    await st.upsertSession('agent:main:a', {
      label: 'alpha',
      pinnedAt: 1,
      owner: { actor: { type: 'profile', id: 'u1' } },
      createdActor: { type: 'profile', id: 'c1' },
      projectId: 'p1',
      spawnedCwd: '/w',
      category: 'work',
    })
    await st.upsertSession('agent:main:b', { archivedAt: 5, displayName: 'Needle Room' })
    await st.upsertSession('agent:ops:c', {})
    expect(keys(await list(st, { label: 'alpha' }))).toEqual(['agent:main:a'])
    expect(keys(await list(st, { agentId: 'ops' }))).toEqual(['agent:ops:c'])
    expect(keys(await list(st, { search: 'needle', archived: 'all' }))).toEqual(['agent:main:b'])
    expect(keys(await list(st, { archived: true }))).toEqual(['agent:main:b'])
    expect(keys(await list(st))).not.toContain('agent:main:b')
    expect(keys(await list(st, { pinned: true }))).toEqual(['agent:main:a'])
    expect(keys(await list(st, { ownerId: 'u1' }))).toEqual(['agent:main:a'])
    expect(keys(await list(st, { creatorId: 'c1' }))).toEqual(['agent:main:a'])
    expect(keys(await list(st, { projectId: 'p1' }))).toEqual(['agent:main:a'])
    expect(keys(await list(st, { workspaceDir: '/w' }))).toEqual(['agent:main:a'])
    expect(keys(await list(st, { group: 'work' }))).toEqual(['agent:main:a'])
    expect(keys(await list(st, { group: '' }))).not.toContain('agent:main:a')
  })

  test('excludeSubagents and kinds drop rows before the limit', async () => {
    const st = await open9()
    await st.upsertSession('agent:main:subagent:x', { updatedAt: at(1) })
    await st.upsertSession('agent:main:cron:job', { updatedAt: at(2) })
    await st.upsertSession('agent:main:main', { updatedAt: at(3) })
    expect(keys(await list(st, { excludeSubagents: true, limit: 1 }))).toEqual(['agent:main:cron:job'])
    expect(keys(await list(st, { kinds: ['MAIN'] }))).toEqual(['agent:main:main'])
    expect(keys(await list(st, { kinds: ['nonsense'] }))).toEqual([])
  })

  test('relationship and activeOnly are refused with the gateway texts', async () => {
    const st = await open9()
    expect((await list(st, { relationship: 'friends' })).error).toBe('relationship must be owned, created, or involving')
    expect((await list(st, { relationship: 'owned' })).error).toBe(
      'relationship requires an authenticated requesting user; use an explicit ownerId or creatorId instead',
    )
    expect((await list(st, { activeOnly: true })).error).toBe(
      'activeOnly requires a Gateway-backed inventory with live run state',
    )
    expect((await list(st, { limit: 2.5 })).error).toBe('limit must be a positive integer')
  })

  test('the 64 KiB budget cuts rows with byte-limit and a nextOffset at the first omitted row', async () => {
    const st = await open9()
    for (let i = 0; i < 20; i++) await st.upsertSession(`agent:main:big${i}`, { label: `l${i}`, displayName: 'x'.repeat(5000), updatedAt: at(i) })
    const r = await list(st)
    expect(r.truncationReason).toBe('byte-limit')
    expect(r.hasMore).toBe(true)
    expect(r.nextOffset).toBe(r.count)
    expect(Buffer.byteLength(JSON.stringify(r, null, 2))).toBeLessThanOrEqual(65536)
  })

  test('inline messages are dropped first when even one row does not fit', async () => {
    const st = await open9()
    await st.appendMessages('agent:main:main', Array.from({ length: 20 }, (_, i) => user(`${i} ` + 'y'.repeat(4000))))
    const r = await list(st, { messageLimit: 20 })
    expect(r.enrichmentOmitted).toBe(true)
    expect(r.sessions[0].messages).toBeUndefined()
    expect(r.count).toBe(1)
  })

  test('the scan stops after five pages of 200 with scan-limit', async () => {
    const st = await open9({ tools: { agentToAgent: { allow: ['main'] } } })
    await Promise.all(Array.from({ length: 1005 }, (_, i) => st.upsertSession(`agent:ops:s${i}`, { updatedAt: at(i) })))
    await st.upsertSession('agent:main:main', { updatedAt: at(5000) })
    const r = await list(st)
    expect([r.count, r.truncationReason, r.hasMore, r.nextOffset]).toEqual([0, 'scan-limit', true, 1000])
    const next = await list(st, { offset: r.nextOffset })
    expect(keys(next)).toEqual(['agent:main:main'])
  })
})

describe('sessions_history 2026.9', () => {
  async function transcript(n: number) {
    const st = await open9()
    await st.appendMessages(
      'agent:main:main',
      Array.from({ length: n }, (_, i) => (i % 2 ? assistant(`a${i}`) : user(`u${i}`))),
    )
    return st
  }

  test('offset pages back from the newest with nextOffset, hasMore and totalMessages', async () => {
    const st = await transcript(10)
    const p = await history(st, { sessionKey: 'main', limit: 3, offset: 0 })
    expect(p.messages.map((m: any) => m.__openclaw.seq)).toEqual([8, 9, 10])
    expect([p.offset, p.nextOffset, p.hasMore, p.totalMessages]).toEqual([0, 3, true, 10])
    const last = await history(st, { sessionKey: 'main', limit: 3, offset: 9 })
    expect(last.messages.map((m: any) => m.__openclaw.seq)).toEqual([1])
    expect([last.hasMore, last.nextOffset]).toEqual([false, undefined])
    for (const k of Object.keys(p)) expect(HISTORY_FIELDS.has(k), k).toBe(true)
  })

  test('every message carries __openclaw {seq, id} and messageId reads around it, ignoring offset', async () => {
    const st = await transcript(10)
    const all = await history(st, { sessionKey: 'main' })
    expect(all.messages[4].__openclaw).toEqual({ seq: 5, id: '00000005' })
    const around = await history(st, { sessionKey: 'main', messageId: '00000005', limit: 4, offset: 7 })
    expect(around.messages.map((m: any) => m.__openclaw.seq)).toEqual([3, 4, 5, 6])
    expect(around.totalMessages).toBe(10)
    expect(around.offset).toBeUndefined()
    expect((await history(st, { sessionKey: 'main', sessionId: 'x' })).error).toBe('sessionId requires messageId')
  })

  test("a sessionId that is not the session's own transcript is refused", async () => {
    const st = await transcript(2)
    await st.appendMessages('agent:main:other', [user('secret of another session')])
    const other: any = await st.getSession('agent:main:other')
    const r = await history(st, { sessionKey: 'main', messageId: '00000001', sessionId: other.sessionId })
    expect(r).toEqual({ status: 'error', error: `sessionId is not a transcript of this session: ${other.sessionId}` })
  })

  test('credential-like text is redacted and reported', async () => {
    const st = await open9()
    await st.appendMessages('agent:main:main', [user('key sk-abcdefghijklmnopqrstuvwxyz0123456789 here')])
    const h = await history(st, { sessionKey: 'main' })
    expect(h.messages[0].content).toBe('key sk-abc…6789 here')
    expect(h.contentRedacted).toBe(true)
  })

  test("form bodies, every Authorization scheme and bare AWS keys are masked as the gateway masks them", async () => {
    const st = await open9()
    const text = 'a=1&password=xyz&b=2\nAuthorization: Token abcdefghijklmnopqrstuvwxyz012345\nkey wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'
    await st.appendMessages('agent:main:main', [user(text)])
    const h = await history(st, { sessionKey: 'main' })
    expect(h.messages[0].content).toBe('a=1&password=***&b=2\nAuthorization: Token abcdef…2345\nkey wJalrX…EKEY')
    expect(h.contentRedacted).toBe(true)
  })

  test('a text over 4,000 characters is cut with the marker', async () => {
    const st = await open9()
    await st.appendMessages('agent:main:main', [assistant('z'.repeat(4500))])
    const h = await history(st, { sessionKey: 'main' })
    expect(h.messages[0].content[0].text).toBe('z'.repeat(4000) + '\n…(truncated)…')
    expect([h.contentTruncated, h.truncated, h.droppedMessages]).toEqual([true, true, false])
  })

  test('usage, cost and details are stripped and count as truncation', async () => {
    const st = await open9()
    await st.appendMessages('agent:main:main', [assistant('ok', { usage: { input: 3 }, cost: 1, details: {} })])
    const h = await history(st, { sessionKey: 'main' })
    expect(h.messages[0].usage).toBeUndefined()
    expect(h.messages[0].cost).toBeUndefined()
    expect(h.contentTruncated).toBe(true)
  })

  test('the oldest messages are dropped to fit 80 KB', async () => {
    const st = await open9()
    await st.appendMessages('agent:main:main', Array.from({ length: 40 }, (_, i) => user(`${i}:` + 'q'.repeat(3900))))
    const h = await history(st, { sessionKey: 'main' })
    expect(h.droppedMessages).toBe(true)
    expect(h.bytes).toBeLessThanOrEqual(81920)
    expect(h.bytes).toBe(Buffer.byteLength(JSON.stringify(h.messages)))
    expect(h.messages.at(-1).__openclaw.seq).toBe(40)
  })

  test('a last message too large alone becomes the placeholder', async () => {
    const st = await open9()
    const blocks = Array.from({ length: 30 }, () => ({ type: 'text', text: 'w'.repeat(3990) }))
    await st.appendMessages('agent:main:main', [{ role: 'assistant', content: blocks }])
    const h = await history(st, { sessionKey: 'main' })
    expect(h.messages).toEqual([
      { role: 'assistant', content: '[sessions_history omitted: message too large]', __openclaw: { seq: 1, id: '00000001' } },
    ])
    expect([h.truncated, h.droppedMessages]).toEqual([true, true])
  })

  test('tool results are left out unless includeTools', async () => {
    const st = await open9()
    await st.appendMessages('agent:main:main', [user('q'), toolResult('r'), assistant('a')])
    expect((await history(st, { sessionKey: 'main' })).messages.map((m: any) => m.role)).toEqual(['user', 'assistant'])
    expect((await history(st, { sessionKey: 'main', includeTools: true })).messages).toHaveLength(3)
  })

  test('a sessionId that matches nothing is not found with the 2026.9 hint', async () => {
    const st = await open9()
    const id = '11111111-2222-3333-4444-555555555555'
    expect(await history(st, { sessionKey: id })).toEqual({
      status: 'error',
      error: `Session not found: ${id} (use the full sessionKey from sessions_list)`,
    })
  })
})

describe('agents_list 2026.9', () => {
  test('ids of deleted agents are omitted; model and agentRuntime come from the roster', async () => {
    const st = await open9({
      agents: {
        ownership: 'explicit',
        defaults: { model: 'anthropic/claude-x' },
        entries: {
          main: { subagents: { allowAgents: ['coder', 'gone'] } },
          coder: { model: 'openai/gpt-y', agentRuntime: { id: 'codex' } },
        },
      },
    } as any)
    const r: any = await st.agentsList(MAIN)
    expect(r).toEqual({
      requester: 'main',
      allowAny: false,
      agents: [{ id: 'coder', configured: true, model: 'openai/gpt-y', agentRuntime: { id: 'codex', source: 'agent' } }],
    })
  })

  test('a sub-agent caller is refused', async () => {
    const st = await open9()
    const r: any = await st.agentsList({ agentSessionKey: 'agent:main:subagent:x' })
    expect(r).toEqual({ status: 'forbidden', error: 'agents_list is not available to sub-agent sessions.' })
  })
})

describe('tool definitions 2026.9', () => {
  test('integers are typed integer under 2026.9 and number under 2026.1', async () => {
    const st9 = await open9()
    const defs = st9.toolDefinitions(MAIN) as any[]
    const listDef = defs.find((d) => d.name === 'sessions_list')
    expect(listDef.parameters.properties.offset).toMatchObject({ type: 'integer', minimum: 0 })
    expect(listDef.parameters.properties.archived.anyOf).toBeDefined()
    const hist = defs.find((d) => d.name === 'sessions_history')
    expect(Object.keys(hist.parameters.properties)).toEqual([
      'sessionKey', 'limit', 'offset', 'pendingBefore', 'messageId', 'sessionId', 'includeTools',
    ])
    for (const d of defs) {
      for (const p of Object.values<any>(d.parameters.properties)) expect(p.type).not.toBe('number')
    }
    expect((st9.createTools(MAIN) as any[]).find((t) => t.name === 'sessions_history').parameters).toEqual(hist.parameters)
    const st1 = track(await SessionTools.open({ path: ':memory:' }))
    const def1 = (st1.toolDefinitions(MAIN) as any[]).find((d) => d.name === 'sessions_list')
    expect(def1.parameters.properties.limit.type).toBe('number')
  })
})

describe('a state folder written by the real 2026.9.6 package', () => {
  const STATE = fileURLToPath(new URL('./fixtures/openclaw-2026.9/state', import.meta.url))

  test('imported, it lists, filters and pages under 2026.9 with its own config', async () => {
    const dir = path.join(tmpDir(), 'state')
    fs.cpSync(STATE, dir, { recursive: true })
    const config = JSON.parse(fs.readFileSync(path.join(STATE, 'openclaw.json'), 'utf8'))
    const st = await open9(config)
    await st.importStateDir(dir)
    const all = await list(st, { archived: 'all', limit: 50 })
    expect(all.count).toBe(20)
    expect(keys(await list(st, { archived: true }))).toEqual(['agent:research:dashboard:old-notes'])
    const pinned = await list(st, { pinned: true })
    expect(pinned.sessions).toMatchObject([{ key: 'agent:main:dashboard:review-api', pinned: true, group: 'Reviews' }])
    const direct = all.sessions.find((s: any) => s.key === 'agent:main:telegram:direct:777')
    expect([direct.kind, direct.channel]).toEqual(['other', 'telegram'])
    const page = await history(st, { sessionKey: 'agent:main:main', offset: 0, limit: 3 })
    const id = page.messages[0].__openclaw.id
    expect(id).toMatch(/^[0-9a-f-]{36}$/)
    const around = await history(st, { sessionKey: 'agent:main:main', messageId: id, limit: 1 })
    expect(around.messages.map((m: any) => m.__openclaw.id)).toEqual([id])
    expect(await st.agentsList(MAIN)).toEqual({
      requester: 'main',
      allowAny: false,
      agents: [{ id: 'research', name: 'Research', configured: true, model: 'anthropic/claude-sonnet-4-5' }],
    })
  })
})

