// How calls are scheduled (README "How calls are run"): the writes of one turn of JS code run
// together (inline in one transaction, the rest through the group-commit writer), each caller
// told its own result or error, in call order, and a read issued after a write sees it.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, test } from 'vitest'

import { threads } from '../bench/lib/threads.mjs'
import { openFile, openMem, tmpDir } from './helpers.js'

const MIB = 1024 * 1024

describe('writes folded together, each caller told its own outcome', () => {
  test('given 1,000 upserts started in one turn when they settle then each has its own entry and every key is stored', async () => {
    const { st } = await openFile()
    const outs = await Promise.all(Array.from({ length: 1000 }, (_, i) => st.upsertSession(`agent:main:k${i}`, { label: `l${i}`, inputTokens: i })))
    outs.forEach((e, i) => expect([e.label, e.inputTokens]).toEqual([`l${i}`, i]))
    const stats = await st.stats()
    expect(stats.sessions).toBe(1000)
    for (const i of [0, 15, 16, 17, 500, 999]) expect((await st.getSession(`agent:main:k${i}`))?.label).toBe(`l${i}`)
  })

  test('given a burst with invalid calls among valid ones when it settles then only the invalid ones reject, with their own code, and the rest are stored', async () => {
    const { st } = await openFile()
    const calls = Array.from({ length: 60 }, (_, i) =>
      i % 7 === 3 ? st.upsertSession(`agent:main:bad${i}`, { updatedAt: 'soon' } as any) : st.upsertSession(`agent:main:ok${i}`, { label: `v${i}` }),
    )
    const settled = await Promise.allSettled(calls)
    settled.forEach((s, i) => {
      if (i % 7 === 3) {
        expect(s.status).toBe('rejected')
        expect((s as PromiseRejectedResult).reason.code).toBe('INVALID_REQUEST')
      } else {
        expect(s.status).toBe('fulfilled')
        expect((s as PromiseFulfilledResult<any>).value.label).toBe(`v${i}`)
      }
    })
    for (let i = 0; i < 60; i++) {
      const e = await st.getSession(i % 7 === 3 ? `agent:main:bad${i}` : `agent:main:ok${i}`)
      expect(e?.label ?? null).toBe(i % 7 === 3 ? null : `v${i}`)
    }
  })

  test('given many upserts of one key in one turn when they settle then they applied in call order', async () => {
    const st = await openMem()
    const outs = await Promise.all(Array.from({ length: 100 }, (_, i) => st.upsertSession('agent:main:same', { inputTokens: i, [`f${i}`]: true })))
    outs.forEach((e, i) => {
      expect(e.inputTokens).toBe(i)
      expect(e[`f${i}`]).toBe(true)
    })
    const last = await st.getSession('agent:main:same')
    expect(last?.inputTokens).toBe(99)
    expect(Object.keys(last!).filter((k) => /^f\d+$/.test(k))).toHaveLength(100)
  })

  test('given writes then reads issued in the same turn when they settle then each read sees the writes before it', async () => {
    const { st } = await openFile()
    const ps: Promise<any>[] = []
    for (let i = 0; i < 40; i++) {
      ps.push(st.upsertSession('agent:main:seq', { inputTokens: i }))
      ps.push(st.getSession('agent:main:seq'))
      ps.push(st.appendMessages('agent:main:seq', [{ role: 'user', content: `m${i}` }]))
      ps.push(st.chatHistory('agent:main:seq', { limit: 1000 }))
    }
    const outs = await Promise.all(ps)
    for (let i = 0; i < 40; i++) {
      expect(outs[i * 4 + 1].inputTokens).toBe(i)
      const h = outs[i * 4 + 3]
      expect(h.messages).toHaveLength(i + 1)
      expect(h.messages[i].content).toBe(`m${i}`)
    }
  })

  test('given writes then long reads (filtered lists, sessions.list, resolve) issued in the same turn when they settle then each read sees the writes before it', async () => {
    const { st } = await openFile()
    const ctx = { agentSessionKey: 'agent:main:main' }
    for (let i = 0; i < 20; i++) {
      const key = `agent:main:group:g${i}`
      const [, tool, listed, resolved] = await Promise.all([
        st.upsertSession(key, { label: `seen-${i}` }),
        st.sessionsList({ kinds: ['group'], activeMinutes: 60 }, ctx),
        st.listSessions({ search: `seen-${i}` }),
        st.resolveSession({ label: `seen-${i}` }),
      ])
      expect(tool.sessions.map((r: any) => r.key)).toContain(key)
      expect(listed.sessions.map((r: any) => r.key)).toEqual([key])
      expect(resolved.key).toBe(key)
    }
  })

  test('given an upsert then patchSession, resetSession or a send command in the same turn when they settle then they applied in call order', async () => {
    const { st } = await openFile()
    for (let i = 0; i < 30; i++) {
      const key = `agent:main:o${i}`
      await st.upsertSession(key, { label: `a${i}` })
      const first = await st.getSession(key)
      const [, patched, reset, command] = await Promise.all([
        st.upsertSession(key, { label: `b${i}`, sendPolicy: 'allow' }),
        st.patchSession({ key, label: `c${i}` }),
        st.resetSession(key),
        st.handleSendCommand({ sessionKey: key, text: '/send off', isOwner: true }),
      ])
      expect(patched.entry.label).toBe(`c${i}`)
      expect(reset.entry.sessionId).not.toBe(first.sessionId)
      expect(command.handled).toBe(true)
      const last = await st.getSession(key)
      expect([last.label, last.sendPolicy, last.sessionId]).toEqual([`c${i}`, 'deny', reset.entry.sessionId])
    }
  })

  test('given an upsert then deleteSession, exportStateDir or sessions_send in the same turn when they settle then each ran after the upsert', async () => {
    const { st } = await openFile()
    for (let i = 0; i < 20; i++) {
      const gone = `agent:main:d${i}`
      const denied = `agent:main:n${i}`
      const out = tmpDir()
      const [, deleted, , , , sent] = await Promise.all([
        st.upsertSession(gone, { label: `d${i}` }),
        st.deleteSession(gone),
        st.upsertSession(`agent:main:e${i}`, { label: `e${i}` }),
        st.exportStateDir(out),
        st.upsertSession(denied, { label: `n${i}`, sendPolicy: 'deny' }),
        st.sessionsSend({ sessionKey: denied, message: 'hi', timeoutSeconds: 0 }, { agentSessionKey: 'agent:main:main' }),
      ])
      expect(deleted.deleted).toBe(true)
      expect(await st.getSession(gone)).toBeNull()
      const written = JSON.parse(readFileSync(join(out, 'agents/main/sessions/sessions.json'), 'utf8'))
      expect(Object.keys(written)).toContain(`agent:main:e${i}`)
      expect([sent.status, sent.error]).toEqual(['error', 'send blocked by session policy'])
    }
  })

  test('given a store closed while a burst is queued when it settles then every call either succeeded or rejected CLOSED', async () => {
    const { st } = await openFile()
    const calls = Array.from({ length: 300 }, (_, i) => st.upsertSession(`agent:main:c${i}`, { label: 'x' }))
    const closing = st.close()
    const settled = await Promise.allSettled(calls)
    await closing
    for (const s of settled) {
      if (s.status === 'rejected') expect(s.reason.code).toBe('CLOSED')
    }
  })

  test('given large appends in a burst when the mirror is on then every mirrored line follows its transcript', async () => {
    const { st } = await openFile()
    const body = 'x'.repeat(MIB / 16)
    await Promise.all(Array.from({ length: 40 }, (_, i) => st.appendMessages(`agent:main:m${i % 4}`, [{ role: 'user', content: `${i} ${body}` }])))
    for (let k = 0; k < 4; k++) {
      const h = await st.chatHistory(`agent:main:m${k}`, { limit: 100 })
      expect(h.messages.map((m: any) => Number(String(m.content).split(" ")[0]))).toEqual(Array.from({ length: 10 }, (_, j) => j * 4 + k))
    }
  })
})

describe('reads that never run inline go to the store\'s reader thread (src/napi/lanes.rs)', () => {
  test.runIf(process.platform === 'linux')('given filtered lists when they run then the reader thread runs them, not the runtime\'s workers', async () => {
    const { st } = await openFile()
    await Promise.all(Array.from({ length: 300 }, (_, i) => st.upsertSession(`agent:main:group:g${i}`, { label: `g${i}` })))
    // time run since `before` by the threads named `prefix…` (per thread: one may end meanwhile)
    const ranSince = (before: ReturnType<typeof threads>, prefix: string) =>
      Object.entries(threads())
        .filter(([, t]) => t.name.startsWith(prefix))
        .reduce((a, [tid, t]) => a + (t.runMs ?? 0) - (before[tid]?.runMs ?? 0), 0)
    const before = threads()
    for (let i = 0; i < 100; i++) {
      const listed = await st.sessionsList({ kinds: ['group'], activeMinutes: 60 }, { agentSessionKey: 'agent:main:main' })
      expect(listed.count).toBe(200)
    }
    const [reader, runtime] = [ranSince(before, 'session-tools-r'), ranSince(before, 'tokio-rt-worker')]
    expect(reader).toBeGreaterThan(0)
    expect(runtime).toBeLessThan(reader / 4)
    await st.close()
  })
})

describe('a large append runs on the writer thread, in its place (src/engine/mod.rs INLINE_APPEND_BYTES)', () => {
  test.runIf(process.platform === 'linux')('given a large append among small writes in one turn when they settle then the writer thread ran it and every write applied in call order', async () => {
    const { st } = await openFile()
    const key = 'agent:main:big'
    const small = (n: number) => [{ role: 'user', content: `small ${n}` }]
    const large = Array.from({ length: 100 }, (_, i) => ({ role: 'assistant', content: `large ${i} ${'x'.repeat(400)}` }))
    await st.appendMessages(key, small(0))
    const ranSince = (before: ReturnType<typeof threads>) =>
      Object.entries(threads())
        .filter(([, t]) => t.name.startsWith('session-tools-w'))
        .reduce((a, [tid, t]) => a + (t.runMs ?? 0) - (before[tid]?.runMs ?? 0), 0)
    const before = threads()
    // the first call of a turn takes the native method, the later ones are gathered in JS: a
    // large one goes to the writer on either path
    const settled = await Promise.all([
      st.appendMessages(key, large),
      st.appendMessages(key, small(1)),
      st.appendMessages(key, large),
      st.appendMessages(key, small(2)),
    ])
    expect(ranSince(before)).toBeGreaterThan(0)
    expect(settled.map((r: any) => r.appended)).toEqual([100, 1, 100, 1])
    const page = await st.chatHistory(key, { limit: 1000 })
    const order = page.messages.map((m: any) => String(m.content).split(' ').slice(0, 2).join(' '))
    const big = Array.from({ length: 100 }, (_, i) => `large ${i}`)
    expect(order).toEqual(['small 0', ...big, 'small 1', ...big, 'small 2'])
    await st.close()
  })
})

describe('the store\'s background threads leave the JS thread its core (src/store/priority.rs)', () => {
  const SCHED_OTHER = 0
  const SCHED_IDLE = 5
  test.runIf(process.platform === 'linux')('given a file store when it is open then its checkpointer and its cache keeper run in the idle class, its writer at nice 10, and this thread as it was', async () => {
    const jsThread = () => threads()[String(process.pid)]
    const before = jsThread()
    const { st } = await openFile()
    // a burst, so that the writer has run
    await Promise.all(Array.from({ length: 100 }, (_, i) => st.upsertSession(`agent:main:p${i}`, { label: 'x' })))
    const all = Object.values(threads())
    const checkpointers = all.filter((t) => t.name.startsWith('session-tools-c'))
    const writers = all.filter((t) => t.name.startsWith('session-tools-w'))
    // the thread keeping the file in the OS's cache (src/store/warm.rs)
    const keepers = all.filter((t) => t.name.startsWith('session-tools-k'))
    expect(checkpointers.length).toBeGreaterThan(0)
    expect(writers.length).toBeGreaterThan(0)
    expect(keepers.length).toBeGreaterThan(0)
    for (const t of [...checkpointers, ...keepers]) expect(t.policy).toBe(SCHED_IDLE)
    for (const t of writers) expect([t.policy, t.nice]).toEqual([SCHED_OTHER, 10])
    // the JS thread keeps its policy and nice
    const now = jsThread()
    expect([now.policy, now.nice]).toEqual([before.policy, before.nice])
    await st.close()
  })
})
