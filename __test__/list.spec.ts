// listSessions (the gateway's sessions.list, REFERENCE.md §2.7) and the sessions_list tool
// (§3, SESSION_TOOLS.md, DECISIONS.md, the implementation's documented departures).
import path from 'node:path'
import { describe, expect, test } from 'vitest'

import type { SessionTools } from '../index.js'
import { assistant, expectKeyOrder, expectReject, openFile, openMem, tmpDir, toolResult, user } from './helpers'

const GATEWAY_ROW_ORDER = [
  'key', 'kind', 'label', 'displayName', 'channel', 'subject', 'groupChannel', 'space', 'chatType', 'origin',
  'updatedAt', 'sessionId', 'systemSent', 'abortedLastRun', 'thinkingLevel', 'verboseLevel', 'reasoningLevel',
  'elevatedLevel', 'sendPolicy', 'inputTokens', 'outputTokens', 'totalTokens', 'responseUsage', 'modelProvider',
  'model', 'contextTokens', 'deliveryContext', 'lastChannel', 'lastTo', 'lastAccountId', 'derivedTitle',
  'lastMessagePreview',
] as const

const TOOL_ROW_ORDER = [
  'key', 'kind', 'channel', 'label', 'displayName', 'deliveryContext', 'updatedAt', 'sessionId', 'model',
  'contextTokens', 'totalTokens', 'thinkingLevel', 'verboseLevel', 'systemSent', 'abortedLastRun', 'sendPolicy',
  'lastChannel', 'lastTo', 'lastAccountId', 'transcriptPath', 'messages',
] as const

const MAIN = { agentSessionKey: 'agent:main:main' }
const soon = (n: number) => Date.now() + 60_000 + n * 1000

/** S25's store: main (newest of the regular ones), a group, a sub-agent, global. */
async function s25(st: SessionTools) {
  await st.upsertSession('discord:group:dev', { chatType: 'group', channel: 'discord', updatedAt: soon(1) })
  await st.upsertSession('agent:main:subagent:one', { spawnedBy: 'agent:main:main', label: 'Briefing', updatedAt: soon(2) })
  await st.upsertSession('main', {
    inputTokens: 10,
    outputTokens: 20,
    lastChannel: 'whatsapp',
    lastTo: '+1555',
    lastAccountId: 'acct-1',
    updatedAt: soon(3),
  })
  await st.upsertSession('global', { updatedAt: soon(4) })
}

describe('listSessions (sessions.list)', () => {
  test('given S25 entries when listed without includeGlobal then no global row, main has totalTokens 30 and deliveryContext', async () => {
    const st = await openMem()
    await s25(st)
    const r = await st.listSessions({ includeGlobal: false })
    expect(r.sessions.map((s) => s.key)).toEqual(['agent:main:main', 'agent:main:subagent:one', 'agent:main:discord:group:dev'])
    expect(r.count).toBe(3)
    expect(typeof r.ts).toBe('number')
    expect(typeof r.path).toBe('string')
    const main = r.sessions[0]
    expect(main.totalTokens).toBe(30)
    expect(main.deliveryContext).toEqual({ channel: 'whatsapp', to: '+1555', accountId: 'acct-1' })
    expect(main.lastChannel).toBe('whatsapp')
    expect(main.lastTo).toBe('+1555')
    expect(main.lastAccountId).toBe('acct-1')
    expect(main.kind).toBe('direct')
  })

  test('given S25 entries when listed with includeGlobal and limit 1 then only the newest, global', async () => {
    const st = await openMem()
    await s25(st)
    const r = await st.listSessions({ includeGlobal: true, limit: 1 })
    expect(r.sessions.map((s) => s.key)).toEqual(['global'])
    expect(r.sessions[0].kind).toBe('global')
    expect(r.count).toBe(1)
  })

  test('given fresh entries when listed with activeMinutes 1 then they are all kept', async () => {
    const st = await openMem()
    await s25(st)
    const r = await st.listSessions({ activeMinutes: 1 })
    expect(r.count).toBe(3)
  })

  test('given an unknown session when listed then includeUnknown decides and its kind is unknown', async () => {
    const st = await openMem()
    await st.upsertSession('unknown', {})
    await st.upsertSession('main', {})
    expect((await st.listSessions()).sessions.map((s) => s.key)).toEqual(['agent:main:main'])
    const r = await st.listSessions({ includeUnknown: true })
    expect(r.sessions.map((s) => s.key).sort()).toEqual(['agent:main:main', 'unknown'])
    expect(r.sessions.find((s) => s.key === 'unknown')!.kind).toBe('unknown')
  })

  test('given a labelled sub-agent when listed by label or spawnedBy then only that key (S26)', async () => {
    const st = await openMem()
    await s25(st)
    expect((await st.listSessions({ label: 'Briefing' })).sessions.map((s) => s.key)).toEqual(['agent:main:subagent:one'])
    expect((await st.listSessions({ label: ' Briefing ' })).sessions.map((s) => s.key)).toEqual(['agent:main:subagent:one'])
    expect((await st.listSessions({ label: 'briefing' })).count).toBe(0)
    const spawned = await st.listSessions({ spawnedBy: 'agent:main:main', includeGlobal: true, includeUnknown: true })
    expect(spawned.sessions.map((s) => s.key)).toEqual(['agent:main:subagent:one'])
    expect((await st.listSessions({ spawnedBy: 'agent:main:other' })).count).toBe(0)
  })

  test('given a child stored with a bare spawnedBy when listed by the canonical parent key then it is found (§2.7/§9 combined view)', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:subagent:c', { spawnedBy: 'main' })
    await st.upsertSession('agent:main:subagent:d', { spawnedBy: 'discord:group:req' })
    expect((await st.listSessions({ spawnedBy: 'agent:main:main' })).sessions.map((s) => s.key)).toEqual(['agent:main:subagent:c'])
    expect((await st.listSessions({ spawnedBy: 'agent:main:discord:group:req' })).sessions.map((s) => s.key)).toEqual(['agent:main:subagent:d'])
  })

  test('given sessions of two agents and global when listed by agentId then only that agent (normalised)', async () => {
    const st = await openMem()
    await s25(st)
    await st.upsertSession('agent:research:main', {})
    await st.upsertSession('agent:research:discord:group:x', {})
    const r = await st.listSessions({ agentId: 'Research', includeGlobal: true, includeUnknown: true })
    expect(r.sessions.map((s) => s.key).sort()).toEqual(['agent:research:discord:group:x', 'agent:research:main'])
    const m = await st.listSessions({ agentId: 'main', includeGlobal: true })
    expect(m.sessions.map((s) => s.key)).not.toContain('global')
    expect(m.count).toBe(3)
  })

  test('given four entries when searched then matches by displayName, subject, label, sessionId, key, trimmed query, none (S27)', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:alpha', { displayName: 'Work Project', sessionId: 'sess-a' })
    await st.upsertSession('agent:main:beta', { subject: 'Family Reunion', sessionId: 'sess-b' })
    await st.upsertSession('agent:main:gamma', { label: 'Discord Bridge', sessionId: 'sess-personal' })
    await st.upsertSession('agent:main:dev-team', { sessionId: 'sess-d' })
    const keys = async (search: string) => (await st.listSessions({ search })).sessions.map((s) => s.key)
    expect(await keys('WORK PROJECT')).toEqual(['agent:main:alpha'])
    expect(await keys('reunion')).toEqual(['agent:main:beta'])
    expect(await keys('discord')).toEqual(['agent:main:gamma'])
    expect(await keys('sess-personal')).toEqual(['agent:main:gamma'])
    expect(await keys('dev-team')).toEqual(['agent:main:dev-team'])
    expect(await keys('  personal  ')).toEqual(['agent:main:gamma'])
    expect(await keys('nonexistent-term')).toEqual([])
    expect((await keys('   ')).length).toBe(4)
  })

  test('given entries with explicit updatedAt when listed then newest first', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:b', { updatedAt: soon(2) })
    await st.upsertSession('agent:main:c', { updatedAt: soon(1) })
    await st.upsertSession('agent:main:a', { updatedAt: soon(3) })
    expect((await st.listSessions()).sessions.map((s) => s.key)).toEqual(['agent:main:a', 'agent:main:b', 'agent:main:c'])
  })

  test('given token fields when listed then totalTokens is the entry value, else the sum, else 0', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:explicit', { inputTokens: 1, outputTokens: 2, totalTokens: 99 })
    await st.upsertSession('agent:main:sum', { inputTokens: 5 })
    await st.upsertSession('agent:main:none', {})
    const r = await st.listSessions()
    const t = Object.fromEntries(r.sessions.map((s) => [s.key, s.totalTokens]))
    expect(t).toEqual({ 'agent:main:explicit': 99, 'agent:main:sum': 5, 'agent:main:none': 0 })
  })

  test('given group keys and chatTypes when listed then gateway kinds and channels are derived', async () => {
    const st = await openMem()
    await st.upsertSession('discord:group:dev', {})
    await st.upsertSession('agent:main:slack:channel:c1', {})
    await st.upsertSession('agent:main:room', { chatType: 'channel' })
    await st.upsertSession('agent:main:dm', { chatType: 'direct' })
    const r = await st.listSessions()
    const byKey = Object.fromEntries(r.sessions.map((s) => [s.key, s]))
    expect(byKey['agent:main:discord:group:dev']).toMatchObject({ kind: 'group', channel: 'discord' })
    expect(byKey['agent:main:slack:channel:c1']).toMatchObject({ kind: 'group', channel: 'slack' })
    expect(byKey['agent:main:room'].kind).toBe('group')
    expect(byKey['agent:main:dm'].kind).toBe('direct')
  })

  test('given a discord group with space and groupChannel when listed then its display name is discord:friends-of-clawd#general', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:discord:channel:123', { channel: 'discord', chatType: 'channel', groupChannel: '#general', space: 'friends-of-clawd' })
    await st.upsertSession('agent:main:plain', { label: 'Just a label' })
    await st.upsertSession('agent:main:named', { displayName: 'Explicit', label: 'ignored' })
    const r = await st.listSessions()
    const byKey = Object.fromEntries(r.sessions.map((s) => [s.key, s]))
    expect(byKey['agent:main:discord:channel:123'].displayName).toBe('discord:friends-of-clawd#general')
    expect(byKey['agent:main:plain'].displayName).toBe('Just a label')
    expect(byKey['agent:main:named'].displayName).toBe('Explicit')
  })

  test('given entries with displayName, subject, a first message, or nothing when titles are derived then S32 order', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:dn', { displayName: '  Shown Name  ', subject: 'Subj' })
    await st.upsertSession('agent:main:subj', { subject: ' Subject Line ' })
    await st.appendMessages('agent:main:msg', [
      assistant('ignored, not a user message'),
      user('Please summarise   the quarterly numbers and prepare the board deck for Thursday morning'),
    ])
    await st.appendMessages('agent:main:short', [user('  hello   there  ')])
    const none = await st.upsertSession('agent:main:none', { sessionId: 'abcd1234-0000-4000-8000-000000000000' })
    const r = await st.listSessions({ includeDerivedTitles: true })
    const t = Object.fromEntries(r.sessions.map((s) => [s.key, s.derivedTitle]))
    expect(t['agent:main:dn']).toBe('Shown Name')
    expect(t['agent:main:subj']).toBe('Subject Line')
    expect(t['agent:main:msg']).toBe('Please summarise the quarterly numbers and prepare the…')
    expect(t['agent:main:short']).toBe('hello there')
    const d = new Date(none.updatedAt)
    const ymd = `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}-${String(d.getUTCDate()).padStart(2, '0')}`
    expect(t['agent:main:none']).toBe(`abcd1234 (${ymd})`)
  })

  test('given input_text / output_text blocks when titles and previews are derived then their text is used', async () => {
    const st = await openMem()
    await st.appendMessages('main', [
      { role: 'user', content: [{ type: 'image', data: 'AA' }, { type: 'input_text', text: 'first from blocks' }] },
      { role: 'assistant', content: [{ type: 'output_text', text: 'answer from blocks' }] },
    ])
    const [row] = (await st.listSessions({ includeDerivedTitles: true, includeLastMessage: true })).sessions
    expect(row.derivedTitle).toBe('first from blocks')
    expect(row.lastMessagePreview).toBe('answer from blocks')
  })

  test('given no includeDerivedTitles when listed then rows carry no derivedTitle', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:dn', { displayName: 'x' })
    const r = await st.listSessions()
    expect('derivedTitle' in r.sessions[0]).toBe(false)
    expect('lastMessagePreview' in r.sessions[0]).toBe(false)
  })

  test('given a transcript ending in a tool result when includeLastMessage then the preview is the newest user/assistant text', async () => {
    const st = await openMem()
    await st.appendMessages('main', [user('first question'), assistant('the latest answer'), toolResult('tool output')])
    await st.appendMessages('agent:main:empty', [])
    const r = await st.listSessions({ includeLastMessage: true })
    const main = r.sessions.find((s) => s.key === 'agent:main:main')!
    expect(main.lastMessagePreview).toBe('the latest answer')
  })

  test('given rows with many fields when listed then keys follow the reference order', async () => {
    const st = await openMem()
    await st.upsertSession('discord:group:dev', {
      label: 'L', displayName: 'D', channel: 'discord', subject: 'S', groupChannel: '#g', space: 'sp', chatType: 'group',
      origin: { label: 'o' }, systemSent: true, abortedLastRun: false, thinkingLevel: 'low', verboseLevel: 'on',
      reasoningLevel: 'on', elevatedLevel: 'off', sendPolicy: 'deny', inputTokens: 1, outputTokens: 2, responseUsage: 'full',
      modelProvider: 'openai', model: 'gpt', contextTokens: 9, lastChannel: 'discord', lastTo: 'channel:dev', lastAccountId: 'a',
    })
    await st.appendMessages('discord:group:dev', [user('hi')])
    const r = await st.listSessions({ includeDerivedTitles: true, includeLastMessage: true })
    expectKeyOrder(r.sessions[0] as any, GATEWAY_ROW_ORDER)
    expect(Object.keys(r.sessions[0]).length).toBeGreaterThan(25)
  })

  test('given bad params when listed then invalid sessions.list params', async () => {
    const st = await openMem()
    await expectReject(st.listSessions({ foo: 1 } as any), 'INVALID_REQUEST', "invalid sessions.list params: at root: unexpected property 'foo'")
    await expectReject(st.listSessions({ limit: 0 }), 'INVALID_REQUEST', /^invalid sessions\.list params: .*limit/)
    await expectReject(st.listSessions({ activeMinutes: 0 }), 'INVALID_REQUEST', /^invalid sessions\.list params: .*activeMinutes/)
    await expectReject(st.listSessions({ limit: 'ten' as any }), 'INVALID_REQUEST', /^invalid sessions\.list params:/)
    await expectReject(st.listSessions({ label: 'x'.repeat(65) }), 'INVALID_REQUEST', /^invalid sessions\.list params:/)
    await expectReject(st.listSessions({ includeGlobal: 'yes' as any }), 'INVALID_REQUEST', /^invalid sessions\.list params:/)
  })
})

describe('sessions_list tool', () => {
  /** L1's store: main (lastChannel whatsapp), a bare group, a bare cron key, global, unknown. */
  async function l1(st: SessionTools) {
    await st.upsertSession('main', { lastChannel: 'whatsapp' })
    await st.upsertSession('discord:group:dev', { chatType: 'group' })
    await st.upsertSession('cron:job-1', {})
    await st.upsertSession('global', {})
    await st.upsertSession('unknown', {})
    await st.appendMessages('main', [toolResult('t'), assistant('hi')])
  }

  test('given L1 rows and messageLimit 1 when listed then 3 rows and main shows as main with one assistant message (L1)', async () => {
    const st = await openMem()
    await l1(st)
    for (const ctx of [MAIN, undefined]) {
      const r: any = await st.sessionsList({ messageLimit: 1 }, ctx)
      expect(r.count).toBe(3)
      const byKey = Object.fromEntries(r.sessions.map((s: any) => [s.key, s]))
      expect(Object.keys(byKey).sort()).toEqual(['agent:main:cron:job-1', 'agent:main:discord:group:dev', 'main'])
      expect(byKey.main).toMatchObject({ kind: 'main', channel: 'whatsapp' })
      expect(byKey.main.messages).toHaveLength(1)
      expect(byKey.main.messages[0]).toMatchObject({ role: 'assistant', content: [{ type: 'text', text: 'hi' }] })
      expect(byKey['agent:main:cron:job-1']).toMatchObject({ kind: 'cron', channel: 'internal', messages: [] })
      expect(byKey['agent:main:discord:group:dev']).toMatchObject({ kind: 'group', channel: 'discord' })
    }
  })

  test('given L1 rows when kinds is cron then exactly one cron row (L2)', async () => {
    const st = await openMem()
    await l1(st)
    const r: any = await st.sessionsList({ kinds: ['cron'] }, MAIN)
    expect(r.count).toBe(1)
    expect(r.sessions[0]).toMatchObject({ key: 'agent:main:cron:job-1', kind: 'cron' })
    const mixed: any = await st.sessionsList({ kinds: [' CRON ', 'bogus', 7] }, MAIN)
    expect(mixed.sessions.map((s: any) => s.kind)).toEqual(['cron'])
    const single: any = await st.sessionsList({ kinds: 'group' as any }, MAIN)
    expect(single.sessions.map((s: any) => s.kind)).toEqual(['group'])
  })

  test('given kinds main and group when listed then both kinds and nothing else', async () => {
    const st = await openMem()
    await l1(st)
    const r: any = await st.sessionsList({ kinds: ['main', 'group'] }, MAIN)
    expect(r.sessions.map((s: any) => s.kind).sort()).toEqual(['group', 'main'])
  })

  test('given kinds bogus only when listed then no kind filter applies (L8)', async () => {
    const st = await openMem()
    await l1(st)
    const r: any = await st.sessionsList({ kinds: ['bogus'] }, MAIN)
    expect(r.count).toBe(3)
  })

  test('given a2a disabled and rows of agents main and other when agent:main:main lists then only main (L3)', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:main', {})
    await st.upsertSession('agent:other:main', {})
    const r: any = await st.sessionsList({}, MAIN)
    expect(r.count).toBe(1)
    expect(r.sessions[0]).toMatchObject({ key: 'main', kind: 'main' })
  })

  test("given a2a enabled when listed then another agent's main keeps its canonical key with kind main", async () => {
    const st = await openMem({ tools: { agentToAgent: { enabled: true } } })
    await st.upsertSession('agent:main:main', {})
    await st.upsertSession('agent:other:main', {})
    const r: any = await st.sessionsList({}, MAIN)
    const byKey = Object.fromEntries(r.sessions.map((s: any) => [s.key, s]))
    expect(Object.keys(byKey).sort()).toEqual(['agent:other:main', 'main'])
    expect(byKey['agent:other:main'].kind).toBe('main')
  })

  test("given a requester of agent other when listed then its own main is main and agent:main:main is hidden", async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:main', {})
    await st.upsertSession('agent:other:main', {})
    const r: any = await st.sessionsList({}, { agentSessionKey: 'agent:other:discord:group:x' })
    expect(r.sessions.map((s: any) => s.key)).toEqual(['main'])
  })

  test('given 30 assistant messages when messageLimit is 50 then at most 20, the last ones (L4)', async () => {
    const st = await openMem()
    await st.appendMessages('main', Array.from({ length: 30 }, (_, i) => assistant(`m${i}`)))
    const r: any = await st.sessionsList({ messageLimit: 50 }, MAIN)
    const msgs = r.sessions[0].messages
    expect(msgs).toHaveLength(20)
    expect(msgs[0].content[0].text).toBe('m10')
    expect(msgs[19].content[0].text).toBe('m29')
  })

  test('given a tool result among the last N when messageLimit N then it is dropped without refill (§3.2)', async () => {
    const st = await openMem()
    await st.appendMessages('main', [assistant('a'), assistant('b'), toolResult('t')])
    const r: any = await st.sessionsList({ messageLimit: 2 }, MAIN)
    expect(r.sessions[0].messages.map((m: any) => m.content[0].text)).toEqual(['b'])
  })

  test('given messageLimit 0, negative or a string when listed then rows carry no messages', async () => {
    const st = await openMem()
    await st.appendMessages('main', [assistant('a')])
    for (const messageLimit of [0, -5, '3', null]) {
      const r: any = await st.sessionsList({ messageLimit } as any, MAIN)
      expect('messages' in r.sessions[0], String(messageLimit)).toBe(false)
    }
    const frac: any = await st.sessionsList({ messageLimit: 1.9 }, MAIN)
    expect(frac.sessions[0].messages).toHaveLength(1)
  })

  test('given scope global and a global row when listed then it shows as main with kind main (L5)', async () => {
    const st = await openMem({ session: { scope: 'global' } })
    await st.upsertSession('global', { lastChannel: 'telegram' })
    const r: any = await st.sessionsList({}, { agentSessionKey: 'main' })
    expect(r.sessions).toHaveLength(1)
    expect(r.sessions[0]).toMatchObject({ key: 'main', kind: 'main', channel: 'telegram' })
    const none: any = await st.sessionsList({})
    expect(none.sessions.map((s: any) => s.key)).toEqual(['main'])
  })

  test('given a sandboxed requester with default visibility when listed then only its spawned children (L6)', async () => {
    const st = await openMem()
    await st.upsertSession('main', {})
    await st.upsertSession('global', {})
    await st.upsertSession('discord:group:dev', {})
    await st.upsertSession('agent:main:subagent:mine', { spawnedBy: 'agent:main:main' })
    await st.upsertSession('agent:main:subagent:theirs', { spawnedBy: 'agent:main:discord:group:dev' })
    const r: any = await st.sessionsList({}, { agentSessionKey: 'agent:main:main', sandboxed: true })
    expect(r.sessions.map((s: any) => s.key)).toEqual(['agent:main:subagent:mine'])
    const viaMain: any = await st.sessionsList({}, { agentSessionKey: 'main', sandboxed: true })
    expect(viaMain.sessions.map((s: any) => s.key)).toEqual(['agent:main:subagent:mine'])
  })

  test('given a file store when listed then transcriptPath is <dir>/transcripts/<sessionId>.jsonl, absolute (L7)', async () => {
    const { st, dir } = await openFile()
    const e = await st.upsertSession('main', {})
    const r: any = await st.sessionsList({}, MAIN)
    expect(r.sessions[0].transcriptPath).toBe(path.join(dir, 'transcripts', `${e.sessionId}.jsonl`))
    expect(path.isAbsolute(r.sessions[0].transcriptPath)).toBe(true)
  })

  test('given a mirrorDir option when listed then transcriptPath is under it', async () => {
    const mirror = path.join(tmpDir(), 'mirror')
    const { st } = await openFile(undefined, { mirrorDir: mirror })
    const e = await st.upsertSession('main', {})
    const r: any = await st.sessionsList({}, MAIN)
    expect(r.sessions[0].transcriptPath).toBe(path.join(mirror, `${e.sessionId}.jsonl`))
  })

  test('given :memory: when listed then transcriptPath is absent unless the entry has sessionFile', async () => {
    const st = await openMem()
    await st.upsertSession('main', {})
    await st.upsertSession('agent:main:filed', { sessionFile: '/data/s1.jsonl' })
    const r: any = await st.sessionsList({}, MAIN)
    const byKey = Object.fromEntries(r.sessions.map((s: any) => [s.key, s]))
    expect('transcriptPath' in byKey.main).toBe(false)
    expect(byKey['agent:main:filed'].transcriptPath).toBe('/data/s1.jsonl')
  })

  test('given mirrorDir null on a file store when listed then transcriptPath is absent', async () => {
    const { st } = await openFile(undefined, { mirrorDir: null })
    await st.upsertSession('main', {})
    const r: any = await st.sessionsList({}, MAIN)
    expect('transcriptPath' in r.sessions[0]).toBe(false)
  })

  test('given 5 cron and 5 newer group sessions when kinds cron and limit 3 then 3 cron rows (filter before limit)', async () => {
    const st = await openMem()
    for (let i = 0; i < 5; i++) await st.upsertSession(`cron:job-${i}`, { updatedAt: soon(i) })
    for (let i = 0; i < 5; i++) await st.upsertSession(`discord:group:g${i}`, { updatedAt: soon(10 + i) })
    const r: any = await st.sessionsList({ kinds: ['cron'], limit: 3 }, MAIN)
    expect(r.sessions.map((s: any) => s.key)).toEqual(['agent:main:cron:job-4', 'agent:main:cron:job-3', 'agent:main:cron:job-2'])
  })

  test('given newer sessions of another agent when a main requester lists with limit 3 then 3 own rows (cross-agent before limit)', async () => {
    const st = await openMem()
    for (let i = 0; i < 3; i++) await st.upsertSession(`agent:main:s${i}`, { updatedAt: soon(i) })
    for (let i = 0; i < 5; i++) await st.upsertSession(`agent:other:s${i}`, { updatedAt: soon(10 + i) })
    const r: any = await st.sessionsList({ limit: 3 }, MAIN)
    expect(r.sessions.map((s: any) => s.key)).toEqual(['agent:main:s2', 'agent:main:s1', 'agent:main:s0'])
  })

  test('given limits 0, -3, 2.7 and a string when listed then they clamp to 1, 1, 2 and the default', async () => {
    const st = await openMem()
    for (let i = 0; i < 4; i++) await st.upsertSession(`agent:main:s${i}`, {})
    const n = async (limit: unknown) => ((await st.sessionsList({ limit } as any, MAIN)) as any).count
    expect(await n(0)).toBe(1)
    expect(await n(-3)).toBe(1)
    expect(await n(2.7)).toBe(2)
    expect(await n('2')).toBe(4)
    expect(await n(Number.NaN)).toBe(4)
  })

  test('given 1005 sessions when listed then the default limit is 200 and the most is 1000', async () => {
    const st = await openMem()
    await Promise.all(Array.from({ length: 1005 }, (_, i) => st.upsertSession(`agent:main:s${i}`, {})))
    expect(((await st.sessionsList({}, MAIN)) as any).count).toBe(200)
    expect(((await st.sessionsList({ limit: 5000 }, MAIN)) as any).count).toBe(1000)
  }, 60_000)

  test('given fresh sessions when activeMinutes 1 then they are listed', async () => {
    const st = await openMem()
    await l1(st)
    expect(((await st.sessionsList({ activeMinutes: 1 }, MAIN)) as any).count).toBe(3)
  })

  test('given main with tokens and route when listed then totalTokens is summed and last* come from deliveryContext', async () => {
    const st = await openMem()
    await st.upsertSession('main', { inputTokens: 10, outputTokens: 20, lastChannel: ' WhatsApp ', lastTo: '+1555', lastAccountId: 'kev', lastThreadId: '7' })
    const r: any = await st.sessionsList({}, MAIN)
    const row = r.sessions[0]
    expect(row.totalTokens).toBe(30)
    expect(row.deliveryContext).toEqual({ channel: 'whatsapp', to: '+1555', accountId: 'kev' })
    expect(row).toMatchObject({ lastChannel: 'whatsapp', lastTo: '+1555', lastAccountId: 'kev', channel: 'whatsapp' })
  })

  test('given a row with every field when listed then keys follow the reference order and types are kept', async () => {
    const st = await openMem()
    await st.upsertSession('main', {
      label: 'L', displayName: 'D', lastChannel: 'whatsapp', lastTo: '+1', lastAccountId: 'a', model: 'gpt', contextTokens: 5,
      totalTokens: 7, thinkingLevel: 'low', verboseLevel: 'on', systemSent: true, abortedLastRun: false, sendPolicy: 'deny',
    })
    await st.appendMessages('main', [assistant('x')])
    const { st: fst } = await openFile()
    await fst.upsertSession('main', { label: 'L' })
    for (const store of [st, fst]) {
      const r: any = await store.sessionsList({ messageLimit: 1 }, MAIN)
      expectKeyOrder(r.sessions[0], TOOL_ROW_ORDER)
    }
    const r: any = await st.sessionsList({ messageLimit: 1 }, MAIN)
    expect(r.sessions[0]).toMatchObject({ systemSent: true, abortedLastRun: false, sendPolicy: 'deny', contextTokens: 5, totalTokens: 7 })
  })

  test('given bare hook, node and other keys when listed then kinds hook, node, other and channels internal/unknown (K9, K10)', async () => {
    const st = await openMem()
    await st.upsertSession('hook:gmail:1', {})
    await st.upsertSession('node-abc', {})
    await st.upsertSession('agent:main:x', { chatType: 'group' })
    await st.upsertSession('agent:main:plain', {})
    await st.upsertSession('agent:main:withch', { channel: 'discord' })
    const r: any = await st.sessionsList({}, MAIN)
    const byKey = Object.fromEntries(r.sessions.map((s: any) => [s.key, s]))
    expect(byKey['agent:main:hook:gmail:1']).toMatchObject({ kind: 'hook', channel: 'internal' })
    expect(byKey['agent:main:node-abc']).toMatchObject({ kind: 'node', channel: 'internal' })
    expect(byKey['agent:main:x']).toMatchObject({ kind: 'group' })
    expect(byKey['agent:main:plain']).toMatchObject({ kind: 'other', channel: 'unknown' })
    expect(byKey['agent:main:withch']).toMatchObject({ kind: 'other', channel: 'discord' })
  })

  test('given mainKey work when agent:main:work lists then its main session shows as main', async () => {
    const st = await openMem({ session: { mainKey: 'work' } })
    await st.upsertSession('main', {})
    const r: any = await st.sessionsList({}, { agentSessionKey: 'agent:main:work' })
    expect(r.sessions.map((s: any) => [s.key, s.kind])).toEqual([['main', 'main']])
  })

  test('given params that are not an object when listed then the tool answers a payload', async () => {
    const st = await openMem()
    await l1(st)
    for (const p of [null, 42, 'x', [1]]) {
      const r: any = await st.sessionsList(p as any, MAIN)
      expect(r && typeof r === 'object', String(p)).toBe(true)
      expect('count' in r || r.status === 'error').toBe(true)
    }
  })
})
