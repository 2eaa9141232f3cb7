// Two gateways on one store, one of them SIGKILLed again and again (issue 16, item 5): gateway
// A (the survivor) runs the whole time; gateway B is started, killed at a random point
// mid-append, mid-run, mid-announce or mid-import, and started again, `kills` times. Each runs
// in a pid namespace of its own (gateway.mjs), so it has a host id of its own and B's work is
// taken over by A when B's lease expires, as across machines. After each kill the harness waits
// for that takeover (A reaps B's lease, ends B's runs, announces B's interrupted children)
// before B starts again, so the survivor is the only taker. On PostgreSQL the server is also
// restarted once under both (restart.mjs). Checked:
// - no acknowledged write lost: every B instance's writes after its kill, A's at the end;
// - no announce twice: an announce key is attempted again only when its earlier attempt was cut
//   off (by a kill of its gateway, or by the server restart) before its end was recorded;
// - every interrupted run ended (none still running once its owner's lease expired) and every
//   interrupted sub-agent announced once, by the survivor;
// - at the end everything settled (checkSettled), and the killed imports complete exactly once.
// Works on a SQLite file as on a PostgreSQL URL (`db`).
import fs from 'node:fs'
import path from 'node:path'

import { startGateway } from './gateway.mjs'
import { acksOf, checkAcked, checkImported, checkSettled, inspect, isPg, stateFolder, storeEnv } from './lib.mjs'
import { serverRestart } from './restart.mjs'

const INTERRUPTED = 'interrupted: the process stopped before the run finished'
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const SURVIVOR = 'A'

/** `p`, or null after `ms`. */
const within = (p, ms) => Promise.race([p, sleep(ms).then(() => null)])

/** Polls `test` every 50 ms for up to `ms`: whether it held. */
async function until(test, ms) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (test()) return true
    await sleep(50)
  }
  return test()
}

/** A JSON scalar: SQLite hands it over as text, psql's reader already parsed. */
const json = (v) => (typeof v === 'string' ? JSON.parse(v) : v)
const median = (xs) => (xs.length ? [...xs].sort((a, b) => a - b)[xs.length >> 1] : null)

/**
 * Runs the two-gateway kill loop on `db` (a SQLite file or a PostgreSQL URL), with scratch
 * files under `dir`. `leaseMs` is the gateways' lease (a takeover waits for it); the survivor's is
 * `survivorLeaseMs` when given (its heartbeat, a third of it, paces the takeovers); with a server
 * restart, the survivor and the victim alive during it hold `restartLeaseMs` (longer than the
 * server is down plus two heartbeats, so no live gateway's lease lapses). `cluster` (pg-cluster.mjs) enables the server restart, at
 * kill `restartAt`. Returns the figures and the violations.
 */
export async function twoHosts({ db, dir, kills, leaseMs = 5_000, survivorLeaseMs: survivorLease = leaseMs, restartLeaseMs = 20_000, cluster = null, restartAt = kills >> 1, downMs = 1_000, log = () => {} }) {
  const violations = []
  const stateDir = stateFolder(dir)
  const env = (id, mode, lease) => ({
    ...storeEnv(db),
    SOAK_MODE: mode,
    SOAK_ID: id,
    SOAK_LEASE_MS: String(lease),
    SOAK_RIDE_OUT: cluster ? '1' : '0',
    SOAK_STATE_DIR: stateDir,
  })
  const q = (sqlite, pg) => (isPg(db) ? pg : sqlite)
  const gateways = new Map() // name → handle, in start order
  // the survivor's heartbeat (a third of its lease) paces the takeovers: its lease is the long
  // one only when the server will be restarted under it
  const survivorLeaseMs = cluster ? restartLeaseMs : survivorLease
  const survivor = startGateway({ ...env(SURVIVOR, 'crash', survivorLeaseMs), SOAK_CONTROL: '1' })
  gateways.set(SURVIVOR, survivor)
  if (!(await within(survivor.ready, 60_000))) {
    survivor.kill()
    return { violations: [`the survivor did not open: ${survivor.lines.slice(-3).join(' | ')}`] }
  }
  const killed = new Set()
  const takeoverMs = []
  let acked = 0
  let lost = 0
  let imports = 0
  let restart = null
  const windows = new Map() // gateway name → [from, to) line indexes of the restart
  for (let i = 0; i < kills; i++) {
    const name = `B${i}`
    const mode = i % 4 === 3 ? 'import' : 'crash'
    const restarting = cluster && i === restartAt
    const gw = startGateway(env(name, mode, restarting ? restartLeaseMs : leaseMs))
    gateways.set(name, gw)
    const hostId = await within(gw.ready, 60_000)
    if (!hostId) {
      violations.push(`${name} did not open: ${gw.lines.slice(-3).join(' | ')}`)
      await gw.kill()
      continue
    }
    if (restarting) {
      restart = await serverRestart({ cluster, gateways: [survivor, gw], downMs, log })
      violations.push(...restart.violations)
      windows.set(SURVIVOR, [restart.marks[0], restart.ends[0]])
      windows.set(name, [restart.marks[1], restart.ends[1]])
      // nothing the survivor had acknowledged so far is lost
      const c = checkAcked(db, acksOf(survivor.lines), 'after the server restart, the survivor')
      violations.push(...c.violations)
    }
    const killAfter = 20 + Math.floor(Math.random() * 1_200)
    await sleep(killAfter)
    const t = Date.now()
    await gw.kill()
    killed.add(name)
    if (mode === 'import') imports++
    // taken over by the survivor: B's lease reaped and its runs ended, in one write, and its
    // children's records ended (before B starts again, so the survivor is the taker; their announces are checked at the end: the
    // default queue mode holds an announce while its requester is busy)
    const hid = hostId.replace(/'/g, "''")
    let left = null
    const taken = await until(() => {
      const s = (left = inspect(db, {
        scalars: {
          owners: `SELECT count(*) FROM owners WHERE host_id = '${hid}'`,
          unheld: "SELECT count(*) FROM runs WHERE status = 'running' AND owner NOT IN (SELECT owner_id FROM owners)",
          // B's children whose run the takeover ended, their records not yet ended by A
          orphans: "SELECT count(*) FROM subagent_runs s JOIN runs r ON r.run_id = s.run_id WHERE s.ended = 0 AND r.status <> 'running'",
        },
      }).scalars)
      return s.owners === 0 && s.unheld === 0 && s.orphans === 0
    }, (restarting ? restartLeaseMs : leaseMs) * 3 + 15_000)
    if (taken) takeoverMs.push(Date.now() - t)
    else violations.push(`${name}: its work was not taken over within the wait: ${JSON.stringify(left)} (its leases, runs without a live owner)`)
    const a = acksOf(gw.lines)
    for (const e of a.errors) violations.push(`${name}: ${e}`)
    const c = checkAcked(db, a, name)
    violations.push(...c.violations)
    acked += c.acked + a.runs
    lost += c.lost
    log(`kill ${i + 1}/${kills} (${mode}): killed ${killAfter} ms after it opened, taken over in ${taken ? Date.now() - t : '-'} ms`)
  }

  // the survivor makes no new work and lets its runs and announces drain, then closes
  survivor.send('stop')
  const settled = await until(() => {
    const s = inspect(db, {
      scalars: {
        pending: "SELECT count(*) FROM outbox WHERE status = 'pending'",
        running: "SELECT count(*) FROM runs WHERE status = 'running'",
        waiting: "SELECT count(*) FROM yields WHERE status <> 'resumed'",
      },
    }).scalars
    return s.pending === 0 && s.running === 0 && s.waiting === 0
  }, 60_000)
  if (!settled) violations.push('runs, announces or yields did not settle at the end')
  survivor.send('close')
  const exit = await within(survivor.exited, 30_000)
  if (!exit || exit.code !== 0) violations.push(`the survivor did not close cleanly (${exit ? exit.code ?? exit.signal : 'still running'}): ${survivor.lines.slice(-2).join(' | ')}`)
  const sa = acksOf(survivor.lines)
  for (const e of sa.errors) violations.push(`${SURVIVOR}: ${e}`)
  const c = checkAcked(db, sa, 'the survivor')
  violations.push(...c.violations)
  acked += c.acked + sa.runs
  lost += c.lost
  if (imports) violations.push(...(await checkImported(db, stateDir)))
  const all = [...gateways.values()].map((g) => acksOf(g.lines))
  const end = checkSettled(db, { yielded: all.flatMap((a) => a.yields), cancelled: all.flatMap((a) => a.cancels) })
  violations.push(...end.violations)

  // announces: who attempted each key, and whether an earlier attempt had recorded its end
  const subagentKeys = new Map(
    json(
      inspect(db, {
        scalars: {
          keys: q(
            "SELECT json_group_array(json_array(run_id, json_extract(record, '$.announce.idempotencyKey'))) FROM subagent_runs",
            "SELECT coalesce(jsonb_agg(jsonb_build_array(run_id, record::jsonb #>> '{announce,idempotencyKey}')), '[]') FROM subagent_runs",
          ),
        },
      }).scalars.keys,
    ),
  )
  const interrupted = json(
    inspect(db, {
      scalars: {
        runs: q(
          `SELECT json_group_array(json_array(run_id, lane)) FROM runs WHERE error = '${INTERRUPTED}'`,
          `SELECT coalesce(jsonb_agg(jsonb_build_array(run_id, lane)), '[]') FROM runs WHERE error = '${INTERRUPTED}'`,
        ),
      },
    }).scalars.runs,
  )
  // each gateway's lines, for a post-mortem (the caller keeps `dir` when something failed)
  for (const [name, g] of gateways) fs.writeFileSync(path.join(dir, `${name}.log`), g.lines.join('\n') + '\n')
  const attempts = new Map() // key → [{ name, restart }]
  const done = new Map() // key → the gateways that reported its end recorded
  for (const [name, g] of gateways) {
    const [from, to] = windows.get(name) ?? [-1, -1]
    g.lines.forEach((l, idx) => {
      const p = l.split(' ')
      if (p[0] === 'ANN') {
        if (!attempts.has(p[1])) attempts.set(p[1], [])
        attempts.get(p[1]).push({ name, at: Number(p[2]) || 0, restart: idx >= from && idx < to })
      } else if (p[0] === 'EVT' && (p[1] === 'subagent.announced' || p[1] === 'delivery.sent')) {
        const key = p[1] === 'delivery.sent' ? p[3] : subagentKeys.get(p[2])
        if (key) done.set(key, [...(done.get(key) ?? []), name])
      } else if (p[0] === 'EVT' && p[1] === 'store.error' && !(idx >= from && idx < to)) {
        violations.push(`${name}: store.error outside the server restart: ${p.slice(4).join(' ')}`)
      }
    })
  }
  let reattemptedAfterKill = 0
  let reattemptedAfterRestart = 0
  let duplicates = 0
  for (const [key, list] of attempts) {
    // in the order they began (the gateways' lines are read one gateway after another)
    list.sort((x, y) => x.at - y.at)
    if ((done.get(key) ?? []).length > 1) {
      duplicates++
      violations.push(`announce ${key} (attempted by ${list.map((x) => x.name).join(', ')}) reported done by ${done.get(key).join(', ')}`)
      continue
    }
    for (const [k, at] of list.slice(0, -1).entries()) {
      // an earlier attempt may be repeated only when it was cut off before its end was recorded
      if (killed.has(at.name) && !list.slice(k + 1).some((x) => x.name === at.name)) reattemptedAfterKill++
      else if (at.restart) reattemptedAfterRestart++
      else {
        duplicates++
        violations.push(`announce ${key} attempted again after an attempt by ${at.name} that was not cut off (${list.map((x) => x.name).join(', ')})`)
      }
    }
  }
  // every interrupted sub-agent run announced (checkSettled: none pending), once, by the
  // survivor: no attempt under its key by anyone else (none at all when the default queue mode
  // collected it into one announce run with others, under another key)
  let interruptedChildren = 0
  for (const [runId, lane] of interrupted) {
    if (lane !== 'subagent' || !subagentKeys.has(runId)) continue
    interruptedChildren++
    const list = attempts.get(subagentKeys.get(runId)) ?? []
    if (list.length > 1 || list.some((x) => x.name !== SURVIVOR)) violations.push(`interrupted child ${runId} announced by [${list.map((x) => x.name).join(', ')}], not once by the survivor`)
  }
  return {
    kills: killed.size,
    acked,
    lost,
    announces: attempts.size,
    attempts: [...attempts.values()].reduce((n, l) => n + l.length, 0),
    reattemptedAfterKill,
    reattemptedAfterRestart,
    duplicates,
    interruptedRuns: interrupted.length,
    interruptedChildren,
    subagents: end.subagents,
    leaseMs,
    survivorLeaseMs,
    takeoverMedianMs: median(takeoverMs),
    takeoverMaxMs: takeoverMs.length ? Math.max(...takeoverMs) : null,
    restart,
    violations,
  }
}
