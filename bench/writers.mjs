#!/usr/bin/env node
// Focused write bench (issue 17, target 2): one upsert and a round of 8 concurrent upserts of
// session-tools beside the better-sqlite3 baseline (lib/sqlite-baseline.mjs: the 8 are 8
// synchronous calls; `sqlite-1tx`, for reference, makes the same 8 in one transaction, the
// group commit done by hand), in one process, in interleaved rounds (the order reversed every
// other round); prints medians (wall and process CPU per call) and the ratios. The keys and patches
// are run.mjs's (lib/data.mjs: existing keys, `upsertPatch`, the gateway's updateEntry path).
//   node bench/writers.mjs [--sizes 10000,50000] [--rounds 6] [--per 200] [--data <dir>]
//   node bench/writers.mjs --loop <seconds> [--sizes 10000]   (ours only: 8-writer rounds, for perf)
// Env: ADDON / NAPI_RS_NATIVE_LIBRARY_PATH as for run.mjs. Seeded stores are kept in --data
// (default: a temp folder, removed at the end) so that two builds can be compared on the same
// files, one process each.
import os from 'node:os'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { keyTable, rng, upsertPatch as patchFor } from './lib/data.mjs'
import { compare as compareSides, dataFolder, loadAddon, option as opt, seedOurs as seed, seedSqlite } from './lib/ab.mjs'

const SIZES = opt('--sizes', '10000,50000').split(',').map(Number)
const ROUNDS = Number(opt('--rounds', 6))
const PER = Number(opt('--per', 200))
const LOOP = Number(opt('--loop', 0))
const data = dataFolder('st-writers-')
const DATA = data.dir
const { SessionTools } = loadAddon()
const WRITERS = 8

const seedOurs = (file, size) => seed(SessionTools, file, size)
const compare = (label, sides) => compareSides(label, sides, { rounds: ROUNDS, per: PER })

console.log(`load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`)
for (const size of SIZES) {
  const st = await seedOurs(path.join(DATA, `ours-${size}`, 'sessions.db'), size)
  const sq = seedSqlite(path.join(DATA, `sqlite-${size}`, 'sessions.db'), size)
  const pick = rng(size)
  const keys = keyTable(size)
  const randomKey = () => keys[Math.floor(pick() * size)]
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
      { name: 'sqlite-1tx', fn: async (i) => sq.upsertMany(keysFor().map((k, w) => ({ key: k, patch: patchFor(i * WRITERS + w) }))) },
    ])
  }
  await st.close()
  sq.close()
}
console.log(`load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`)
data.done()
