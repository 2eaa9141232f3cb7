// Restart recovery for real (DECISIONS.md #3): a child process is killed with SIGKILL while a
// run is in flight, and a fresh process reopens the file: the run ends as interrupted, a
// sub-agent killed mid-run is announced to its requester with that error, exactly once.
import { spawn } from 'node:child_process'
import path from 'node:path'
import { describe, expect, it } from 'vitest'

import type { AgentRunRequest } from '../index.js'
import { INDEX_JS, SessionTools, tmpDir, track } from './helpers'

const INTERRUPTED = 'interrupted: the process stopped before the run finished'

/** Runs `code` in a child node that prints `READY <json>` once its run is in flight; kills it
 * with SIGKILL then, and resolves after it has exited (so its pid is gone). */
function killMidRun(code: string, db: string): Promise<any> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', code], { env: { ...process.env, ST_INDEX: INDEX_JS, ST_DB: db } })
    let out = ''
    let ready: any
    let err = ''
    child.stderr.on('data', (d) => (err += d))
    child.stdout.on('data', (d) => {
      out += d
      const line = out.split('\n').find((l) => l.startsWith('READY '))
      if (line && ready === undefined) {
        ready = JSON.parse(line.slice(6))
        child.kill('SIGKILL')
      }
    })
    child.on('exit', (_code, signal) => {
      if (ready !== undefined && signal === 'SIGKILL') resolve(ready)
      else reject(new Error(`child ended before its run was in flight: ${signal ?? _code} ${err}`))
    })
  })
}

const CHILD_PRELUDE = `
  const { SessionTools } = require(process.env.ST_INDEX)
  setInterval(() => {}, 1000) // a gateway stays up; the addon's weak callbacks alone would let it exit
  // one promise that never settles, kept reachable as a host's call in flight is (a bare
  // \`new Promise(() => {})\` may be garbage collected, and the store then ends its run at once)
  const stuck = new Promise(() => {})
  let result
  const opened = SessionTools.open({
    path: process.env.ST_DB,
    config: { session: { agentToAgent: { maxPingPongTurns: 0 } } },
    runAgent: (req) => {
      setTimeout(() => console.log('READY ' + JSON.stringify({ req, result })), 50)
      return stuck
    },
  })
`

describe('SIGKILL mid-run, then a fresh process reopens the file', () => {
  it('given a send whose run is in flight when the process is killed then the reopened store reports the run as interrupted', async () => {
    const db = path.join(tmpDir(), 'sessions.db')
    const seen = await killMidRun(
      CHILD_PRELUDE +
        `opened.then(async (st) => { result = await st.sessionsSend({ sessionKey: 'agent:main:target', message: 'work', timeoutSeconds: 0 }, { agentSessionKey: 'agent:main:main' }) })`,
      db,
    )
    expect(seen.result.status).toBe('accepted')
    const st = track(await SessionTools.open({ path: db }))
    expect(await st.waitRun(seen.result.runId, { timeoutMs: 0 })).toMatchObject({ status: 'error', error: INTERRUPTED })
    // the incoming message was committed before the run started and is still there
    const h = await st.chatHistory('agent:main:target')
    expect(h.messages).toHaveLength(1)
    expect(h.messages[0].provenance.kind).toBe('inter_session')
  })

  it('given a sub-agent killed mid-run then the next open ends it as interrupted and announces it to the requester once', async () => {
    const db = path.join(tmpDir(), 'sessions.db')
    const seen = await killMidRun(
      CHILD_PRELUDE +
        `opened.then(async (st) => { result = await st.sessionsSpawn({ task: 'index the logs', label: 'indexer' }, { agentSessionKey: 'agent:main:main' }) })`,
      db,
    )
    expect(seen.result.status).toBe('accepted')
    expect(seen.req.lane).toBe('subagent')

    const announces: AgentRunRequest[] = []
    const st = track(
      await SessionTools.open({
        path: db,
        runAgent: async (req) => {
          if (req.lane === 'announce') announces.push(req)
          return { reply: 'told the user' }
        },
      }),
    )
    const deadline = Date.now() + 10_000
    let run: any
    while (Date.now() < deadline) {
      ;[run] = await st.listSubagentRuns('agent:main:main')
      if (run?.announce.status === 'delivered') break
      await new Promise((r) => setTimeout(r, 20))
    }
    expect(run).toMatchObject({
      runId: seen.result.runId,
      childSessionKey: seen.result.childSessionKey,
      outcome: { status: 'error', error: INTERRUPTED },
      announce: { status: 'delivered', attempts: 1 },
    })
    expect(announces).toHaveLength(1)
    expect(announces[0]).toMatchObject({ sessionKey: 'agent:main:main', lane: 'announce', deliver: true })
    expect(announces[0].message).toContain('"indexer" just failed: interrupted')
    expect(await st.waitRun(seen.result.runId, { timeoutMs: 0 })).toMatchObject({ status: 'error', error: INTERRUPTED })

    // a second reopen announces nothing again
    await st.close()
    const again: AgentRunRequest[] = []
    const st2 = track(await SessionTools.open({ path: db, runAgent: async (req) => (again.push(req), { reply: 'x' }) }))
    await new Promise((r) => setTimeout(r, 300))
    expect(again).toHaveLength(0)
    expect((await st2.listSubagentRuns())[0].announce.status).toBe('delivered')
  })
})
