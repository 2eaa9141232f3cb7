#!/usr/bin/env node
// Focused read bench (issue 17): sessions_list limit 50 and sessions_history limit 20 of
// session-tools beside the better-sqlite3 baseline (lib/sqlite-baseline.mjs) and a raw indexed
// `SELECT key, entry … ORDER BY updated_at DESC LIMIT 50` + JSON.parse of each entry on
// better-sqlite3 (a stand-in for the 2026.9 gateway's floor, which runs under node:sqlite), in one
// process, in interleaved rounds; prints medians (wall and process CPU per call) and the ratios.
// `list-cold` lists right after a setConfig (outside the timed window), so no row is remembered:
// the cost of a listing whose every row changed since the last one.
//   node bench/reads.mjs [--sizes 1000,10000,50000] [--rounds 6] [--per 100] [--messages 100000] [--data <dir>]
// Env: ADDON / NAPI_RS_NATIVE_LIBRARY_PATH as for run.mjs. Seeded stores are kept in --data
// (default: a temp folder, removed at the end) so that two builds can be compared on the same
// files, one process each (two builds of the addon cannot be loaded in one process).
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import Database from 'better-sqlite3'
import { SqliteStore } from './lib/sqlite-baseline.mjs'
import { makeEntry, makeTranscriptMessage } from './lib/data.mjs'

const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url))
const argv = process.argv.slice(2)
const opt = (name, def) => {
  const i = argv.indexOf(name)
  return i >= 0 && argv[i + 1] ? argv[i + 1] : def
}
const SIZES = opt('--sizes', '1000,10000,50000').split(',').map(Number)
const ROUNDS = Number(opt('--rounds', 6))
const PER = Number(opt('--per', 100))
const MESSAGES = Number(opt('--messages', 100_000))
const KEEP = argv.includes('--data')
const DATA = path.resolve(opt('--data', fs.mkdtempSync(path.join(os.tmpdir(), 'st-reads-'))))
const ADDON = process.env.ADDON ? path.resolve(process.env.ADDON) : path.resolve(BENCH_DIR, '../index.js')
const { SessionTools } = createRequire(import.meta.url)(ADDON)
const CTX = { agentSessionKey: 'agent:main:main' }

const tick = () => new Promise((r) => setImmediate(r))
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]

async function seedOurs(file, size) {
  const fresh = !fs.existsSync(file)
  const st = await SessionTools.open({ path: file })
  for (let i = 0; fresh && i < size; i += 500) {
    const batch = []
    for (let j = i; j < Math.min(size, i + 500); j++) {
      const { key, entry } = makeEntry(j)
      const { updatedAt, sessionId, ...patch } = entry
      batch.push(st.upsertSession(key, { sessionId, ...patch }))
    }
    await Promise.all(batch)
  }
  return st
}

function seedSqlite(file, size) {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  const fresh = !fs.existsSync(file)
  const sq = new SqliteStore(file)
  const items = []
  for (let j = 0; fresh && j < size; j++) {
    const { key, entry } = makeEntry(j)
    const { updatedAt, ...patch } = entry
    items.push({ key, patch })
  }
  for (let i = 0; i < items.length; i += 500) sq.seed(items.slice(i, i + 500))
  return sq
}

/** Each side `PER` calls a round, `ROUNDS` rounds, the order reversed every other round. */
async function compare(label, sides) {
  for (const s of sides) for (let i = 0; i < 50; i++) await s.fn()
  const all = Object.fromEntries(sides.map((s) => [s.name, { times: [], cpu: [] }]))
  for (let r = 0; r < ROUNDS; r++) {
    for (const s of r % 2 ? [...sides].reverse() : sides) {
      globalThis.gc?.()
      const c0 = process.cpuUsage()
      for (let i = 0; i < PER; i++) {
        await tick()
        s.pre?.()
        const t = performance.now()
        await s.fn()
        all[s.name].times.push(performance.now() - t)
      }
      const c = process.cpuUsage(c0)
      all[s.name].cpu.push((c.user + c.system) / PER)
    }
  }
  const ref = median(all.sqlite.times)
  const cells = sides.map((s) => {
    const m = median(all[s.name].times)
    const ratio = s.name === 'sqlite' ? '' : ` (sqlite/this ${(ref / m).toFixed(2)})`
    return `${s.name} ${(m * 1000).toFixed(0)} µs, cpu ${median(all[s.name].cpu).toFixed(0)} µs${ratio}`
  })
  console.log(`${label}: ${cells.join(' | ')}`)
}

for (const size of SIZES) {
  const st = await seedOurs(path.join(DATA, `ours-${size}`, 'sessions.db'), size)
  const sqFile = path.join(DATA, `sqlite-${size}`, 'sessions.db')
  const sq = seedSqlite(sqFile, size)
  const raw = new Database(sqFile, { readonly: true })
  const q = raw.prepare("SELECT key, entry FROM sessions WHERE agent_id = 'main' ORDER BY updated_at DESC LIMIT 50")
  const list = () => st.sessionsList({ limit: 50 }, CTX)
  await compare(`sessions_list 50 @ ${size}`, [
    { name: 'ours', fn: list },
    { name: 'ours-cold', fn: list, pre: () => st.setConfig(null) },
    { name: 'sqlite', fn: () => sq.sessionsList({ limit: 50 }, CTX) },
    { name: 'raw', fn: () => q.all().map((r) => ({ key: r.key, entry: JSON.parse(r.entry) })) },
  ])
  await st.close()
  sq.close()
  raw.close()
}

{
  const file = path.join(DATA, `history-ours-${MESSAGES}`, 'sessions.db')
  const fresh = !fs.existsSync(file)
  const st = await SessionTools.open({ path: file })
  const sqDir = path.join(DATA, `history-sqlite-${MESSAGES}`)
  fs.mkdirSync(sqDir, { recursive: true })
  const sq = new SqliteStore(path.join(sqDir, 'sessions.db'))
  if (fresh) {
    await st.upsertSession('agent:main:main', { lastChannel: 'whatsapp' })
    sq.upsertSession('agent:main:main', { lastChannel: 'whatsapp' })
    for (let i = 0; i < MESSAGES; i += 10_000) {
      const msgs = []
      for (let j = i; j < Math.min(MESSAGES, i + 10_000); j++) msgs.push(makeTranscriptMessage(j))
      await st.appendMessages('agent:main:main', msgs)
      sq.appendMessages('agent:main:main', msgs)
    }
  }
  const params = { sessionKey: 'main', limit: 20 }
  await compare(`sessions_history 20 of ${MESSAGES}`, [
    { name: 'ours', fn: () => st.sessionsHistory(params, CTX) },
    { name: 'sqlite', fn: () => sq.sessionsHistory(params, CTX) },
  ])
  await st.close()
  sq.close()
}
if (!KEEP) fs.rmSync(DATA, { recursive: true, force: true })
