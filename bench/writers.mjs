#!/usr/bin/env node
// Focused write bench (issue 17, target 2): one upsert and a round of 8 concurrent upserts of
// session-tools beside the better-sqlite3 baseline (lib/sqlite-baseline.mjs: the 8 are 8
// synchronous calls), in one process, in interleaved rounds (the order reversed every other
// round); prints medians (wall and process CPU per call) and the ratios. The keys and patches
// are run.mjs's (existing keys, the gateway's updateEntry path).
//   node bench/writers.mjs [--sizes 10000,50000] [--rounds 6] [--per 200] [--data <dir>]
//   node bench/writers.mjs --loop <seconds> [--sizes 10000]   (ours only: 8-writer rounds, for perf)
// Env: ADDON / NAPI_RS_NATIVE_LIBRARY_PATH as for run.mjs. Seeded stores are kept in --data
// (default: a temp folder, removed at the end) so that two builds can be compared on the same
// files, one process each.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { SqliteStore } from './lib/sqlite-baseline.mjs'
import { makeEntry, keyTable, rng } from './lib/data.mjs'

const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url))
const argv = process.argv.slice(2)
const opt = (name, def) => {
  const i = argv.indexOf(name)
  return i >= 0 && argv[i + 1] ? argv[i + 1] : def
}
const SIZES = opt('--sizes', '10000,50000').split(',').map(Number)
const ROUNDS = Number(opt('--rounds', 6))
const PER = Number(opt('--per', 200))
const LOOP = Number(opt('--loop', 0))
const KEEP = argv.includes('--data')
const DATA = path.resolve(opt('--data', fs.mkdtempSync(path.join(os.tmpdir(), 'st-writers-'))))
const ADDON = process.env.ADDON ? path.resolve(process.env.ADDON) : path.resolve(BENCH_DIR, '../index.js')
const { SessionTools } = createRequire(import.meta.url)(ADDON)
const WRITERS = 8

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
  for (const s of sides) for (let i = 0; i < 50; i++) await s.fn(i)
  const all = Object.fromEntries(sides.map((s) => [s.name, { times: [], cpu: [] }]))
  let n = 0
  for (let r = 0; r < ROUNDS; r++) {
    for (const s of r % 2 ? [...sides].reverse() : sides) {
      globalThis.gc?.()
      const c0 = process.cpuUsage()
      for (let i = 0; i < PER; i++) {
        await tick()
        const t = performance.now()
        await s.fn(n++)
        all[s.name].times.push(performance.now() - t)
      }
      const c = process.cpuUsage(c0)
      all[s.name].cpu.push((c.user + c.system) / PER)
    }
  }
  const ref = median(all.sqlite.times)
  const out = {}
  const cells = sides.map((s) => {
    const m = median(all[s.name].times)
    out[s.name] = m
    const ratio = s.name === 'sqlite' ? '' : ` (sqlite/this ${(ref / m).toFixed(2)})`
    return `${s.name} ${(m * 1000).toFixed(0)} µs, cpu ${median(all[s.name].cpu).toFixed(0)} µs${ratio}`
  })
  console.log(`${label}: ${cells.join(' | ')}`)
  return out
}

console.log(`load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`)
for (const size of SIZES) {
  const st = await seedOurs(path.join(DATA, `ours-${size}`, 'sessions.db'), size)
  const sq = seedSqlite(path.join(DATA, `sqlite-${size}`, 'sessions.db'), size)
  const pick = rng(size)
  const keys = keyTable(size)
  const randomKey = () => keys[Math.floor(pick() * size)]
  const patchFor = (i) => ({ lastChannel: 'telegram', lastTo: `+1555${1000 + (i & 1023)}`, inputTokens: 100 + i, outputTokens: 50 })
  const keysFor = () => { const ks = new Set(); while (ks.size < WRITERS) ks.add(randomKey()); return [...ks] }
  if (LOOP > 0) {
    const end = performance.now() + LOOP * 1000
    let i = 0
    while (performance.now() < end) {
      await Promise.all(keysFor().map((k, w) => st.upsertSession(k, patchFor(i * WRITERS + w))))
      i++
    }
    console.log(`${i} rounds of ${WRITERS} writers at ${size}`)
  } else {
    await compare(`upsert @ ${size}`, [
      { name: 'ours', fn: (i) => st.upsertSession(randomKey(), patchFor(i)) },
      { name: 'sqlite', fn: async (i) => sq.upsertSession(randomKey(), patchFor(i)) },
    ])
    await compare(`writers8 @ ${size}`, [
      { name: 'ours', fn: (i) => Promise.all(keysFor().map((k, w) => st.upsertSession(k, patchFor(i * WRITERS + w)))) },
      { name: 'sqlite', fn: (i) => Promise.all(keysFor().map(async (k, w) => sq.upsertSession(k, patchFor(i * WRITERS + w)))) },
    ])
  }
  await st.close()
  sq.close()
}
console.log(`load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`)
if (!KEEP) fs.rmSync(DATA, { recursive: true, force: true })
