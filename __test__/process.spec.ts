// Process-level behaviour (API.md §1): several SessionTools on one file in one process and in
// several processes lose no update and never show half-written entries; an idle open store
// does not keep Node alive.
import { spawn, spawnSync } from 'node:child_process'
import path from 'node:path'
import { describe, expect, test } from 'vitest'

import { INDEX_JS, SessionTools, openFile, runChild, tmpDir, track } from './helpers'

describe('two stores on one file in one process', () => {
  test('given two SessionTools on one file when both upsert 200 keys and append concurrently then every key and message is there', async () => {
    const { st: a, db } = await openFile()
    const b = track(await SessionTools.open({ path: db }))
    const N = 200
    const work: Promise<unknown>[] = []
    for (let i = 0; i < N; i++) {
      work.push(a.upsertSession(`agent:main:a-${i}`, { from: 'a', i }))
      work.push(b.upsertSession(`agent:main:b-${i}`, { from: 'b', i }))
      work.push(a.appendMessages('agent:main:shared', [{ role: 'user', content: `a${i}` }]))
      work.push(b.appendMessages('agent:main:shared', [{ role: 'user', content: `b${i}` }]))
      work.push(a.upsertSession('agent:main:fields', { [`a${i}`]: i }))
      work.push(b.upsertSession('agent:main:fields', { [`b${i}`]: i }))
    }
    await Promise.all(work)
    for (const st of [a, b]) {
      const keys = new Set((await st.listSessions({ limit: 1000 })).sessions.map((s) => s.key))
      for (let i = 0; i < N; i++) {
        expect(keys.has(`agent:main:a-${i}`), `a-${i}`).toBe(true)
        expect(keys.has(`agent:main:b-${i}`), `b-${i}`).toBe(true)
      }
      expect(keys.size).toBe(2 * N + 2)
      const texts = (await st.chatHistory('agent:main:shared', { limit: 1000 })).messages.map((m) => m.content)
      expect(texts).toHaveLength(2 * N)
      expect(new Set(texts).size).toBe(2 * N)
      const fields = (await st.getSession('agent:main:fields'))!
      for (let i = 0; i < N; i++) {
        expect(fields[`a${i}`], `a${i}`).toBe(i)
        expect(fields[`b${i}`], `b${i}`).toBe(i)
      }
    }
  }, 60_000)

  test('given two stores when one resets a session the other reads then it sees the new sessionId at once', async () => {
    const { st: a, db } = await openFile()
    const b = track(await SessionTools.open({ path: db }))
    const before = await a.upsertSession('main', {})
    const reset = await b.resetSession('main')
    expect(reset.entry.sessionId).not.toBe(before.sessionId)
    expect((await a.getSession('main'))?.sessionId).toBe(reset.entry.sessionId)
  })
})

describe('child processes', () => {
  test('given a child that opens a file store, writes and never closes when it finishes its script then it exits on its own', () => {
    const dir = tmpDir()
    const db = path.join(dir, 'sessions.db')
    const code = `
      const { SessionTools } = require(process.env.ST_INDEX)
      ;(async () => {
        const st = await SessionTools.open({ path: process.env.ST_DB })
        await st.upsertSession('main', { label: 'from-child' })
        await st.appendMessages('main', [{ role: 'user', content: 'hi' }])
        const l = await st.listSessions()
        console.log('listed ' + l.count)
      })().catch((e) => { console.error(e); process.exit(3) })
    `
    const r = spawnSync(process.execPath, ['-e', code], {
      env: { ...process.env, ST_INDEX: INDEX_JS, ST_DB: db },
      encoding: 'utf8',
      timeout: 20_000,
    })
    expect(r.error, 'the child did not exit on its own (killed by the timeout)').toBeUndefined()
    expect(r.signal).toBeNull()
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
    expect(r.stdout.trim()).toBe('listed 1')
  }, 30_000)

  test('given a child that opens :memory: and does nothing when its script ends then it exits on its own', () => {
    const code = `require(process.env.ST_INDEX).SessionTools.open({ path: ':memory:' }).then(() => console.log('open'))`
    const r = spawnSync(process.execPath, ['-e', code], { env: { ...process.env, ST_INDEX: INDEX_JS }, encoding: 'utf8', timeout: 20_000 })
    expect(r.error).toBeUndefined()
    expect(r.status).toBe(0)
    expect(r.stdout.trim()).toBe('open')
  }, 30_000)

  test('given two processes writing the same file concurrently when both finish then no update is lost', async () => {
    const dir = tmpDir()
    const db = path.join(dir, 'sessions.db')
    const N = 150
    const code = `
      const { SessionTools } = require(process.env.ST_INDEX)
      const id = process.env.ST_ID
      const N = Number(process.env.ST_N)
      ;(async () => {
        const st = await SessionTools.open({ path: process.env.ST_DB })
        const work = []
        for (let i = 0; i < N; i++) {
          work.push(st.upsertSession('agent:main:p' + id + '-' + i, { id, i }))
          work.push(st.appendMessages('agent:main:shared', [{ role: 'user', content: id + ':' + i }]))
          work.push(st.upsertSession('agent:main:fields', { ['f' + id + '_' + i]: i }))
        }
        await Promise.all(work)
        await st.close()
        console.log('done ' + id)
      })().catch((e) => { console.error(e && e.code, e && e.message); process.exit(3) })
    `
    const [r1, r2] = await Promise.all([
      runChild(code, { ST_DB: db, ST_ID: '1', ST_N: String(N) }),
      runChild(code, { ST_DB: db, ST_ID: '2', ST_N: String(N) }),
    ])
    for (const [r, id] of [[r1, '1'], [r2, '2']] as const) {
      expect(r.stderr, `child ${id}`).toBe('')
      expect(r.code, `child ${id}`).toBe(0)
      expect(r.stdout.trim()).toBe(`done ${id}`)
    }
    const st = track(await SessionTools.open({ path: db }))
    const keys = new Set((await st.listSessions({ limit: 1000 })).sessions.map((s) => s.key))
    expect(keys.size).toBe(2 * N + 2)
    const messages = (await st.chatHistory('agent:main:shared', { limit: 1000 })).messages.map((m) => m.content)
    expect(messages).toHaveLength(2 * N)
    expect(new Set(messages).size).toBe(2 * N)
    const fields = (await st.getSession('agent:main:fields'))!
    for (let i = 0; i < N; i++) {
      expect(keys.has(`agent:main:p1-${i}`)).toBe(true)
      expect(keys.has(`agent:main:p2-${i}`)).toBe(true)
      expect(fields[`f1_${i}`]).toBe(i)
      expect(fields[`f2_${i}`]).toBe(i)
    }
  }, 90_000)

  test('given a writer process killed mid-work when the file is reopened then every entry is whole and the store works', async () => {
    const dir = tmpDir()
    const db = path.join(dir, 'sessions.db')
    const code = `
      const { SessionTools } = require(process.env.ST_INDEX)
      ;(async () => {
        const st = await SessionTools.open({ path: process.env.ST_DB })
        let n = 0
        const loop = async (w) => {
          for (let i = 0; ; i++) {
            const v = w * 1000000 + i
            await st.upsertSession('agent:main:k' + (i % 50), { a: v, b: v, c: 'x'.repeat(2000) + v })
            await st.appendMessages('agent:main:k' + (i % 50), [{ role: 'user', content: 'm' + v, v }, { role: 'assistant', content: 'r' + v, v }])
            if (++n === 300) console.log('busy')
          }
        }
        for (let w = 0; w < 4; w++) loop(w)
      })()
    `
    const child = spawn(process.execPath, ['-e', code], { env: { ...process.env, ST_INDEX: INDEX_JS, ST_DB: db } })
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('the writer never got busy')), 30_000)
      child.stdout.on('data', (d) => {
        if (String(d).includes('busy')) {
          clearTimeout(t)
          child.kill('SIGKILL')
          resolve()
        }
      })
    })
    await new Promise((r) => child.on('close', r))
    const st = track(await SessionTools.open({ path: db }))
    const rows = (await st.listSessions({ limit: 1000 })).sessions
    expect(rows.length).toBeGreaterThan(0)
    for (const row of rows) {
      const e = (await st.getSession(row.key))!
      expect(e.a).toBe(e.b)
      expect(e.c).toBe('x'.repeat(2000) + e.a)
      const msgs = (await st.chatHistory(row.key, { limit: 1000 })).messages
      expect(msgs.length % 2).toBe(0)
      for (let i = 0; i < msgs.length; i += 2) {
        expect(msgs[i].role).toBe('user')
        expect(msgs[i + 1].role).toBe('assistant')
        expect(msgs[i + 1].v).toBe(msgs[i].v)
      }
    }
    await st.upsertSession('agent:main:after-crash', { ok: true })
    expect((await st.getSession('agent:main:after-crash'))?.ok).toBe(true)
  }, 60_000)
})
