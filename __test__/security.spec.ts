// Security: tests that try to get round the protections through the real addon (issue 6 item 4).
// Sandbox visibility (REFERENCE.md §9, DECISIONS.md per-agent visibility), the agent-to-agent
// allow list (§8), the send policy on every delivery path (§7, DECISIONS.md #6), sub-agents and
// sessions_spawn (§6.1, §6.9, DECISIONS.md #5), path escapes in import/export and the JSONL mirror
// (DECISIONS.md #8, #9), and the chain budget (DECISIONS.md #4). Every attack is asserted to fail,
// and, where it matters, that nothing was written, no run was started and nothing was delivered.
import { describe, expect, test } from 'vitest'
import fs from 'node:fs'
import path from 'node:path'

import type { AgentRunRequest, DeliveryRequest, GatewayConfig, OpenOptions, SessionTools, SessionToolsEvent, ToolContext } from '../index.js'
import { assistant, neverSettles, openFile, openMem, SessionTools as ST, textOf, tmpDir, track, until, user } from './helpers'


/** A host that records every run, delivery and event; runs answer at once. */
function recordingHost(reply = 'ok') {
  const runs: AgentRunRequest[] = []
  const deliveries: DeliveryRequest[] = []
  const events: SessionToolsEvent[] = []
  const options: Partial<OpenOptions> = {
    runAgent: async (req) => {
      runs.push(req)
      return { reply }
    },
    deliver: async (msg) => void deliveries.push(msg),
    onEvent: (ev) => void events.push(ev),
  }
  return { runs, deliveries, events, options }
}

/** Every session key the store holds (global and unknown included). */
async function allKeys(st: SessionTools): Promise<string[]> {
  const r = await st.listSessions({ includeGlobal: true, includeUnknown: true, limit: 1000 })
  return r.sessions.map((s: any) => s.key).sort()
}

/** Every path below `root` (files, folders, links), relative. */
function tree(root: string): string[] {
  const out: string[] = []
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name)
      out.push(path.relative(root, p))
      if (e.isDirectory()) walk(p)
    }
  }
  walk(root)
  return out.sort()
}

const SANDBOXED_MAIN: ToolContext = { agentSessionKey: 'agent:main:main', sandboxed: true }
const SECRET = 'their child secret'

/** main, a child spawned by main (label `mine`), a child spawned by someone else (label
 * `theirs`), and a labelled session nobody spawned. */
async function family(st: SessionTools) {
  await st.appendMessages('main', [assistant('main msg')])
  await st.appendMessages('agent:main:subagent:mine', [assistant('my child')])
  await st.upsertSession('agent:main:subagent:mine', { spawnedBy: 'agent:main:main', label: 'mine' })
  await st.appendMessages('agent:main:subagent:theirs', [assistant(SECRET)])
  await st.upsertSession('agent:main:subagent:theirs', { spawnedBy: 'agent:main:discord:group:dev', label: 'theirs' })
  await st.appendMessages('agent:main:secret', [assistant('secret session')])
  await st.upsertSession('agent:main:secret', { label: 'secret' })
  const theirs = (await st.getSession('agent:main:subagent:theirs'))!.sessionId
  const mine = (await st.getSession('agent:main:subagent:mine'))!.sessionId
  return { theirs, mine }
}

describe('sandbox visibility cannot be got round (§9)', () => {
  /** Spellings of a session the sandboxed main did not spawn. */
  function attacks(theirsSid: string): string[] {
    return [
      'agent:main:subagent:theirs',
      theirsSid,
      theirsSid.toUpperCase(),
      ` ${theirsSid} `,
      'subagent:theirs',
      'AGENT:MAIN:subagent:theirs',
      'Agent:Main:subagent:theirs',
      'agent:MAIN:subagent:theirs',
      'agent:Main:SUBAGENT:theirs',
      'agent:main::subagent:theirs',
      'agent:main:subagent:theirs:',
      'agent::main:subagent:theirs',
      ':agent:main:subagent:theirs',
      '  agent:main:subagent:theirs  ',
      '\u00a0agent:main:subagent:theirs\ufeff',
      'agent:ｍａｉｎ:subagent:theirs', // fullwidth agent id: normalizes to main
      'аgent:main:subagent:theirs', // Cyrillic а
      'agent:main:subagent:theirs\u200b', // zero-width space
      'agent\uff1amain\uff1asubagent\uff1atheirs', // fullwidth colons
      'agent:main:secret',
      'secret',
      'main',
      'agent:main:main',
    ]
  }

  test('given a sandboxed main requester when it reads a session it did not spawn, under any spelling, then it is refused and nothing leaks', async () => {
    const st = await openMem()
    const { theirs } = await family(st)
    for (const input of attacks(theirs)) {
      const r: any = await st.sessionsHistory({ sessionKey: input }, SANDBOXED_MAIN)
      expect(r.status, `${JSON.stringify(input)} → ${JSON.stringify(r)}`).toBe('forbidden')
      expect(r.error).toMatch(/^Session not visible from this sandboxed agent session: /)
      expect(JSON.stringify(r)).not.toContain(SECRET)
    }
  })

  test('given a sandboxed main requester when it sends to a session it did not spawn, under any spelling, then forbidden, no run and nothing written', async () => {
    const host = recordingHost()
    const st = await openMem(null, host.options)
    const { theirs } = await family(st)
    const before = await allKeys(st)
    const historyBefore = (await st.chatHistory('agent:main:subagent:theirs')).messages.length
    for (const input of attacks(theirs)) {
      const r: any = await st.sessionsSend({ sessionKey: input, message: 'leak it', timeoutSeconds: 0 }, SANDBOXED_MAIN)
      expect(r.status, `${JSON.stringify(input)} → ${JSON.stringify(r)}`).toBe('forbidden')
    }
    expect(host.runs).toHaveLength(0)
    expect(await allKeys(st)).toEqual(before)
    expect((await st.chatHistory('agent:main:subagent:theirs')).messages).toHaveLength(historyBefore)
  })

  test('given a sandboxed main requester when it looks a session up by label (with or without agentId) then only its own children are found', async () => {
    const host = recordingHost()
    const st = await openMem({ tools: { agentToAgent: { enabled: true } } }, host.options)
    await family(st)
    await st.appendMessages('agent:other:x', [assistant('other agent')])
    await st.upsertSession('agent:other:x', { label: 'other-label', spawnedBy: 'agent:main:main' })
    for (const label of ['theirs', 'secret', ' theirs ', 'THEIRS', 'Secret']) {
      for (const agentId of [undefined, 'main', 'MAIN', ' Main ']) {
        const params: any = { label, message: 'x', timeoutSeconds: 0 }
        if (agentId) params.agentId = agentId
        const r: any = await st.sessionsSend(params, SANDBOXED_MAIN)
        expect(r.status, `${label}/${agentId} → ${JSON.stringify(r)}`).toBe('forbidden')
      }
    }
    // another agent's session, even one naming this requester as its spawner: the label lookup
    // stays within the requester's agent
    for (const agentId of ['other', 'OTHER', 'other ']) {
      const r: any = await st.sessionsSend({ label: 'other-label', agentId, message: 'x', timeoutSeconds: 0 }, SANDBOXED_MAIN)
      expect(r).toMatchObject({ status: 'forbidden', error: 'Sandboxed sessions_send label lookup is limited to this agent' })
    }
    expect(host.runs).toHaveLength(0)
  })

  test('given a sandboxed main requester when it lists then only its own child is listed', async () => {
    const st = await openMem()
    await family(st)
    await st.upsertSession('global', {})
    await st.upsertSession('unknown', {})
    const r: any = await st.sessionsList({ limit: 1000, messageLimit: 5 }, SANDBOXED_MAIN)
    expect(r.sessions.map((s: any) => s.key)).toEqual(['agent:main:subagent:mine'])
    expect(JSON.stringify(r)).not.toContain(SECRET)
    // a requester key with odd casing is another session: it spawned nothing, so it sees nothing
    for (const agentSessionKey of ['AGENT:MAIN:MAIN', 'Agent:Main:main']) {
      const odd: any = await st.sessionsList({}, { agentSessionKey, sandboxed: true })
      expect(odd.sessions, agentSessionKey).toEqual([])
    }
  })

  test('given a sandboxed main requester when it reaches its own child by key, sessionId or label then it works (control)', async () => {
    const host = recordingHost('child reply')
    const st = await openMem(null, host.options)
    const { mine } = await family(st)
    for (const input of ['agent:main:subagent:mine', 'subagent:mine', 'agent:MAIN:subagent:mine', mine]) {
      const r: any = await st.sessionsHistory({ sessionKey: input }, SANDBOXED_MAIN)
      expect(r.messages?.map(textOf), input).toEqual(['my child'])
    }
    const byKey: any = await st.sessionsSend({ sessionKey: 'agent:main:subagent:mine', message: 'a', timeoutSeconds: 5 }, SANDBOXED_MAIN)
    expect(byKey).toMatchObject({ status: 'ok', reply: 'child reply' })
    const byLabel: any = await st.sessionsSend({ label: 'mine', message: 'b', timeoutSeconds: 5 }, SANDBOXED_MAIN)
    expect(byLabel).toMatchObject({ status: 'ok', sessionKey: 'agent:main:subagent:mine' })
    // the primary runs (the reply-back steps run on the requester, as in any exchange)
    expect(host.runs.filter((r) => r.message === 'a' || r.message === 'b').map((r) => r.sessionKey)).toEqual(['agent:main:subagent:mine', 'agent:main:subagent:mine'])
  })

  test('given per-agent visibility when it differs from the default then the per-agent value wins, and requesterAgentIdOverride does not change it', async () => {
    const host = recordingHost()
    const config: GatewayConfig = {
      agents: {
        defaults: { sandbox: { sessionToolsVisibility: 'all' } },
        list: [{ id: 'main', sandbox: { sessionToolsVisibility: 'spawned' } }, { id: 'ops' }],
      },
    }
    const st = await openMem(config, host.options)
    await family(st)
    for (const ctx of [SANDBOXED_MAIN, { ...SANDBOXED_MAIN, requesterAgentIdOverride: 'ops' }]) {
      const h: any = await st.sessionsHistory({ sessionKey: 'agent:main:subagent:theirs' }, ctx)
      expect(h.status).toBe('forbidden')
      const s: any = await st.sessionsSend({ sessionKey: 'agent:main:secret', message: 'x', timeoutSeconds: 0 }, ctx)
      expect(s.status).toBe('forbidden')
      const l: any = await st.sessionsList({}, ctx)
      expect(l.sessions.map((r: any) => r.key)).toEqual(['agent:main:subagent:mine'])
    }
    expect(host.runs).toHaveLength(0)
    // the other way round: default spawned, main opened up to all
    st.setConfig({ agents: { list: [{ id: 'main', sandbox: { sessionToolsVisibility: 'all' } }, { id: 'ops' }] } })
    const open: any = await st.sessionsHistory({ sessionKey: 'agent:main:secret' }, SANDBOXED_MAIN)
    expect(open.messages?.map(textOf)).toEqual(['secret session'])
    // ... which does not open up ops
    await st.appendMessages('agent:ops:private', [assistant('ops private')])
    const ops: any = await st.sessionsHistory({ sessionKey: 'agent:ops:private' }, { agentSessionKey: 'agent:ops:main', sandboxed: true })
    expect(ops.status).toBe('forbidden')
  })
})

describe('the agent-to-agent allow list cannot be got round (§8)', () => {
  async function twoAgents(config: GatewayConfig, extra: Partial<OpenOptions> = {}) {
    const st = await openMem(config, extra)
    await st.appendMessages('agent:main:work', [assistant('main work')])
    await st.appendMessages('agent:other:main', [assistant('other secret')])
    await st.upsertSession('agent:other:main', { label: 'other-label' })
    const otherSid = (await st.getSession('agent:other:main'))!.sessionId
    return { st, otherSid }
  }
  const MAIN: ToolContext = { agentSessionKey: 'agent:main:main' }

  test('given a2a disabled when main reads, sends to or lists another agent under any spelling then refused; its own agent stays reachable', async () => {
    const host = recordingHost()
    const { st, otherSid } = await twoAgents({}, host.options)
    const spellings = ['agent:other:main', 'agent:Other:main', 'agent:OTHER:main', ' agent:other:main ', 'agent::other::main', 'agent:other:main:', otherSid, otherSid.toUpperCase()]
    for (const ctx of [MAIN, { ...MAIN, requesterAgentIdOverride: 'other' }]) {
      for (const input of spellings) {
        const h: any = await st.sessionsHistory({ sessionKey: input }, ctx)
        expect(h.status, `${input} → ${JSON.stringify(h)}`).toMatch(/^(forbidden|error)$/)
        expect(JSON.stringify(h)).not.toContain('other secret')
        const s: any = await st.sessionsSend({ sessionKey: input, message: 'x', timeoutSeconds: 0 }, ctx)
        expect(s.status, `${input} → ${JSON.stringify(s)}`).toMatch(/^(forbidden|error)$/)
      }
      // key spellings that name the session are refused with the a2a text
      const h: any = await st.sessionsHistory({ sessionKey: 'agent:Other:main' }, ctx)
      expect(h).toEqual({ status: 'forbidden', error: 'Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.' })
      const bySid: any = await st.sessionsHistory({ sessionKey: otherSid }, ctx)
      expect(bySid.status).toBe('forbidden')
      // label lookups: with agentId the pair is checked first, without it the key found is
      for (const agentId of [undefined, 'other', 'OTHER', ' Other ']) {
        const params: any = { label: 'other-label', message: 'x', timeoutSeconds: 0 }
        if (agentId) params.agentId = agentId
        const r: any = await st.sessionsSend(params, ctx)
        expect(r.status, `${agentId} → ${JSON.stringify(r)}`).toBe('forbidden')
        expect(r.error).toMatch(/^Agent-to-agent messaging is disabled/)
      }
      const list: any = await st.sessionsList({ limit: 1000 }, ctx)
      expect(list.sessions.map((s: any) => s.key)).toEqual(['agent:main:work'])
    }
    expect(host.runs).toHaveLength(0)
    expect(await allKeys(st)).toEqual(['agent:main:work', 'agent:other:main'])
    // control: its own agent
    const own: any = await st.sessionsSend({ sessionKey: 'agent:main:work', message: 'x', timeoutSeconds: 5 }, MAIN)
    expect(own.status).toBe('ok')
  })

  test('given allow patterns that must not match when main reaches other then denied (case, literal characters, both sides)', async () => {
    const host = recordingHost()
    const { st, otherSid } = await twoAgents({}, host.options)
    const denied: string[][] = [['Main', 'other'], ['main', 'Other'], ['ma*'], ['main'], ['other'], ['main', 'oth'], ['main', 'o?her'], ['main', 'othe'], ['main', 'other.'], ['main', '.*'], ['', 'main', 'other '.repeat(0)]]
    for (const allow of denied) {
      st.setConfig({ tools: { agentToAgent: { enabled: true, allow } } })
      for (const input of ['agent:other:main', 'agent:OTHER:main', otherSid]) {
        const h: any = await st.sessionsHistory({ sessionKey: input }, MAIN)
        expect(h, `${JSON.stringify(allow)} ${input}`).toEqual({ status: 'forbidden', error: 'Agent-to-agent history denied by tools.agentToAgent.allow.' })
        const s: any = await st.sessionsSend({ sessionKey: input, message: 'x', timeoutSeconds: 0 }, MAIN)
        expect(s).toMatchObject({ status: 'forbidden', error: 'Agent-to-agent messaging denied by tools.agentToAgent.allow.' })
      }
      const byLabel: any = await st.sessionsSend({ label: 'other-label', agentId: 'other', message: 'x', timeoutSeconds: 0 }, MAIN)
      expect(byLabel.status).toBe('forbidden')
      const list: any = await st.sessionsList({}, MAIN)
      expect(list.sessions.map((s: any) => s.key), JSON.stringify(allow)).toEqual(['agent:main:work'])
    }
    expect(host.runs).toHaveLength(0)
    // control: patterns that do match both sides
    for (const allow of [['main', 'other'], ['MA*', 'oth*'], ['*ain', '*ther'], ['*']]) {
      st.setConfig({ tools: { agentToAgent: { enabled: true, allow } } })
      const h: any = await st.sessionsHistory({ sessionKey: 'agent:other:main' }, MAIN)
      expect(h.messages?.map(textOf), JSON.stringify(allow)).toEqual(['other secret'])
    }
  })
})

describe('the send policy holds on every delivery path (§7, DECISIONS.md #6)', () => {
  test('given a target whose entry denies when a send reaches it by key, casing, sessionId or label then blocked and no run', async () => {
    const host = recordingHost()
    const st = await openMem(null, host.options)
    await st.appendMessages('agent:main:quiet', [user('hi')])
    await st.upsertSession('agent:main:quiet', { sendPolicy: 'deny', label: 'quiet' })
    const sid = (await st.getSession('agent:main:quiet'))!.sessionId
    const ctx = { agentSessionKey: 'agent:main:main' }
    for (const target of [{ sessionKey: 'agent:main:quiet' }, { sessionKey: 'agent:MAIN:quiet' }, { sessionKey: 'quiet' }, { sessionKey: ' agent:main::quiet: ' }, { sessionKey: sid }, { label: 'quiet' }, { label: 'quiet', agentId: 'Main' }]) {
      for (const timeoutSeconds of [0, 5]) {
        const r: any = await st.sessionsSend({ ...target, message: 'x', timeoutSeconds }, ctx)
        expect(r, JSON.stringify(target)).toMatchObject({ status: 'error', error: 'send blocked by session policy' })
      }
    }
    expect(host.runs).toHaveLength(0)
    expect((await st.chatHistory('agent:main:quiet')).messages).toHaveLength(1)
    expect(host.events.filter((e) => e.type === 'run.start')).toHaveLength(0)
  })

  test('given a deny rule for discord groups when a send names the group with other prefixes or casing then blocked and no run', async () => {
    const host = recordingHost()
    const st = await openMem({ session: { sendPolicy: { rules: [{ action: 'deny', match: { channel: 'discord', chatType: 'group' } }] } } }, host.options)
    await st.appendMessages('agent:main:discord:group:dev', [user('hi')])
    await st.appendMessages('agent:main:team', [user('hi')])
    await st.upsertSession('agent:main:team', { channel: ' Discord ', chatType: 'group' })
    const variants = [
      'discord:group:dev',
      'agent:main:discord:group:dev',
      'agent:MAIN:discord:group:dev',
      'agent:Main:DISCORD:group:dev',
      '  discord:group:dev  ',
      'agent:main::discord:group:dev',
      'agent:main:discord:group:dev:',
      'agent::main:discord::group:dev',
      'agent:main:team',
      'team',
      (await st.getSession('agent:main:team'))!.sessionId,
    ]
    for (const sessionKey of variants) {
      const r: any = await st.sessionsSend({ sessionKey, message: 'x', timeoutSeconds: 0 }, { agentSessionKey: 'agent:main:main' })
      expect(r, sessionKey).toMatchObject({ status: 'error', error: 'send blocked by session policy' })
      if (!/^[0-9a-f-]{36}$/.test(sessionKey)) expect(await st.resolveSendPolicy({ sessionKey }), sessionKey).toBe('deny')
    }
    expect(host.runs).toHaveLength(0)
    // spellings that are other sessions (the key's case kept) never deliver to the discord group
    for (const sessionKey of ['AGENT:main:discord:group:dev', 'agent:main:discord:GROUP:dev']) {
      const r: any = await st.sessionsSend({ sessionKey, message: 'x', timeoutSeconds: 5 }, { agentSessionKey: 'agent:main:main' })
      expect(r.sessionKey).not.toBe('agent:main:discord:group:dev')
    }
    await new Promise((r) => setTimeout(r, 100))
    expect(host.runs.map((r) => r.sessionKey)).not.toContain('agent:main:discord:group:dev')
    expect(host.deliveries.filter((d) => d.channel === 'discord')).toEqual([])
  })

  test('given a policy that turns to deny before the announce (by /send off or by config) then no delivery and delivery.blocked', async () => {
    for (const flip of ['command', 'config'] as const) {
      const runs: AgentRunRequest[] = []
      const deliveries: DeliveryRequest[] = []
      const events: SessionToolsEvent[] = []
      const DEV = 'agent:main:discord:group:dev'
      let st!: SessionTools
      st = await openMem(
        { session: { agentToAgent: { maxPingPongTurns: 0 } } },
        {
          runAgent: async (req) => {
            runs.push(req)
            if (req.message.startsWith('Agent-to-agent announce')) {
              if (flip === 'command') expect(await st.handleSendCommand({ sessionKey: 'discord:group:dev', text: '/send off', isOwner: true })).toEqual({ handled: true, reply: '⚙️ Send policy set to off.' })
              else st.setConfig({ session: { agentToAgent: { maxPingPongTurns: 0 }, sendPolicy: { rules: [{ action: 'deny', match: { keyPrefix: 'DISCORD:' } }] } } })
            }
            return { reply: 'to the channel' }
          },
          deliver: async (msg) => void deliveries.push(msg),
          onEvent: (ev) => void events.push(ev),
        },
      )
      const r: any = await st.sessionsSend({ sessionKey: DEV, message: 'x', timeoutSeconds: 5 }, { agentSessionKey: 'agent:main:main' })
      expect(r.status).toBe('ok')
      const blocked = await until(() => events.find((e) => e.type === 'delivery.blocked'))
      expect(blocked.sessionKey).toBe(DEV)
      await new Promise((r) => setTimeout(r, 50))
      expect(deliveries, flip).toHaveLength(0)
      expect(events.filter((e) => e.type === 'delivery.sent')).toHaveLength(0)
    }
  })

  test('given a sub-agent whose requester denies sends when the child finishes then its announce is skipped, not run and not delivered', async () => {
    for (const how of ['entry', 'rule'] as const) {
      const host = recordingHost('child result')
      const config: GatewayConfig = how === 'rule' ? { session: { sendPolicy: { rules: [{ action: 'deny', match: { channel: 'discord' } }] } } } : {}
      const st = await openMem(config, host.options)
      const REQ = 'agent:main:discord:group:req'
      if (how === 'entry') await st.upsertSession(REQ, { sendPolicy: 'deny' })
      const spawned: any = await st.sessionsSpawn({ task: 'work' }, { agentSessionKey: REQ, agentChannel: 'discord', agentTo: 'channel:req' })
      expect(spawned.status).toBe('accepted')
      const [run] = await until(async () => {
        const runs = await st.listSubagentRuns(REQ)
        return runs[0]?.announce.status !== 'pending' && runs
      })
      expect(run.announce.status, how).toBe('skipped')
      const ev = host.events.find((e) => e.type === 'delivery.blocked')
      expect(ev).toMatchObject({ sessionKey: REQ, reason: 'send blocked by session policy' })
      expect(host.runs.map((r) => r.lane)).toEqual(['subagent'])
      expect(host.deliveries).toHaveLength(0)
      expect(host.events.filter((e) => e.type === 'subagent.announced')).toHaveLength(0)
    }
  })

  test('given a /send command from a sender who is not the owner then it is ignored, whatever its spelling', async () => {
    const host = recordingHost()
    const st = await openMem(null, host.options)
    await st.upsertSession('agent:main:quiet', { sendPolicy: 'deny' })
    await st.upsertSession('agent:main:open', {})
    for (const text of ['/send on', '/send inherit', '/SEND ON', '/send: allow', '/send reset', ' /send default ']) {
      expect(await st.handleSendCommand({ sessionKey: 'agent:main:quiet', text, isOwner: false }), text).toEqual({ handled: true })
    }
    for (const text of ['/send off', '/Send Off', '/send: deny', '/send@bot off']) {
      expect(await st.handleSendCommand({ sessionKey: 'open', text, isOwner: false }), text).toEqual({ handled: true })
    }
    expect((await st.getSession('agent:main:quiet'))!.sendPolicy).toBe('deny')
    expect(await st.getSession('agent:main:open')).not.toHaveProperty('sendPolicy')
    const r: any = await st.sessionsSend({ sessionKey: 'agent:main:quiet', message: 'x', timeoutSeconds: 0 }, { agentSessionKey: 'agent:main:main' })
    expect(r).toMatchObject({ status: 'error', error: 'send blocked by session policy' })
    expect(host.runs).toHaveLength(0)
    // a non-owner's command on a session that does not exist creates nothing
    await st.handleSendCommand({ sessionKey: 'agent:main:new', text: '/send off', isOwner: false })
    expect(await st.getSession('agent:main:new')).toBeNull()
  })
})

describe('sub-agents and sessions_spawn (§6.1, §6.9, DECISIONS.md #5)', () => {
  const SUBAGENT_SPELLINGS = [
    'agent:main:subagent:x',
    'agent:main:SubAgent:x',
    'agent:MAIN:SUBAGENT:x',
    'subagent:x',
    'SubAgent:x',
    ' agent:main:subagent:x ',
    'agent::main:subagent:x',
    'agent:main::subagent:x',
    'agent:other:subagent:x',
  ]

  test('given a sub-agent caller, however its key is spelled, when it calls sessions_spawn then forbidden and no run, no child, no record', async () => {
    const host = recordingHost()
    const st = await openMem({ agents: { list: [{ id: 'main', subagents: { allowAgents: ['*'] } }] } }, host.options)
    const before = await allKeys(st)
    for (const agentSessionKey of SUBAGENT_SPELLINGS) {
      for (const params of [{ task: 't' }, { task: 't', agentId: 'main' }, { task: 't', agentId: 'other' }]) {
        const r: any = await st.sessionsSpawn(params, { agentSessionKey })
        expect(r, agentSessionKey).toEqual({ status: 'forbidden', error: 'sessions_spawn is not allowed from sub-agent sessions' })
      }
      const viaExecute: any = await st.executeTool('sessions_spawn', { task: 't' }, { agentSessionKey, requesterAgentIdOverride: 'main' })
      expect(viaExecute.details.status).toBe('forbidden')
    }
    expect(host.runs).toHaveLength(0)
    expect(await allKeys(st)).toEqual(before)
    expect(await st.listSubagentRuns()).toEqual([])
  })

  test('given a sub-agent caller when it asks for its tools then none of the session tools are offered', async () => {
    const st = await openMem()
    for (const agentSessionKey of SUBAGENT_SPELLINGS) {
      for (const ctx of [{ agentSessionKey }, { agentSessionKey, sandboxed: true }, { agentSessionKey, requesterAgentIdOverride: 'main' }]) {
        expect(st.toolDefinitions(ctx).map((t) => t.name), agentSessionKey).toEqual([])
        expect(st.createTools(ctx).map((t) => t.name), agentSessionKey).toEqual([])
      }
    }
    // control
    expect(st.toolDefinitions({ agentSessionKey: 'agent:main:main' }).map((t) => t.name)).toContain('sessions_spawn')
  })

  test('given an allow list when a spawn names another agent in any spelling then forbidden and no run', async () => {
    const host = recordingHost()
    const st = await openMem({ agents: { list: [{ id: 'main', subagents: { allowAgents: ['research'] } }, { id: 'research' }, { id: 'ops' }] } }, host.options)
    for (const agentId of ['ops', 'OPS', ' ops ', 'research2', 'researc', 'res*', 'Research Ops', 'ops\u0000']) {
      const r: any = await st.sessionsSpawn({ task: 't', agentId }, { agentSessionKey: 'agent:main:main' })
      expect(r, JSON.stringify(agentId)).toEqual({ status: 'forbidden', error: 'agentId is not allowed for sessions_spawn (allowed: research)' })
    }
    expect(host.runs).toHaveLength(0)
    expect(await st.listSubagentRuns()).toEqual([])
    expect(await allKeys(st)).toEqual([])
    // control: the allowed agent, in another case
    const ok: any = await st.sessionsSpawn({ task: 't', agentId: 'Research' }, { agentSessionKey: 'agent:main:main' })
    expect(ok.status).toBe('accepted')
    expect(ok.childSessionKey).toMatch(/^agent:research:subagent:/)
  })

  test('given maxActive 3 and runs that never end when 20 spawns are fired at once then at most 3 are accepted and run', async () => {
    const runs: AgentRunRequest[] = []
    const st = await openMem(
      { agents: { defaults: { subagents: { maxActive: 3 } } } },
      { runAgent: (req) => (runs.push(req), neverSettles()) },
    )
    const results: any[] = await Promise.all(Array.from({ length: 20 }, (_, i) => st.sessionsSpawn({ task: `t${i}` }, { agentSessionKey: 'agent:main:main' })))
    const accepted = results.filter((r) => r.status === 'accepted')
    expect(accepted.length).toBeGreaterThan(0)
    expect(accepted.length).toBeLessThanOrEqual(3)
    for (const r of results.filter((r) => r.status !== 'accepted')) {
      expect(r).toMatchObject({ status: 'forbidden', error: expect.stringMatching(/^Too many active sub-agents \(\d+\); wait for one to finish\.$/) })
    }
    await new Promise((r) => setTimeout(r, 100))
    expect(runs.length).toBeLessThanOrEqual(3)
    expect((await st.listSubagentRuns('agent:main:main')).length).toBe(accepted.length)
    expect((await allKeys(st)).filter((k) => k.includes(':subagent:')).length).toBe(accepted.length)
  })

  test('given two stores on one file when 20 spawns are fired at once through both then still at most 3 are accepted and run', async () => {
    const runs: AgentRunRequest[] = []
    const dir = tmpDir()
    const options: OpenOptions = {
      path: path.join(dir, 'sessions.db'),
      config: { agents: { defaults: { subagents: { maxActive: 3 } } } },
      runAgent: (req) => (runs.push(req), neverSettles()),
    }
    const a = track(await ST.open(options))
    const b = track(await ST.open(options))
    const results: any[] = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).sessionsSpawn({ task: `t${i}` }, { agentSessionKey: 'agent:main:main' })))
    const accepted = results.filter((r) => r.status === 'accepted')
    expect(accepted.length).toBe(3)
    for (const r of results.filter((r) => r.status !== 'accepted')) expect(r.error).toMatch(/^Too many active sub-agents \(\d+\); wait for one to finish\.$/)
    await new Promise((r) => setTimeout(r, 100))
    expect(runs.length).toBe(3)
    expect((await a.listSubagentRuns('agent:main:main')).length).toBe(3)
    expect((await allKeys(a)).filter((k) => k.includes(':subagent:')).length).toBe(3)
  })
})

describe('path escapes (DECISIONS.md #8, #9)', () => {
  const jsonl = (...lines: unknown[]) => lines.map((l) => JSON.stringify(l) + '\n').join('')
  const msg = (text: string) => ({ type: 'message', message: { role: 'user', content: text } })

  test('given a state folder whose sessionFile climbs, is absolute or is a link to outside when imported then it is skipped, reported and nothing outside is read', async () => {
    const parent = tmpDir()
    const outside = path.join(parent, 'outside')
    fs.mkdirSync(outside)
    fs.writeFileSync(path.join(outside, 'secret.jsonl'), jsonl(msg('OUTSIDE SECRET')))
    fs.mkdirSync(path.join(outside, 'dir'))
    fs.writeFileSync(path.join(outside, 'dir', 'sid-dirlink.jsonl'), jsonl(msg('OUTSIDE SECRET')))
    const root = path.join(parent, 'state')
    const sessions = path.join(root, 'agents', 'main', 'sessions')
    fs.mkdirSync(sessions, { recursive: true })
    fs.symlinkSync(path.join(outside, 'secret.jsonl'), path.join(sessions, 'link.jsonl'))
    fs.symlinkSync(path.join(outside, 'secret.jsonl'), path.join(sessions, 'sid-besidelink.jsonl'))
    fs.symlinkSync(path.join(outside, 'dir'), path.join(sessions, 'sub'))
    const rel = path.relative(sessions, path.join(outside, 'secret.jsonl'))
    fs.writeFileSync(
      path.join(sessions, 'sessions.json'),
      JSON.stringify({
        'agent:main:climb': { sessionId: 'sid-climb', updatedAt: 1, sessionFile: rel },
        'agent:main:passwd': { sessionId: 'sid-passwd', updatedAt: 1, sessionFile: '../../etc/passwd' },
        'agent:main:abs': { sessionId: 'sid-abs', updatedAt: 1, sessionFile: path.join(outside, 'secret.jsonl') },
        'agent:main:etc': { sessionId: 'sid-etc', updatedAt: 1, sessionFile: '/etc/passwd' },
        'agent:main:link': { sessionId: 'sid-link', updatedAt: 1, sessionFile: 'link.jsonl' },
        'agent:main:besidelink': { sessionId: 'sid-besidelink', updatedAt: 1 },
        'agent:main:dirlink': { sessionId: 'sid-dirlink', updatedAt: 1, sessionFile: 'sub/sid-dirlink.jsonl' },
        'agent:main:escapeid': { sessionId: '../../outside/secret', updatedAt: 1 },
      }),
    )
    // a whole agent folder that is a link to outside
    fs.mkdirSync(path.join(outside, 'agent', 'sessions'), { recursive: true })
    fs.writeFileSync(path.join(outside, 'agent', 'sessions', 'sessions.json'), JSON.stringify({ main: { sessionId: 'sid-x', updatedAt: 1 } }))
    fs.writeFileSync(path.join(outside, 'agent', 'sessions', 'sid-x.jsonl'), jsonl(msg('OUTSIDE SECRET')))
    fs.symlinkSync(path.join(outside, 'agent'), path.join(root, 'agents', 'evil'))

    const st = await openMem()
    const r = await st.importStateDir(root)
    for (const key of await allKeys(st)) {
      const h = await st.chatHistory(key, { limit: 1000 })
      expect(JSON.stringify(h.messages), key).not.toContain('OUTSIDE SECRET')
    }
    expect(r.messages).toBe(0)
    const reasons = r.skipped.map((s) => `${s.file}: ${s.reason}`).join('\n')
    for (const sf of [rel, '../../etc/passwd', path.join(outside, 'secret.jsonl'), '/etc/passwd', 'link.jsonl', 'sub/sid-dirlink.jsonl']) {
      expect(reasons, sf).toContain(`sessionFile ${sf} leads outside the state folder`)
    }
    expect(reasons).toContain('outside the state folder')
    for (const s of r.skipped) {
      expect(path.isAbsolute(s.file), s.file).toBe(false)
      expect(s.file.startsWith('..'), s.file).toBe(false)
    }
    expect(await st.getSession('agent:evil:main')).toBeNull()
  })

  test('given sessionIds that are not plain file names when exported or mirrored then no file is written outside the folder', async () => {
    const parent = tmpDir()
    const mirror = path.join(parent, 'deep', 'mirror')
    const st = track(await ST.open({ path: path.join(parent, 'deep', 'db', 'sessions.db'), mirrorDir: mirror }))
    const ids = ['../../evil', '../evil', '/abs/path', path.join(parent, 'abs-evil'), 'a/b', 'a\\b', '..', '.', '.hidden', 'x\u0000y', 'c:evil', '..\\..\\evil']
    for (const [i, sessionId] of ids.entries()) {
      const key = `agent:main:s${i}`
      const set = await st.upsertSession(key, { sessionId }).then(() => true, (e) => (expect(e.code).toBe('INVALID_REQUEST'), false))
      if (set) await st.appendMessages(key, [user(`m${i}`)])
      // and a topic key whose topic climbs
      await st.appendMessages(`agent:main:telegram:group:g${i}:topic:../../t${i}`, [user('topic')])
    }
    const before = tree(parent).filter((p) => !p.startsWith(path.join('deep', 'db')))
    for (const p of before) expect(p === 'deep' || p.startsWith(path.join('deep', 'mirror')), p).toBe(true)
    for (const f of fs.readdirSync(mirror)) expect(f).toMatch(/^[0-9a-f-]{36}\.jsonl$/)

    const out = path.join(parent, 'out')
    const report = await st.exportStateDir(out)
    const after = tree(parent).filter((p) => !p.startsWith(path.join('deep')))
    for (const p of after) expect(p === 'out' || p.startsWith('out' + path.sep), p).toBe(true)
    for (const p of tree(out)) {
      const real = fs.realpathSync(path.join(out, p))
      expect(real.startsWith(fs.realpathSync(out) + path.sep), p).toBe(true)
    }
    expect(report.skipped.length).toBeGreaterThan(0)
    expect(fs.existsSync(path.join(parent, 'evil.jsonl'))).toBe(false)
    expect(fs.existsSync(path.join(parent, 'abs-evil.jsonl'))).toBe(false)
    expect(fs.existsSync('/abs/path.jsonl')).toBe(false)
  })

  test('given an export folder holding links to outside when exported then nothing is written or made through them', async () => {
    const { st } = await openFile(null, { mirrorDir: null })
    await st.appendMessages('agent:main:main', [user('hi')])
    await st.appendMessages('agent:ops:main', [user('hi')])
    const sid = (await st.getSession('agent:main:main'))!.sessionId
    // (1) an agent folder that is a link to outside; (2) a store file and a transcript that are links
    for (const plant of ['agent-folder', 'files'] as const) {
      const parent = tmpDir()
      const outside = path.join(parent, 'outside')
      fs.mkdirSync(outside)
      fs.writeFileSync(path.join(outside, 'victim.json'), 'untouched')
      const out = path.join(parent, 'out')
      fs.mkdirSync(path.join(out, 'agents', 'main', 'sessions'), { recursive: true })
      if (plant === 'agent-folder') {
        fs.symlinkSync(outside, path.join(out, 'agents', 'ops'))
      } else {
        fs.symlinkSync(path.join(outside, 'victim.json'), path.join(out, 'agents', 'main', 'sessions', 'sessions.json'))
        fs.symlinkSync(path.join(outside, 'victim.json'), path.join(out, 'agents', 'main', 'sessions', `${sid}.jsonl`))
      }
      const before = tree(outside)
      const e: any = await st.exportStateDir(out).then(() => null, (e) => e)
      expect(e?.code, plant).toBe('STORE_ERROR')
      expect(fs.readFileSync(path.join(outside, 'victim.json'), 'utf8')).toBe('untouched')
      expect(tree(outside), plant).toEqual(before)
    }
  })

  test('given a link planted in the mirror folder when messages are appended then it is not followed and the store still has them', async () => {
    const parent = tmpDir()
    const mirror = path.join(parent, 'mirror')
    fs.mkdirSync(mirror)
    fs.writeFileSync(path.join(parent, 'victim'), 'untouched')
    fs.symlinkSync(path.join(parent, 'victim'), path.join(mirror, 'sid-planted.jsonl'))
    const st = await openMem(null, { mirrorDir: mirror })
    await st.upsertSession('agent:main:x', { sessionId: 'sid-planted' })
    const r = await st.appendMessages('agent:main:x', [user('hello')])
    expect(r.appended).toBe(1)
    expect(fs.readFileSync(path.join(parent, 'victim'), 'utf8')).toBe('untouched')
    expect((await st.chatHistory('agent:main:x')).messages.map(textOf)).toEqual(['hello'])
  })
})

describe('the chain budget cannot be escaped from inside a run (DECISIONS.md #4)', () => {
  test('given nested sends made with only agentSessionKey (any spelling, or a runId that names no run) then they join the active run and the chain stops', async () => {
    for (const spell of [(k: string) => k, (k: string) => ` ${k.replace('agent:main:', 'agent:MAIN::')} `, (k: string) => k.replace('agent:main:', '')]) {
      const runs: AgentRunRequest[] = []
      const results: any[] = []
      const next: Record<string, string> = { 'agent:main:a': 'agent:main:b', 'agent:main:b': 'agent:main:c', 'agent:main:c': 'agent:main:a' }
      let st!: SessionTools
      let i = 0
      st = await openMem(
        { session: { agentToAgent: { maxPingPongTurns: 0, maxChainTurns: 4 } } },
        {
          runAgent: async (req) => {
            runs.push(req)
            if (!req.message.startsWith('Agent-to-agent announce')) {
              // no runId: the tool call is attributed to the run active on the caller's session
              const ctx: ToolContext = { agentSessionKey: spell(req.sessionKey) }
              if (i++ % 2) ctx.runId = '00000000-0000-4000-8000-000000000000'
              results.push(await st.sessionsSend({ sessionKey: next[req.sessionKey], message: 'pass it on', timeoutSeconds: 0 }, ctx))
            }
            return { reply: 'ANNOUNCE_SKIP' }
          },
        },
      )
      await st.sessionsSend({ sessionKey: 'agent:main:b', message: 'start', timeoutSeconds: 0 }, { agentSessionKey: 'agent:main:a' })
      const refused = await until(() => results.find((r) => r.status === 'forbidden'))
      expect(refused.error).toBe('Agent-to-agent chain limit reached (4 turns).')
      await new Promise((r) => setTimeout(r, 150))
      expect(runs.length).toBeLessThanOrEqual(4)
      expect(new Set(runs.map((r) => r.chainId)).size).toBe(1)
      await st.close()
    }
  })
})
