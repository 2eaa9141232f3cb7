// Orchestration workloads (issue 5): only session-tools has them (the baselines are stores, not
// orchestrators), so they are reported against the absolute targets, not as ratios.
//   callback_roundtrip  one host callback (a threadsafe function called from the runtime, the
//                       JSON request in, the value or promise awaited), SessionTools.measureCallback
//   send_overhead       a waited sessions_send with a model that answers at once and no ping-pong:
//                       tool checks, run record, transcript appends, the wait, reply extraction
//   sends_1000          1,000 concurrent sessions_send with a model that answers in 5 ms: wall
//                       time, how many ended ok, and that every transcript holds its exchange
import { performance } from 'node:perf_hooks'
import { loopMonitor, loopStats, pct, round } from './measure.mjs'

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Starts a loop monitor; the function it answers stops it and says what it saw (`loopStats`). */
function elMonitor() {
  const h = loopMonitor()
  h.enable()
  return () => {
    h.disable()
    return loopStats(h)
  }
}

export async function orchestrationWorkloads({ SessionTools, quick, log }) {
  const rows = []

  // one JS callback round trip
  for (const [name, fn] of [
    ['callback_roundtrip (sync fn)', () => ({ ok: true })],
    ['callback_roundtrip (async fn)', async () => ({ ok: true })],
  ]) {
    await SessionTools.measureCallback(fn, 200) // warm-up
    const samples = []
    const stop = elMonitor()
    for (let i = 0; i < (quick ? 3 : 10); i++) samples.push((await SessionTools.measureCallback(fn, quick ? 500 : 5000)).perCallUs / 1000)
    const el = stop()
    samples.sort((a, b) => a - b)
    rows.push({ workload: name, medianMs: round(pct(samples, 50)), p95Ms: round(pct(samples, 95)), eventLoop: el, note: 'mean per call of each batch; median and p95 over batches' })
    log(`${name}: ${round(pct(samples, 50) * 1000)} µs`)
  }

  // sessions_send overhead, no ping-pong
  {
    const st = await SessionTools.open({
      path: ':memory:',
      config: { session: { agentToAgent: { maxPingPongTurns: 0 } } },
      runAgent: (req) => ({ reply: req.message.startsWith('Agent-to-agent announce') ? 'ANNOUNCE_SKIP' : 'pong' }),
    })
    const ctx = { agentSessionKey: 'agent:main:main' }
    const n = quick ? 30 : 300
    for (let i = 0; i < 10; i++) await st.sessionsSend({ sessionKey: `agent:main:warm-${i}`, message: 'ping', timeoutSeconds: 5 }, ctx)
    const times = []
    let ok = 0
    const stop = elMonitor()
    for (let i = 0; i < n; i++) {
      await new Promise((r) => setImmediate(r))
      const s = performance.now()
      const r = await st.sessionsSend({ sessionKey: `agent:main:t-${i}`, message: 'ping', timeoutSeconds: 5 }, ctx)
      times.push(performance.now() - s)
      if (r.status === 'ok' && r.reply === 'pong') ok++
    }
    const el = stop()
    times.sort((a, b) => a - b)
    rows.push({ workload: 'send_overhead', medianMs: round(pct(times, 50)), p95Ms: round(pct(times, 95)), eventLoop: el, ok, of: n, note: 'waited send, model answers at once, maxPingPongTurns 0; each to a fresh session (the announce step of the previous send runs in the background)' })
    log(`send_overhead: ${round(pct(times, 50))} ms median, ${ok}/${n} ok`)
    await st.close()
  }

  // 1,000 concurrent sends, 5 ms model
  {
    const st = await SessionTools.open({
      path: ':memory:',
      config: { session: { agentToAgent: { maxPingPongTurns: 0 } } },
      runAgent: async (req) => {
        await sleep(5)
        return { reply: req.message.startsWith('Agent-to-agent announce') ? 'ANNOUNCE_SKIP' : `re: ${req.message}` }
      },
    })
    const n = quick ? 200 : 1000
    const stop = elMonitor()
    const s = performance.now()
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) => st.sessionsSend({ sessionKey: `agent:main:c-${i}`, message: `m${i}`, timeoutSeconds: 30 }, { agentSessionKey: 'agent:main:main' })),
    )
    const wall = performance.now() - s
    const el = stop()
    const ok = results.filter((r, i) => r.status === 'ok' && r.reply === `re: m${i}`).length
    let intact = 0
    for (let i = 0; i < n; i++) {
      const h = await st.chatHistory(`agent:main:c-${i}`, { limit: 2 })
      if (h.messages.length === 2 || h.messages.length === 4) intact++
    }
    rows.push({ workload: `sends_${n}_concurrent`, medianMs: round(wall), p95Ms: null, eventLoop: el, ok, of: n, intact, note: `wall time for all ${n} (model 5 ms each)` })
    log(`sends_${n}_concurrent: ${round(wall)} ms wall, ${ok}/${n} ok, ${intact} transcripts intact`)
    await st.close()
  }
  return rows
}

export function orchestrationTable(rows) {
  const fmt = (x) => (x == null ? '-' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(3))
  const head = ['workload', 'median ms', 'p95 ms', 'ok', 'EL max', 'EL p99']
  const body = rows.map((r) => [r.workload, fmt(r.medianMs), fmt(r.p95Ms), r.of ? `${r.ok}/${r.of}` : '-', fmt(r.eventLoop.maxMs), fmt(r.eventLoop.p99Ms)])
  const w = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i].length)))
  const line = (r) => r.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ')
  return [line(head), w.map((n) => '-'.repeat(n)).join('  '), ...body.map(line)].join('\n')
}
