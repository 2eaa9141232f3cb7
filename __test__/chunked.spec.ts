// Large answers (a 1,000-row listing, a 1,000-message history) are materialised over several
// turns of the event loop (src/napi/chunked.rs) and must be the very value one JSON.parse of
// the answer gives: same rows, same order, same key order, odd text kept.
import { spawnSync } from 'node:child_process'

import { describe, expect, test } from 'vitest'

import { INDEX_JS, openFile } from './helpers.js'

const CTX = { agentSessionKey: 'agent:main:main' }
const ODD = ['plain', 'quote " and \\ backslash', 'brackets ] [ } {, comma', 'non-ASCII é 日本 😀', '__proto__', '']

async function seed(st: any) {
  await Promise.all(
    Array.from({ length: 1000 }, (_, i) =>
      st.upsertSession(`agent:main:telegram:group:g${i}`, {
        chatType: 'group',
        subject: `${ODD[i % ODD.length]} ${i}`,
        label: `${ODD[(i + 3) % ODD.length]} ${i}`,
        origin: { label: ODD[(i + 1) % ODD.length] },
        deliveryContext: { channel: 'telegram', to: `+1${i}`, accountId: ODD[(i + 2) % ODD.length] || 'acc' },
        inputTokens: i * 1.5,
      }),
    ),
  )
  const messages = Array.from({ length: 1000 }, (_, i) =>
    i % 2 === 0
      ? { role: 'user', content: `[WhatsApp +1555 2026-01-01T10:00Z] ${ODD[i % ODD.length]} ${i}\n[message_id: ${i}]`, timestamp: i }
      : { role: 'assistant', content: [{ type: 'text', text: `${ODD[i % ODD.length]} "${i}" ${'x'.repeat(i % 7 === 0 ? 20_000 : 10)}` }], timestamp: i },
  )
  await st.appendMessages('agent:main:main', messages)
}

/** How many turns of the event loop passed while `p` settled. */
async function turns<T>(p: Promise<T>): Promise<{ value: T; turns: number }> {
  let n = 0
  let done = false
  const tick = () => {
    if (done) return
    n++
    setImmediate(tick)
  }
  setImmediate(tick)
  const value = await p
  done = true
  return { value, turns: n }
}

describe('large answers materialised over several turns', () => {
  test('given 1,000 sessions when listed with limit 1,000 then the answer equals one parse of the same answer, key order included, and it came over several turns', async () => {
    const { st } = await openFile()
    await seed(st)
    const { value: listed, turns: n } = await turns(st.sessionsList({ limit: 1000 }, CTX))
    expect(listed.count).toBe(1000)
    expect(listed.sessions).toHaveLength(1000)
    expect(n).toBeGreaterThan(1)
    const wrapped = await st.executeTool('sessions_list', { limit: 1000 }, CTX)
    const once = JSON.parse(wrapped.content[0].text)
    expect(JSON.stringify(wrapped.details)).toBe(JSON.stringify(once))
    expect(JSON.stringify(listed)).toBe(JSON.stringify(once))
    expect(Object.keys(listed)).toEqual(['count', 'sessions'])
    const subjects = new Set(listed.sessions.map((r: any) => r.displayName))
    expect(subjects.size).toBe(1000)
    expect(listed.sessions.some((r: any) => r.label?.includes('😀'))).toBe(true)
  })

  test('given a 1,000-message transcript when read with limit 1,000 then the answer equals one parse of the same answer, envelopes stripped', async () => {
    const { st } = await openFile()
    await seed(st)
    const { value: history, turns: n } = await turns(st.sessionsHistory({ sessionKey: 'main', limit: 1000 }, CTX))
    expect(history.messages).toHaveLength(1000)
    expect(n).toBeGreaterThan(1)
    const wrapped = await st.executeTool('sessions_history', { sessionKey: 'main', limit: 1000 }, CTX)
    expect(JSON.stringify(history)).toBe(JSON.stringify(JSON.parse(wrapped.content[0].text)))
    expect(JSON.stringify(wrapped.details)).toBe(JSON.stringify(history))
    expect(history.messages[0].content).toBe(`${ODD[0]} 0`)
    expect(history.messages[1].content[0].text).toContain(`"1"`)
    const chat = await st.chatHistory('agent:main:main', { limit: 1000 })
    expect(chat.messages ?? chat).toHaveLength(1000)
  })

  test('given several large answers at once when they settle then each is whole and a small one started with them is right too', async () => {
    const { st } = await openFile()
    await seed(st)
    const big = Array.from({ length: 4 }, () => st.sessionsList({ limit: 1000 }, CTX))
    const small = st.sessionsList({ limit: 3 }, CTX)
    const all = await Promise.all([...big, small])
    const first = JSON.stringify(all[0])
    for (const a of all.slice(1, 4)) expect(JSON.stringify(a)).toBe(first)
    expect(all[4].sessions.map((r: any) => r.key)).toEqual(all[0].sessions.slice(0, 3).map((r: any) => r.key))
  })

  test('given a process without performance and setImmediate globals when a large answer comes then it is parsed whole, the same value', () => {
    const code = `
      const { SessionTools } = require(process.env.ST_INDEX)
      delete globalThis.performance
      delete globalThis.setImmediate
      ;(async () => {
        const st = await SessionTools.open({ path: ':memory:' })
        await Promise.all(Array.from({ length: 600 }, (_, i) => st.upsertSession('agent:main:k' + i, { label: 'l' + i, subject: 'x'.repeat(100) })))
        const listed = await st.sessionsList({ limit: 600 }, { agentSessionKey: 'agent:main:main' })
        const wrapped = await st.executeTool('sessions_list', { limit: 600 }, { agentSessionKey: 'agent:main:main' })
        const same = JSON.stringify(listed) === JSON.stringify(JSON.parse(wrapped.content[0].text)) && JSON.stringify(listed).length > 100000
        await st.close()
        console.log(same ? 'SAME' : 'DIFFERENT')
      })().catch((e) => { console.log('ERROR ' + e.message); process.exitCode = 1 })
    `
    const r = spawnSync(process.execPath, ['-e', code], { env: { ...process.env, ST_INDEX: INDEX_JS }, encoding: 'utf8', timeout: 60_000 })
    expect(r.stdout.trim()).toBe('SAME')
  })
})
