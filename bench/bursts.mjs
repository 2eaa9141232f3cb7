#!/usr/bin/env node
// Focused burst bench (issue 17, target 4): bursts of 1,000 upserts started at once and awaited
// one after another (run.mjs's burst1000), with the event loop's delay while they run (how late
// a 1 ms monitor fired: lib/measure.mjs loopStats) and, on Linux, each thread's time on a core
// and waiting for one (/proc/self/task/<tid>/schedstat): whether a late tick was the JS thread's
// own work or a wait behind the writer, the checkpointer or V8's helpers. Ours only.
//   node bench/bursts.mjs [--sizes 10000,50000] [--bursts 15] [--data <dir>]
// Env: ADDON / NAPI_RS_NATIVE_LIBRARY_PATH as for run.mjs. Nothing here asserts timing.
import os from 'node:os'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { burstKeys, keyTable, upsertPatch as patchFor } from './lib/data.mjs'
import { dataFolder, loadAddon, median, option as opt, seedOurs, tick } from './lib/ab.mjs'
import { loopMonitor, loopStats, round } from './lib/measure.mjs'
import { threads } from './lib/threads.mjs'

const SIZES = opt('--sizes', '10000,50000').split(',').map(Number)
const BURSTS = Number(opt('--bursts', 15))
const WARMUP = 3
const BURST = 1000
const data = dataFolder('st-bursts-')
const { SessionTools } = loadAddon()

console.log(`load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`)
for (const size of SIZES) {
  const st = await seedOurs(SessionTools, path.join(data.dir, `ours-${size}`, 'sessions.db'), size)
  const keys = keyTable(size)
  const burst = (i) => Promise.all(burstKeys(keys, size, i, BURST).map((k, w) => st.upsertSession(k, patchFor(w))))
  for (let i = 0; i < WARMUP; i++) { await burst(-1 - i); await tick() }
  const before = threads()
  const h = loopMonitor()
  const walls = []
  const start = performance.now()
  h.enable()
  for (let i = 0; i < BURSTS; i++) {
    const s = performance.now()
    await burst(i)
    walls.push(performance.now() - s)
    await tick()
  }
  h.disable()
  const elapsed = performance.now() - start
  const loop = loopStats(h)
  console.log(`bursts @ ${size}: ${BURSTS} in ${round(elapsed)} ms, median ${round(median(walls))} ms; loop delay p99 ${loop.p99Ms} ms, max ${loop.maxMs} ms (${loop.samples} samples)`)
  const after = threads()
  const rows = Object.entries(after)
    .map(([tid, t]) => ({ tid, name: t.name, runMs: t.runMs - (before[tid]?.runMs ?? 0), waitMs: t.waitMs - (before[tid]?.waitMs ?? 0) }))
    .filter((t) => t.runMs >= 1 || t.waitMs >= 1) // (off Linux, or with no schedstat, none)
    .sort((a, b) => b.runMs - a.runMs)
  for (const t of rows) console.log(`  ${t.tid === String(process.pid) ? 'JS thread' : t.name}: ran ${round(t.runMs)} ms, waited for a core ${round(t.waitMs)} ms`)
  await st.close()
}
data.done()
