// Transcripts: appendMessages, chatHistory paging (API.md §4, DECISIONS.md #7) and the
// sessions_history tool (REFERENCE.md §4, scenarios H1–H7, maxChars).
import { describe, expect, test } from 'vitest'

import { UUID_RE, assistant, expectReject, openMem, textOf, toolResult, user } from './helpers'

const MAIN = { agentSessionKey: 'agent:main:main' }
const numbered = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => ({ role: 'user', content: `m${from + i}`, n: from + i }))

describe('appendMessages', () => {
  test('given a missing session when messages are appended then the session is created and the result names it', async () => {
    const st = await openMem()
    const r = await st.appendMessages('discord:group:dev', [user('a'), assistant('b')])
    expect(r).toEqual({ sessionKey: 'agent:main:discord:group:dev', sessionId: expect.stringMatching(UUID_RE), appended: 2 })
    const e = await st.getSession('agent:main:discord:group:dev')
    expect(e?.sessionId).toBe(r.sessionId)
  })

  test('given host messages with extra fields and odd text when appended then chatHistory returns them unchanged', async () => {
    const st = await openMem()
    const msgs = [
      { role: 'user', content: [{ type: 'text', text: 'héllo 🌍 \u202eRTL\u202c' }, { type: 'image', data: 'AAAA', mimeType: 'image/png' }], timestamp: 1 },
      { role: 'assistant', content: [{ type: 'toolCall', id: 't1', name: 'w', arguments: { q: 1 } }], usage: { input: 1, output: 2 }, stopReason: 'toolUse' },
      { role: 'toolResult', toolCallId: 't1', toolName: 'w', content: [{ type: 'text', text: 'nul:\u0000:end' }], isError: false },
      { role: 'custom', customType: 'x', data: { deep: { er: [null, true, 1.5, -0.25, 'x'] } } },
      { role: 'user', content: '[WhatsApp 2026-01-24 13:36] stays as stored\n[message_id: 1]' },
    ]
    await st.appendMessages('main', msgs)
    const h = await st.chatHistory('main')
    expect(h.messages).toEqual(msgs)
  })

  test('given an existing session when messages are appended then updatedAt moves to now and other fields stay', async () => {
    const st = await openMem()
    const e = await st.upsertSession('main', { label: 'keep', 'x-custom': 1 })
    const before = Date.now()
    const r = await st.appendMessages('main', [user('x')])
    expect(r.sessionId).toBe(e.sessionId)
    const after = await st.getSession('main')
    expect(after?.label).toBe('keep')
    expect(after?.['x-custom']).toBe(1)
    expect(after!.updatedAt).toBeGreaterThanOrEqual(before)
  })

  test('given bad messages when appended then INVALID_REQUEST and nothing is written', async () => {
    const st = await openMem()
    await expectReject(st.appendMessages('main', 'nope' as any), 'INVALID_REQUEST')
    await expectReject(st.appendMessages('main', [user('ok'), { content: 'no role' } as any]), 'INVALID_REQUEST', /index 1/)
    await expectReject(st.appendMessages('main', [{ role: 5 } as any]), 'INVALID_REQUEST')
    await expectReject(st.appendMessages('main', [null as any]), 'INVALID_REQUEST')
    expect((await st.chatHistory('main')).messages).toEqual([])
  })

  test('given 10,001 messages in one call when appended then INVALID_REQUEST; 10,000 are accepted', async () => {
    const st = await openMem()
    await expectReject(st.appendMessages('main', numbered(0, 10_001)), 'INVALID_REQUEST')
    const r = await st.appendMessages('main', numbered(0, 10_000))
    expect(r.appended).toBe(10_000)
  })

  test('given concurrent appends to one session when all settle then every message is there once, in call order per call', async () => {
    const st = await openMem()
    await Promise.all(Array.from({ length: 50 }, (_, i) => st.appendMessages('main', [user(`a${i}`), user(`b${i}`)])))
    const h = await st.chatHistory('main', { limit: 1000 })
    expect(h.messages).toHaveLength(100)
    const texts = h.messages.map(textOf)
    for (let i = 0; i < 50; i++) {
      expect(texts.indexOf(`a${i}`)).toBeGreaterThanOrEqual(0)
      expect(texts.indexOf(`b${i}`)).toBe(texts.indexOf(`a${i}`) + 1)
    }
  })
})

describe('chatHistory', () => {
  test('given 250 messages when read without a limit then the last 200 in order with a cursor; the next page is the first 50 without one', async () => {
    const st = await openMem()
    await st.appendMessages('main', numbered(0, 250))
    const p1 = await st.chatHistory('main')
    expect(p1.messages.map((m: any) => m.n)).toEqual(numbered(50, 250).map((m) => m.n))
    expect(typeof p1.nextBefore).toBe('number')
    expect(p1.sessionId).toMatch(UUID_RE)
    const p2 = await st.chatHistory('main', { before: p1.nextBefore })
    expect(p2.messages.map((m: any) => m.n)).toEqual(numbered(0, 50).map((m) => m.n))
    expect('nextBefore' in p2).toBe(false)
  })

  test('given 250 messages when paged back by 100 then the pages tile the transcript exactly', async () => {
    const st = await openMem()
    await st.appendMessages('main', numbered(0, 250))
    const pages: number[][] = []
    let before: number | undefined
    for (let i = 0; i < 10; i++) {
      const p = await st.chatHistory('main', before === undefined ? { limit: 100 } : { limit: 100, before })
      pages.push(p.messages.map((m: any) => m.n))
      if (p.nextBefore === undefined) break
      before = p.nextBefore
    }
    expect(pages.map((p) => p.length)).toEqual([100, 100, 50])
    expect(pages.reverse().flat()).toEqual(numbered(0, 250).map((m) => m.n))
  })

  test('given exactly limit messages when read then no cursor', async () => {
    const st = await openMem()
    await st.appendMessages('main', numbered(0, 20))
    const p = await st.chatHistory('main', { limit: 20 })
    expect(p.messages).toHaveLength(20)
    expect('nextBefore' in p).toBe(false)
  })

  test('given a page cursor when messages are appended after it then the older page is unchanged', async () => {
    const st = await openMem()
    await st.appendMessages('main', numbered(0, 30))
    const p1 = await st.chatHistory('main', { limit: 10 })
    await st.appendMessages('main', numbered(30, 40))
    const p2 = await st.chatHistory('main', { limit: 10, before: p1.nextBefore })
    expect(p2.messages.map((m: any) => m.n)).toEqual(numbered(10, 20).map((m) => m.n))
  })

  test.each([0, 1001, 5000, -1, 1.5, '10', true])('given limit %j when read then invalid chat.history params', async (limit) => {
    const st = await openMem()
    await expectReject(st.chatHistory('main', { limit } as any), 'INVALID_REQUEST', /^invalid chat\.history params: /)
  })

  test('given limit 5000 when read then the exact text names /limit', async () => {
    const st = await openMem()
    await expectReject(st.chatHistory('main', { limit: 5000 }), 'INVALID_REQUEST', 'invalid chat.history params: at /limit: must be <= 1000')
  })

  test('given limits 1 and 1000 when read then they are accepted', async () => {
    const st = await openMem()
    await st.appendMessages('main', numbered(0, 1200))
    expect((await st.chatHistory('main', { limit: 1 })).messages.map((m: any) => m.n)).toEqual([1199])
    expect((await st.chatHistory('main', { limit: 1000 })).messages).toHaveLength(1000)
  })

  test('given bad before or an unknown option when read then invalid chat.history params', async () => {
    const st = await openMem()
    await expectReject(st.chatHistory('main', { before: 'x' } as any), 'INVALID_REQUEST', /^invalid chat\.history params: /)
    await expectReject(st.chatHistory('main', { before: -5 } as any), 'INVALID_REQUEST', /^invalid chat\.history params: /)
    await expectReject(st.chatHistory('main', { foo: 1 } as any), 'INVALID_REQUEST', /^invalid chat\.history params: .*unexpected property 'foo'/)
  })

  test('given no such session when read then an empty page, no error', async () => {
    const st = await openMem()
    const p = await st.chatHistory('agent:main:nope')
    expect(p.messages).toEqual([])
    expect('nextBefore' in p).toBe(false)
  })

  test('given transcripts in two sessions when each is read then they do not mix', async () => {
    const st = await openMem()
    await st.appendMessages('agent:main:a', [user('for a')])
    await st.appendMessages('agent:main:b', [user('for b')])
    expect((await st.chatHistory('agent:main:a')).messages.map(textOf)).toEqual(['for a'])
    expect((await st.chatHistory('agent:main:b')).messages.map(textOf)).toEqual(['for b'])
  })

  test('given 100,000 messages in one session when the last 20 are read then they come back in order (O(limit) reads)', async () => {
    const st = await openMem()
    const TOTAL = 100_000
    for (let from = 0; from < TOTAL; from += 10_000) {
      const r = await st.appendMessages('main', numbered(from, from + 10_000))
      expect(r.appended).toBe(10_000)
    }
    const last = await st.chatHistory('main', { limit: 20 })
    expect(last.messages.map((m: any) => m.n)).toEqual(numbered(TOTAL - 20, TOTAL).map((m) => m.n))
    const prev = await st.chatHistory('main', { limit: 20, before: last.nextBefore })
    expect(prev.messages.map((m: any) => m.n)).toEqual(numbered(TOTAL - 40, TOTAL - 20).map((m) => m.n))
    const tool: any = await st.sessionsHistory({ sessionKey: 'main', limit: 20 }, MAIN)
    expect(tool.messages).toHaveLength(20)
    expect(tool.messages.map((m: any) => m.content)).toEqual(numbered(TOTAL - 20, TOTAL).map((m) => m.content))
    const list: any = await st.sessionsList({ messageLimit: 3 }, MAIN)
    expect(list.sessions[0].messages.map((m: any) => m.n)).toEqual([TOTAL - 3, TOTAL - 2, TOTAL - 1])
  }, 180_000)
})

describe('sessions_history tool', () => {
  test('given [toolResult, assistant] in main when read with sessionKey main then 1 message, with includeTools 2 (H1)', async () => {
    const st = await openMem()
    await st.appendMessages('main', [toolResult('t'), assistant('hi')])
    const r: any = await st.sessionsHistory({ sessionKey: 'main' }, MAIN)
    expect(r.sessionKey).toBe('main')
    expect(r.messages).toHaveLength(1)
    expect(r.messages[0].role).toBe('assistant')
    expect('truncated' in r).toBe(false)
    const all: any = await st.sessionsHistory({ sessionKey: 'main', includeTools: true }, MAIN)
    expect(all.messages.map((m: any) => m.role)).toEqual(['toolResult', 'assistant'])
    const noCtx: any = await st.sessionsHistory({ sessionKey: 'main' })
    expect(noCtx.messages).toHaveLength(1)
  })

  test('given includeTools values when read then their truthiness decides (§4.1)', async () => {
    const st = await openMem()
    await st.appendMessages('main', [toolResult('t'), assistant('hi')])
    const n = async (includeTools: unknown) => ((await st.sessionsHistory({ sessionKey: 'main', includeTools } as any, MAIN)) as any).messages.length
    expect(await n(1)).toBe(2)
    expect(await n('yes')).toBe(2)
    expect(await n(0)).toBe(1)
    expect(await n('')).toBe(1)
    expect(await n(false)).toBe(1)
  })

  test('given scope global when main or global is read then the global transcript, shown as main', async () => {
    const st = await openMem({ session: { scope: 'global' } })
    await st.appendMessages('main', [assistant('g')])
    for (const sessionKey of ['main', 'global']) {
      const r: any = await st.sessionsHistory({ sessionKey }, { agentSessionKey: 'main' })
      expect(r, sessionKey).toEqual({ sessionKey: 'main', messages: [{ role: 'assistant', content: [{ type: 'text', text: 'g' }], timestamp: expect.any(Number) }] })
    }
  })

  test('given a sessionKey with spaces around it when read then it is trimmed', async () => {
    const st = await openMem()
    await st.appendMessages('main', [assistant('hi')])
    const r: any = await st.sessionsHistory({ sessionKey: '  main  ' }, MAIN)
    expect(r.sessionKey).toBe('main')
    expect(r.messages).toHaveLength(1)
  })

  test('given the canonical key of the requester main when read then the display key is main', async () => {
    const st = await openMem()
    await st.appendMessages('main', [assistant('hi')])
    const r: any = await st.sessionsHistory({ sessionKey: 'agent:main:main' }, MAIN)
    expect(r.sessionKey).toBe('main')
    expect(r.messages).toHaveLength(1)
  })

  test('given a requester of agent other when it reads main then its own main session', async () => {
    const st = await openMem()
    await st.appendMessages('agent:main:main', [assistant('main agent')])
    await st.appendMessages('agent:other:main', [assistant('other agent')])
    const r: any = await st.sessionsHistory({ sessionKey: 'main' }, { agentSessionKey: 'agent:other:discord:group:x' })
    expect(r.messages.map(textOf)).toEqual(['other agent'])
  })

  test('given a group session when read by its sessionId then its messages and its key', async () => {
    const st = await openMem()
    const { sessionId } = await st.appendMessages('discord:group:dev', [assistant('from group')])
    const r: any = await st.sessionsHistory({ sessionKey: sessionId }, MAIN)
    expect(r.sessionKey).toBe('agent:main:discord:group:dev')
    expect(r.messages.map(textOf)).toEqual(['from group'])
  })

  test('given a non-key-like sessionId such as sess-group when read then it resolves as a sessionId (H2)', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:discord:channel:1457', { sessionId: 'sess-group' })
    await st.appendMessages('agent:main:discord:channel:1457', [assistant('channel msg')])
    const r: any = await st.sessionsHistory({ sessionKey: 'sess-group' }, MAIN)
    expect(r.sessionKey).toBe('agent:main:discord:channel:1457')
    expect(r.messages.map(textOf)).toEqual(['channel msg'])
  })

  test('given an unknown UUID when read then status error with Session not found / No session found (H3)', async () => {
    const st = await openMem()
    const r: any = await st.sessionsHistory({ sessionKey: 'aaaaaaaa-aaaa-4aaa-aaaa-aaaaaaaaaaaa' }, MAIN)
    expect(r.status).toBe('error')
    expect(r.error).toMatch(/Session not found|No session found/)
    expect('messages' in r).toBe(false)
  })

  test('given a key-like key with no session when read then no error and no messages (§4.3)', async () => {
    const st = await openMem()
    const r: any = await st.sessionsHistory({ sessionKey: 'agent:main:nope' }, MAIN)
    expect(r).toEqual({ sessionKey: 'agent:main:nope', messages: [] })
  })

  test('given a2a disabled when agent:main:main reads agent:other:main then forbidden disabled text; allow [main] then denied text (H4)', async () => {
    const st = await openMem()
    await st.appendMessages('agent:other:main', [assistant('secret')])
    const r: any = await st.sessionsHistory({ sessionKey: 'agent:other:main' }, MAIN)
    expect(r).toEqual({
      status: 'forbidden',
      error: 'Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access.',
    })
    st.setConfig({ tools: { agentToAgent: { enabled: true, allow: ['main'] } } })
    const d: any = await st.sessionsHistory({ sessionKey: 'agent:other:main' }, MAIN)
    expect(d).toEqual({ status: 'forbidden', error: 'Agent-to-agent history denied by tools.agentToAgent.allow.' })
  })

  test('given a cross-agent sessionId when read with a2a disabled then forbidden as well', async () => {
    const st = await openMem()
    const { sessionId } = await st.appendMessages('agent:other:main', [assistant('secret')])
    const r: any = await st.sessionsHistory({ sessionKey: sessionId }, MAIN)
    expect(r.status).toBe('forbidden')
    expect(r.error).toMatch(/^Agent-to-agent history is disabled/)
  })

  test('given no agentSessionKey when agent:other:main is read then the requester counts as agent main (§4.3)', async () => {
    const st = await openMem()
    await st.appendMessages('agent:other:main', [assistant('secret')])
    const r: any = await st.sessionsHistory({ sessionKey: 'agent:other:main' })
    expect(r.status).toBe('forbidden')
  })

  test('given a sandboxed requester when it reads a key it did not spawn then forbidden naming the raw input (H5)', async () => {
    const st = await openMem()
    await st.appendMessages('discord:group:dev', [assistant('x')])
    const r: any = await st.sessionsHistory({ sessionKey: 'discord:group:dev' }, { agentSessionKey: 'agent:main:main', sandboxed: true })
    expect(r).toEqual({ status: 'forbidden', error: 'Session not visible from this sandboxed agent session: discord:group:dev' })
  })

  test('given limit 5000 when read then the tool payload carries the chat.history error (H6)', async () => {
    const st = await openMem()
    await st.appendMessages('main', [assistant('x')])
    const r: any = await st.sessionsHistory({ sessionKey: 'main', limit: 5000 }, MAIN)
    expect(r).toEqual({ status: 'error', tool: 'sessions_history', error: 'invalid chat.history params: at /limit: must be <= 1000' })
  })

  test('given a missing, blank or non-string sessionKey when read then sessionKey required', async () => {
    const st = await openMem()
    for (const p of [{}, { sessionKey: '   ' }, { sessionKey: 42 }, { sessionKey: null }, undefined, null]) {
      const r: any = await st.sessionsHistory(p as any, MAIN)
      expect(r, JSON.stringify(p)).toEqual({ status: 'error', tool: 'sessions_history', error: 'sessionKey required' })
    }
  })

  test('given limits 0.5, 2.9 and a string when read then 1, 2 and the default', async () => {
    const st = await openMem()
    await st.appendMessages('main', numbered(0, 5))
    const n = async (limit: unknown) => ((await st.sessionsHistory({ sessionKey: 'main', limit } as any, MAIN)) as any).messages.length
    expect(await n(0.5)).toBe(1)
    expect(await n(2.9)).toBe(2)
    expect(await n('3')).toBe(5)
    expect(await n(-4)).toBe(1)
  })

  test('given channel envelopes in user messages when read then they are stripped; assistant text and inline ids are kept (H7)', async () => {
    const st = await openMem()
    await st.appendMessages('main', [
      user('[WhatsApp 2026-01-24 13:36] yolo\n[message_id: 7b8b]'),
      { role: 'user', content: [{ type: 'text', text: '[Telegram Ops Chat] hello team' }] },
      user('[Discord 2026-01-24T13:36Z] see [message_id: 123] inline'),
      user('[not an envelope] kept'),
      assistant('[WhatsApp 2026-01-24 13:36] assistant untouched'),
    ])
    const r: any = await st.sessionsHistory({ sessionKey: 'main' }, MAIN)
    expect(r.messages.map(textOf)).toEqual([
      'yolo',
      'hello team',
      'see [message_id: 123] inline',
      '[not an envelope] kept',
      '[WhatsApp 2026-01-24 13:36] assistant untouched',
    ])
    const raw = await st.chatHistory('main')
    expect(textOf(raw.messages[0])).toBe('[WhatsApp 2026-01-24 13:36] yolo\n[message_id: 7b8b]')
  })

  test('given ten 100-char messages when maxChars 350 then the newest messages that fit and truncated true (DECISIONS #7)', async () => {
    const st = await openMem()
    const msgs = Array.from({ length: 10 }, (_, i) => ({ role: 'assistant', content: `${i}`.padEnd(100, 'x') }))
    await st.appendMessages('main', msgs)
    const r: any = await st.sessionsHistory({ sessionKey: 'main', maxChars: 350 }, MAIN)
    expect(r.truncated).toBe(true)
    expect(JSON.stringify(r.messages).length).toBeLessThanOrEqual(350)
    expect(r.messages.length).toBeGreaterThanOrEqual(1)
    expect(r.messages.length).toBeLessThan(10)
    expect(r.messages).toEqual(msgs.slice(10 - r.messages.length))
    const oneMore = msgs.slice(10 - r.messages.length - 1)
    expect(JSON.stringify(oneMore).length).toBeGreaterThan(350)
    expect(Object.keys(r)).toEqual(['sessionKey', 'messages', 'truncated'])
  })

  test('given maxChars smaller than the newest message when read then the newest message alone stays', async () => {
    const st = await openMem()
    await st.appendMessages('main', [assistant('older'), assistant('the newest one, longer than five chars')])
    const r: any = await st.sessionsHistory({ sessionKey: 'main', maxChars: 5 }, MAIN)
    expect(r.messages.map(textOf)).toEqual(['the newest one, longer than five chars'])
    expect(r.truncated).toBe(true)
  })

  test('given maxChars larger than the history when read then nothing is dropped and no truncated key', async () => {
    const st = await openMem()
    await st.appendMessages('main', [assistant('a'), assistant('b')])
    const r: any = await st.sessionsHistory({ sessionKey: 'main', maxChars: 100_000 }, MAIN)
    expect(r.messages).toHaveLength(2)
    expect('truncated' in r).toBe(false)
  })

  test('given session.history.maxChars in config when read then it applies; a maxChars param overrides it', async () => {
    const st = await openMem({ session: { history: { maxChars: 60 } } })
    await st.appendMessages('main', Array.from({ length: 5 }, (_, i) => ({ role: 'assistant', content: `${i}`.padEnd(40, 'y') })))
    const r: any = await st.sessionsHistory({ sessionKey: 'main' }, MAIN)
    expect(r.truncated).toBe(true)
    expect(r.messages).toHaveLength(1)
    const wide: any = await st.sessionsHistory({ sessionKey: 'main', maxChars: 10_000 }, MAIN)
    expect(wide.messages).toHaveLength(5)
    expect('truncated' in wide).toBe(false)
  })

  test('given more than 6 MiB of history when read then the answer is capped, keeping the newest', async () => {
    const st = await openMem()
    const big = (i: number) => ({ role: 'assistant', content: `${i}:`.padEnd(1024 * 1024, 'z') })
    await st.appendMessages('main', Array.from({ length: 8 }, (_, i) => big(i)))
    const r: any = await st.sessionsHistory({ sessionKey: 'main' }, MAIN)
    expect(r.messages.length).toBeGreaterThanOrEqual(1)
    expect(r.messages.length).toBeLessThan(8)
    expect(Buffer.byteLength(JSON.stringify(r.messages))).toBeLessThanOrEqual(6 * 1024 * 1024)
    expect(r.messages[r.messages.length - 1].content.startsWith('7:')).toBe(true)
  }, 60_000)
})
