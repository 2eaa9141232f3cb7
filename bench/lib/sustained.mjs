// Sustained writes (issue 17, target 2): rounds of 8 concurrent upserts back to back for a few
// seconds, on session-tools and on the better-sqlite3 baseline, in alternating stints (the
// order reversed every other stint). The writers8 row times single rounds with a quiet machine
// between them (a GC and a `sync` before the timed calls, a turn of the loop between two), so
// it never meets a checkpoint; here the log fills and is copied back into the database while
// the rounds go on, as it does under a steady load, on both sides. Reports the mean time a round
// (the reciprocal of the throughput), its median, p99 and worst, and the share of the time spent
// in rounds over 2 ms.
import { performance } from 'node:perf_hooks'
import { round } from './measure.mjs'

const SLOW_ROUND_MS = 2

/** `stints` stints of `seconds` per side, sides alternating; one summary per side, in order. */
export async function sustained(sides, { seconds, stints }) {
  const acc = sides.map(() => ({ times: [], wallMs: 0 }))
  let i = 0
  for (let s = 0; s < stints; s++) {
    const order = s % 2 ? [...sides.keys()].reverse() : [...sides.keys()]
    for (const k of order) {
      const end = performance.now() + seconds * 1000
      const start = performance.now()
      while (performance.now() < end) {
        const t = performance.now()
        await sides[k](i++)
        acc[k].times.push(performance.now() - t)
      }
      acc[k].wallMs += performance.now() - start
    }
  }
  return acc.map(summary)
}

function summary({ times, wallMs }) {
  const sorted = [...times].sort((a, b) => a - b)
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.floor(p * (sorted.length - 1)))]
  const slow = times.filter((t) => t > SLOW_ROUND_MS).reduce((a, b) => a + b, 0)
  return {
    rounds: times.length,
    meanMs: round(wallMs / times.length),
    medianMs: round(at(0.5)),
    p99Ms: round(at(0.99)),
    maxMs: round(sorted[sorted.length - 1]),
    slowShare: round(slow / wallMs),
  }
}

export function sustainedTable(rows) {
  const head = ['size', 'sqlite rounds', 'sqlite mean', 'sqlite p50 / p99 / max', 'sqlite >2 ms', 'ours rounds', 'ours mean', 'ours p50 / p99 / max', 'ours >2 ms', 'sqlite/ours (mean)']
  const f = (x) => (x == null ? '-' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2))
  const pc = (x) => (x == null ? '-' : `${Math.round(x * 100)}%`)
  const side = (s) => [String(s.rounds), f(s.meanMs), `${f(s.medianMs)} / ${f(s.p99Ms)} / ${f(s.maxMs)}`, pc(s.slowShare)]
  const body = rows.map((r) => [String(r.size), ...side(r.sqlite), ...side(r.sessionTools), r.ratioSqlite == null ? '-' : `${f(r.ratioSqlite)}x`])
  return [head, head.map(() => '---'), ...body].map((cells) => `| ${cells.join(' | ')} |`).join('\n')
}
