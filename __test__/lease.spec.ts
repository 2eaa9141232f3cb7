// Ownership by lease across processes (API.md §1.7): a second process on the same file leaves a
// live process's run and its announce in flight alone, however long it waits, and takes both
// over (the run ended as interrupted, the announce delivered once, by it) once that process is
// killed with SIGKILL, without reopening.
import { spawn, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import { describe, expect, it } from 'vitest'

import type { AgentRunRequest } from '../index.js'
import { INDEX_JS, SessionTools, tmpDir, track } from './helpers'

const INTERRUPTED = 'interrupted: the process stopped before the run finished'
const CONFIG = { session: { agentToAgent: { maxPingPongTurns: 0 } } }
// a short lease, so that the heartbeat (a third of it) notices the kill soon
const SETTINGS = { ownership: { leaseMs: 1500 } }

/** A gateway process whose child run finishes, whose announce of it and whose send's run never
 * do; prints `READY <json>` once both are in flight. */
const HOLDER = `
  const { SessionTools } = require(process.env.ST_INDEX)
  setInterval(() => {}, 1000)
  // one promise that never settles, kept reachable as a host's call in flight is (a bare
  // \`new Promise(() => {})\` may be garbage collected, and the store then ends its run at once)
  const stuck = new Promise(() => {})
  const seen = { announce: null, nested: false }
  let send, spawned
  const report = () => {
    if (seen.announce && seen.nested && send && spawned) console.log('READY ' + JSON.stringify({ send, spawned, announceKey: seen.announce.idempotencyKey }))
  }
  SessionTools.open({
    path: process.env.ST_DB,
    config: ${JSON.stringify(CONFIG)},
    settings: ${JSON.stringify(SETTINGS)},
    runAgent: (req) => {
      if (req.lane === 'subagent') return Promise.resolve({ reply: 'indexed' })
      if (req.lane === 'announce') seen.announce = req
      if (req.lane === 'nested') seen.nested = true
      setTimeout(report, 20)
      return stuck
    },
  }).then(async (st) => {
    spawned = await st.sessionsSpawn({ task: 'index the logs', label: 'indexer' }, { agentSessionKey: 'agent:main:main' })
    send = await st.sessionsSend({ sessionKey: 'agent:main:target', message: 'work', timeoutSeconds: 0 }, { agentSessionKey: 'agent:main:main' })
    report()
  })
`

function startHolder(db: string): Promise<{ child: ChildProcess; ready: any }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', HOLDER], { env: { ...process.env, ST_INDEX: INDEX_JS, ST_DB: db } })
    let out = ''
    let err = ''
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`the holder never got its work in flight: ${err}`))
    }, 30_000)
    child.stderr.on('data', (d) => (err += d))
    child.stdout.on('data', (d) => {
      out += d
      const line = out.split('\n').find((l) => l.startsWith('READY '))
      if (line) {
        clearTimeout(timer)
        resolve({ child, ready: JSON.parse(line.slice(6)) })
      }
    })
    child.on('exit', (code, signal) => reject(new Error(`the holder exited early: ${signal ?? code} ${err}`)))
  })
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('a second process on the same file', () => {
  it('given a live process holding a run and an announce when another process waits then it takes neither until the first is SIGKILLed, then ends the run as interrupted and delivers the announce once', async () => {
    const db = path.join(tmpDir(), 'sessions.db')
    const { child, ready } = await startHolder(db)
    try {
      expect(ready.send.status).toBe('accepted')
      expect(ready.spawned.status).toBe('accepted')
      const announces: AgentRunRequest[] = []
      const st = track(
        await SessionTools.open({
          path: db,
          config: CONFIG,
          settings: SETTINGS,
          runAgent: async (req) => {
            if (req.lane === 'announce') announces.push(req)
            return { reply: 'told the user' }
          },
        }),
      )
      // two lease lengths: the holder renews, so nothing of its work moves
      await sleep(3_000)
      expect(await st.waitRun(ready.send.runId, { timeoutMs: 0 })).toMatchObject({ status: 'timeout' })
      expect(announces).toHaveLength(0)
      const [held] = await st.listSubagentRuns('agent:main:main')
      expect(held).toMatchObject({ runId: ready.spawned.runId, announce: { status: 'pending' } })
      expect(held.outcome).toMatchObject({ status: 'ok' })

      const exited = new Promise((r) => child.on('exit', r))
      child.kill('SIGKILL')
      await exited
      const deadline = Date.now() + 15_000
      let run: any
      while (Date.now() < deadline) {
        ;[run] = await st.listSubagentRuns('agent:main:main')
        if (run?.announce.status === 'delivered') break
        await sleep(50)
      }
      expect(run).toMatchObject({ runId: ready.spawned.runId, announce: { status: 'delivered' } })
      expect(announces).toHaveLength(1)
      expect(announces[0]).toMatchObject({ idempotencyKey: ready.announceKey, lane: 'announce', deliver: true })
      expect(announces[0].message).toContain('"indexer" just completed successfully')
      expect(await st.waitRun(ready.send.runId, { timeoutMs: 5_000 })).toMatchObject({ status: 'error', error: INTERRUPTED })
    } finally {
      child.kill('SIGKILL')
    }
  }, 60_000)
})
