// Opening, configuring and closing a store (API.md §1, §1.1).
import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, test } from 'vitest'

import {
  FOREIGN_SQLITE_DB_BASE64,
  SessionTools,
  expectReject,
  expectThrowCode,
  freshPgUrl,
  openFile,
  openMem,
  settle,
  tmpDir,
  track,
} from './helpers'

describe('open', () => {
  test('given :memory: when opened then the store works and path reports :memory:', async () => {
    const st = await openMem()
    expect(st.path).toBe(':memory:')
    const e = await st.upsertSession('main', { label: 'x' })
    expect(e.label).toBe('x')
  })

  test('given a path in folders that do not exist when opened then the folders and the file are created', async () => {
    const dir = tmpDir()
    const db = path.join(dir, 'a', 'b', 'sessions.db')
    const st = track(await SessionTools.open({ path: db }))
    expect(st.path).toBe(db)
    await st.upsertSession('main', { label: 'made' })
    expect(fs.existsSync(db)).toBe(true)
  })

  test('given a file store when closed and reopened then its sessions and messages are still there', async () => {
    const { st, db } = await openFile()
    await st.upsertSession('discord:group:dev', { subject: 'Dev' })
    await st.appendMessages('discord:group:dev', [{ role: 'user', content: 'persisted' }])
    await st.close()
    const again = track(await SessionTools.open({ path: db }))
    expect((await again.getSession('agent:main:discord:group:dev'))?.subject).toBe('Dev')
    const h = await again.chatHistory('discord:group:dev')
    expect(h.messages).toEqual([{ role: 'user', content: 'persisted' }])
  })

  test('given a text file when opened then it rejects STORE_ERROR naming the path and the file is byte-identical', async () => {
    const dir = tmpDir()
    const file = path.join(dir, 'notes.txt')
    const content = 'these are my notes, not a database\n'.repeat(100)
    fs.writeFileSync(file, content)
    const before = fs.readFileSync(file)
    const err = await expectReject(SessionTools.open({ path: file }), 'STORE_ERROR')
    expect(err.message).toContain(file)
    expect(fs.readFileSync(file).equals(before)).toBe(true)
    expect(fs.readdirSync(dir)).toEqual(['notes.txt'])
  })

  test('given a SQLite database with foreign tables when opened then it rejects STORE_ERROR and the file is unchanged', async () => {
    const dir = tmpDir()
    const file = path.join(dir, 'other.db')
    const bytes = Buffer.from(FOREIGN_SQLITE_DB_BASE64, 'base64')
    fs.writeFileSync(file, bytes)
    const err = await expectReject(SessionTools.open({ path: file }), 'STORE_ERROR')
    expect(err.message).toContain(file)
    expect(fs.readFileSync(file).equals(bytes)).toBe(true)
  })

  test('given an empty (0-byte) file when opened then it is a new store', async () => {
    const dir = tmpDir()
    const file = path.join(dir, 'empty.db')
    fs.writeFileSync(file, '')
    const st = track(await SessionTools.open({ path: file }))
    await st.upsertSession('main', { label: 'fresh' })
    expect((await st.getSession('main'))?.label).toBe('fresh')
  })

  test('given a folder as the path when opened then it rejects STORE_ERROR', async () => {
    const dir = tmpDir()
    await expectReject(SessionTools.open({ path: dir }), 'STORE_ERROR')
  })

  test('given a new file opened by two stores at once when both resolve then both work on one store', async () => {
    const dir = tmpDir()
    const db = path.join(dir, 'race.db')
    const [a, b] = (await Promise.all([SessionTools.open({ path: db }), SessionTools.open({ path: db })])).map(track)
    await a.upsertSession('main', { label: 'a' })
    expect((await b.getSession('main'))?.label).toBe('a')
  })

  test('given the same file opened twice in one process when both write then each sees the other', async () => {
    const { st, db } = await openFile()
    const other = track(await SessionTools.open({ path: db }))
    await st.upsertSession('agent:main:a', { label: 'a' })
    await other.upsertSession('agent:main:b', { label: 'b' })
    expect((await other.getSession('agent:main:a'))?.label).toBe('a')
    expect((await st.getSession('agent:main:b'))?.label).toBe('b')
  })

  test.each([
    ['no options', undefined],
    ['null options', null],
    ['a string', ':memory:'],
    ['no path', {}],
    ['a numeric path', { path: 42 }],
    ['an empty path', { path: '   ' }],
  ])('given %s when opened then it rejects INVALID_REQUEST without throwing', async (_name, options) => {
    const r = await settle(() => (SessionTools.open as any)(options))
    expect('threw' in r).toBe(false)
    expect('ok' in r && r.ok).toBe(false)
    expect((r as any).error.code).toBe('INVALID_REQUEST')
  })

  test('given options whose path getter throws or a Proxy that throws when opened then it rejects INVALID_REQUEST without throwing', async () => {
    const trap = () => {
      throw new Error('trap')
    }
    for (const options of [{ get path() { return trap() } }, new Proxy({}, { get: trap, ownKeys: trap, has: trap })]) {
      const r = await settle(() => SessionTools.open(options as any))
      expect('threw' in r, `threw synchronously: ${(r as any).error?.message}`).toBe(false)
      expect((r as any).ok).toBe(false)
      expect((r as any).error.code).toBe('INVALID_REQUEST')
    }
  })

  test('given a callback option that is not a function when opened then it rejects INVALID_REQUEST', async () => {
    await expectReject(SessionTools.open({ path: ':memory:', runAgent: 42 as any }), 'INVALID_REQUEST', /runAgent/)
  })
})

describe('config validation', () => {
  test('given a send-policy rule with action maybe when opened then it rejects INVALID_CONFIG naming the key', async () => {
    const err = await expectReject(
      SessionTools.open({ path: ':memory:', config: { session: { sendPolicy: { rules: [{ action: 'maybe' as any }] } } } }),
      'INVALID_CONFIG',
    )
    expect(err.message).toMatch(/action|sendPolicy/)
  })

  test.each([
    ['a chatType outside its vocabulary', { session: { sendPolicy: { rules: [{ action: 'deny', match: { chatType: 'room' } }] } } }],
    ['a default outside its vocabulary', { session: { sendPolicy: { default: 'block' } } }],
    ['non-array rules', { session: { sendPolicy: { rules: { action: 'deny' } } } }],
    ['non-array tools.agentToAgent.allow', { tools: { agentToAgent: { enabled: true, allow: 'main' } } }],
    ['non-array allowAgents', { agents: { list: [{ id: 'main', subagents: { allowAgents: 'research' } }] } }],
    ['a negative maxPingPongTurns', { session: { agentToAgent: { maxPingPongTurns: -1 } } }],
    ['a negative maxChainTurns', { session: { agentToAgent: { maxChainTurns: -3 } } }],
    ['a negative timeoutSeconds', { agents: { defaults: { timeoutSeconds: -5 } } }],
    ['a string maxPingPongTurns', { session: { agentToAgent: { maxPingPongTurns: 'five' } } }],
    ['a non-boolean agentToAgent.enabled', { tools: { agentToAgent: { enabled: 'yes' } } }],
    ['a session that is a string', { session: 'per-sender' }],
    ['a scope outside its vocabulary', { session: { scope: 'everyone' } }],
    ['a visibility outside its vocabulary', { agents: { defaults: { sandbox: { sessionToolsVisibility: 'some' } } } }],
    ['a negative history.maxChars', { session: { history: { maxChars: -1 } } }],
    // issue 12: the two configs the gateway's own schema refuses
    ['a rule without action', { session: { sendPolicy: { rules: [{ match: { channel: 'discord' } }] } } }],
    ['maxPingPongTurns 9', { session: { agentToAgent: { maxPingPongTurns: 9 } } }],
  ])('given %s when opened then it rejects INVALID_CONFIG', async (_name, config) => {
    await expectReject(SessionTools.open({ path: ':memory:', config: config as any }), 'INVALID_CONFIG')
  })

  test.each([
    ['no config', undefined],
    ['null config', null],
    ['an empty config', {}],
    ['maxPingPongTurns 5', { session: { agentToAgent: { maxPingPongTurns: 5 } } }],
    ['unknown keys', { whatever: { deep: [1, 2, 3] }, session: { somethingNew: true } }],
  ])('given %s when opened then it opens', async (_name, config) => {
    const st = track(await SessionTools.open({ path: ':memory:', config: config as any }))
    expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('allow')
  })

  test('given an open store when setConfig gets a bad config then it throws INVALID_CONFIG synchronously and keeps the old config', async () => {
    const st = await openMem({ session: { sendPolicy: { default: 'deny' } } })
    expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('deny')
    expectThrowCode(() => st.setConfig({ session: { sendPolicy: { rules: [{ action: 'maybe' as any }] } } }), 'INVALID_CONFIG')
    expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('deny')
  })

  test('given an open store when setConfig gets a good config then the new config applies at once', async () => {
    const st = await openMem()
    expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('allow')
    st.setConfig({ session: { sendPolicy: { default: 'deny' } } })
    expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('deny')
    st.setConfig(null)
    expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('allow')
  })

  test('given setConfig with a new default agent when a bare key is used then it belongs to the new default agent', async () => {
    const st = await openMem()
    st.setConfig({ agents: { list: [{ id: 'ops', default: true }] } })
    const r = await st.appendMessages('discord:group:dev', [{ role: 'user', content: 'x' }])
    expect(r.sessionKey).toBe('agent:ops:discord:group:dev')
  })
})

describe('close', () => {
  test('given a store when closed twice then both resolve', async () => {
    const st = await SessionTools.open({ path: ':memory:' })
    await st.close()
    await expect(st.close()).resolves.toBeUndefined()
  })

  test('given a closed store when every promise method is called then each rejects CLOSED', async () => {
    const { st } = await openFile()
    await st.upsertSession('main', {})
    await st.close()
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['getSession', () => st.getSession('main')],
      ['upsertSession', () => st.upsertSession('main', {})],
      ['patchSession', () => st.patchSession({ key: 'main', label: 'x' })],
      ['resolveSession', () => st.resolveSession({ key: 'main' })],
      ['listSessions', () => st.listSessions()],
      ['deleteSession', () => st.deleteSession('agent:main:x')],
      ['resetSession', () => st.resetSession('main')],
      ['appendMessages', () => st.appendMessages('main', [{ role: 'user', content: 'x' }])],
      ['chatHistory', () => st.chatHistory('main')],
      ['resolveSendPolicy', () => st.resolveSendPolicy({ sessionKey: 'main' })],
      ['handleSendCommand', () => st.handleSendCommand({ sessionKey: 'main', text: '/send off', isOwner: true })],
      ['sessionsList', () => st.sessionsList({})],
      ['sessionsHistory', () => st.sessionsHistory({ sessionKey: 'main' })],
      ['agentsList', () => st.agentsList()],
      ['executeTool', () => st.executeTool('sessions_list', {})],
    ]
    for (const [name, call] of calls) {
      const r = await settle(call)
      expect('threw' in r, `${name} threw synchronously`).toBe(false)
      expect((r as any).ok, `${name} resolved after close`).toBe(false)
      expect((r as any).error?.code, `${name}: ${(r as any).error?.message}`).toBe('CLOSED')
    }
  })

  test('given a closed store when a createTools tool executes then it rejects CLOSED', async () => {
    const st = await SessionTools.open({ path: ':memory:' })
    const tools = st.createTools({ agentSessionKey: 'agent:main:main' })
    await st.close()
    const list = tools.find((t) => t.name === 'sessions_list')!
    await expectReject(list.execute('call-1', {}), 'CLOSED')
  })

  test('given writes in flight when the store is closed then each settles (done or CLOSED) and close resolves', async () => {
    const { st, db } = await openFile()
    const writes = Array.from({ length: 100 }, (_, i) => st.upsertSession(`agent:main:w${i}`, { i }).then(() => 'ok', (e) => e.code))
    await st.close()
    const outcomes = await Promise.all(writes)
    for (const o of outcomes) expect(['ok', 'CLOSED']).toContain(o)
    const again = track(await SessionTools.open({ path: db }))
    const count = (await again.listSessions({ limit: 1000 })).count
    expect(count).toBe(outcomes.filter((o) => o === 'ok').length)
  })

  test('given two stores on one file when one is closed then the other keeps working', async () => {
    const { st, db } = await openFile()
    const other = track(await SessionTools.open({ path: db }))
    await st.close()
    await other.upsertSession('main', { label: 'still' })
    expect((await other.getSession('main'))?.label).toBe('still')
  })
})

describe('open on PostgreSQL (options.url)', () => {
  test('given path and url together when opened then INVALID_REQUEST says to give one', async () => {
    await expectReject(SessionTools.open({ path: ':memory:', url: 'postgres://u@localhost/db' }), 'INVALID_REQUEST', /not both/)
  })

  test('given a url that is not postgres:// when opened then INVALID_REQUEST names options.url', async () => {
    await expectReject(SessionTools.open({ url: 'mysql://u@localhost/db' }), 'INVALID_REQUEST', /options\.url/)
  })

  test('given a postgres URL as options.path when opened then INVALID_REQUEST points to options.url', async () => {
    await expectReject(SessionTools.open({ path: 'postgres://u@localhost/db' }), 'INVALID_REQUEST', /options\.url/)
  })

  test('given neither path nor url when opened then INVALID_REQUEST names both', async () => {
    await expectReject(SessionTools.open({} as any), 'INVALID_REQUEST', /options\.path .*options\.url/)
  })

  test('given a server that does not answer when opened then STORE_ERROR names it without the password', async () => {
    const err = await expectReject(
      SessionTools.open({ url: 'postgres://me:secret@127.0.0.1:1/db?connect_timeout=1' }),
      'STORE_ERROR',
      /127\.0\.0\.1/,
    )
    expect(err.message).not.toContain('secret')
  })

  test('given the test server when opened by url then sessions are kept across a reopen, and path shows no password', async () => {
    const url = freshPgUrl()
    const st = track(await SessionTools.open({ url }))
    expect(st.path).toMatch(/^postgres:\/\//)
    await st.upsertSession('agent:main:pg', { label: 'on-postgres' })
    await st.close()
    const again = track(await SessionTools.open({ url }))
    expect((await again.getSession('agent:main:pg'))?.label).toBe('on-postgres')
  })
})
