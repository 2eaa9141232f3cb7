// The long-running reliability checks of issue 6, shared by `npm run soak` (long) and the vitest
// suite (a few iterations): a crash loop that SIGKILLs worker processes at random points, and a
// contention run of several processes with two stores each on one file. Every check reads the
// file afterwards with better-sqlite3 (PRAGMA integrity_check, the rows themselves) and reopens
// it with the addon, so recovery is exercised too. Returns counts and the invariant violations.
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

import { inspectPg } from './pg-inspect.mjs'

const require = createRequire(import.meta.url) // the addon only: better-sqlite3 runs in inspect.cjs
const here = path.dirname(fileURLToPath(import.meta.url))
const WORKER = path.join(here, 'worker.cjs')
const INSPECT = path.join(here, 'inspect.cjs')
export const INDEX = path.join(here, '..', '..', 'index.js')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
/** Whether `db` names a PostgreSQL store (a URL) rather than a SQLite file. */
export const isPg = (db) => /^postgres(ql)?:\/\//.test(db)
/** The worker's environment for the store `db`. */
export const storeEnv = (db) => (isPg(db) ? { ST_URL: db } : { ST_DB: db })

/** Runs a worker; with `killAfterMs`, SIGKILLs it that long after it started or, with
 * `fromReady`, after it said its stores are open (READY): a slow open on a busy machine then
 * still leaves it time to work. */
function runWorker(env, killAfterMs, fromReady = false) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [WORKER], { env: { ...process.env, ST_INDEX: INDEX, ...env } })
    let out = ''
    let killed = false
    let timer
    const arm = () => {
      timer = setTimeout(() => {
        killed = true
        child.kill('SIGKILL')
      }, killAfterMs)
    }
    child.stdout.on('data', (d) => {
      const ready = fromReady && timer === undefined && /^READY /m.test(out + d)
      out += d
      if (ready) arm()
    })
    child.stderr.on('data', (d) => (out += d))
    if (killAfterMs !== undefined && !fromReady) arm()
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ lines: out.split('\n').filter(Boolean), code, signal, killed })
    })
  })
}

export function acksOf(lines) {
  const msgs = new Map()
  const upserts = new Map()
  const errors = []
  const yields = []
  const cancels = []
  let runs = 0
  for (const l of lines) {
    const p = l.split(' ')
    if (p[0] === 'ACK' && p[1] === 'msg') {
      if (!msgs.has(p[2])) msgs.set(p[2], [])
      msgs.get(p[2]).push(p[3])
    } else if (p[0] === 'ACK' && p[1] === 'upsert') upserts.set(p[2], Number(p[3]))
    else if (p[0] === 'ACK' && p[1] === 'yield') yields.push(p[2])
    else if (p[0] === 'ACK' && p[1] === 'cancel') cancels.push(p[2])
    else if (p[0] === 'ACK') runs++
    else if (p[0] === 'ERR') errors.push(l)
  }
  return { msgs, upserts, errors, runs, yields, cancels }
}

/** Reads the store directly, in a child process (see inspect.cjs; on PostgreSQL
 * pg-inspect.mjs): integrity, the messages of some keys in order, some entries, some counts. */
export function inspect(db, { messages = [], entries = [], scalars = {} } = {}) {
  if (isPg(db)) return inspectPg(db, { messages, entries, scalars })
  const r = spawnSync(process.execPath, [INSPECT, db, JSON.stringify({ messages, entries, scalars })], { encoding: 'utf8', maxBuffer: 256 * 2 ** 20 })
  if (r.status !== 0) throw new Error(`inspect failed: ${r.stderr}`)
  return JSON.parse(r.stdout)
}

/** Reads the store back and checks one worker's acknowledged writes (`a`, from acksOf): every
 * acknowledged message is there, in order, once, the rows exactly m0..m(k-1); every acknowledged
 * upsert is there (or a later value). `{ acked, lost, violations }`, each violation prefixed
 * `where`. */
export function checkAcked(db, a, where) {
  const violations = []
  let acked = 0
  let lost = 0
  const v = inspect(db, { messages: [...a.msgs.keys()], entries: [...a.upserts.keys()] })
  if (v.integrity !== 'ok') violations.push(`${where}: integrity_check says ${v.integrity}`)
  for (const [key, ns] of a.msgs) {
    const rows = v.messages[key]
    const texts = rows.map((m) => m.text)
    if (texts.some((t, j) => t !== `m${j}`)) violations.push(`${where}: ${key} holds ${texts.length} rows out of sequence`)
    const seqs = rows.map((m) => m.seq)
    if (new Set(seqs).size !== seqs.length) violations.push(`${where}: ${key} has duplicate seq`)
    const have = new Set(texts)
    for (const n of ns) {
      if (have.has(`m${n}`)) continue
      lost++
      violations.push(`${where}: acknowledged message m${n} of ${key} is missing`)
    }
    acked += ns.length
  }
  for (const [key, value] of a.upserts) {
    const e = v.entries[key]
    if (!e || e.soakValue < value) {
      lost++
      violations.push(`${where}: acknowledged upsert ${key}=${value} lost (found ${e?.soakValue})`)
    }
    acked++
  }
  return { acked, lost, violations }
}

/** Opens the file with the addon (recovery runs), lets the outbox and every run settle. */
async function reopenAndSettle(db, seen) {
  const { SessionTools } = require(INDEX)
  const st = await SessionTools.open({
    path: db,
    config: { session: { outbox: { backoffMs: 10 } } },
    runAgent: async (req) => {
      if (req.lane === 'announce') seen.push(req.idempotencyKey)
      return { reply: 'ANNOUNCE_SKIP' }
    },
    deliver: async () => {},
  })
  const end = Date.now() + 15_000
  let settled = false
  while (Date.now() < end) {
    const { scalars } = inspect(db, {
      scalars: {
        pending: "SELECT count(*) FROM outbox WHERE status = 'pending'",
        running: "SELECT count(*) FROM runs WHERE status = 'running'",
        // a yield resumes once its children have delivered
        waiting: "SELECT count(*) FROM yields WHERE status <> 'resumed'",
      },
    })
    if (scalars.pending === 0 && scalars.running === 0 && scalars.waiting === 0) {
      settled = true
      break
    }
    await sleep(20)
  }
  await st.close()
  return settled
}

const IMPORT_SESSIONS = 300
const IMPORT_MESSAGES = 40

/** A gateway state folder of `sessions` sessions with `messages` messages each. */
export function stateFolder(dir, sessions = IMPORT_SESSIONS, messages = IMPORT_MESSAGES) {
  const root = path.join(dir, 'state')
  const store = {}
  fs.mkdirSync(path.join(root, 'agents/main/sessions'), { recursive: true })
  for (let i = 0; i < sessions; i++) {
    store[`agent:main:imported-${i}`] = { sessionId: `imp-${i}`, updatedAt: 1_000 + i }
    const lines = [JSON.stringify({ type: 'session', version: 3, id: `imp-${i}` })]
    for (let j = 0; j < messages; j++) lines.push(JSON.stringify({ type: 'message', id: `${i}-${j}`, message: { role: j % 2 ? 'assistant' : 'user', content: `i${i}.${j}` } }))
    fs.writeFileSync(path.join(root, `agents/main/sessions/imp-${i}.jsonl`), lines.join('\n') + '\n')
  }
  fs.writeFileSync(path.join(root, 'agents/main/sessions/sessions.json'), JSON.stringify(store, null, 2))
  return root
}

/** SIGKILLs `iterations` workers at random points, checking the file after each. Every fourth
 * worker is importing a state folder when it is killed (the others append, upsert, send and
 * spawn); at the end the folder is imported once more and must hold exactly what it should. */
export async function crashLoop({ db, iterations, log = () => {} }) {
  const stateDir = stateFolder(path.dirname(db), IMPORT_SESSIONS, IMPORT_MESSAGES)
  const violations = []
  const announceKeys = []
  const yielded = []
  const cancelled = []
  let kills = 0
  let acked = 0
  for (let i = 0; i < iterations; i++) {
    const killAfter = 40 + Math.floor(Math.random() * 360)
    const mode = i % 4 === 3 ? 'import' : 'crash'
    // every other worker is killed at a point counted from its start (possibly mid-open), the
    // others from when its stores are open (mid-work)
    const r = await runWorker({ ST_DB: db, SOAK_MODE: mode, SOAK_ID: String(i), SOAK_STATE_DIR: stateDir }, killAfter, i % 2 === 1)
    if (r.killed) kills++
    const a = acksOf(r.lines)
    for (const e of a.errors) violations.push(`iteration ${i}: ${e}`)
    const c = checkAcked(db, a, `iteration ${i}`)
    violations.push(...c.violations)
    acked += c.acked
    acked += a.runs
    yielded.push(...a.yields)
    cancelled.push(...a.cancels)
    // every few kills, a fresh process reopens the file: recovery must end every run and
    // settle every announce
    if (i % 5 === 4 || i === iterations - 1) {
      if (!(await reopenAndSettle(db, announceKeys))) violations.push(`iteration ${i}: runs or announces did not settle after reopening`)
    }
    log(`crash ${i + 1}/${iterations} (${mode}): killed after ${killAfter} ms, ${a.msgs.size ? [...a.msgs.values()][0].length : 0} messages acknowledged`)
  }
  violations.push(...(await checkImported(db, stateDir)))
  const end = checkSettled(db, { yielded, cancelled })
  violations.push(...end.violations)
  const dup = announceKeys.length - new Set(announceKeys).size
  if (dup) violations.push(`${dup} announces seen twice by the reopening host under one key`)
  return { iterations, kills, acked, subagents: end.subagents, yields: yielded.length, cancels: cancelled.length, violations }
}

/** Opens the store `db` (a file or a PostgreSQL URL) with the addon. */
function openStore(db, options = {}) {
  const { SessionTools } = require(INDEX)
  return SessionTools.open({ ...(isPg(db) ? { url: db } : { path: db }), ...options })
}

/** After imports of `stateDir` (see stateFolder) were killed midway: they left whole sessions
 * and whole transcripts or nothing, so one more import completes the folder, a second adds
 * nothing, and the store holds it exactly once. The violations. */
export async function checkImported(db, stateDir) {
  const violations = []
  const st = await openStore(db)
  await st.importStateDir(stateDir)
  const again = await st.importStateDir(stateDir)
  if (again.sessions || again.messages) violations.push(`a repeated import added ${again.sessions} sessions, ${again.messages} messages`)
  for (const i of [0, IMPORT_SESSIONS >> 1, IMPORT_SESSIONS - 1]) {
    const h = await st.chatHistory(`agent:main:imported-${i}`, { limit: 1000 })
    const texts = h.messages.map((m) => m.content)
    const want = Array.from({ length: IMPORT_MESSAGES }, (_, j) => `i${i}.${j}`)
    if (JSON.stringify(texts) !== JSON.stringify(want)) violations.push(`imported transcript ${i} holds ${texts.length} messages, not its ${IMPORT_MESSAGES} in order`)
  }
  const n = (await st.listSessions({ search: 'imported-', limit: 1000 })).count
  if (n !== IMPORT_SESSIONS) violations.push(`${n} imported sessions, not ${IMPORT_SESSIONS}`)
  await st.close()
  return violations
}

/** The end state once everything settled: no sub-agent announce pending, no run running,
 * every acknowledged yield stored and resumed, every acknowledged cancel (task ids) cancelled
 * and its child never in the outbox. `{ subagents, violations }`. */
export function checkSettled(db, { yielded, cancelled }) {
  const violations = []
  const ids = cancelled.map((t) => `'${t.replace(/[^0-9a-f-]/g, '')}'`).join(',') || "''"
  const announceKey = isPg(db) ? "(s.record::jsonb #>> '{announce,idempotencyKey}')" : "json_extract(s.record, '$.announce.idempotencyKey')"
  const y = inspect(db, {
    scalars: {
      pendingAnnounces: "SELECT count(*) FROM subagent_runs WHERE announce_status = 'pending'",
      stillRunning: "SELECT count(*) FROM runs WHERE status = 'running'",
      subagents: 'SELECT count(*) FROM subagent_runs',
      yields: 'SELECT count(*) FROM yields',
      openYields: "SELECT count(*) FROM yields WHERE status <> 'resumed'",
      cancelledTasks: `SELECT count(*) FROM task_runs WHERE status = 'cancelled' AND task_id IN (${ids})`,
      announcedCancelled: `SELECT count(*) FROM task_runs t JOIN subagent_runs s ON s.run_id = t.run_id JOIN outbox o ON o.idempotency_key = ${announceKey} WHERE t.task_id IN (${ids})`,
    },
  }).scalars
  if (y.yields < yielded.length) violations.push(`${yielded.length} yields acknowledged, ${y.yields} stored`)
  if (y.openYields) violations.push(`${y.openYields} yields never resumed`)
  if (y.cancelledTasks !== cancelled.length) violations.push(`${cancelled.length} cancels acknowledged, ${y.cancelledTasks} tasks cancelled`)
  if (y.announcedCancelled) violations.push(`${y.announcedCancelled} cancelled children reached the outbox`)
  if (y.pendingAnnounces) violations.push(`${y.pendingAnnounces} sub-agent announces still pending at the end`)
  if (y.stillRunning) violations.push(`${y.stillRunning} runs still marked running at the end`)
  return { subagents: y.subagents, violations }
}

/** `procs` processes × 2 stores each writing one store (a file, or a PostgreSQL URL) for
 * `seconds`, readers alongside. */
export async function contention({ db, procs, seconds }) {
  const runs = await Promise.all(
    Array.from({ length: procs }, (_, p) => runWorker({ ...storeEnv(db), SOAK_MODE: 'contention', SOAK_ID: String(p), SOAK_SECONDS: String(seconds) })),
  )
  const violations = []
  let writes = 0
  const perProcess = []
  const all = []
  runs.forEach((r, p) => {
    const a = acksOf(r.lines)
    for (const e of a.errors) violations.push(`process ${p}: ${e}`)
    if (r.code !== 0) violations.push(`process ${p} exited with ${r.code ?? r.signal}`)
    for (const ns of a.msgs.values()) all.push(...ns)
    perProcess.push([...a.msgs.values()].reduce((n, l) => n + l.length, 0) + a.upserts.size)
    writes += perProcess[p]
    const v = inspect(db, { entries: [...a.upserts.keys()] })
    for (const [key, value] of a.upserts) {
      const e = v.entries[key]
      if (!e || e.soakValue !== value) violations.push(`lost update: ${key} should be ${value}, is ${e?.soakValue}`)
    }
  })
  const v = inspect(db, { messages: ['agent:main:shared'] })
  const texts = v.messages['agent:main:shared'].map((m) => m.text)
  if (v.integrity !== 'ok') violations.push(`integrity_check says ${v.integrity}`)
  if (texts.length !== all.length) violations.push(`shared transcript holds ${texts.length} messages, ${all.length} were acknowledged`)
  const have = new Set(texts)
  for (const t of all) if (!have.has(`c${t}`)) violations.push(`acknowledged message c${t} missing`)
  if (new Set(texts).size !== texts.length) violations.push('duplicate messages in the shared transcript')
  return { procs, seconds, writes, perProcess, violations }
}
