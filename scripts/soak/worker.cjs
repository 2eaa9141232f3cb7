// A soak worker process: opens the store at ST_DB and works until it is killed (crash loop) or
// its time is up (contention). Every acknowledged effect is printed as one line on stdout, so
// the parent can check afterwards that nothing acknowledged was lost:
//   ACK msg <sessionKey> <n>      an appendMessages that resolved (message text `m<n>`)
//   ACK upsert <key> <value>      an upsertSession that resolved
//   ACK send <runId>              a sessionsSend that was accepted
//   ACK spawn <runId>             a sessionsSpawn that was accepted
//   ACK import <json>             an importStateDir that resolved (mode import)
//   ERR <code> <message>          any rejection (an invariant violation in these workloads)
const { SessionTools } = require(process.env.ST_INDEX)

const mode = process.env.SOAK_MODE || 'crash'
const id = process.env.SOAK_ID || '0'
const seconds = Number(process.env.SOAK_SECONDS || 3600)
const out = (line) => process.stdout.write(line + '\n')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function open() {
  return SessionTools.open({
    path: process.env.ST_DB,
    config: { session: { agentToAgent: { maxPingPongTurns: 1 }, outbox: { backoffMs: 10 } } },
    runAgent: async (req) => {
      await sleep(Math.random() * 15)
      return { reply: req.lane === 'subagent' ? `done ${req.message}` : 'ANNOUNCE_SKIP', usage: { input: 3, output: 2 } }
    },
    deliver: async () => {},
  })
}

async function crashWork(st) {
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
    if (mode === 'crash') await crashWork(await open())
    else await contentionWork([await open(), await open()])
  } catch (e) {
    out(`ERR ${e.code} ${String(e.message).replace(/\n/g, ' ')}`)
    process.exit(3)
  }
})()
