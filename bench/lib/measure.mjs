// Timing shared by the harness and its child processes: medians over many calls, with the
// event-loop delay sampled while they run. Nothing here asserts on timing.
import { monitorEventLoopDelay, performance } from 'node:perf_hooks'

export const round = (x) => (x == null || !Number.isFinite(x) ? null : Math.round(x * 1000) / 1000)

export function pct(sorted, p) {
  if (!sorted.length) return null
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[idx]
}

/**
 * Times `fn(i)` `run.iters` times after `run.warmup` warm-up calls (stopping after `run.capMs`
 * once `run.minIters` ran). An operation that fails is counted in `errors` with its time, and
 * the run goes on. The event loop gets one turn (setImmediate) between operations, outside the
 * timed window: a synchronous implementation would otherwise hold it for the whole loop, as no
 * caller would.
 */
export async function measure(run, fn) {
  let errors = 0
  let firstError = null
  const attempt = async (i) => {
    try {
      await fn(i)
    } catch (err) {
      errors++
      firstError ??= String(err?.message ?? err).slice(0, 200)
    }
  }
  for (let i = 0; i < run.warmup; i++) await attempt(-1 - i)
  const warmupErrors = errors
  globalThis.gc?.()
  const h = monitorEventLoopDelay({ resolution: 1 })
  const times = []
  const start = performance.now()
  h.enable()
  for (let i = 0; i < run.iters; i++) {
    await new Promise((r) => setImmediate(r))
    const s = performance.now()
    await attempt(i)
    times.push(performance.now() - s)
    if (i + 1 >= run.minIters && performance.now() - start > run.capMs) break
  }
  h.disable()
  const sorted = [...times].sort((a, b) => a - b)
  return {
    n: times.length,
    ...(errors ? { errors: errors - warmupErrors, warmupErrors, firstError } : {}),
    medianMs: round(pct(sorted, 50)),
    p95Ms: round(pct(sorted, 95)),
    minMs: round(sorted[0]),
    maxMs: round(sorted[sorted.length - 1]),
    // no sample at all (the whole workload took less than the 1 ms resolution): reported as null
    eventLoop: h.count ? { maxMs: round(h.max / 1e6), p99Ms: round(h.percentile(99) / 1e6), samples: h.count } : { maxMs: null, p99Ms: null, samples: 0 },
  }
}
