// A soak worker process: opens the store at ST_DB and works until it is killed (crash loop) or
// its time is up (contention). Every acknowledged effect is printed as one line on stdout, so
// the parent can check afterwards that nothing acknowledged was lost:
//   ACK msg <sessionKey> <n>      an appendMessages that resolved (message text `m<n>`)
//   ACK upsert <key> <value>      an upsertSession that resolved
//   ACK send <runId>              a sessionsSend that was accepted
//   ACK spawn <runId>             a sessionsSpawn that was accepted
//   ACK yield <sessionKey>        a sessions_yield that answered `yielded` (2026.9 store)
//   ACK cancel <taskId> <runId>   a subagents cancel that answered `cancelled` (2026.9 store)
//   ACK import <json>             an importStateDir that resolved (mode import)
//   ERR <code> <message>          any rejection (an invariant violation in these workloads)
const { SessionTools } = require(process.env.ST_INDEX)

const mode = process.env.SOAK_MODE || 'crash'
const id = process.env.SOAK_ID || '0'
const seconds = Number(process.env.SOAK_SECONDS || 3600)
const out = (line) => process.stdout.write(line + '\n')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function open(contract) {
  return SessionTools.open({
    path: process.env.ST_DB,
    contract,
    config: { session: { agentToAgent: { maxPingPongTurns: 1 }, outbox: { backoffMs: 10 } } },
    runAgent: async (req) => {
      // a child that is to be cancelled runs long enough to be caught running
      await sleep(req.message.includes('slow') ? 400 : Math.random() * 15)
      return { reply: req.lane === 'subagent' ? `done ${req.message}` : 'ANNOUNCE_SKIP', usage: { input: 3, output: 2 } }
    },
    deliver: async () => {},
  })
}

async function crashWork(st, st9) {
  // one transcript per worker instance, so the parent can check its sequence exactly
  const key = `agent:main:soak-${id}`
  let n = 0
  for (;;) {
    const batch = 1 + Math.floor(Math.random() * 5)
    const msgs = []
    for (let i = 0; i < batch; i++) msgs.push({ role: 'user', content: `m${n + i}` })
    await st.appendMessages(key, msgs)
    for (let i = 0; i < batch; i++) out(`ACK msg ${key} ${n + i}`)
    n += batch
    const v = n
    await st.upsertSession(`agent:main:counter-${id}`, { soakValue: v })
    out(`ACK upsert agent:main:counter-${id} ${v}`)
    if (n % 7 < batch) {
      const r = await st.sessionsSend({ sessionKey: `agent:main:peer-${id}`, message: `hi ${n}`, timeoutSeconds: 0 }, { agentSessionKey: 'agent:main:main' })
      if (r.status === 'accepted') out(`ACK send ${r.runId}`)
    }
    if (n % 11 < batch) {
      const r = await st.sessionsSpawn({ task: `task ${id}-${n}` }, { agentSessionKey: 'agent:main:main' })
      if (r.status === 'accepted') out(`ACK spawn ${r.runId}`)
    }
    if (n % 13 < batch) {
      // a turn that spawns two children and yields for them (the 2026.9 store on the same file)
      const ctx = { agentSessionKey: `agent:main:yielder-${id}` }
      for (const k of [0, 1]) {
        const r = await st9.sessionsSpawn({ task: `yield child ${id}-${n}-${k}` }, ctx)
        if (r.status === 'accepted') out(`ACK spawn ${r.runId}`)
      }
      const y = (await st9.executeTool('sessions_yield', { message: `resume ${n}` }, ctx)).details
      if (y.status === 'yielded') out(`ACK yield ${ctx.agentSessionKey}`)
    }
    if (n % 17 < batch) {
      // a child cancelled while it runs
      const ctx = { agentSessionKey: `agent:main:canceller-${id}` }
      const r = await st9.sessionsSpawn({ task: `slow ${id}-${n}` }, ctx)
      if (r.status === 'accepted') {
        out(`ACK spawn ${r.runId}`)
        const list = (await st9.executeTool('subagents', {}, ctx)).details
        const task = list.tasks.find((t) => t.status === 'running')
        if (task) {
          const c = (await st9.executeTool('subagents', { action: 'cancel', taskId: task.taskId }, ctx)).details
          if (c.status === 'cancelled') out(`ACK cancel ${task.taskId}`)
        }
      }
    }
  }
}

async function contentionWork(stores) {
  const end = Date.now() + seconds * 1000
  const key = 'agent:main:shared'
  let n = 0
  const writers = stores.map(async (st, inst) => {
    let i = 0
    while (Date.now() < end) {
      const tag = `${id}.${inst}.${i}`
      await st.appendMessages(key, [{ role: 'user', content: `c${tag}` }])
      out(`ACK msg ${key} ${tag}`)
      await st.upsertSession(`agent:main:w-${id}-${inst}`, { soakValue: i })
      out(`ACK upsert agent:main:w-${id}-${inst} ${i}`)
      i++
      n++
    }
  })
  const reader = (async () => {
    while (Date.now() < end) {
      await stores[0].listSessions({ limit: 50 })
      await stores[1].chatHistory(key, { limit: 20 })
      await sleep(5)
    }
  })()
  await Promise.all([...writers, reader])
  for (const st of stores) await st.close()
  out(`DONE ${n}`)
}

;(async () => {
  try {
    if (mode === 'import') {
      // killed mid-import by the parent; the import itself is one of the kill points
      const st = await open()
      for (;;) out(`ACK import ${JSON.stringify(await st.importStateDir(process.env.SOAK_STATE_DIR))}`)
    }
    if (mode === 'crash') await crashWork(await open(), await open('2026.9'))
    else await contentionWork([await open(), await open()])
  } catch (e) {
    out(`ERR ${e.code} ${String(e.message).replace(/\n/g, ' ')}`)
    process.exit(3)
  }
})()
