// The WAL workload (not a timing): a steady stream of writes (4 writers, each one call every
// 10 ms, 10 messages a call) for `seconds` while another process keeps a
// read transaction open at all times (wal-reader.mjs, each transaction held `holdMs`), on the
// better-sqlite3 baseline (SQLite's defaults: the log may only start over when no reader reads
// from it) and on session-tools (journal_size_limit and a checkpoint that waits for the readers
// of the moment). Reports the largest -wal file seen (sampled every 20 ms), the messages
// written and the writes' p99 latency.
import fs from 'node:fs'
import path from 'node:path'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { makeTranscriptMessage } from './data.mjs'
import { pct, round } from './measure.mjs'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const WRITERS = 4
const BATCH = 10
/** Each writer's pause between calls: about 400 writes a second in all, a busy gateway. */
const PAUSE_MS = 10

function startReader(file, holdMs) {
  const child = spawn(process.execPath, [path.join(HERE, 'wal-reader.mjs'), file, String(holdMs)], { stdio: ['pipe', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (d) => { out += d })
  const done = new Promise((resolve) => child.on('close', () => resolve(out.trim() ? JSON.parse(out.trim().split('\n').pop()) : { transactions: null })))
  return { stop: () => { child.stdin.end(); return done } }
}

async function soak({ file, seconds, holdMs, write }) {
  const wal = `${file}-wal`
  const reader = startReader(file, holdMs)
  await new Promise((r) => setTimeout(r, 300)) // the reader is in its first transaction
  let largest = 0
  const sample = () => { try { largest = Math.max(largest, fs.statSync(wal).size) } catch {} }
  const timer = setInterval(sample, 20)
  const latencies = []
  let messages = 0
  const end = Date.now() + seconds * 1000
  await Promise.all(Array.from({ length: WRITERS }, async (_, w) => {
    let j = w * 1_000_000
    while (Date.now() < end) {
      const msgs = Array.from({ length: BATCH }, () => makeTranscriptMessage(j++))
      const s = performance.now()
      await write(`agent:main:wal-${w}`, msgs)
      latencies.push(performance.now() - s)
      messages += BATCH
      await new Promise((r) => setTimeout(r, PAUSE_MS))
    }
  }))
  clearInterval(timer)
  sample()
  const { transactions } = await reader.stop()
  const sorted = latencies.sort((a, b) => a - b)
  let finalBytes = 0
  try { finalBytes = fs.statSync(wal).size } catch {}
  return { seconds, holdMs, writers: WRITERS, messages, readerTransactions: transactions, largestWalBytes: largest, finalWalBytes: finalBytes,
    writeMedianMs: round(pct(sorted, 50)), writeP99Ms: round(pct(sorted, 99)), writeMaxMs: round(sorted[sorted.length - 1]),
    // the writes held by a checkpoint that waits for the reader: about 1% of them on our side,
    // so the p99 alone falls on one side of them or the other from run to run
    writesOver10Ms: sorted.filter((ms) => ms > 10).length, writes: sorted.length }
}

export async function walWorkload({ SessionTools, SqliteStore, work, seconds, holdMs, log }) {
  const out = {}
  const sqFile = path.join(work, 'wal-sqlite', 'sessions.db')
  fs.mkdirSync(path.dirname(sqFile), { recursive: true })
  const sq = new SqliteStore(sqFile)
  log(`wal: ${seconds} s of writes under a ${holdMs} ms reader, better-sqlite3`)
  out.sqlite = await soak({ file: sqFile, seconds, holdMs, write: async (k, m) => sq.appendMessages(k, m) })
  sq.close()
  const ourFile = path.join(work, 'wal-ours', 'sessions.db')
  const st = await SessionTools.open({ path: ourFile, mirrorDir: null })
  log(`wal: ${seconds} s of writes under a ${holdMs} ms reader, session-tools`)
  out.sessionTools = await soak({ file: ourFile, seconds, holdMs, write: (k, m) => st.appendMessages(k, m) })
  await st.close()
  return out
}

const mib = (b) => (b / 2 ** 20).toFixed(1)
export function walTable(w) {
  const row = (name, r) => `${name.padEnd(14)}  ${mib(r.largestWalBytes).padStart(10)}  ${mib(r.finalWalBytes).padStart(9)}  ${String(r.messages).padStart(9)}  ${String(r.readerTransactions).padStart(7)}  ${String(r.writeMedianMs).padStart(8)}  ${String(r.writeP99Ms).padStart(8)}  ${`${r.writesOver10Ms}/${r.writes}`.padStart(11)}  ${String(r.writeMaxMs).padStart(8)}`
  return [`${w.sqlite.seconds} s of writes (${w.sqlite.writers} writers, each a call every ${PAUSE_MS} ms, ${BATCH} messages a call), a reader always in a transaction held ${w.sqlite.holdMs} ms`, '',
    `${'side'.padEnd(14)}  ${'WAL max MiB'.padStart(10)}  ${'final MiB'.padStart(9)}  ${'messages'.padStart(9)}  ${'reads'.padStart(7)}  ${'write med'.padStart(8)}  ${'write p99'.padStart(8)}  ${'over 10 ms'.padStart(11)}  ${'write max'.padStart(8)}`,
    row('better-sqlite3', w.sqlite), row('session-tools', w.sessionTools)].join('\n')
}
