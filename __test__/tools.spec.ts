// The tool layer: sandbox visibility (REFERENCE.md §9, X1–X3, DECISIONS.md per-agent
// visibility), the agent-to-agent policy (§8, A1–A4), agents_list (§10.1, G1–G4) and the tool
// surface (API.md §3, T1–T2).
import { describe, expect, test } from 'vitest'

import type { GatewayConfig, SessionTools, ToolContext } from '../index.js'
import { assistant, expectReject, openMem, textOf } from './helpers'

const SANDBOXED_MAIN: ToolContext = { agentSessionKey: 'agent:main:main', sandboxed: true }

/** main, a group, a child spawned by main, a child spawned by the group, global. */
async function family(st: SessionTools) {
  await st.appendMessages('main', [assistant('main msg')])
  await st.appendMessages('discord:group:dev', [assistant('group msg')])
  await st.appendMessages('agent:main:subagent:mine', [assistant('my child')])
  await st.upsertSession('agent:main:subagent:mine', { spawnedBy: 'agent:main:main' })
  await st.appendMessages('agent:main:subagent:theirs', [assistant('their child')])
  await st.upsertSession('agent:main:subagent:theirs', { spawnedBy: 'agent:main:discord:group:dev' })
  await st.upsertSession('global', {})
}

const listKeys = async (st: SessionTools, ctx?: ToolContext) => ((await st.sessionsList({}, ctx)) as any).sessions.map((s: any) => s.key).sort()

describe('sandbox visibility (§9)', () => {
  test('given a sandboxed main requester when it reads its own child by key then the messages', async () => {
    const st = await openMem()
    await family(st)
    const r: any = await st.sessionsHistory({ sessionKey: 'agent:main:subagent:mine' }, SANDBOXED_MAIN)
    expect(r.messages.map(textOf)).toEqual(['my child'])
    const viaMainKey: any = await st.sessionsHistory({ sessionKey: 'agent:main:subagent:mine' }, { agentSessionKey: 'main', sandboxed: true })
    expect(viaMainKey.messages.map(textOf)).toEqual(['my child'])
  })

  test('given a sandboxed main requester when it reads its own child by sessionId then the messages', async () => {
    const st = await openMem()
    await family(st)
    const sid = (await st.getSession('agent:main:subagent:mine'))!.sessionId
    const r: any = await st.sessionsHistory({ sessionKey: sid }, SANDBOXED_MAIN)
    expect(r.messages.map(textOf)).toEqual(['my child'])
  })

  test('given a sandboxed requester when it reads a child of someone else or its own main then forbidden (H5)', async () => {
    const st = await openMem()
    await family(st)
    for (const key of ['agent:main:subagent:theirs', 'discord:group:dev', 'main']) {
      const r: any = await st.sessionsHistory({ sessionKey: key }, SANDBOXED_MAIN)
      expect(r, key).toEqual({ status: 'forbidden', error: `Session not visible from this sandboxed agent session: ${key}` })
    }
  })

  test('given a sandboxed requester and a sessionId that is not its child then forbidden naming the id (X3)', async () => {
    const st = await openMem()
    await family(st)
    const sid = (await st.getSession('agent:main:subagent:theirs'))!.sessionId
    const r: any = await st.sessionsHistory({ sessionKey: sid }, SANDBOXED_MAIN)
    expect(r).toEqual({ status: 'forbidden', error: `Session not visible from this sandboxed agent session: ${sid}` })
    const unknown: any = await st.sessionsHistory({ sessionKey: 'aaaaaaaa-aaaa-4aaa-aaaa-aaaaaaaaaaaa' }, SANDBOXED_MAIN)
    expect(unknown).toEqual({ status: 'forbidden', error: 'Session not visible from this sandboxed agent session: aaaaaaaa-aaaa-4aaa-aaaa-aaaaaaaaaaaa' })
  })

  test('given a sandboxed sub-agent requester when it lists and reads then it is not restricted (X1)', async () => {
    const st = await openMem()
    await family(st)
    const ctx = { agentSessionKey: 'agent:main:subagent:x', sandboxed: true }
    expect(await listKeys(st, ctx)).toEqual([
      'agent:main:discord:group:dev', 'agent:main:subagent:mine', 'agent:main:subagent:theirs', 'main',
    ])
    const r: any = await st.sessionsHistory({ sessionKey: 'discord:group:dev' }, ctx)
    expect(r.messages.map(textOf)).toEqual(['group msg'])
  })

  test('given a sandboxed requester without a key when it lists then it is not restricted', async () => {
    const st = await openMem()
    await family(st)
    expect((await listKeys(st, { sandboxed: true })).length).toBe(4)
  })

  test('given visibility all when a sandboxed requester lists and reads then not restricted, but a2a still applies (X2)', async () => {
    const st = await openMem({ agents: { defaults: { sandbox: { sessionToolsVisibility: 'all' } } } })
    await family(st)
    await st.appendMessages('agent:other:main', [assistant('other')])
    expect(await listKeys(st, SANDBOXED_MAIN)).toEqual(['agent:main:discord:group:dev', 'agent:main:subagent:mine', 'agent:main:subagent:theirs', 'main'])
    const r: any = await st.sessionsHistory({ sessionKey: 'discord:group:dev' }, SANDBOXED_MAIN)
    expect(r.messages.map(textOf)).toEqual(['group msg'])
    const other: any = await st.sessionsHistory({ sessionKey: 'agent:other:main' }, SANDBOXED_MAIN)
    expect(other.status).toBe('forbidden')
  })

  test('given default spawned but agent main set to all when a sandboxed main requester lists then not restricted (per-agent wins)', async () => {
    const st = await openMem({
      agents: { defaults: { sandbox: { sessionToolsVisibility: 'spawned' } }, list: [{ id: 'main', sandbox: { sessionToolsVisibility: 'all' } }] },
    })
    await family(st)
    expect((await listKeys(st, SANDBOXED_MAIN)).length).toBe(4)
    const r: any = await st.sessionsHistory({ sessionKey: 'discord:group:dev' }, SANDBOXED_MAIN)
    expect(r.messages.map(textOf)).toEqual(['group msg'])
  })

  test('given default all but agent main set to spawned when a sandboxed main requester lists then restricted (per-agent wins)', async () => {
    const st = await openMem({
      agents: { defaults: { sandbox: { sessionToolsVisibility: 'all' } }, list: [{ id: 'main', sandbox: { sessionToolsVisibility: 'spawned' } }, { id: 'ops' }] },
    })
    await family(st)
    expect(await listKeys(st, SANDBOXED_MAIN)).toEqual(['agent:main:subagent:mine'])
    const r: any = await st.sessionsHistory({ sessionKey: 'discord:group:dev' }, SANDBOXED_MAIN)
    expect(r.status).toBe('forbidden')
    await st.appendMessages('agent:ops:discord:group:x', [assistant('ops')])
    const ops = { agentSessionKey: 'agent:ops:main', sandboxed: true }
    expect(await listKeys(st, ops)).toEqual(['agent:ops:discord:group:x'])
  })

  test('given a child whose stored spawnedBy is the bare requester key when the sandboxed requester lists and reads then it is visible (§9 canonicalised spawnedBy)', async () => {
    const st = await openMem()
    await st.appendMessages('agent:main:subagent:bare', [assistant('bare child')])
    await st.upsertSession('agent:main:subagent:bare', { spawnedBy: 'discord:group:req' })
    const ctx = { agentSessionKey: 'discord:group:req', sandboxed: true }
    expect(await listKeys(st, ctx)).toEqual(['agent:main:subagent:bare'])
    const r: any = await st.sessionsHistory({ sessionKey: 'agent:main:subagent:bare' }, ctx)
    expect(r.messages?.map(textOf)).toEqual(['bare child'])
  })

  test('given not sandboxed when the same requester lists then everything of its agent', async () => {
    const st = await openMem()
    await family(st)
    expect((await listKeys(st, { agentSessionKey: 'agent:main:main', sandboxed: false })).length).toBe(4)
  })
})

describe('agent-to-agent policy (§8)', () => {
  async function twoAgents(config: GatewayConfig) {
    const st = await openMem(config)
    await st.appendMessages('agent:main:discord:group:dev', [assistant('main group')])
    await st.appendMessages('agent:mars:main', [assistant('mars main')])
    await st.appendMessages('agent:other:main', [assistant('other main')])
    return st
  }
  const canRead = async (st: SessionTools, key: string, requester = 'agent:main:main') => {
    const r: any = await st.sessionsHistory({ sessionKey: key }, { agentSessionKey: requester })
    return Array.isArray(r.messages)
  }

  test('given a2a disabled when requester and target share an agent then allowed (A1)', async () => {
    const st = await twoAgents({})
    expect(await canRead(st, 'agent:main:discord:group:dev')).toBe(true)
    expect(await canRead(st, 'agent:other:main', 'agent:other:discord:group:z')).toBe(true)
    expect(await canRead(st, 'agent:other:main')).toBe(false)
  })

  test('given enabled and no allow list when any pair reads and lists then allowed (A2)', async () => {
    const st = await twoAgents({ tools: { agentToAgent: { enabled: true } } })
    expect(await canRead(st, 'agent:other:main')).toBe(true)
    expect(await canRead(st, 'agent:mars:main')).toBe(true)
    expect(await listKeys(st, { agentSessionKey: 'agent:main:main' })).toEqual(['agent:main:discord:group:dev', 'agent:mars:main', 'agent:other:main'])
  })

  test('given enabled with allow ["*"] when any pair reads then allowed, as with no list', async () => {
    const st = await twoAgents({ tools: { agentToAgent: { enabled: true, allow: ['*'] } } })
    expect(await canRead(st, 'agent:other:main')).toBe(true)
  })

  test('given allow ["ma*"] or ["MA*"] when main reads mars then allowed; other is denied (A3)', async () => {
    for (const pattern of ['ma*', 'MA*']) {
      const st = await twoAgents({ tools: { agentToAgent: { enabled: true, allow: [pattern] } } })
      expect(await canRead(st, 'agent:mars:main'), pattern).toBe(true)
      expect(await canRead(st, 'agent:other:main'), pattern).toBe(false)
      expect(await listKeys(st, { agentSessionKey: 'agent:main:main' })).toEqual(['agent:main:discord:group:dev', 'agent:mars:main'])
    }
  })

  test('given allow ["Main", "mars"] when main reads mars then denied: exact patterns are case-sensitive (A3)', async () => {
    const st = await twoAgents({ tools: { agentToAgent: { enabled: true, allow: ['Main', 'mars'] } } })
    const r: any = await st.sessionsHistory({ sessionKey: 'agent:mars:main' }, { agentSessionKey: 'agent:main:main' })
    expect(r).toEqual({ status: 'forbidden', error: 'Agent-to-agent history denied by tools.agentToAgent.allow.' })
  })

  test('given allow ["main"] when main reads or lists other then denied and omitted: both sides must match (A4)', async () => {
    const st = await twoAgents({ tools: { agentToAgent: { enabled: true, allow: ['main'] } } })
    const r: any = await st.sessionsHistory({ sessionKey: 'agent:other:main' }, { agentSessionKey: 'agent:main:main' })
    expect(r).toEqual({ status: 'forbidden', error: 'Agent-to-agent history denied by tools.agentToAgent.allow.' })
    expect(await listKeys(st, { agentSessionKey: 'agent:main:main' })).toEqual(['agent:main:discord:group:dev'])
  })

  test('given allow patterns with regex metacharacters when matched then they are literal: m.* does not match main', async () => {
    const st = await twoAgents({ tools: { agentToAgent: { enabled: true, allow: ['m.*', 'other'] } } })
    expect(await canRead(st, 'agent:other:main')).toBe(false)
    st.setConfig({ tools: { agentToAgent: { enabled: true, allow: ['m*', 'other'] } } })
    expect(await canRead(st, 'agent:other:main')).toBe(true)
  })

  test('given allow [""] when main reads other then denied, while its own agent stays readable', async () => {
    const st = await twoAgents({ tools: { agentToAgent: { enabled: true, allow: [''] } } })
    expect(await canRead(st, 'agent:other:main')).toBe(false)
    expect(await canRead(st, 'agent:main:discord:group:dev')).toBe(true)
  })
})

describe('agents_list (§10.1)', () => {
  test('given no agents config and requester main then requester main, allowAny false, one unconfigured main (G1)', async () => {
    const st = await openMem()
    expect(await st.agentsList({ agentSessionKey: 'main' })).toEqual({ requester: 'main', allowAny: false, agents: [{ id: 'main', configured: false }] })
    expect(await st.agentsList()).toEqual({ requester: 'main', allowAny: false, agents: [{ id: 'main', configured: false }] })
  })

  test('given main allowAgents [research] and research configured then main and research (G2)', async () => {
    const st = await openMem({ agents: { list: [{ id: 'main', subagents: { allowAgents: ['research'] } }, { id: 'research', name: ' Research ' }] } })
    const r: any = await st.agentsList({ agentSessionKey: 'agent:main:main' })
    expect(r).toEqual({
      requester: 'main',
      allowAny: false,
      agents: [
        { id: 'main', configured: true },
        { id: 'research', name: 'Research', configured: true },
      ],
    })
  })

  test('given allowAgents ["*"] with main, research, coder then allowAny and requester first, the rest sorted (G3)', async () => {
    const st = await openMem({ agents: { list: [{ id: 'main', subagents: { allowAgents: ['*'] } }, { id: 'research' }, { id: 'coder' }] } })
    const r: any = await st.agentsList({ agentSessionKey: 'agent:main:main' })
    expect(r.allowAny).toBe(true)
    expect(r.agents.map((a: any) => a.id)).toEqual(['main', 'coder', 'research'])
  })

  test('given allowAgents [research] with research not configured then it is listed as configured false (G4)', async () => {
    const st = await openMem({ agents: { list: [{ id: 'main', subagents: { allowAgents: ['Research', ' '] } }] } })
    const r: any = await st.agentsList({ agentSessionKey: 'agent:main:main' })
    expect(r.agents).toEqual([
      { id: 'main', configured: true },
      { id: 'research', configured: false },
    ])
  })

  test('given agent ids needing normalisation and several defaults when listed then ids are normalised (K4) and the first default wins', async () => {
    const st = await openMem({ agents: { list: [{ id: 'My Agent!', default: true, subagents: { allowAgents: ['Research'] } }, { id: 'Research', default: true }] } })
    const r: any = await st.agentsList()
    expect(r.requester).toBe('my-agent')
    expect(r.agents).toEqual([
      { id: 'my-agent', configured: true },
      { id: 'research', configured: true },
    ])
    expect((await st.appendMessages('x:y', [])).sessionKey).toBe('agent:my-agent:x:y')
  })

  test('given a requester of agent coder or an override then that agent is the requester, listed first', async () => {
    const st = await openMem({ agents: { list: [{ id: 'main' }, { id: 'coder', subagents: { allowAgents: ['main'] } }] } })
    const r: any = await st.agentsList({ agentSessionKey: 'agent:coder:discord:group:x' })
    expect(r.requester).toBe('coder')
    expect(r.agents.map((a: any) => a.id)).toEqual(['coder', 'main'])
    const o: any = await st.agentsList({ agentSessionKey: 'agent:main:main', requesterAgentIdOverride: 'Coder' })
    expect(o.requester).toBe('coder')
  })

  test('given an allowlist on another agent when main lists then only main (the requester agent decides)', async () => {
    const st = await openMem({ agents: { list: [{ id: 'main' }, { id: 'coder', subagents: { allowAgents: ['*'] } }] } })
    const r: any = await st.agentsList({ agentSessionKey: 'agent:main:main' })
    expect(r).toEqual({ requester: 'main', allowAny: false, agents: [{ id: 'main', configured: true }] })
  })
})

describe('the tool surface (API.md §3)', () => {
  test('given a main caller when tool definitions are read then the three read-side tools with their labels', async () => {
    const st = await openMem()
    const defs = st.toolDefinitions({ agentSessionKey: 'agent:main:main' })
    const byName = Object.fromEntries(defs.map((d) => [d.name, d]))
    expect(byName.sessions_list?.label).toBe('Sessions')
    expect(byName.sessions_history?.label).toBe('Session History')
    expect(byName.agents_list?.label).toBe('Agents')
    for (const d of defs) {
      expect(Object.keys(d).sort()).toEqual(['description', 'label', 'name', 'parameters'])
      expect(typeof d.description).toBe('string')
      expect(d.description.length).toBeGreaterThan(0)
    }
    expect(st.toolDefinitions().map((d) => d.name)).toEqual(defs.map((d) => d.name))
  })

  test('given the schemas when inspected then numbers are typed number, sessionKey is required, no top-level anyOf/oneOf (T1)', async () => {
    const st = await openMem()
    const defs = st.toolDefinitions()
    const byName: Record<string, any> = Object.fromEntries(defs.map((d) => [d.name, d]))
    for (const d of defs) {
      const p: any = d.parameters
      expect(p.type, d.name).toBe('object')
      expect('anyOf' in p, d.name).toBe(false)
      expect('oneOf' in p, d.name).toBe(false)
    }
    expect(byName.sessions_history.parameters.properties.limit.type).toBe('number')
    expect(byName.sessions_history.parameters.required).toContain('sessionKey')
    expect(byName.sessions_history.parameters.properties.sessionKey.type).toBe('string')
    for (const f of ['limit', 'activeMinutes', 'messageLimit']) {
      expect(byName.sessions_list.parameters.properties[f].type, f).toBe('number')
    }
    expect(byName.sessions_list.parameters.properties.kinds.type).toBe('array')
    if (byName.sessions_send) expect(byName.sessions_send.parameters.properties.timeoutSeconds.type).toBe('number')
    if (byName.sessions_spawn) {
      expect(byName.sessions_spawn.parameters.properties.runTimeoutSeconds.type).toBe('number')
      expect(byName.sessions_spawn.parameters.properties.thinking.type).toBe('string')
    }
    const text = JSON.stringify(defs)
    expect(text).not.toContain('"integer"')
  })

  test('given a sub-agent caller when definitions and tools are requested then none (X4)', async () => {
    const st = await openMem()
    expect(st.toolDefinitions({ agentSessionKey: 'agent:main:subagent:x' })).toEqual([])
    expect(st.createTools({ agentSessionKey: 'agent:main:subagent:x' })).toEqual([])
    expect(st.toolDefinitions({ agentSessionKey: 'subagent:x' })).toEqual([])
  })

  test('given a tool that fails on a missing parameter when executed then the model sees the error payload as JSON text (T2)', async () => {
    const st = await openMem()
    const r = await st.executeTool('sessions_history', {}, { agentSessionKey: 'agent:main:main' })
    expect(r.details).toEqual({ status: 'error', tool: 'sessions_history', error: 'sessionKey required' })
    expect(r.content).toEqual([{ type: 'text', text: JSON.stringify(r.details, null, 2) }])
  })

  test('given each tool when executed then details equal the direct method result and text is details with 2-space JSON', async () => {
    const st = await openMem({ agents: { list: [{ id: 'main', subagents: { allowAgents: ['research'] } }] } })
    await st.appendMessages('main', [assistant('hello')])
    const ctx = { agentSessionKey: 'agent:main:main' }
    const cases: Array<[string, unknown, () => Promise<unknown>]> = [
      ['sessions_list', { messageLimit: 1 }, () => st.sessionsList({ messageLimit: 1 }, ctx)],
      ['sessions_history', { sessionKey: 'main' }, () => st.sessionsHistory({ sessionKey: 'main' }, ctx)],
      ['agents_list', {}, () => st.agentsList(ctx)],
    ]
    for (const [name, args, direct] of cases) {
      const r = await st.executeTool(name, args, ctx)
      const d: any = await direct()
      expect(r.details, name).toEqual(d)
      expect(Object.keys(r)).toEqual(['content', 'details'])
      expect(r.content).toHaveLength(1)
      expect(r.content[0].type).toBe('text')
      expect(JSON.parse(r.content[0].text)).toEqual(r.details)
      expect(r.content[0].text).toBe(JSON.stringify(r.details, null, 2))
    }
  })

  test('given an unknown tool name when executed then it rejects INVALID_REQUEST', async () => {
    const st = await openMem()
    await expectReject(st.executeTool('nope', {}), 'INVALID_REQUEST')
    await expectReject(st.executeTool(42 as any, {}), 'INVALID_REQUEST')
  })

  test('given createTools when its tools run then they are plain objects whose execute resolves like executeTool', async () => {
    const st = await openMem()
    await st.appendMessages('main', [assistant('hello')])
    const ctx = { agentSessionKey: 'agent:main:main' }
    const tools = st.createTools(ctx)
    expect(tools.map((t) => t.name)).toEqual(st.toolDefinitions(ctx).map((d) => d.name))
    for (const t of tools) {
      expect(Object.keys(t).sort()).toEqual(['description', 'execute', 'label', 'name', 'parameters'])
      expect(typeof t.execute).toBe('function')
      expect(Object.getPrototypeOf(t)).toBe(Object.prototype)
    }
    const hist = tools.find((t) => t.name === 'sessions_history')!
    const r = await hist.execute('call-1', { sessionKey: 'main' })
    expect(r).toEqual(await st.executeTool('sessions_history', { sessionKey: 'main' }, ctx))
    expect((r.details as any).messages.map(textOf)).toEqual(['hello'])
    const missing = await hist.execute('call-2', {}, new AbortController().signal)
    expect(missing.details).toEqual({ status: 'error', tool: 'sessions_history', error: 'sessionKey required' })
  })

  test('given a tool whose signal is already aborted when executed then it does nothing and rejects with the reason', async () => {
    const st = await openMem()
    const ctx = { agentSessionKey: 'agent:main:main' }
    const spawn = st.createTools(ctx).find((t) => t.name === 'sessions_spawn')!
    const ac = new AbortController()
    ac.abort(new Error('turn aborted'))
    await expect(spawn.execute('c', { task: 'never', label: 'x' }, ac.signal)).rejects.toThrow('turn aborted')
    expect((await st.listSessions({})).count).toBe(0)
    const plain = new AbortController()
    plain.abort()
    await expect(spawn.execute('c', { task: 'never' }, plain.signal)).rejects.toMatchObject({ name: 'AbortError' })
    // Not a signal, a throwing getter: read as no signal, and the tool runs.
    const hist = st.createTools(ctx).find((t) => t.name === 'sessions_history')!
    const hostile = { get aborted() { throw new Error('boom') } }
    expect((await hist.execute('c', {}, hostile as any)).details).toMatchObject({ status: 'error', error: 'sessionKey required' })
    expect((await hist.execute('c', {}, 'nope' as any)).details).toMatchObject({ error: 'sessionKey required' })
  })

  test('given tools created for one caller when executed then that caller context applies', async () => {
    const st = await openMem()
    await st.appendMessages('agent:other:main', [assistant('other')])
    const mainTools = st.createTools({ agentSessionKey: 'agent:main:main' })
    const otherTools = st.createTools({ agentSessionKey: 'agent:other:main' })
    const fromMain = await mainTools.find((t) => t.name === 'sessions_history')!.execute('c', { sessionKey: 'agent:other:main' })
    const fromOther = await otherTools.find((t) => t.name === 'sessions_history')!.execute('c', { sessionKey: 'agent:other:main' })
    expect((fromMain.details as any).status).toBe('forbidden')
    expect((fromOther.details as any).sessionKey).toBe('main')
    expect((fromOther.details as any).messages.map(textOf)).toEqual(['other'])
  })
})
