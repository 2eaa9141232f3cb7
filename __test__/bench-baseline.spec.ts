// The better-sqlite3 bench baseline answers what session-tools answers, so the benchmark compares
// like with like: same rows for the listed workloads, same history page, the same merge rule.
import path from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

// @ts-expect-error: plain .mjs bench modules, no type declarations
import { SqliteStore } from '../bench/lib/sqlite-baseline.mjs'
// @ts-expect-error: plain .mjs bench modules, no type declarations
import { makeEntry, makeTranscriptMessage } from '../bench/lib/data.mjs'
import { SessionTools, tmpDir, track } from './helpers'

const N = 300
const CTX = { agentSessionKey: 'agent:main:main' }
type Row = { key: string; kind: string; sessionId?: string }

let sq: any
let st: SessionTools

beforeEach(async () => {
  sq = new SqliteStore(path.join(tmpDir(), 'baseline.db'))
  st = track(await SessionTools.open({ path: ':memory:', mirrorDir: null }))
  const items = []
  for (let j = 0; j < N; j++) {
    const { key, entry } = makeEntry(j)
    const { updatedAt, ...patch } = entry
    items.push({ key, patch })
    await st.upsertSession(key, patch)
  }
  sq.seed(items)
})

afterEach(() => sq.close())

const ids = (rows: Row[]) => rows.map((r) => r.sessionId).sort()

describe('bench sqlite baseline', () => {
  it('lists the same group sessions as session-tools for activeMinutes + kinds', async () => {
    const params = { activeMinutes: 60, kinds: ['group'] }
    const ours = (await st.sessionsList(params, CTX)) as { count: number; sessions: Row[] }
    const theirs = sq.sessionsList(params, CTX)
    expect(theirs.count).toBe(N * 0.3)
    expect(theirs.count).toBe(ours.count)
    expect(ids(theirs.sessions)).toEqual(ids(ours.sessions))
    expect(new Set(theirs.sessions.map((r: Row) => r.kind))).toEqual(new Set(['group']))
  })

  it('classifies cron keys and applies limit after the kind filter, as session-tools does', async () => {
    const ours = (await st.sessionsList({ kinds: ['cron'], limit: 20 }, CTX)) as { count: number; sessions: Row[] }
    const theirs = sq.sessionsList({ kinds: ['cron'], limit: 20 }, CTX)
    expect(theirs.count).toBe(20)
    expect(ours.count).toBe(20)
    expect(sq.sessionsList({ kinds: ['cron'] }, CTX).count).toBe(N / 10)
    expect(sq.sessionsList({ limit: 50 }, CTX).count).toBe(50)
    expect(sq.sessionsList({}, CTX).count).toBe(200) // no limit: at most 200 rows
  })

  it('applies the merge rule on upsert: patch wins, sessionId and unknown fields kept, updatedAt moves forward', () => {
    const { key, entry } = makeEntry(7)
    const before = sq.getSession(key)
    expect(before.sessionId).toBe(entry.sessionId)
    const next = sq.upsertSession(key, { lastChannel: 'telegram', lastTo: '+15559999', custom: { x: 1 } })
    expect(next).toMatchObject({ sessionId: entry.sessionId, lastChannel: 'telegram', lastTo: '+15559999', custom: { x: 1 }, model: entry.model })
    expect(next.updatedAt).toBeGreaterThanOrEqual(before.updatedAt)
    expect(sq.getSession(key)).toEqual(next)
    expect(sq.upsertSession('brand:new', {}).sessionId).toMatch(/^[0-9a-f-]{36}$/)
  })

  it('returns the same history page as session-tools', async () => {
    const msgs = Array.from({ length: 60 }, (_, j) => makeTranscriptMessage(j))
    await st.appendMessages('main', msgs)
    sq.appendMessages('main', msgs)
    const ours = (await st.sessionsHistory({ sessionKey: 'main', limit: 20 }, CTX)) as { messages: unknown[] }
    const theirs = sq.sessionsHistory({ sessionKey: 'main', limit: 20 }, CTX)
    expect(theirs.messages).toHaveLength(20)
    expect(theirs.messages).toEqual(ours.messages)
    expect(theirs.messages[0].content).toBe('question number 40: how is the build going?') // envelope stripped
  })
})
