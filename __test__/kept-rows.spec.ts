// A listing's rows cross with an index (src/tools/indexed.rs), and JS keeps the rows it parsed
// by their stamp (from the second time a row comes), copying a kept row instead of parsing it
// again (src/napi/rows.rs). What a caller gets must stay exactly the value one JSON.parse of the
// plain answer gives, however often it lists, whatever it does to what it got, and whatever text
// the rows hold. Each test lists at least three times: once noted, once kept, then copied.
import { describe, expect, test } from 'vitest'

import { openFile } from './helpers.js'

const CTX = { agentSessionKey: 'agent:main:main' }
const ODD = ['plain', 'quote " and \\ backslash', 'brackets ] [ } {, comma', 'non-ASCII é 日本 😀', '__proto__', '', '\u2028 \u0000 nul']

async function seed(st: any, n: number, round = 0) {
  await Promise.all(
    Array.from({ length: n }, (_, i) =>
      st.upsertSession(`agent:main:telegram:group:g${i}`, {
        chatType: 'group',
        subject: `${ODD[(i + round) % ODD.length]} ${i}`,
        label: `${ODD[(i + 3) % ODD.length]} ${i} r${round}`,
        origin: { label: ODD[(i + 1) % ODD.length] },
        deliveryContext: { channel: 'telegram', to: `+1${i}`, accountId: ODD[(i + 2) % ODD.length] || 'acc' },
        inputTokens: i * 1.5,
        contextTokens: i % 5 === 0 ? -0 : i,
      }),
    ),
  )
}

/** The plain answer: the tool's wrapped text, parsed once. */
async function plain(st: any, params: Record<string, unknown>) {
  const wrapped = await st.executeTool('sessions_list', params, CTX)
  return JSON.parse(wrapped.content[0].text)
}

function expectSameValue(got: any, want: any) {
  expect(JSON.stringify(got)).toBe(JSON.stringify(want)) // key order included
  expect(got).toStrictEqual(want) // -0 and types included
  for (const row of got.sessions) {
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype)
    if (row.deliveryContext) expect(Object.getPrototypeOf(row.deliveryContext)).toBe(Object.prototype)
  }
}

describe('kept rows of a listing', () => {
  test('given 300 sessions with odd texts when listed again and again then every answer is the plain answer and no two answers share an object', async () => {
    const { st } = await openFile()
    await seed(st, 300)
    const want = await plain(st, { limit: 200 })
    const first = await st.sessionsList({ limit: 200 }, CTX)
    expectSameValue(first, want)
    expectSameValue(await st.sessionsList({ limit: 200 }, CTX), want)
    const second = await st.sessionsList({ limit: 200 }, CTX)
    expectSameValue(second, want)
    expect(second.sessions.some((r: any) => r.label?.includes('😀'))).toBe(true)
    const texts = JSON.stringify(second)
    expect(texts.includes('\u2028') && texts.includes('\\u0000')).toBe(true)
    for (let i = 0; i < first.sessions.length; i++) {
      expect(second.sessions[i]).not.toBe(first.sessions[i])
      if (first.sessions[i].deliveryContext) expect(second.sessions[i].deliveryContext).not.toBe(first.sessions[i].deliveryContext)
    }
  })

  test('given a listing whose rows the caller changed when listed again then the next answer is the plain answer, untouched', async () => {
    const { st } = await openFile()
    await seed(st, 60)
    const want = await plain(st, { limit: 50 })
    for (let round = 0; round < 4; round++) {
      const got = await st.sessionsList({ limit: 50 }, CTX)
      expectSameValue(got, want)
      for (const row of got.sessions) {
        row.key = 'changed'
        delete row.updatedAt
        if (row.deliveryContext) row.deliveryContext.to = 'changed'
        Object.setPrototypeOf(row, null)
      }
      got.sessions.length = 0
    }
  })

  test('given sessions updated between listings when listed then the changed rows show the change and the others stay', async () => {
    const { st } = await openFile()
    await seed(st, 40)
    await st.sessionsList({ limit: 40 }, CTX)
    await st.sessionsList({ limit: 40 }, CTX)
    await st.upsertSession('agent:main:telegram:group:g7', { label: 'now changed 😀' })
    const got = await st.sessionsList({ limit: 40 }, CTX)
    expectSameValue(got, await plain(st, { limit: 40 }))
    expect(got.sessions[0].key).toBe('agent:main:telegram:group:g7')
    expect(got.sessions[0].label).toBe('now changed 😀')
  })

  test('given more rendered rows than an environment keeps when listed round after round then every answer is the plain answer', async () => {
    const { st } = await openFile()
    // 25 rounds of 200 changed rows, each listed twice: 5,000 stamps, past the 4,096 kept
    for (let round = 0; round < 25; round++) {
      await seed(st, 200, round)
      await st.sessionsList({ limit: 200 }, CTX)
      const got = await st.sessionsList({ limit: 200 }, CTX)
      if (round % 6 === 0 || round === 24) expectSameValue(got, await plain(st, { limit: 200 }))
      else expect(got.count).toBe(200)
    }
    expectSameValue(await st.sessionsList({ limit: 200 }, CTX), await plain(st, { limit: 200 }))
  })

  test('given a filtered listing and an empty one when listed then each is the plain answer', async () => {
    const { st } = await openFile()
    await seed(st, 30)
    for (const params of [{ activeMinutes: 60, limit: 20 }, { kinds: ['group'], limit: 10 }, { search: 'nothing matches this' }]) {
      for (let k = 0; k < 3; k++) expectSameValue(await st.sessionsList(params, CTX), await plain(st, params))
    }
    const empty = await st.sessionsList({ search: 'nothing matches this' }, CTX)
    expect(empty).toStrictEqual({ count: 0, sessions: [] })
  })
})
