// A soak worker process: opens the store at ST_DB (a SQLite file) or ST_URL (PostgreSQL) and
// works until it is killed (crash loop, two hosts) or its time is up (contention). Every
// acknowledged effect is printed as one line on stdout, so the parent can check afterwards that
// nothing acknowledged was lost:
//   ACK msg <sessionKey> <n>      an appendMessages that resolved (message text `m<n>`)
//   ACK upsert <key> <value>      an upsertSession that resolved
//   ACK send <runId>              a sessionsSend that was accepted
//   ACK spawn <runId>             a sessionsSpawn that was accepted
//   ACK yield <sessionKey>        a sessions_yield that answered `yielded` (2026.9 store)
//   ACK cancel <taskId> <runId>   a subagents cancel that answered `cancelled` (2026.9 store)
//   ACK import <json>             an importStateDir that resolved (mode import)
//   ERR <code> <message>          any rejection (an invariant violation in these workloads)
// and, for the two-host run (scripts/soak/hosts.mjs):
//   READY <hostId>                both stores are open (hostId: what the engine records as this
//                                 process's host, /proc boot id + pid namespace)
//   ANN <idempotencyKey> <at>     an announce attempt began at <at> (ms since the epoch; runAgent
//                                 on the announce lane, or deliver)
//   EVT <type> <runId|-> <idempotencyKey|-> [error]   subagent.announced, delivery.sent, store.error
//   DOWN <code> <at> <message>    SOAK_RIDE_OUT=1: a call failed with STORE_ERROR at <at> (ms
//                                 since the epoch; the server is down); the worker tries again
//                                 every 25 ms and resumes where the store says it was
//   UP <at>                       … the store answered again at <at>
//   STOPPED, DONE                 SOAK_CONTROL=1: told `stop` on stdin, it makes no new work;
//                                 told `close`, it closes its stores and exits
// SOAK_LEASE_MS sets the setting ownership.leaseMs.
const { SessionTools } = require(process.env.ST_INDEX)

const mode = process.env.SOAK_MODE || 'crash'
const id = process.env.SOAK_ID || '0'
const seconds = Number(process.env.SOAK_SECONDS || 3600)
const rideOut = process.env.SOAK_RIDE_OUT === '1'
const out = (line) => process.stdout.write(line + '\n')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const WATCHED = new Set(['subagent.announced', 'delivery.sent', 'store.error'])

async function open(contract) {
  const where = process.env.ST_URL ? { url: process.env.ST_URL } : { path: process.env.ST_DB }
  return SessionTools.open({
    ...where,
    contract,
    config: { session: { agentToAgent: { maxPingPongTurns: 1 }, outbox: { backoffMs: 10 } } },
    ...(process.env.SOAK_LEASE_MS ? { settings: { ownership: { leaseMs: Number(process.env.SOAK_LEASE_MS) } } } : {}),
    onEvent: (ev) => {
      if (!WATCHED.has(ev.type)) return
      const error = ev.error ? ` ${String(ev.error).replace(/\n/g, ' ')}` : ''
      out(`EVT ${ev.type} ${ev.runId ?? '-'} ${ev.idempotencyKey ?? '-'}${error}`)
    },
    runAgent: async (req) => {
      if (req.lane === 'announce') out(`ANN ${req.idempotencyKey} ${Date.now()}`)
      // a child that is to be cancelled runs long enough to be caught running
      await sleep(req.message.includes('slow') ? 400 : Math.random() * 15)
      return { reply: req.lane === 'subagent' ? `done ${req.message}` : 'ANNOUNCE_SKIP', usage: { input: 3, output: 2 } }
    },
    deliver: async (msg) => out(`ANN ${msg.idempotencyKey} ${Date.now()}`),
  })
}

async function crashWork(st, st9) {
  // one transcript per worker instance, so the parent can check its sequence exactly
  const key = `agent:main:soak-${id}`
  let n = 0
  while (!control.stop) {
    try {
      n = await crashStep(st, st9, key, n)
    } catch (e) {
      if (!rideOut || e.code !== 'STORE_ERROR') throw e
      n = await rejoin(st, key, e)
    }
  }
  // stopped (SOAK_CONTROL): the stores stay open so their runs and announces drain, until told
  // to close
  out('STOPPED')
  await control.closing
  await st.close()
  await st9.close()
  out('DONE')
  process.exit(0)
}

/** SOAK_CONTROL=1: the parent writes `stop` (no new work) and `close` (close and exit) on stdin. */
const control = { stop: false }
control.closing = new Promise((r) => (control.close = r))
if (process.env.SOAK_CONTROL === '1') {
  process.stdin.setEncoding('utf8')
  process.stdin.on('data', (d) => {
    if (d.includes('stop')) control.stop = true
    if (d.includes('close')) control.close()
  })
}

/** The server went away: waits until the store answers again, then goes on after the last
 * message the store holds (an append whose answer was lost may have committed). */
async function rejoin(st, key, e) {
  out(`DOWN ${e.code} ${Date.now()} ${String(e.message).replace(/\n/g, ' ')}`)
  for (;;) {
    await sleep(25)
    try {
      const last = (await st.chatHistory(key, { limit: 1 })).messages.at(-1)
      out(`UP ${Date.now()}`)
      return last ? Number(String(last.content).slice(1)) + 1 : 0
    } catch (e2) {
      if (e2.code !== 'STORE_ERROR') throw e2
    }
  }
}

/** One round of work from message `n` on; returns the next message number. */
async function crashStep(st, st9, key, n) {
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
  return n
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

/** The host id the engine records for this process (src/owner.rs): boot id and pid namespace. */
function hostId() {
  const fs = require('node:fs')
  try {
    return `linux:${fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()}:${fs.readlinkSync('/proc/self/ns/pid')}`
  } catch {
    return '-'
  }
}

;(async () => {
  try {
    if (mode === 'import') {
      // killed mid-import by the parent; the import itself is one of the kill points
      const st = await open()
      out(`READY ${hostId()}`)
      for (;;) out(`ACK import ${JSON.stringify(await st.importStateDir(process.env.SOAK_STATE_DIR))}`)
    }
    if (mode === 'crash') {
      const stores = [await open(), await open('2026.9')]
      out(`READY ${hostId()}`)
      await crashWork(...stores)
    }
    else await contentionWork([await open(), await open()])
  } catch (e) {
    out(`ERR ${e.code} ${String(e.message).replace(/\n/g, ' ')}`)
    process.exit(3)
  }
})()
