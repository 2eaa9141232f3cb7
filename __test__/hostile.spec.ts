// Everything a caller passes is untrusted (DECISIONS.md #9, API.md §1/§3/§4): wrong types,
// symbols, functions, BigInts, cycles, 100k-deep nesting, 1 MB strings, NUL bytes, `__proto__`
// keys, odd Unicode. Each gets a rejection with a `code` (promise methods), a thrown `code`
// (sync methods) or a tool payload, never a synchronous throw from a promise method, and the
// store stays usable afterwards.
import path from 'node:path'
import { describe, expect, test } from 'vitest'

import type { SessionTools } from '../index.js'
import { SessionTools as ST, openMem, safeJson, settle, tmpDir, track } from './helpers'

const cyclic: any = { a: 1 }
cyclic.self = cyclic
let deep: any = []
for (let i = 0; i < 100_000; i++) deep = [deep]
const megabyte = 'x'.repeat(1 << 20)

/** name → value; `json` says whether a model could send it (it is plain JSON data). */
const HOSTILE: Array<{ name: string; value: () => unknown; json: boolean }> = [
  { name: 'the number 42', value: () => 42, json: true },
  { name: 'NaN', value: () => Number.NaN, json: true },
  { name: 'an array', value: () => [1, 'a', { b: 2 }], json: true },
  { name: 'an empty array', value: () => [], json: true },
  { name: 'null', value: () => null, json: true },
  { name: 'undefined', value: () => undefined, json: true },
  { name: 'a symbol', value: () => Symbol('s'), json: false },
  { name: 'a function', value: () => () => 1, json: false },
  { name: 'a BigInt', value: () => 1n, json: false },
  { name: 'a cyclic object', value: () => cyclic, json: false },
  { name: 'a 100k-deep nested array', value: () => deep, json: true },
  { name: 'a 1 MB string', value: () => megabyte, json: true },
  { name: 'a string with NUL bytes', value: () => 'a\u0000b\u0000', json: true },
  { name: 'an object with a __proto__ key', value: () => JSON.parse('{"__proto__": {"polluted": true}}'), json: true },
  { name: 'a lone surrogate', value: () => 'x\uD800y', json: true },
  { name: 'an object with a throwing getter', value: () => ({ get key() { throw new Error('boom') } }), json: false },
  { name: 'a Proxy that throws', value: () => new Proxy({}, { get() { throw new Error('trap') }, ownKeys() { throw new Error('trap') } }), json: false },
]

type Position = {
  name: string
  call: (st: SessionTools, v: unknown) => unknown
  /** Values for which resolving is also acceptable (the argument is optional, or the value is legal there). */
  mayResolve: string[]
}

const EITHER_FOR_STRINGS = ['a lone surrogate']
const ABSENT_LIKE = ['null', 'undefined', 'a symbol', 'a function', 'NaN']

const STORE_POSITIONS: Position[] = [
  { name: 'getSession(key)', call: (st, v) => st.getSession(v as any), mayResolve: EITHER_FOR_STRINGS },
  { name: 'upsertSession(key, {})', call: (st, v) => st.upsertSession(v as any, {}), mayResolve: EITHER_FOR_STRINGS },
  { name: 'upsertSession(k, patch)', call: (st, v) => st.upsertSession('agent:main:h', v as any), mayResolve: ['an object with a __proto__ key'] },
  { name: 'patchSession(params)', call: (st, v) => st.patchSession(v as any), mayResolve: [] },
  { name: 'patchSession({key})', call: (st, v) => st.patchSession({ key: v } as any), mayResolve: EITHER_FOR_STRINGS },
  { name: 'patchSession({key, label})', call: (st, v) => st.patchSession({ key: 'agent:main:h', label: v } as any), mayResolve: [...ABSENT_LIKE, 'a string with NUL bytes', ...EITHER_FOR_STRINGS] },
  { name: 'patchSession({key, thinkingLevel})', call: (st, v) => st.patchSession({ key: 'agent:main:h', thinkingLevel: v } as any), mayResolve: ABSENT_LIKE },
  { name: 'resolveSession(params)', call: (st, v) => st.resolveSession(v as any), mayResolve: [] },
  { name: 'resolveSession({key})', call: (st, v) => st.resolveSession({ key: v } as any), mayResolve: [] },
  { name: 'listSessions(params)', call: (st, v) => st.listSessions(v as any), mayResolve: ABSENT_LIKE },
  { name: 'listSessions({search})', call: (st, v) => st.listSessions({ search: v } as any), mayResolve: [...ABSENT_LIKE, 'a 1 MB string', 'a string with NUL bytes', ...EITHER_FOR_STRINGS] },
  { name: 'deleteSession(key)', call: (st, v) => st.deleteSession(v as any), mayResolve: EITHER_FOR_STRINGS },
  { name: 'deleteSession(k, options)', call: (st, v) => st.deleteSession('agent:main:h', v as any), mayResolve: ABSENT_LIKE },
  { name: 'resetSession(key)', call: (st, v) => st.resetSession(v as any), mayResolve: EITHER_FOR_STRINGS },
  { name: 'appendMessages(key, msgs)', call: (st, v) => st.appendMessages(v as any, [{ role: 'user', content: 'x' }]), mayResolve: EITHER_FOR_STRINGS },
  { name: 'appendMessages(k, messages)', call: (st, v) => st.appendMessages('agent:main:h', v as any), mayResolve: ['an empty array'] },
  { name: 'appendMessages(k, [message])', call: (st, v) => st.appendMessages('agent:main:h', [v] as any), mayResolve: [] },
  { name: 'chatHistory(key)', call: (st, v) => st.chatHistory(v as any), mayResolve: EITHER_FOR_STRINGS },
  { name: 'chatHistory(k, options)', call: (st, v) => st.chatHistory('main', v as any), mayResolve: ABSENT_LIKE },
  { name: 'chatHistory(k, {before})', call: (st, v) => st.chatHistory('main', { before: v } as any), mayResolve: [...ABSENT_LIKE, 'the number 42'] },
  { name: 'resolveSendPolicy(params)', call: (st, v) => st.resolveSendPolicy(v as any), mayResolve: [] },
  { name: 'resolveSendPolicy({sessionKey})', call: (st, v) => st.resolveSendPolicy({ sessionKey: v } as any), mayResolve: EITHER_FOR_STRINGS },
  // No text is no command: `{ handled: false }` (API.md §4) is a legal answer for absent-like values.
  { name: 'handleSendCommand(params)', call: (st, v) => st.handleSendCommand(v as any), mayResolve: ABSENT_LIKE },
  { name: 'handleSendCommand({text})', call: (st, v) => st.handleSendCommand({ sessionKey: 'main', text: v, isOwner: true } as any), mayResolve: [...ABSENT_LIKE, 'a 1 MB string', 'a string with NUL bytes', ...EITHER_FOR_STRINGS] },
  { name: 'executeTool(name, args)', call: (st, v) => st.executeTool(v as any, {}), mayResolve: [] },
  { name: 'agentsList(ctx)', call: (st, v) => st.agentsList(v as any), mayResolve: HOSTILE.map((h) => h.name) },
  { name: 'sessionsList({}, ctx)', call: (st, v) => st.sessionsList({}, v as any), mayResolve: HOSTILE.map((h) => h.name) },
]

/** Positions where the value is what a model sent: JSON-able values must resolve to a payload. */
const TOOL_POSITIONS: Array<{ name: string; call: (st: SessionTools, v: unknown) => Promise<any>; payload: (r: any) => boolean }> = [
  { name: 'sessionsList(params)', call: (st, v) => st.sessionsList(v as any), payload: (r) => typeof r.count === 'number' || isRefusal(r) },
  { name: 'sessionsList({kinds, limit, messageLimit})', call: (st, v) => st.sessionsList({ kinds: v, limit: v, activeMinutes: v, messageLimit: v } as any), payload: (r) => typeof r.count === 'number' || isRefusal(r) },
  { name: 'sessionsHistory(params)', call: (st, v) => st.sessionsHistory(v as any), payload: (r) => Array.isArray(r.messages) || isRefusal(r) },
  { name: 'sessionsHistory({sessionKey})', call: (st, v) => st.sessionsHistory({ sessionKey: v } as any), payload: (r) => Array.isArray(r.messages) || isRefusal(r) },
  { name: 'sessionsHistory({sessionKey: main, limit, includeTools, maxChars})', call: (st, v) => st.sessionsHistory({ sessionKey: 'main', limit: v, includeTools: v, maxChars: v } as any), payload: (r) => Array.isArray(r.messages) || isRefusal(r) },
  { name: "executeTool('sessions_history', args)", call: (st, v) => st.executeTool('sessions_history', v), payload: (r) => Array.isArray(r.content) && r.content[0].text === JSON.stringify(r.details, null, 2) },
  { name: "executeTool('sessions_list', args)", call: (st, v) => st.executeTool('sessions_list', v), payload: (r) => Array.isArray(r.content) && typeof r.details === 'object' },
  { name: "executeTool('agents_list', args)", call: (st, v) => st.executeTool('agents_list', v), payload: (r) => Array.isArray(r.content) && typeof r.details === 'object' },
]

function isRefusal(r: any): boolean {
  return (r?.status === 'error' || r?.status === 'forbidden') && typeof r.error === 'string'
}

/** A follow-up write and read on the same store still work. */
async function expectUsable(st: SessionTools) {
  const e = await st.upsertSession('agent:main:after', { label: 'after' })
  expect((await st.getSession('agent:main:after'))?.sessionId).toBe(e.sessionId)
  const h = await st.appendMessages('agent:main:after', [{ role: 'user', content: 'still fine' }])
  expect(h.appended).toBe(1)
}

describe.each(STORE_POSITIONS)('store method $name', ({ call, mayResolve }) => {
  test.each(HOSTILE)('given $name when called then it rejects with a code (or a legal result) and the store stays usable', async ({ name, value }) => {
    const st = await openMem()
    const r = await settle(() => call(st, value()))
    expect('threw' in r, `threw synchronously: ${(r as any).error?.message}`).toBe(false)
    if ((r as any).ok) {
      expect(mayResolve, `resolved with ${safeJson((r as any).value)}`).toContain(name)
    } else {
      const err = (r as any).error
      expect(err).toBeInstanceOf(Error)
      expect(err.code, err.message).toBe('INVALID_REQUEST')
      expect(typeof err.message).toBe('string')
      expect(err.message.length).toBeGreaterThan(0)
    }
    await expectUsable(st)
  })
})

describe.each(TOOL_POSITIONS)('tool $name', ({ call, payload }) => {
  test.each(HOSTILE)('given $name from the model when called then a payload, never a crash', async ({ value, json }) => {
    const st = await openMem()
    await st.appendMessages('main', [{ role: 'assistant', content: 'hi' }])
    const r = await settle(() => call(st, value()))
    expect('threw' in r, `threw synchronously: ${(r as any).error?.message}`).toBe(false)
    if ((r as any).ok) {
      expect(payload((r as any).value), safeJson((r as any).value)).toBe(true)
    } else {
      expect(json, `a model could send this; the tool must answer a payload, not reject: ${(r as any).error?.message}`).toBe(false)
      expect((r as any).error.code).toBe('INVALID_REQUEST')
    }
    await expectUsable(st)
  })
})

describe('sync methods with hostile arguments', () => {
  test.each(HOSTILE)('given $name as config when setConfig then it throws INVALID_CONFIG or accepts it, and a refused config changes nothing', async ({ name, value }) => {
    const st = await openMem({ session: { sendPolicy: { default: 'deny' } } })
    let threw: any = null
    try {
      st.setConfig(value() as any)
    } catch (e) {
      threw = e
    }
    if (threw) {
      expect(threw.code, threw.message).toBe('INVALID_CONFIG')
      expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('deny')
    } else {
      expect([...ABSENT_LIKE, 'an object with a __proto__ key'], `accepted ${name}`).toContain(name)
    }
    await expectUsable(st)
  })

  test.each(HOSTILE)('given $name as ctx when toolDefinitions and createTools then an array or a thrown INVALID_REQUEST', async ({ value }) => {
    const st = await openMem()
    for (const f of [() => st.toolDefinitions(value() as any), () => st.createTools(value() as any)]) {
      let out: unknown
      try {
        out = f()
      } catch (e: any) {
        expect(e.code, e.message).toBe('INVALID_REQUEST')
        continue
      }
      expect(Array.isArray(out)).toBe(true)
    }
    await expectUsable(st)
  })

  test.each(HOSTILE)('given $name as open options, path or config when opened then a rejection with a code, never a throw', async ({ name, value }) => {
    const forms: Array<[string, () => unknown, string[]]> = [
      ['options', () => value(), ['INVALID_REQUEST']],
      // A string path goes under a temp folder so that nothing lands in the working directory.
      ['path', () => ({ path: typeof value() === 'string' ? path.join(tmpDir(), value() as string) : value() }), ['INVALID_REQUEST', 'STORE_ERROR']],
      ['config', () => ({ path: ':memory:', config: value() }), ['INVALID_REQUEST', 'INVALID_CONFIG']],
    ]
    for (const [form, options, codes] of forms) {
      const r = await settle(() => ST.open(options() as any))
      expect('threw' in r, `${form} threw synchronously: ${(r as any).error?.message}`).toBe(false)
      if ((r as any).ok) {
        track((r as any).value)
        // Only a legal path (a lone surrogate becomes U+FFFD) or an absent-like config may open.
        const legal = form === 'path' ? ['a lone surrogate'] : form === 'config' ? [...ABSENT_LIKE, 'an object with a __proto__ key'] : []
        expect(legal, `${form}: opened with ${name}`).toContain(name)
      } else {
        expect(codes, `${form}: ${(r as any).error.message}`).toContain((r as any).error.code)
      }
    }
    const st = await openMem()
    await expectUsable(st)
  })
})

describe('__proto__ keys stay plain data', () => {
  test('given a patch with a __proto__ key when upserted then it round-trips as an own property and no prototype changes', async () => {
    const st = await openMem()
    const patch = JSON.parse('{"__proto__": {"polluted": true, "label": "inherited"}, "x": 1}')
    for (const e of [await st.upsertSession('main', patch), (await st.getSession('main'))!]) {
      expect(Object.getPrototypeOf(e)).toBe(Object.prototype)
      expect(Object.prototype.hasOwnProperty.call(e, '__proto__')).toBe(true)
      expect(Object.getOwnPropertyDescriptor(e, '__proto__')!.value).toEqual({ polluted: true, label: 'inherited' })
      expect((e as any).polluted).toBeUndefined()
      expect(e.label).toBeUndefined()
      expect(e.x).toBe(1)
    }
    expect(({} as any).polluted).toBeUndefined()
    expect((Object.prototype as any).polluted).toBeUndefined()
  })

  test('given a message with a __proto__ key when appended then chatHistory returns it as an own property', async () => {
    const st = await openMem()
    const msg = JSON.parse('{"role": "user", "content": "x", "__proto__": {"role": "evil"}}')
    await st.appendMessages('main', [msg])
    const [m] = (await st.chatHistory('main')).messages
    expect(Object.getPrototypeOf(m)).toBe(Object.prototype)
    expect(m.role).toBe('user')
    expect(Object.getOwnPropertyDescriptor(m, '__proto__')!.value).toEqual({ role: 'evil' })
  })

  test('given tool params whose sessionKey sits under __proto__ when called then it is not read (sessionKey required)', async () => {
    const st = await openMem()
    const r = await st.sessionsHistory(JSON.parse('{"__proto__": {"sessionKey": "main"}}'))
    expect(r).toEqual({ status: 'error', tool: 'sessions_history', error: 'sessionKey required' })
  })

  test('given a config whose session sits under __proto__ when opened then it is ignored', async () => {
    const st = track(await ST.open({ path: ':memory:', config: JSON.parse('{"__proto__": {"session": {"sendPolicy": {"default": "deny"}}}}') }))
    expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('allow')
  })
})

describe('odd but legal data is stored as given', () => {
  test('given keys with emoji, combining marks and RTL text when written then they round-trip and are listed', async () => {
    const st = await openMem()
    const keys = ['agent:main:discord:group:🎉-party', 'agent:main:e\u0301te\u0301', 'agent:main:\u05e9\u05dc\u05d5\u05dd', 'agent:main:𝔘𝔫𝔦𝔠𝔬𝔡𝔢']
    for (const k of keys) await st.upsertSession(k, { label: `L ${k.slice(-4)}` })
    for (const k of keys) expect((await st.getSession(k))?.label).toBe(`L ${k.slice(-4)}`)
    const listed = (await st.listSessions()).sessions.map((s) => s.key).sort()
    expect(listed).toEqual([...keys].sort())
  })

  test('given NUL bytes, 1 MB strings and control characters in fields and messages when written then they round-trip', async () => {
    const st = await openMem()
    const e = await st.upsertSession('main', { note: 'a\u0000b\u0001c\u001f', big: megabyte })
    expect(e.note).toBe('a\u0000b\u0001c\u001f')
    expect((await st.getSession('main'))?.big).toBe(megabyte)
    const msgs = [{ role: 'user', content: 'nul\u0000inside' }, { role: 'assistant', content: megabyte }]
    await st.appendMessages('main', msgs)
    expect((await st.chatHistory('main')).messages).toEqual(msgs)
  })

  test('given a message nested 100 levels deep when appended then it round-trips; 100k levels are refused', async () => {
    const st = await openMem()
    let nested: any = { leaf: true }
    for (let i = 0; i < 100; i++) nested = { n: nested }
    await st.appendMessages('main', [{ role: 'custom', data: nested }])
    expect((await st.chatHistory('main')).messages).toEqual([{ role: 'custom', data: nested }])
    const r = await settle(() => st.appendMessages('main', [{ role: 'custom', data: deep }]))
    expect((r as any).ok).toBe(false)
    expect((r as any).error.code).toBe('INVALID_REQUEST')
    expect((await st.chatHistory('main')).messages).toHaveLength(1)
  })

  test('given a message with a lone surrogate (a cut emoji) when appended then it is stored, well-formed', async () => {
    const st = await openMem()
    const broken = 'cut emoji: \uD83D'
    const r = await settle(() => st.appendMessages('main', [{ role: 'assistant', content: broken }]))
    expect((r as any).ok, `rejected: ${(r as any).error?.message}`).toBe(true)
    const [m] = (await st.chatHistory('main')).messages
    expect([broken, 'cut emoji: \uFFFD']).toContain(m.content)
  })
})
