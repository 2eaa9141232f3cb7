// Timing shared by the harness and its child processes: medians over many calls, with the
// event-loop delay sampled while they run. Nothing here asserts on timing.
import { monitorEventLoopDelay, performance, PerformanceObserver } from 'node:perf_hooks'
import { spawnSync } from 'node:child_process'
import { threads } from './threads.mjs'
import v8 from 'node:v8'
import vm from 'node:vm'

export const round = (x) => (x == null || !Number.isFinite(x) ? null : Math.round(x * 1000) / 1000)

let gc = null
/** A full garbage collection, run between the warm-up and the timed calls, so that a side's
 * timed calls (and its event-loop figures) do not pay for the garbage an earlier side left. The
 * harness need not be started with --expose-gc: the first call sets the flag for this process. */
function collect() {
  if (!gc) {
    if (typeof globalThis.gc === 'function') gc = globalThis.gc
    else {
      v8.setFlagsFromString('--expose-gc')
      gc = vm.runInNewContext('gc')
    }
  }
  gc()
}

/** Writes the machine's dirty file data back (`sync`), so that the writeback of what an earlier
 * side wrote (the file baseline rewrites a 35 MB `sessions.json` per call at 50,000 sessions)
 * does not run during a later side's timed calls. Where there is no `sync`, nothing. */
function flushDisk() {
  if (process.platform === 'win32') return
  spawnSync('sync', { stdio: 'ignore', timeout: 60_000 })
}

/** The run time (ms) of V8's own background threads so far: every thread named `node` but the
 * JS thread (concurrent marking and sweeping, compiling; libuv's pool, idle here). */
function backgroundRunMs() {
  const js = String(process.pid)
  let ms = 0
  for (const [tid, t] of Object.entries(threads())) if (tid !== js && t.name === 'node') ms += t.runMs ?? 0
  return ms
}

/** Waits until V8's background threads stop running (two polls 10 ms apart with under 0.5 ms
 * run between them), at most `limitMs`. After the full GC of the file baseline's documents (35 MB
 * each at 50,000 sessions) four of them ran beside the JS thread in the kernel's 4 ms slices for
 * up to a second, on a machine of 2 cores: a late tick of 16-32 ms on either SQLite side with
 * no GC pause in it (perf sched; the same 60 rounds after a 2 s pause: none over 0.7 ms). */
async function settleBackground(limitMs = 2_000) {
  const end = performance.now() + limitMs
  let last = backgroundRunMs()
  for (let still = 0; still < 2 && performance.now() < end; ) {
    await new Promise((r) => setTimeout(r, 10))
    const now = backgroundRunMs()
    still = now - last < 0.5 ? still + 1 : 0
    last = now
  }
}

/** Before a side's timed calls: the garbage and the dirty file data earlier work left, and the
 * background work collecting the garbage leaves. */
async function quiet() {
  flushDisk()
  collect()
  await settleBackground()
}

/** Every garbage collection of this process since the first monitor was made: [start, ms]. */
const pauses = []
let gcObserver = null
function watchGc() {
  if (gcObserver) return
  gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) pauses.push([e.startTime, e.duration])
  })
  gcObserver.observe({ entryTypes: ['gc'] })
}

/** The garbage collections that began inside the `[start, end]` windows: how many, the longest
 * and their sum, in ms (a collection holds the JS thread: an event-loop delay as long as one
 * of them is V8's, not a call's). */
export function gcIn(windows) {
  const inside = pauses.filter(([at]) => windows.some(([s, e]) => at >= s && at <= e))
  return { count: inside.length, maxMs: round(Math.max(0, ...inside.map(([, ms]) => ms))), totalMs: round(inside.reduce((t, [, ms]) => t + ms, 0)) }
}

/** Lets the observer take the collections of the last moments (it hears of them a turn later). */
export const gcSettled = () => new Promise((r) => setTimeout(() => setImmediate(r), 1))

/** The resolution (ms) of every event-loop monitor of the harness. */
export const LOOP_RESOLUTION_MS = 1

/** The percentiles at which a stint of a monitor is read before its next one (`stintOf`): every
 * 1% up to 99, every 0.01% above. */
const STINT_GRID = [...Array.from({ length: 99 }, (_, i) => i + 1), ...Array.from({ length: 100 }, (_, i) => 99.01 + i * 0.01)]

/** What one stint of a monitor recorded: its count, its worst interval, and its distribution as
 * [interval, weight] at the percentiles of `STINT_GRID` (ns). */
function stintOf(h) {
  const bands = []
  let below = 0
  for (const p of STINT_GRID) {
    const at = Math.min(p, 100)
    bands.push([h.percentile(at), ((at - below) / 100) * h.count])
    below = at
  }
  return { count: h.count, max: h.max, bands }
}

/** The stints of a monitor as one histogram (`count`, `max`, `percentile(p)`, in ns). */
function merged(stints) {
  const bands = stints.flatMap((s) => s.bands).filter(([, w]) => w > 0).sort((a, b) => a[0] - b[0])
  const count = stints.reduce((n, s) => n + s.count, 0)
  return {
    count,
    max: Math.max(0, ...stints.map((s) => s.max)),
    percentile: (p) => {
      let seen = 0
      for (const [v, w] of bands) {
        seen += w
        if (seen >= (p / 100) * count - 1e-9) return v
      }
      return bands.length ? bands[bands.length - 1][0] : 0
    },
  }
}

/**
 * An event-loop monitor that also keeps the windows it was enabled in (for `gcIn`). It may be
 * enabled several times (`measureAlternating` turns each side's on only while its own calls
 * run): each stint starts from an empty histogram (Node's records, at the first firing after a
 * re-enable, the whole time it was off: 87 ms where the loop was held 1 ms, measured), and
 * `loopStats` reads the stints together (`merged`).
 */
export function loopMonitor() {
  watchGc()
  const h = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS })
  const { enable, disable } = h
  h.windows = []
  // the process's page faults and involuntary context switches while it was on (all threads)
  h.usage = { minorFaults: 0, majorFaults: 0, involuntarySwitches: 0 }
  const stints = []
  let from = null
  h.enable = () => {
    from = process.resourceUsage()
    h.windows.push([performance.now(), Infinity])
    h.reset()
    return enable.call(h)
  }
  h.disable = () => {
    const w = h.windows[h.windows.length - 1]
    if (w) w[1] = performance.now()
    if (from) {
      const to = process.resourceUsage()
      h.usage.minorFaults += to.minorPageFault - from.minorPageFault
      h.usage.majorFaults += to.majorPageFault - from.majorPageFault
      h.usage.involuntarySwitches += to.involuntaryContextSwitches - from.involuntaryContextSwitches
      from = null
    }
    const out = disable.call(h)
    if (h.count) stints.push(stintOf(h))
    return out
  }
  h.merged = () => merged(stints)
  return h
}

/**
 * What a loop monitor saw, in ms. `monitorEventLoopDelay` records the time between two firings
 * of its timer, the timer's own period included: an idle loop reads about 1.1 ms at a 1 ms
 * resolution. How late the timer fired (how long something held the loop) is that interval less
 * the resolution: `maxMs` and `p99Ms` are that delay; `interval` keeps the monitor's own figures.
 */
export function loopStats(monitor) {
  const costs = monitor.windows ? { gc: gcIn(monitor.windows), usage: monitor.usage } : {}
  const h = monitor.merged ? monitor.merged() : monitor
  if (!h.count) return { maxMs: null, p99Ms: null, samples: 0, interval: null, ...costs }
  const max = h.max / 1e6
  const p99 = h.percentile(99) / 1e6
  const late = (x) => round(Math.max(0, x - LOOP_RESOLUTION_MS))
  return { maxMs: late(max), p99Ms: late(p99), samples: h.count, interval: { maxMs: round(max), p99Ms: round(p99) }, ...costs }
}

export function pct(sorted, p) {
  if (!sorted.length) return null
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[idx]
}

/**
 * Times `fn(i)` `run.iters` times after its warm-up ([`warmUp`]; stopping after `run.capMs`
 * once `run.minIters` ran). An operation that fails is counted in `errors` with its time, and
 * the run goes on. The event loop gets one turn (setImmediate) between operations, outside the
 * timed window: a synchronous implementation would otherwise hold it for the whole loop, as no
 * caller would. Between the warm-up and the timed calls, `quiet()`: a `sync`, a full GC and its
 * background work's end.
 */
export async function measure(run, fn) {
  const side = newSide(fn)
  await warmUp(side, run)
  await quiet()
  const start = performance.now()
  side.h.enable()
  for (let i = 0; i < run.iters; i++) {
    await timedCall(side, i)
    if (i + 1 >= run.minIters && performance.now() - start > run.capMs) break
  }
  side.h.disable()
  await gcSettled()
  return summary(side)
}

/**
 * As [`measure`] for several functions side by side: after their warm-up calls, `rounds` rounds,
 * each making a share of `run.iters` calls of every function in turn (the order reversed every
 * other round), so that a slow phase of a shared machine falls on every side alike. Each
 * function's event-loop delay is sampled only while its own calls run. Answers one result per
 * function, in order.
 */
export async function measureAlternating(run, fns, rounds = 6) {
  const sides = fns.map(newSide)
  for (const side of sides) await warmUp(side, run)
  await quiet()
  const per = Math.max(1, Math.ceil(run.iters / rounds))
  const start = performance.now()
  let done = 0
  for (let r = 0; r < rounds && done < run.iters; r++) {
    for (const side of r % 2 ? [...sides].reverse() : sides) {
      side.h.enable()
      for (let i = done; i < Math.min(run.iters, done + per); i++) await timedCall(side, i)
      side.h.disable()
    }
    done += per
    if (done >= run.minIters && performance.now() - start > run.capMs * sides.length) break
  }
  await gcSettled()
  return sides.map(summary)
}

/** One timed function: its calls' times and failures, and its own loop monitor. */
export const newSide = (fn) => ({ fn, errors: 0, warmupErrors: 0, firstError: null, times: [], h: loopMonitor() })

/** Calls `side.fn(i)`; a failure is counted (the first one's message kept), never thrown. */
async function attempt(side, i) {
  try {
    await side.fn(i)
  } catch (err) {
    side.errors++
    side.firstError ??= String(err?.message ?? err).slice(0, 200)
  }
}

/**
 * Warm-up calls (`i` = -1, -2, …), their failures counted apart: at least `run.warmup`, then
 * more until `run.warmupMs` has passed since the first or `run.warmupMax` have run, so that a
 * call of a tenth of a millisecond is timed past V8's warm-up of the JS it runs (a listing's
 * calls 4 to 15 of a fresh process took 0.2–0.36 ms, later ones 0.1) and a call of seconds is
 * not made more often than before. Answers how many ran.
 */
export async function warmUp(side, run) {
  const start = performance.now()
  const most = Math.max(run.warmup, run.warmupMax ?? 0)
  let n = 0
  while (n < most && (n < run.warmup || performance.now() - start < (run.warmupMs ?? 0))) {
    await attempt(side, -1 - n)
    n++
  }
  side.warmupErrors = side.errors
  return n
}

/** One timed call, after a turn of the event loop outside the timed window. */
async function timedCall(side, i) {
  await new Promise((r) => setImmediate(r))
  const s = performance.now()
  await attempt(side, i)
  side.times.push(performance.now() - s)
}

function summary({ times, errors, warmupErrors, firstError, h }) {
  const sorted = [...times].sort((a, b) => a - b)
  return {
    n: times.length,
    ...(errors ? { errors: errors - warmupErrors, warmupErrors, firstError } : {}),
    medianMs: round(pct(sorted, 50)),
    p95Ms: round(pct(sorted, 95)),
    minMs: round(sorted[0]),
    maxMs: round(sorted[sorted.length - 1]),
    // no sample at all (the whole workload took less than the 1 ms resolution): reported as null
    eventLoop: loopStats(h),
  }
}
