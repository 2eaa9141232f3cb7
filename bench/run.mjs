#!/usr/bin/env node
// session-tools benchmark: each workload on session-tools and on two baselines (the gateway's
// file store, and the same store in JS on better-sqlite3), same run.
//   node bench/run.mjs [--quick] [--out <dir>]
// Env: ADDON=<path to index.js> overrides ../index.js; NAPI_RS_NATIVE_LIBRARY_PATH picks the .node.
// Figures are printed and written; nothing here asserts on timing.
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { monitorEventLoopDelay, performance } from 'node:perf_hooks'
import { measure as measureWith, measureAlternating, pct, round } from './lib/measure.mjs'
import { findOpenclaw, runOpenclaw, openclawRows, openclawTable, OPENCLAW_MAX_SIZE } from './lib/openclaw.mjs'
import { walWorkload, walTable } from './lib/wal.mjs'
import { spawnSync } from 'node:child_process'
import { FileStore } from './lib/baseline.mjs'
import { SqliteStore, SQLITE_VERSION } from './lib/sqlite-baseline.mjs'
import { burstKeys, keyTable, makeEntry, makeTranscriptMessage, transcriptLine, rng, upsertPatch as patchFor } from './lib/data.mjs'
import { renderChart } from './lib/chart.mjs'
import { seedSessions, seedTranscript } from './lib/seed.mjs'
import { orchestrationTable, orchestrationWorkloads } from './lib/orchestration.mjs'
import { postgresTable, postgresWorkloads } from './lib/postgres.mjs'
import { eventLoopRows, eventLoopTable, idleEventLoop } from './lib/eventloop.mjs'
import { sustained, sustainedTable } from './lib/sustained.mjs'

const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url))
const argv = process.argv.slice(2)
const QUICK = argv.includes('--quick')
const outIdx = argv.indexOf('--out')
const OUT_DIR = outIdx >= 0 && argv[outIdx + 1] ? path.resolve(argv[outIdx + 1]) : path.join(BENCH_DIR, 'out')
const ADDON = process.env.ADDON ? path.resolve(process.env.ADDON) : path.resolve(BENCH_DIR, '../index.js')

const SIZES = QUICK ? [1_000, 10_000] : [1_000, 10_000, 50_000]
const HISTORY_MESSAGES = QUICK ? 20_000 : 100_000
const RUN = QUICK
  ? { warmup: 1, iters: 15, minIters: 3, capMs: 1_200 }
  : { warmup: 3, warmupMs: 250, warmupMax: 30, iters: 60, minIters: 10, capMs: 8_000 }
const SEED_BATCH = 500
const SIDES = ['baseline', 'sqlite', 'sessionTools'] // file baseline, better-sqlite3 baseline, ours
const WRITERS = 8
const BURST = 1_000
/** Sustained 8 writers: stints per side and seconds a stint (lib/sustained.mjs). */
const SUSTAINED = QUICK ? { stints: 2, seconds: 0.5 } : { stints: 4, seconds: 2 }
const WAL_SECONDS = QUICK ? 5 : 30
const WAL_HOLD_MS = 1_000
const ONLY_WAL_SKIP = argv.includes('--no-wal')
const POSTGRES_SKIP = argv.includes('--no-postgres')
// PostgreSQL rows: the SQLite sizes (quick: the smallest only, CI runs it on a debug build)
const PG_SIZES = QUICK ? SIZES.slice(0, 1) : SIZES
const CTX = { agentSessionKey: 'agent:main:main' }
const ACTIVE_PARAMS = { activeMinutes: 60, kinds: ['group'] }
const LIST_PARAMS = { limit: 50 }

const require = createRequire(import.meta.url)
const { SessionTools } = require(ADDON)

const WORK = fs.mkdtempSync(path.join(os.tmpdir(), 'st-bench-'))
const t0 = performance.now()
const log = (...a) => console.error(`[${((performance.now() - t0) / 1000).toFixed(1)}s]`, ...a)

// ---------------------------------------------------------------- measuring
const measure = (fn) => measureWith(RUN, fn)
/** better-sqlite3 and ours on one workload, their calls alternated (`measureAlternating`): a slow
 * phase of a shared machine falls on both alike, where one side timed after the other could
 * meet it alone (history's median went from 0.05 to 0.10 ms between two full runs, ours and the
 * upsert's alike). The file baseline, far from both, is timed on its own. */
const pair = async (sqlite, ours) => {
  const [s, o] = await measureAlternating(RUN, [sqlite, ours])
  return { sqlite: s, ours: o }
}

// ---------------------------------------------------------------- seeding
function seedSqlite(sq, from, to) {
  const items = []
  for (let j = from; j < to; j++) {
    const { key, entry } = makeEntry(j)
    const { updatedAt, ...patch } = entry // as for session-tools: the merge rule sets updatedAt = now
    items.push({ key, patch })
  }
  for (let i = 0; i < items.length; i += SEED_BATCH) sq.seed(items.slice(i, i + SEED_BATCH))
}

function seedBaseline(file, size) {
  const store = {}
  for (let j = 0; j < size; j++) {
    const { key, entry } = makeEntry(j)
    store[key] = entry
  }
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, JSON.stringify(store, null, 2), { mode: 0o600 })
}

// ---------------------------------------------------------------- workloads
const results = []
/** The sustained 8-writer rows, one per size (lib/sustained.mjs). */
const sustainedRows = []
const notes = []

// ratio: file baseline / ours; ratioSqlite: better-sqlite3 baseline / ours (medians).
// A side that does not run a workload is `null` (the file baseline has no burst workload).
function record(workload, size, { baseline, sqlite, ours }, extra = {}) {
  const div = (a, b) => (a && b ? round(a / b) : null)
  const ratio = div(baseline?.medianMs, ours.medianMs)
  const ratioSqlite = div(sqlite.medianMs, ours.medianMs)
  results.push({ workload, size, baseline, sqlite, sessionTools: ours, ratio, ratioSqlite, ...extra })
  log(`${workload} @ ${size}: file ${baseline?.medianMs ?? '-'} ms, sqlite ${sqlite.medianMs} ms, ours ${ours.medianMs} ms, ratios ${ratio} / ${ratioSqlite}`)
}

/**
 * A burst: `n` upserts started in one synchronous loop, then awaited; one op = the whole burst.
 * Reports, besides the burst's time, how long the loop that started it held the thread
 * (`launch*`), and how long the whole turn of the event loop that started it did (`turn*`: the
 * loop and the microtasks that ran at its end, where the calls' work is handed on).
 */
async function burst(n, start) {
  const launches = []
  const turns = []
  const m = await measureWith({ ...RUN, iters: QUICK ? 5 : 15, minIters: 3 }, async (i) => {
    const s = performance.now()
    const pending = start(i)
    launches.push(performance.now() - s)
    // queued after every microtask the calls queued: runs once they have
    queueMicrotask(() => turns.push(performance.now() - s))
    await pending
  })
  const sorted = launches.sort((a, b) => a - b)
  const turnsSorted = turns.sort((a, b) => a - b)
  return {
    ...m,
    launchMedianMs: round(pct(sorted, 50)),
    launchMaxMs: round(sorted[sorted.length - 1]),
    turnMedianMs: round(pct(turnsSorted, 50)),
    turnMaxMs: round(turnsSorted[turnsSorted.length - 1]),
  }
}

async function storeWorkloads() {
  const oursPath = path.join(WORK, 'ours', 'sessions.db')
  const st = await SessionTools.open({ path: oursPath })
  const sqlitePath = path.join(WORK, 'sqlite', 'sessions.db')
  fs.mkdirSync(path.dirname(sqlitePath), { recursive: true })
  const sq = new SqliteStore(sqlitePath)
  let seeded = 0
  for (const size of SIZES) {
    log(`seeding ${size} sessions`)
    let s = performance.now()
    await seedSessions(st, seeded, size, SEED_BATCH)
    const seedOursMs = performance.now() - s
    s = performance.now()
    seedSqlite(sq, seeded, size)
    const seedSqliteMs = performance.now() - s
    seeded = size
    const basePath = path.join(WORK, `base-${size}`, 'sessions.json')
    s = performance.now()
    seedBaseline(basePath, size)
    const seedBaseMs = performance.now() - s
    const base = new FileStore(basePath)
    const fileBytes = fs.statSync(basePath).size
    const seed = { sessionToolsSeedMs: round(seedOursMs), sqliteSeedMs: round(seedSqliteMs), baselineSeedMs: round(seedBaseMs), baselineFileBytes: fileBytes }

    const pick = rng(size)
    const keys = keyTable(size) // made outside the timed calls
    const randomKey = () => keys[Math.floor(pick() * size)]

    // 1. upsert one session (an existing key; the gateway's updateEntry path)
    record('upsert', size, {
      baseline: await measure((i) => base.upsertExisting(randomKey(), patchFor(i))),
      ...(await pair(
        (i) => sq.upsertSession(randomKey(), patchFor(i)),
        (i) => st.upsertSession(randomKey(), patchFor(i)),
      )),
    }, seed)

    // 2. sessions_list limit 50
    let rowsB = 0, rowsS = 0, rowsO = 0
    record('list_limit50', size, {
      baseline: await measure(async () => { rowsB = (await base.sessionsList(LIST_PARAMS, CTX)).count }),
      ...(await pair(
        () => { rowsS = sq.sessionsList(LIST_PARAMS, CTX).count },
        async () => { rowsO = (await st.sessionsList(LIST_PARAMS, CTX)).count },
      )),
    }, { rows: { baseline: rowsB, sqlite: rowsS, sessionTools: rowsO } })

    // 3. sessions_list activeMinutes + kinds
    record('list_active_kinds', size, {
      baseline: await measure(async () => { rowsB = (await base.sessionsList(ACTIVE_PARAMS, CTX)).count }),
      ...(await pair(
        () => { rowsS = sq.sessionsList(ACTIVE_PARAMS, CTX).count },
        async () => { rowsO = (await st.sessionsList(ACTIVE_PARAMS, CTX)).count },
      )),
    }, { rows: { baseline: rowsB, sqlite: rowsS, sessionTools: rowsO } })

    // 4. 8 concurrent writers, different keys; one op = one round of 8 (on better-sqlite3 the 8
    //    calls are synchronous, so they run one after another on the main thread)
    const keysFor = () => { const ks = new Set(); while (ks.size < WRITERS) ks.add(randomKey()); return [...ks] }
    record('writers8', size, {
      baseline: await measure((i) => Promise.all(keysFor().map((k, w) => base.upsertExisting(k, patchFor(i * WRITERS + w))))),
      ...(await pair(
        (i) => Promise.all(keysFor().map(async (k, w) => sq.upsertSession(k, patchFor(i * WRITERS + w)))),
        (i) => Promise.all(keysFor().map((k, w) => st.upsertSession(k, patchFor(i * WRITERS + w)))),
      )),
    })
    // 4b. the same rounds back to back for a few seconds a side, checkpoints included
    const [sqliteRun, oursRun] = await sustained([
      (i) => Promise.all(keysFor().map(async (k, w) => sq.upsertSession(k, patchFor(i * WRITERS + w)))),
      (i) => Promise.all(keysFor().map((k, w) => st.upsertSession(k, patchFor(i * WRITERS + w)))),
    ], SUSTAINED)
    const sustainedRow = { size, sqlite: sqliteRun, sessionTools: oursRun, ratioSqlite: round(sqliteRun.meanMs / oursRun.meanMs) }
    sustainedRows.push(sustainedRow)
    log(`writers8 sustained @ ${size}: sqlite ${sqliteRun.meanMs} ms a round, ours ${oursRun.meanMs} ms, ratio ${sustainedRow.ratioSqlite}`)

    // 5. a burst of 1,000 upserts started at once (better-sqlite3: 1,000 synchronous calls)
    const keysOfBurst = (i) => burstKeys(keys, size, i, BURST) // warm-up i < 0
    record('burst1000', size, {
      baseline: null,
      sqlite: await burst(BURST, (i) => { for (const [w, k] of keysOfBurst(i).entries()) sq.upsertSession(k, patchFor(w)); return Promise.resolve() }),
      ours: await burst(BURST, (i) => Promise.all(keysOfBurst(i).map((k, w) => st.upsertSession(k, patchFor(w))))),
    })
  }
  await st.close()
  sq.close()
  return { oursPath, sqlitePath, basePath: path.join(WORK, `base-${SIZES[SIZES.length - 1]}`, 'sessions.json') }
}

async function historyWorkload() {
  const n = HISTORY_MESSAGES
  log(`seeding a ${n}-message transcript`)
  // session-tools
  const st = await SessionTools.open({ path: path.join(WORK, 'hist-ours', 'sessions.db') })
  await st.upsertSession('agent:main:main', { lastChannel: 'whatsapp' })
  await seedTranscript(st, 'agent:main:main', n)
  // better-sqlite3 baseline: the same messages, 10,000 per transaction
  const CHUNK = 10_000
  fs.mkdirSync(path.join(WORK, 'hist-sqlite'), { recursive: true })
  const sq = new SqliteStore(path.join(WORK, 'hist-sqlite', 'sessions.db'))
  sq.upsertSession('agent:main:main', { lastChannel: 'whatsapp' })
  for (let i = 0; i < n; i += CHUNK) {
    const msgs = []
    for (let j = i; j < Math.min(n, i + CHUNK); j++) msgs.push(makeTranscriptMessage(j))
    sq.appendMessages('agent:main:main', msgs)
  }
  // baseline: sessions.json with the one entry + the gateway-format JSONL
  const dir = path.join(WORK, 'hist-base')
  fs.mkdirSync(dir, { recursive: true })
  const sessionId = '0b6f0f2e-5a0c-4f57-9d7e-3f1c2b7a9e10'
  fs.writeFileSync(path.join(dir, 'sessions.json'), JSON.stringify({ 'agent:main:main': { sessionId, updatedAt: Date.now(), lastChannel: 'whatsapp' } }, null, 2))
  const fd = fs.openSync(path.join(dir, `${sessionId}.jsonl`), 'w')
  fs.writeSync(fd, JSON.stringify({ type: 'session', version: 3, id: sessionId, timestamp: new Date().toISOString(), cwd: process.cwd() }) + '\n')
  let prev = null
  let buf = ''
  for (let j = 0; j < n; j++) {
    const { id, line } = transcriptLine(j, prev)
    prev = id
    buf += line + '\n'
    if (buf.length > 1 << 20) { fs.writeSync(fd, buf); buf = '' }
  }
  fs.writeSync(fd, buf)
  fs.closeSync(fd)
  const base = new FileStore(path.join(dir, 'sessions.json'))
  const transcriptBytes = fs.statSync(path.join(dir, `${sessionId}.jsonl`)).size
  let mb = 0, ms = 0, mo = 0
  const params = { sessionKey: 'main', limit: 20 }
  record('history_limit20', n, {
    baseline: await measure(async () => { mb = (await base.sessionsHistory(params, CTX)).messages.length }),
    ...(await pair(
      () => { ms = sq.sessionsHistory(params, CTX).messages.length },
      async () => { mo = (await st.sessionsHistory(params, CTX)).messages.length },
    )),
  }, { messages: { baseline: mb, sqlite: ms, sessionTools: mo }, transcriptMessages: n, baselineTranscriptBytes: transcriptBytes })

  // one message appended to the long transcript (file baseline: one JSONL line appended, as the
  // gateway's transcript writer does, the sessions.json entry left alone)
  let next = n
  const jsonl = path.join(dir, `${sessionId}.jsonl`)
  let prevId = null
  record('append1', n, {
    baseline: await measure(async () => { const { id, line } = transcriptLine(next++, prevId); prevId = id; await fsp.appendFile(jsonl, line + '\n') }),
    ...(await pair(
      () => sq.appendMessages('agent:main:main', [makeTranscriptMessage(next++)]),
      () => st.appendMessages('agent:main:main', [makeTranscriptMessage(next++)]),
    )),
  }, { transcriptMessages: n })
  await st.close()
  sq.close()
}

function memoryWorkload(paths) {
  const child = path.join(BENCH_DIR, 'lib', 'memory-child.mjs')
  const emptyDir = path.join(WORK, 'mem-empty')
  fs.mkdirSync(emptyDir, { recursive: true })
  const run = (side, file) => {
    const r = spawnSync(process.execPath, ['--expose-gc', child, side, file, ADDON], { encoding: 'utf8', env: process.env, timeout: 120_000 })
    if (r.status !== 0) throw new Error(`memory child failed (${side}): ${r.stderr}`)
    return JSON.parse(r.stdout.trim().split('\n').pop())
  }
  const size = SIZES[SIZES.length - 1]
  const out = {
    size,
    baseline: { empty: run('baseline', path.join(emptyDir, 'sessions.json')), full: run('baseline', paths.basePath) },
    sqlite: { empty: run('sqlite', path.join(emptyDir, 'empty-sqlite.db')), full: run('sqlite', paths.sqlitePath) },
    sessionTools: { empty: run('ours', path.join(emptyDir, 'empty.db')), full: run('ours', paths.oursPath) },
  }
  for (const side of SIDES) {
    out[side].rssDeltaMB = round((out[side].full.rssBytes - out[side].empty.rssBytes) / 2 ** 20)
    out[side].heapDeltaMB = round((out[side].full.heapUsedBytes - out[side].empty.heapUsedBytes) / 2 ** 20)
  }
  out.ratio = out.sessionTools.rssDeltaMB > 0 ? round(out.baseline.rssDeltaMB / out.sessionTools.rssDeltaMB) : null
  out.ratioSqlite = out.sessionTools.rssDeltaMB > 0 ? round(out.sqlite.rssDeltaMB / out.sessionTools.rssDeltaMB) : null
  log(`memory @ ${size}: file +${out.baseline.rssDeltaMB} MB rss, sqlite +${out.sqlite.rssDeltaMB} MB rss, ours +${out.sessionTools.rssDeltaMB} MB rss`)
  return out
}

// ---------------------------------------------------------------- report
function fmt(x) {
  if (x == null) return '-'
  return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2)
}

function table(results, memory) {
  const head = ['workload', 'size', 'file med', 'file p95', 'sqlite med', 'sqlite p95', 'ours med', 'ours p95', 'file/ours', 'sqlite/ours', 'EL max f/s/o', 'EL p99 f/s/o']
  const x = (r) => (r == null ? '-' : `${fmt(r)}x`)
  const med = (side) => (side ? fmt(side.medianMs) + (side.errors || side.warmupErrors ? ` (${side.errors + side.warmupErrors} failed)` : '') : '-')
  const el = (r, k) => SIDES.map((side) => fmt(r[side]?.eventLoop[k])).join(' / ')
  const rows = results.map((r) => [
    r.workload, String(r.size),
    med(r.baseline), fmt(r.baseline?.p95Ms), med(r.sqlite), fmt(r.sqlite.p95Ms),
    med(r.sessionTools), fmt(r.sessionTools.p95Ms),
    x(r.ratio), x(r.ratioSqlite), el(r, 'maxMs'), el(r, 'p99Ms'),
  ])
  if (memory) {
    rows.push(['rss above empty (MB)', String(memory.size), fmt(memory.baseline.rssDeltaMB), '', fmt(memory.sqlite.rssDeltaMB), '',
      fmt(memory.sessionTools.rssDeltaMB), '', x(memory.ratio), x(memory.ratioSqlite), '', ''])
  }
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)))
  const line = (r) => r.map((c, i) => (i < 2 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ')
  return [line(head), w.map((n) => '-'.repeat(n)).join('  '), ...rows.map(line)].join('\n')
}

// ---------------------------------------------------------------- main
let exitCode = 0
try {
  notes.push(
    'Times in ms (wall clock per operation); file/ours and sqlite/ours = that baseline\'s median / the session-tools median; EL = Node event-loop delay while the workload ran, max and p99, file / sqlite / ours: how late perf_hooks.monitorEventLoopDelay\'s 1 ms timer fired, i.e. the interval it records less its 1 ms period (results.json keeps the raw intervals as eventLoop.interval). The event loop gets one turn (setImmediate) between operations, outside the timed window; better-sqlite3 and ours are timed in alternating rounds (six, the order reversed every other one), each side\'s event-loop monitor on only while its own calls run; before each side\'s timed calls, after its warm-up (on the rows that alternate better-sqlite3 and ours, once, after both warm-ups), a sync (the dirty file data of earlier work written back), a full garbage collection, and a wait (up to 2 s) until V8\'s background threads have stopped running (its concurrent marking and sweeping of that garbage took both cores from the timed calls).',
    'Baseline: our own JS implementation of the gateway file store (REFERENCE.md §2.2-§2.6): JSON5 read (a small dependency-free JSON5 parser, likely faster than the json5 package), 45 s mtime-checked cache with deep copies, <store>.lock exclusive create polled every 25 ms, whole-file 2-space JSON rewrite via temp file + rename, mode 0600. Channel-alias mapping and some row fields are simplified.',
    'session-tools was seeded with upsertSession in batches of 500 concurrent calls; the merge rule sets updatedAt = now, so every session-tools session is recent. The baseline sessions.json was written directly with updatedAt spread over 7 days. The activeMinutes workload therefore matches far more rows on session-tools than on the baseline (see rows in results.json).',
    'The gateway applies sessions_list limit before the kind filter; session-tools filters first and caps an unlimited list at 200 rows. The activeMinutes+kinds workload passes no limit, so the baseline returns all matching rows.',
    'upsert/writers8 patch existing keys (the gateway updateEntry path). writers8 = one round of 8 concurrent upserts to 8 different keys; the figure is the time of the whole round. On the baseline the 8 contend for the lock file (25 ms polling).',
    `history: sessions_history limit 20 from a ${HISTORY_MESSAGES}-message transcript (baseline: JSONL read whole and parsed; its sessions.json holds that one session).`,
    'sqlite baseline: the same store as a TypeScript team would write it today, in JS on better-sqlite3 ' + `${SQLITE_VERSION}` + ', synchronous on the main thread: a sessions table (key primary key, agent_id, session_id, updated_at indexed, the entry as a JSON text column), a messages table (rowid order, indexed by session_id); WAL, synchronous=NORMAL; every upsert one BEGIN IMMEDIATE transaction doing read, merge rule, write. Row building, merge rule and history clean-up are the file baseline\'s code.',
    'sqlite baseline semantics follow session-tools, so its rows compare with ours: it was seeded with the merge rule (updatedAt = now, in transactions of 500), sessions_list filters by kind before limit and returns at most 200 rows without one, scanning newest first and stopping when full; history reads the last N rows by index. Its 8 writers are 8 synchronous calls, one after another on the main thread.',
    'Sessions: 60% direct, 30% group, 10% cron keys under agent main; entries of about 0.6-0.8 KB (no skillsSnapshot/systemPromptReport, which make real entries larger).',
    `Iterations per workload and side: up to ${RUN.iters} after a warm-up of at least ${RUN.warmup} calls` + (RUN.warmupMax ? `, and more until ${RUN.warmupMs} ms had passed or ${RUN.warmupMax} had run` : '') + `; the timed calls stop after ${RUN.capMs} ms once ${RUN.minIters} ran.`,
  )
  if (QUICK) notes.push('Quick mode: sizes 1,000 and 10,000 (PostgreSQL: 1,000), 20,000-message transcript, few iterations, no memory workload.')

  // The OpenClaw child runs first, alone: nothing of ours competes with it for the CPU.
  const openclaw = runOpenclaw(findOpenclaw(argv, process.env), { work: path.join(WORK, 'openclaw'), sizes: SIZES, historyMessages: HISTORY_MESSAGES, run: RUN, log, addon: ADDON })
  if (openclaw.skipped) log(`openclaw baseline skipped: ${openclaw.skipped}`)
  const loadStart = os.loadavg()
  const idleLoop = await idleEventLoop()
  const paths = await storeWorkloads()
  await historyWorkload()
  const postgres = POSTGRES_SKIP
    ? { skipped: '--no-postgres' }
    : await postgresWorkloads({ SessionTools, sizes: PG_SIZES, historyMessages: HISTORY_MESSAGES, measure, work: WORK, quick: QUICK, log })
  if (postgres.skipped) log(`postgres rows skipped: ${postgres.skipped}`)
  const memory = QUICK ? null : memoryWorkload(paths)
  const wal = ONLY_WAL_SKIP ? null : await walWorkload({ SessionTools, SqliteStore, work: WORK, seconds: WAL_SECONDS, holdMs: WAL_HOLD_MS, log })
  const orchestration = await orchestrationWorkloads({ SessionTools, quick: QUICK, log })
  const ours = (workload, size) => results.find((r) => r.workload === workload && (size == null || r.size === size))?.sessionTools
  const openclawVs = openclawRows(openclaw, ours)
  notes.push(openclaw.skipped
    ? `OpenClaw baseline skipped: ${openclaw.skipped}.`
    : `OpenClaw baseline: the real openclaw@${openclaw.version} store from ${openclaw.dir}, under Node ${openclaw.node} in a child process, where session-tools is timed too, under the same Node, each workload in alternating rounds with its own (the figures in that table; the main run's, under ${process.version}, are given beside them), on the same generated data, sizes up to ${OPENCLAW_MAX_SIZE.toLocaleString('en-US')} (it is seeded one upsertSessionEntry at a time). Its upsert replaces the entry (the caller merges); its patch is its own read-merge-write. Its public list call reads every entry; the raw indexed query is a floor no gateway call reaches. Its newest-tail history reader caches the last page per transcript revision, so its repeated reads are cache hits.`)

  const meta = {
    date: new Date().toISOString(),
    mode: QUICK ? 'quick' : 'full',
    node: process.version,
    platform: `${os.platform()} ${os.arch()}`,
    cpus: `${os.cpus().length} x ${os.cpus()[0]?.model ?? '?'}`,
    totalMemMB: Math.round(os.totalmem() / 2 ** 20),
    addon: ADDON,
    nativeLibrary: process.env.NAPI_RS_NATIVE_LIBRARY_PATH ?? null,
    betterSqlite3: SQLITE_VERSION,
    sizes: SIZES,
    // the machine is shared: the load average (1, 5, 15 min) before the workloads and at the end
    loadAverage: { start: loadStart.map(round), end: os.loadavg().map(round) },
    osRelease: `${os.type()} ${os.release()}`,
    sessionToolsVersion: require(path.resolve(BENCH_DIR, '../package.json')).version,
    openclaw: openclaw.skipped ? { skipped: openclaw.skipped } : { version: openclaw.version, node: openclaw.node, dir: openclaw.dir },
    durationS: round((performance.now() - t0) / 1000),
  }
  const eventLoop = { limitMs: 2, idle: idleLoop, rows: eventLoopRows(results) }
  fs.mkdirSync(OUT_DIR, { recursive: true })
  fs.writeFileSync(path.join(OUT_DIR, 'results.json'), JSON.stringify({ meta, notes, results, sustained: sustainedRows, eventLoop, memory, wal, openclaw: openclaw.skipped ? null : { ...openclaw, versus: openclawVs }, orchestration, postgres }, null, 2) + '\n')
  fs.writeFileSync(path.join(OUT_DIR, 'chart.svg'), renderChart({ meta, results, sizes: SIZES }))
  console.log(`\nsession-tools ${meta.sessionToolsVersion} bench (${meta.mode}, ${meta.date}, Node ${meta.node}, ${meta.platform}, ${meta.osRelease}, ${meta.cpus}, ${meta.totalMemMB} MB; better-sqlite3 ${meta.betterSqlite3}; OpenClaw ${openclaw.skipped ? 'skipped' : `${openclaw.version} under Node ${openclaw.node}`}; load average ${meta.loadAverage.start.join(' / ')} at the start, ${meta.loadAverage.end.join(' / ')} at the end)\n`)
  console.log(table(results, memory))
  console.log(`\n8 writers sustained (rounds back to back, ${SUSTAINED.stints} stints of ${SUSTAINED.seconds} s a side, alternating; times in ms a round):\n\n${sustainedTable(sustainedRows)}`)
  console.log(`\nEvent loop (target: no call holds it more than ${eventLoop.limitMs} ms; a burst of 1,000 calls keeps its p99 under ${eventLoop.limitMs} ms):\n\n${eventLoopTable(eventLoop.rows, eventLoop.idle)}`)
  console.log(`\nAgainst OpenClaw's own store:\n\n${openclawTable(openclaw, openclawVs)}`)
  console.log(`\nsession-tools on PostgreSQL (same workloads; sqlite = session-tools on SQLite above):\n\n${postgresTable(postgres, results)}`)
  if (wal) console.log(`\nWrite-ahead log under a reader that is always there:\n\n${walTable(wal)}`)
  console.log(`\nOrchestration (session-tools only; the baselines are stores):\n\n${orchestrationTable(orchestration)}`)
  for (const r of results) {
    for (const side of SIDES) if (r[side]?.firstError) console.log(`! ${r.workload} @ ${r.size}, ${side}: ${r[side].errors + r[side].warmupErrors} operation(s) failed, first: ${r[side].firstError}`)
  }
  console.log('\nNotes:\n' + notes.map((n) => `- ${n}`).join('\n'))
  console.log(`\nWrote ${path.join(OUT_DIR, 'results.json')} and ${path.join(OUT_DIR, 'chart.svg')} in ${meta.durationS} s`)
} catch (err) {
  console.error(err)
  exitCode = 1
} finally {
  await fsp.rm(WORK, { recursive: true, force: true }).catch(() => {})
}
process.exitCode = exitCode
