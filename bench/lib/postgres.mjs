// session-tools on PostgreSQL (issue 16, item 6): the store workloads of run.mjs (upsert,
// sessions_list limit 50, 8 concurrent writers, sessions_history limit 20, append one message)
// on a throwaway local cluster started here (scripts/lib/pg-cluster.mjs, fsync and synchronous
// commit on, over a Unix socket), beside the same workloads of session-tools on SQLite from the
// same run. Also what one round trip to the server costs: `SELECT 1` timed by the server's own
// `pgbench` over the same socket, and the cost of one trivial store call (getSession of a
// missing key) on each backend. Without the server binaries it is skipped with the reason.
// Nothing here asserts on timing.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'

import { MISSING, startCluster } from '../../scripts/lib/pg-cluster.mjs'
import { keyTable, makeTranscriptMessage, rng, upsertPatch as patchFor } from './data.mjs'
import { seedSessions, seedTranscript } from './seed.mjs'
import { round } from './measure.mjs'

const CTX = { agentSessionKey: 'agent:main:main' }
const WRITERS = 8
// seeding concurrency: the pool's size (every write takes one advisory lock; 500 calls at once
// only queue for it, about 4 times slower per write than 8 at a time)
const SEED_BATCH = 8

/** `SELECT 1` round trips timed by pgbench (one client, no transaction wrapper): mean ms. */
function pgbenchSelect1(cluster, work, seconds) {
  const script = path.join(work, 'select1.sql')
  fs.writeFileSync(script, 'SELECT 1;\n')
  const port = new URL(cluster.url).port || '5432'
  const r = spawnSync('pgbench', ['-n', '-h', cluster.dir, '-p', port, '-U', 'postgres', '-f', script, '-T', String(seconds), 'postgres'], { encoding: 'utf8' })
  const m = /latency average = ([\d.]+) ms/.exec(r.stdout ?? '')
  return m ? { meanMs: Number(m[1]), tool: 'pgbench -f "SELECT 1" (libpq, one client)' } : { meanMs: null, error: (r.stderr || r.error?.message || 'pgbench failed').trim().slice(0, 200) }
}

/**
 * Runs the workloads on PostgreSQL. `measure(fn)` is run.mjs's (same iterations); `sizes` and
 * `historyMessages` as for SQLite (quick mode passes smaller ones). `{ skipped }` when no server
 * can be started, else `{ durable, roundTrip, trivial, seedMs, results }`.
 */
export async function postgresWorkloads({ SessionTools, sizes, historyMessages, measure, work, quick, log }) {
  let cluster
  try {
    cluster = startCluster({ port: 5600 + (process.pid % 1000), durable: true })
  } catch (e) {
    return { skipped: e.message === MISSING ? 'no PostgreSQL server binaries (initdb, pg_ctl)' : e.message }
  }
  try {
    const results = []
    const roundTrip = pgbenchSelect1(cluster, work, quick ? 1 : 3)
    log(`postgres: SELECT 1 round trip ${roundTrip.meanMs ?? roundTrip.error} ms`)

    // one trivial store call on each backend: the engine's per-call cost beyond the round trips
    const sq = await SessionTools.open({ path: path.join(work, 'pg-trivial.db') })
    const st = await SessionTools.open({ url: `${cluster.url}&schema=bench` })
    const trivial = {
      sqlite: await measure(() => sq.getSession('agent:main:missing')),
      postgres: await measure(() => st.getSession('agent:main:missing')),
    }
    await sq.close()
    log(`postgres: getSession (missing key) sqlite ${trivial.sqlite.medianMs} ms, postgres ${trivial.postgres.medianMs} ms`)

    const seedMs = {}
    let seeded = 0
    for (const size of sizes) {
      const s = performance.now()
      await seedSessions(st, seeded, size, SEED_BATCH)
      seedMs[size] = round(performance.now() - s)
      seeded = size
      const pick = rng(size)
      const keys = keyTable(size) // made outside the timed calls
      const randomKey = () => keys[Math.floor(pick() * size)]
      const keysFor = () => {
        const ks = new Set()
        while (ks.size < WRITERS) ks.add(randomKey())
        return [...ks]
      }
      results.push({ workload: 'upsert', size, postgres: await measure((i) => st.upsertSession(randomKey(), patchFor(i))) })
      results.push({ workload: 'list_limit50', size, postgres: await measure(() => st.sessionsList({ limit: 50 }, CTX)) })
      results.push({ workload: 'writers8', size, postgres: await measure((i) => Promise.all(keysFor().map((k, w) => st.upsertSession(k, patchFor(i * WRITERS + w))))) })
      log(`postgres @ ${size}: seeded in ${seedMs[size]} ms, ${results.slice(-3).map((r) => `${r.workload} ${r.postgres.medianMs} ms`).join(', ')}`)
    }
    await st.close()

    // one long transcript, in its own schema
    const h = await SessionTools.open({ url: `${cluster.url}&schema=bench_history` })
    await h.upsertSession('agent:main:main', { lastChannel: 'whatsapp' })
    const s = performance.now()
    await seedTranscript(h, 'agent:main:main', historyMessages)
    seedMs.history = round(performance.now() - s)
    let next = historyMessages
    results.push({ workload: 'history_limit20', size: historyMessages, postgres: await measure(() => h.sessionsHistory({ sessionKey: 'main', limit: 20 }, CTX)) })
    results.push({ workload: 'append1', size: historyMessages, postgres: await measure(() => h.appendMessages('agent:main:main', [makeTranscriptMessage(next++)])) })
    log(`postgres history @ ${historyMessages}: ${results.slice(-2).map((r) => `${r.workload} ${r.postgres.medianMs} ms`).join(', ')}`)
    await h.close()
    return { durable: cluster.durable, roundTrip, trivial, seedMs, results }
  } catch (e) {
    return { skipped: `failed: ${String(e?.message ?? e).slice(0, 300)}` }
  } finally {
    cluster.stop()
  }
}

const fmt = (x) => (x == null ? '-' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2))

/** The PostgreSQL rows beside session-tools' SQLite rows of the same run (`results` of run.mjs). */
export function postgresTable(pg, results) {
  if (pg.skipped) return `PostgreSQL rows skipped: ${pg.skipped}`
  const rt = pg.roundTrip.meanMs
  const head = ['workload', 'size', 'sqlite med', 'pg med', 'pg p95', 'pg/sqlite', 'pg med in round trips']
  const rows = pg.results.map((r) => {
    const sq = results.find((x) => x.workload === r.workload && x.size === r.size)?.sessionTools
    const ratio = sq?.medianMs ? `${fmt(r.postgres.medianMs / sq.medianMs)}x` : '-'
    return [r.workload, String(r.size), fmt(sq?.medianMs), fmt(r.postgres.medianMs), fmt(r.postgres.p95Ms), ratio, rt ? fmt(r.postgres.medianMs / rt) : '-']
  })
  rows.push(['getSession (missing key)', '-', fmt(pg.trivial.sqlite.medianMs), fmt(pg.trivial.postgres.medianMs), fmt(pg.trivial.postgres.p95Ms),
    pg.trivial.sqlite.medianMs ? `${fmt(pg.trivial.postgres.medianMs / pg.trivial.sqlite.medianMs)}x` : '-', rt ? fmt(pg.trivial.postgres.medianMs / rt) : '-'])
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)))
  const line = (r) => r.map((c, i) => (i < 2 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ')
  const fsync = pg.durable ? 'fsync and synchronous_commit on' : 'fsync OFF'
  return [
    `One round trip (${pg.roundTrip.tool ?? 'pgbench'}): ${rt ?? `not measured (${pg.roundTrip.error})`} ms; local cluster over a Unix socket, ${fsync}.`,
    '',
    line(head),
    w.map((n) => '-'.repeat(n)).join('  '),
    ...rows.map(line),
  ].join('\n')
}
