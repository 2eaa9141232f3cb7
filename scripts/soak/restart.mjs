// The PostgreSQL server restarted under running gateways (issue 16, item 5): the server is
// stopped at once (`pg_ctl stop -m immediate`, the way a crash or a failover looks to a client),
// kept down for a while, and started again. While it is down, every call the gateways make must
// fail with STORE_ERROR (the workers, started with SOAK_RIDE_OUT=1, print DOWN lines and try
// again every 25 ms; any other failure ends them with an ERR line); once it is back, each must
// reconnect by itself (an UP line) with nothing acknowledged lost (checked by the caller, which
// reads the store afterwards). Returns the figures and the violations.
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Waits until `test(line)` holds for a line of `gw` after index `from`; that line, or null. */
async function waitLine(gw, from, test, ms) {
  const end = Date.now() + ms
  for (;;) {
    const hit = gw.lines.slice(from).find(test)
    if (hit) return hit
    if (Date.now() > end) return null
    await sleep(5)
  }
}

/**
 * Restarts `cluster` (from pg-cluster.mjs) under `gateways` (from gateway.mjs), keeping it down
 * `downMs`. `{ downMs, startMs, storeErrors, recoveryMs: [per gateway], marks, violations }`:
 * `marks[k]` is the index of gateway k's first line from 1 s before the server was stopped, `ends[k]` the index
 * 2 s after its recovery (announce attempts in between may be retried: the caller allows for it).
 */
export async function serverRestart({ cluster, gateways, downMs = 1_000, log = () => {} }) {
  const violations = []
  // the window of lines the restart may have cut into starts 1 s before the server goes (an
  // announce attempt begun then may not get its end recorded)
  const marks = gateways.map((g) => g.lines.length)
  await sleep(1_000)
  log(`restarting the PostgreSQL server under ${gateways.length} gateways…`)
  const t0 = Date.now()
  if (!cluster.halt('immediate')) violations.push('the server did not stop')
  await sleep(downMs)
  // each gateway has noticed: a call failed, with STORE_ERROR (any other code ends the worker)
  const down = await Promise.all(gateways.map((g, k) => waitLine(g, marks[k], (l) => l.startsWith('DOWN ') || l.startsWith('ERR '), 10_000)))
  down.forEach((l, k) => {
    if (!l) violations.push(`gateway ${k}: no call failed while the server was down`)
    else if (!l.startsWith('DOWN STORE_ERROR ')) violations.push(`gateway ${k}: a call failed otherwise than with STORE_ERROR: ${l}`)
  })
  const tStart = Date.now()
  if (!cluster.start()) violations.push('the server did not start again')
  const tUp = Date.now()
  // each gateway reconnects by itself: its next call succeeds (UP <at>)
  const up = await Promise.all(gateways.map((g, k) => waitLine(g, marks[k], (l) => l.startsWith('UP ') || l.startsWith('ERR '), 60_000)))
  const recoveryMs = up.map((l, k) => {
    if (!l || !l.startsWith('UP ')) {
      violations.push(`gateway ${k}: did not reconnect after the restart${l ? `: ${l}` : ''}`)
      return null
    }
    return Number(l.split(' ')[1]) - tUp
  })
  // what was under way when the server went (an announce attempt whose end could not be
  // recorded, a heartbeat) settles in the next moments: the caller's allowance window ends here
  await sleep(2_000)
  const storeErrors = gateways.reduce((n, g, k) => n + g.lines.slice(marks[k]).filter((l) => l.startsWith('DOWN ')).length, 0)
  return { downMs: tUp - t0, startMs: tUp - tStart, storeErrors, recoveryMs, marks, ends: gateways.map((g) => g.lines.length), violations }
}
