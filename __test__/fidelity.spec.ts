// Issue 12: the disagreements found by running the 2026.1 gateway's own code against the store.
// Each test builds the situation the way that gateway leaves it on disk (version-3 transcripts
// with entry ids, parent links, compaction and branch entries; topic sessions; global-scope
// folders; entries keyed with capitals) and asserts the fixed behaviour. Where a test needs to
// know how the gateway reads a folder back, it reads it by the gateway's rules (REFERENCE.md
// §2.1, §2.6), written out below.
import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, test } from 'vitest'

import type { AgentRunResult, SessionToolsEvent } from '../index.js'
import { SessionTools, expectReject, openMem, textOf, tmpDir, track } from './helpers'

const CTX = { agentSessionKey: 'agent:main:main' }
const TS = '2026-01-29T10:00:00.000Z'

function write(root: string, rel: string, text: string) {
  const p = path.join(root, rel)
  fs.mkdirSync(path.dirname(p), { recursive: true })
  fs.writeFileSync(p, text)
}

const jsonl = (lines: unknown[]) => lines.map((l) => JSON.stringify(l) + '\n').join('')
const header = (id: string) => ({ type: 'session', version: 3, id, timestamp: TS, cwd: '/srv/gateway' })

/** A message entry as the gateway's transcript library appends it. */
function msg(id: string, parentId: string | null, role: 'user' | 'assistant', text: string) {
  const content = role === 'user' ? text : [{ type: 'text', text }]
  return { type: 'message', id, parentId, timestamp: TS, message: { role, content, timestamp: 1769680800000 } }
}

/** `n` alternating turns chained by parentId after `parent`, ids `<prefix>1…`. */
function turns(prefix: string, n: number, parent: string | null): any[] {
  const out = []
  for (let i = 1; i <= n; i++) {
    out.push(msg(`${prefix}${i}`, i === 1 ? parent : `${prefix}${i - 1}`, i % 2 ? 'user' : 'assistant', `${prefix} ${i}`))
  }
  return out
}

const texts = (messages: any[]) => messages.map(textOf)
const fileMessages = (lines: any[]) => lines.filter((l) => l.message).map((l) => l.message)
const readLines = (file: string) => fs.readFileSync(file, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l))

/** The 2026.1 gateway's transcript lookup and read (REFERENCE.md §2.1, §2.6): `sessionFile` as
 * written, then `<dir of the store>/<sessionId>.jsonl`; every line with a truthy `message`. */
function gatewayReadMessages(storePath: string, entry: any): any[] {
  const candidates = [entry.sessionFile, path.join(path.dirname(storePath), `${entry.sessionId}.jsonl`)].filter(Boolean)
  const file = candidates.find((p) => fs.existsSync(p))
  if (!file) return []
  return fs
    .readFileSync(file, 'utf8')
    .split(/\r?\n/)
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l))
    .filter((l) => l.message)
    .map((l) => l.message)
}

async function history(st: SessionTools, key: string) {
  return (await st.chatHistory(key, { limit: 1000 })).messages
}

describe('issue 12: fidelity with the 2026.1 gateway', () => {
  test('1: given a transcript the gateway compacted and ran 30 more turns on, when imported again then the store holds exactly the messages the file now holds, and once more changes nothing', async () => {
    const root = tmpDir()
    write(root, 'agents/main/sessions/sessions.json', JSON.stringify({ 'agent:main:main': { sessionId: 's1', updatedAt: 1 } }))
    const file = 'agents/main/sessions/s1.jsonl'
    const before = [header('s1'), ...turns('e', 40, null)]
    write(root, file, jsonl(before))
    const st = await openMem()
    expect((await st.importStateDir(root)).messages).toBe(40)

    // sessions.compact keeps the file's last lines (the header goes too), then the agent
    // compacts its context (a compaction entry) and runs 31 more messages.
    const kept = before.slice(-11)
    const compaction = { type: 'compaction', id: 'c1', parentId: 'e40', timestamp: TS, summary: 'earlier turns', firstKeptEntryId: 'e35', tokensBefore: 9000 }
    const after = [...kept, compaction, ...turns('n', 31, 'c1')]
    write(root, file, jsonl(after))
    const r = await st.importStateDir(root)
    expect(r.skipped).toEqual([])
    expect(texts(await history(st, 'main'))).toEqual(texts(fileMessages(after)))
    expect((await history(st, 'main')).length).toBe(42)

    const again = await st.importStateDir(root)
    expect(again).toMatchObject({ sessions: 0, messages: 0 })
    expect(texts(await history(st, 'main'))).toEqual(texts(fileMessages(after)))
  })

  test('2: given user messages with channel envelopes when sessions_list is asked for messages then the envelopes are stripped as sessions_history strips them', async () => {
    const st = await openMem()
    await st.appendMessages('main', [
      { role: 'user', content: '[WebChat +15551234567 2026-01-24 13:36] where are we?\n[message_id: 7b8b-42]' },
      { role: 'assistant', content: [{ type: 'text', text: 'at step 3' }] },
      { role: 'user', content: [{ type: 'text', text: '[WhatsApp +15557654321 2026-01-24 13:40] and now?' }] },
    ])
    const list: any = await st.sessionsList({ messageLimit: 3 }, CTX)
    const row = list.sessions.find((s: any) => s.key === 'main')
    expect(texts(row.messages)).toEqual(['where are we?', 'at step 3', 'and now?'])
    expect(JSON.stringify(row.messages)).not.toMatch(/\+1555|message_id/)
    const h: any = await st.sessionsHistory({ sessionKey: 'main' }, CTX)
    expect(row.messages).toEqual(h.messages)
  })

  test('3: given a transcript with compaction, a branch and other entries that are not messages when imported, exported and imported again then every entry comes back in order with its parent link, and only messages are shown', async () => {
    const root = tmpDir()
    write(root, 'agents/main/sessions/sessions.json', JSON.stringify({ 'agent:main:main': { sessionId: 's3', updatedAt: 5 } }))
    const entries = [
      { type: 'model_change', id: 'm0', parentId: null, timestamp: TS, provider: 'anthropic', modelId: 'claude' },
      { type: 'thinking_level_change', id: 't0', parentId: 'm0', timestamp: TS, thinkingLevel: 'high' },
      ...turns('a', 4, 't0'),
      { type: 'compaction', id: 'c1', parentId: 'a4', timestamp: TS, summary: 'a1-a2', firstKeptEntryId: 'a3', tokensBefore: 1200 },
      ...turns('b', 2, 'c1'),
      // the user went back to a2 and took another way: a branch summary, then the new turns
      { type: 'branch_summary', id: 'bs', parentId: 'a2', timestamp: TS, fromId: 'b2', summary: 'tried b' },
      ...turns('x', 3, 'bs'),
      { type: 'custom', id: 'cu', parentId: 'x3', timestamp: TS, customType: 'tool-state', data: { k: [1, 2] } },
      { type: 'label', id: 'lb', parentId: 'cu', timestamp: TS, targetId: 'x2', label: 'checkpoint' },
    ]
    write(root, 'agents/main/sessions/s3.jsonl', jsonl([header('s3'), ...entries]))
    const a = await openMem()
    expect((await a.importStateDir(root)).messages).toBe(9)
    expect(texts(await history(a, 'main'))).toEqual(texts(fileMessages(entries)))

    const out1 = tmpDir()
    await a.exportStateDir(out1)
    const lines1 = readLines(path.join(out1, 'agents/main/sessions/s3.jsonl'))
    expect(lines1[0]).toMatchObject({ type: 'session', version: 3, id: 's3' })
    expect(lines1.slice(1)).toEqual(entries)

    const b = await openMem()
    const back = await b.importStateDir(out1)
    expect(back).toMatchObject({ messages: 9, skipped: [] })
    const out2 = tmpDir()
    await b.exportStateDir(out2)
    expect(readLines(path.join(out2, 'agents/main/sessions/s3.jsonl')).slice(1)).toEqual(entries)
    expect(await history(b, 'main')).toEqual(await history(a, 'main'))
  })

  test('4: given topic sessions when the export is moved into the state folder by the documented steps then the gateway finds all their messages', async () => {
    const live = tmpDir() // the state folder the gateway will run on
    const src = tmpDir()
    const topic31 = 'agent:main:telegram:group:-100:topic:7'
    const topic7 = 'agent:main:telegram:group:-100:topic:8'
    write(
      src,
      'agents/main/sessions/sessions.json',
      JSON.stringify({
        [topic31]: { sessionId: 'st', updatedAt: 2, sessionFile: path.join(src, 'agents/main/sessions/st-topic-7.jsonl') },
        [topic7]: { sessionId: 'su', updatedAt: 3, sessionFile: path.join(src, 'agents/main/sessions/su-topic-8.jsonl') },
      }),
    )
    write(src, 'agents/main/sessions/st-topic-7.jsonl', jsonl([header('st'), ...turns('t', 31, null)]))
    write(src, 'agents/main/sessions/su-topic-8.jsonl', jsonl([header('su'), ...turns('u', 7, null)]))
    const st = await openMem()
    await st.importStateDir(src)

    // docs/INTEGRATION.md §6, steps 2 and 3
    const out = tmpDir()
    await st.exportStateDir(out, { stateDir: live })
    for (const id of fs.readdirSync(path.join(out, 'agents'))) {
      fs.mkdirSync(path.join(live, 'agents', id), { recursive: true })
      fs.renameSync(path.join(out, 'agents', id, 'sessions'), path.join(live, 'agents', id, 'sessions'))
    }
    fs.rmSync(out, { recursive: true, force: true })

    const storePath = path.join(live, 'agents/main/sessions/sessions.json')
    const store = JSON.parse(fs.readFileSync(storePath, 'utf8'))
    expect(gatewayReadMessages(storePath, store[topic31]).length).toBe(31)
    expect(gatewayReadMessages(storePath, store[topic7]).length).toBe(7)
    await expectReject(st.exportStateDir(tmpDir(), { stateDir: 'relative/state' }), 'INVALID_REQUEST', /stateDir/)
  })

  test('5: given a global-scope folder with two agents when imported then each agent\'s main session can be found and the collision is reported', async () => {
    const root = tmpDir()
    write(root, 'agents/main/sessions/sessions.json', JSON.stringify({ global: { sessionId: 'g-main', updatedAt: 1 } }))
    write(root, 'agents/main/sessions/g-main.jsonl', jsonl([header('g-main'), ...turns('m', 7, null)]))
    write(root, 'agents/ops/sessions/sessions.json', JSON.stringify({ global: { sessionId: 'g-ops', updatedAt: 2 } }))
    write(root, 'agents/ops/sessions/g-ops.jsonl', jsonl([header('g-ops'), ...turns('o', 7, null)]))
    const st = await openMem({ session: { scope: 'global' }, agents: { list: [{ id: 'main' }, { id: 'ops' }] } })
    const r = await st.importStateDir(root)
    expect(r).toMatchObject({ sessions: 2, messages: 14 })
    expect(r.merged).toEqual([
      { file: 'agents/ops/sessions/sessions.json', key: 'global', sessionId: 'g-ops', into: 'global', keptAs: 'agent:ops:global' },
    ])
    expect(texts(await history(st, 'global'))).toEqual(turns('m', 7, null).map((e) => textOf(e.message)))
    expect(texts(await history(st, 'agent:ops:global'))).toEqual(turns('o', 7, null).map((e) => textOf(e.message)))
    const listed: any = await st.listSessions({ includeGlobal: true })
    expect(listed.sessions.map((s: any) => s.key).sort()).toEqual(['agent:ops:global', 'global'])
  })

  describe('6: the lower-impact disagreements', () => {
    test('6a: after an export the gateway finds every session\'s transcript through sessionFile, which its listing (path "(multiple)") needs for titles and previews', async () => {
      const st = await openMem()
      await st.appendMessages('main', [{ role: 'user', content: 'plan the trip' }, { role: 'assistant', content: [{ type: 'text', text: 'done' }] }])
      const out = tmpDir()
      await st.exportStateDir(out)
      const store = JSON.parse(fs.readFileSync(path.join(out, 'agents/main/sessions/sessions.json'), 'utf8'))
      const entry = store['agent:main:main']
      expect(path.isAbsolute(entry.sessionFile)).toBe(true)
      // the gateway's combined listing passes "(multiple)" as the store path: only sessionFile leads to the file
      const found = gatewayReadMessages('(multiple)', entry)
      expect(texts(found)).toEqual(['plan the trip', 'done'])
    })

    test('6b: given an agents.list when listing then sessions of agents not in it are hidden, as the gateway hides them', async () => {
      const st = await openMem({ agents: { list: [{ id: 'main', default: true }, { id: 'ops' }] }, tools: { agentToAgent: { enabled: true } } })
      for (const key of ['agent:main:a', 'agent:ops:b', 'agent:ghost:c']) await st.upsertSession(key, { label: key.split(':')[2] })
      const rpc: any = await st.listSessions({})
      expect(rpc.sessions.map((s: any) => s.key).sort()).toEqual(['agent:main:a', 'agent:ops:b'])
      const tool: any = await st.sessionsList({}, CTX)
      expect(tool.sessions.map((s: any) => s.key).sort()).toEqual(['agent:main:a', 'agent:ops:b'])
    })

    test('6c: given an entry the gateway keeps under a capitalised agent key with sendPolicy deny when imported then the send-policy decision on that key is deny, as the gateway\'s', async () => {
      const root = tmpDir()
      write(
        root,
        'agents/ops/sessions/sessions.json',
        JSON.stringify({ 'agent:Ops:discord:group:Dev': { sessionId: 'sd', updatedAt: 1, sendPolicy: 'deny', channel: 'discord' } }),
      )
      const st = await openMem({ agents: { list: [{ id: 'main' }, { id: 'ops' }] } })
      await st.importStateDir(root)
      // one rule on every path: the agent id lower-case, the rest as written
      expect(await st.resolveSendPolicy({ sessionKey: 'agent:Ops:discord:group:Dev' })).toBe('deny')
      expect((await st.getSession('agent:ops:discord:group:Dev'))?.sendPolicy).toBe('deny')
      expect(await st.getSession('agent:ops:discord:group:dev')).toBeNull()
    })

    test('6d: sessions.list reports the store path the gateway reports, not the database file', async () => {
      const plain: any = await (await openMem()).listSessions({})
      expect(plain.path).toBe('(multiple)')
      const templ: any = await (await openMem({ session: { store: ' ~/state/{agentId}/sessions.json ' } })).listSessions({})
      expect(templ.path).toBe('~/state/{agentId}/sessions.json')
      const fixed: any = await (await openMem({ session: { store: '/srv/state/sessions.json' } })).listSessions({})
      expect(fixed.path).toBe('/srv/state/sessions.json')
    })

    test('6e: sessions_history (and sessions_send, through the same resolution) echo a bare key as it was given', async () => {
      const runAgent = async () => ({ reply: 'ANNOUNCE_SKIP' })
      const st = await openMem({ session: { agentToAgent: { maxPingPongTurns: 0 } } }, { runAgent })
      await st.appendMessages('discord:group:dev', [{ role: 'user', content: 'hi' }])
      const h: any = await st.sessionsHistory({ sessionKey: 'discord:group:dev' }, CTX)
      expect(h.sessionKey).toBe('discord:group:dev')
      expect(texts(h.messages)).toEqual(['hi'])
      expect(((await st.sessionsHistory({ sessionKey: 'main' }, CTX)) as any).sessionKey).toBe('main')
      const sent: any = await st.sessionsSend({ sessionKey: 'discord:group:dev', message: 'ping', timeoutSeconds: 5 }, CTX)
      expect(sent).toMatchObject({ status: 'ok', sessionKey: 'discord:group:dev' })
    })

    test('6f: the last-message preview keeps the message\'s white space (trimmed only); the derived title collapses it', async () => {
      const st = await openMem()
      await st.appendMessages('main', [{ role: 'user', content: '  first\n\n  line  ' }])
      const r: any = await st.listSessions({ includeLastMessage: true, includeDerivedTitles: true })
      expect(r.sessions[0].lastMessagePreview).toBe('first\n\n  line')
      expect(r.sessions[0].derivedTitle).toBe('first line')
    })

    test('6g: the two configs the gateway refuses are refused', async () => {
      await expectReject(SessionTools.open({ path: ':memory:', config: { session: { agentToAgent: { maxPingPongTurns: 9 } } } }), 'INVALID_CONFIG', /maxPingPongTurns/)
      await expectReject(
        SessionTools.open({ path: ':memory:', config: { session: { sendPolicy: { rules: [{ match: { channel: 'discord' } }] } } } as any }),
        'INVALID_CONFIG',
        /rules\[0\]\.action is required/,
      )
    })
  })

  test('7: our settings go in open({ settings }) and setConfig(config, settings); the old places still work for one release with a config.deprecated event', async () => {
    const events: SessionToolsEvent[] = []
    const gatewayConfig = { session: { scope: 'per-sender' as const, agentToAgent: { maxPingPongTurns: 2 } } }
    const st = track(await SessionTools.open({ path: ':memory:', config: gatewayConfig, settings: { history: { maxChars: 40 } }, onEvent: (e) => void events.push(e) }))
    await st.appendMessages('main', [1, 2, 3].map((i) => ({ role: 'user', content: `message number ${i}` })))
    const h: any = await st.sessionsHistory({ sessionKey: 'main' }, CTX)
    expect(h.truncated).toBe(true)
    expect(texts(h.messages)).toEqual(['message number 3'])
    expect(events.filter((e) => e.type === 'config.deprecated')).toEqual([])

    // setConfig without settings keeps them; with them, replaces them
    st.setConfig(gatewayConfig)
    expect(((await st.sessionsHistory({ sessionKey: 'main' }, CTX)) as any).messages.length).toBe(1)
    st.setConfig(gatewayConfig, { history: {} })
    expect(((await st.sessionsHistory({ sessionKey: 'main' }, CTX)) as any).messages.length).toBe(3)

    // the old place: still read, and reported
    st.setConfig({ session: { history: { maxChars: 40 } } } as any)
    expect(((await st.sessionsHistory({ sessionKey: 'main' }, CTX)) as any).messages.length).toBe(1)
    await new Promise((r) => setTimeout(r, 50))
    expect(events.filter((e) => e.type === 'config.deprecated')).toEqual([
      expect.objectContaining({ type: 'config.deprecated', key: 'session.history', use: 'settings.history' }),
    ])

    // a bad setting is INVALID_CONFIG naming the key, and the config in force stays
    expect(() => st.setConfig(gatewayConfig, { outbox: { backoffMs: -1 } })).toThrow(/settings\.outbox\.backoffMs/)
    expect(() => st.setConfig(gatewayConfig, { histroy: {} } as any)).toThrow(/settings\.histroy is not a setting/)
    await expectReject(SessionTools.open({ path: ':memory:', settings: { agentToAgent: { maxChainTurns: 'x' } } as any }), 'INVALID_CONFIG', /settings\.agentToAgent\.maxChainTurns/)
  })

  test('8: given a run that fails with an empty error message then sessions_send ends with error "agent error"', async () => {
    for (const fail of [() => Promise.reject(new Error('')), () => Promise.reject(''), () => { throw new Error('') }]) {
      const st = await openMem({ session: { agentToAgent: { maxPingPongTurns: 0 } } }, { runAgent: fail as () => Promise<AgentRunResult> })
      const r: any = await st.sessionsSend({ sessionKey: 'agent:main:target', message: 'ping', timeoutSeconds: 5 }, CTX)
      expect(r).toMatchObject({ status: 'error', error: 'agent error' })
    }
  })
})
