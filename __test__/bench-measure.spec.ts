// The bench's event-loop figures (bench/lib/measure.mjs): a monitor records the interval between
// two firings of its timer, period included; the bench reports how late the timer fired.
import v8 from 'node:v8'
import vm from 'node:vm'

import { describe, expect, it } from 'vitest'

import { gcSettled, LOOP_RESOLUTION_MS, loopMonitor, loopStats, newSide, warmUp } from '../bench/lib/measure.mjs'

/** A stand-in for an IntervalHistogram holding `ms` (nanoseconds inside, as Node's). */
function histogram(ms: number[]) {
  const sorted = [...ms].sort((a, b) => a - b)
  return {
    count: ms.length,
    max: Math.max(...ms) * 1e6,
    percentile: (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] * 1e6,
  }
}

describe('loopStats', () => {
  it('reports the delay as the recorded interval less the timer period, and keeps the interval', () => {
    expect(LOOP_RESOLUTION_MS).toBe(1)
    const intervals = [...Array(99).fill(1.1), 3.5]
    const s = loopStats(histogram(intervals))
    expect(s.samples).toBe(100)
    expect(s.maxMs).toBeCloseTo(2.5, 6)
    expect(s.p99Ms).toBeCloseTo(0.1, 6)
    expect(s.interval).toEqual({ maxMs: 3.5, p99Ms: 1.1 })
  })

  it('never reports a negative delay (a timer that fired early)', () => {
    const s = loopStats(histogram([0.97, 0.99]))
    expect(s.maxMs).toBe(0)
    expect(s.p99Ms).toBe(0)
  })

  it('reports nothing when the monitor took no sample', () => {
    expect(loopStats({ count: 0, max: 0, percentile: () => 0 })).toEqual({ maxMs: null, p99Ms: null, samples: 0, interval: null })
  })
})

describe('garbage collections while a monitor ran', () => {
  it('counts a collection made while the monitor was on, and none in a window that had none', async () => {
    v8.setFlagsFromString('--expose-gc')
    const gc = vm.runInNewContext('gc')
    const h = loopMonitor()
    h.enable()
    gc()
    h.disable()
    const quiet = loopMonitor()
    quiet.enable()
    quiet.disable()
    await gcSettled()
    const seen = loopStats(h).gc
    expect(seen.count).toBeGreaterThanOrEqual(1)
    expect(seen.maxMs).toBeGreaterThan(0)
    expect(seen.totalMs).toBeGreaterThanOrEqual(seen.maxMs)
    expect(loopStats(quiet).gc).toEqual({ count: 0, maxMs: 0, totalMs: 0 })
  })
})

describe('a monitor enabled in stints', () => {
  const wait = (ms: number) => new Promise((r) => setTimeout(r, ms))
  const spin = (ms: number) => {
    const end = Date.now() + ms
    while (Date.now() < end);
  }

  it('does not count the time it was off, which another side held', async () => {
    const h = loopMonitor()
    h.enable()
    await wait(30)
    h.disable()
    spin(150) // the other side of an alternating round, the monitor off
    h.enable()
    await wait(30)
    h.disable()
    const s = loopStats(h)
    expect(s.samples).toBeGreaterThan(20)
    expect(s.maxMs).toBeLessThan(100)
  })

  it('reads one stint as the histogram itself', async () => {
    const h = loopMonitor()
    h.enable()
    await wait(40)
    spin(5)
    await wait(20)
    h.disable()
    const s = loopStats(h)
    expect(s.samples).toBe(h.count)
    expect(s.interval).toEqual({ maxMs: Math.round(h.max / 1e3) / 1e3, p99Ms: Math.round(h.percentile(99) / 1e3) / 1e3 })
  })
})

describe('the warm-up', () => {
  const run = { warmup: 3, warmupMs: 60, warmupMax: 30 }

  it('runs quick calls up to its most, past its least', async () => {
    const seen: number[] = []
    const n = await warmUp(newSide((i: number) => seen.push(i)), run)
    expect(n).toBe(30)
    expect(seen).toEqual(Array.from({ length: 30 }, (_, k) => -1 - k))
  })

  it('runs slow calls only until its time has passed, and never fewer than its least', async () => {
    const slow = () => new Promise((r) => setTimeout(r, 25))
    expect(await warmUp(newSide(slow), run)).toBe(3)
    expect(await warmUp(newSide(slow), { ...run, warmupMs: 0 })).toBe(3)
    expect(await warmUp(newSide(() => new Promise((r) => setTimeout(r, 5))), run)).toBeLessThan(30)
  })

  it('counts failed warm-up calls apart and runs exactly its count without the time rule', async () => {
    const side = newSide(() => {
      throw new Error('no')
    })
    expect(await warmUp(side, { warmup: 4 })).toBe(4)
    expect(side.warmupErrors).toBe(4)
  })
})
