// `npm run soak [-- --iterations 200 --seconds 30 --cases 20000 --kills 50]`: the long reliability
// run of issues 6 and 16. A crash loop (workers SIGKILLed at random points mid-append, mid-run,
// mid-announce and mid-import, then the file checked and reopened), two gateways on one file as on
// two hosts with one of them SIGKILLed `--kills` times (scripts/soak/hosts.mjs), 4 processes ×
// 2 stores contending for one file, and the property tests with many cases.
// `--postgres` (`npm run soak:pg`): the same on a throwaway PostgreSQL cluster (fsync on) started
// here: the two gateways with the server restarted once under them, and the contention run.
// Prints a summary table; exits 1 on any invariant violation.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { startCluster } from './lib/pg-cluster.mjs'
import { twoHosts } from './soak/hosts.mjs'
import { separateHosts } from './soak/gateway.mjs'
import { contention, crashLoop } from './soak/lib.mjs'

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : dflt
}
const iterations = arg('iterations', 200)
const seconds = arg('seconds', 30)
const cases = arg('cases', 20000)
const kills = arg('kills', 50)
const postgres = process.argv.includes('--postgres')
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'st-soak-'))
const rows = []
const figures = []
const violations = []
let failed = false
const tick = (s) => process.stderr.isTTY && process.stderr.write(`\r${s.padEnd(90)}`)

/** The two-gateway row and its figures. */
async function hostsRow(db, cluster) {
  const t = Date.now()
  const h = await twoHosts({ db, dir, kills, cluster, log: tick })
  violations.push(...h.violations)
  const where = separateHosts() ? 'each in its own pid namespace (own host id)' : 'same host id (unshare unavailable: pid shortcut, not lease expiry)'
  rows.push([`2 gateways, 1 SIGKILLed (${where})`, kills, h.kills ?? 0, `${h.acked} acknowledged writes, ${h.announces} announces`, h.violations.length, Date.now() - t])
  figures.push(
    ['kills', h.kills],
    ['writes acknowledged', h.acked],
    ['acknowledged writes lost', h.lost],
    ['announces (distinct keys) / attempts', `${h.announces} / ${h.attempts}`],
    ['announces attempted again after a kill cut the attempt off (same key)', h.reattemptedAfterKill],
    ['announces attempted again after the server restart cut the attempt off (same key)', h.reattemptedAfterRestart],
    ['duplicate announces', h.duplicates],
    ['runs interrupted by the kills / of them sub-agents, each announced once by the survivor', `${h.interruptedRuns} / ${h.interruptedChildren}`],
    [`takeover after a kill (victim's lease ${h.leaseMs / 1000} s; the survivor looks every ${(h.survivorLeaseMs / 3000).toFixed(1)} s), median / max`, `${h.takeoverMedianMs} / ${h.takeoverMaxMs} ms`],
  )
  if (h.restart) {
    const r = h.restart
    figures.push(
      ['server restart: down (stop -m immediate to started again) / pg_ctl start', `${r.downMs} / ${r.startMs} ms`],
      ['calls failed with STORE_ERROR while down (both gateways)', r.storeErrors],
      ['recovery: first successful call after the server was up, per gateway', r.recoveryMs.map((x) => `${x} ms`).join(', ')],
    )
  }
}

if (postgres) {
  const cluster = startCluster({ port: 5433 + (process.pid % 1000), durable: true })
  process.on('exit', () => cluster.stop())
  try {
    const url = `${cluster.url}&schema=soak`
    await hostsRow(url, cluster)
    const t1 = Date.now()
    tick(`contention on PostgreSQL: 4 processes × 2 stores for ${seconds} s…`)
    const cont = await contention({ db: `${cluster.url}&schema=contention`, procs: 4, seconds })
    violations.push(...cont.violations)
    rows.push(['contention 4 proc × 2 stores (PostgreSQL)', 1, 0, `${cont.writes} acknowledged writes`, cont.violations.length, Date.now() - t1])
    // a failed run keeps the database too
    if (violations.length) spawnSync('pg_dump', ['-h', cluster.dir, '-p', new URL(cluster.url).port, '-U', 'postgres', '-f', path.join(dir, 'postgres.sql'), 'postgres'])
  } finally {
    cluster.stop()
  }
  report()
}

const t0 = Date.now()
const crash = await crashLoop({ db: path.join(dir, 'crash.db'), iterations, log: tick })
rows.push(['crash loop (SIGKILL)', crash.iterations, crash.kills, `${crash.acked} acknowledged writes, ${crash.subagents} sub-agents, ${crash.yields} yields, ${crash.cancels} cancels`, crash.violations.length, Date.now() - t0])

await hostsRow(path.join(dir, 'hosts.db'), null)

const t1 = Date.now()
tick(`contention: 4 processes × 2 stores for ${seconds} s…`)
const cont = await contention({ db: path.join(dir, 'contention.db'), procs: 4, seconds })
rows.push(['contention 4 proc × 2 stores', 1, 0, `${cont.writes} acknowledged writes`, cont.violations.length, Date.now() - t1])

const t2 = Date.now()
tick(`fuzz: ${cases} cases per property…`)
const fz = spawnSync(process.execPath, [path.join(path.dirname(new URL(import.meta.url).pathname), 'fuzz.mjs'), '--cases', String(cases)], { encoding: 'utf8' })
const m = fz.stdout.match(/fuzz: (\d+) properties × (\d+) cases \((\d+) inputs\).*; (\d+) failed/)
rows.push(['property tests (fuzz)', m ? Number(m[1]) : 0, 0, `${m ? m[3] : '?'} inputs`, m ? Number(m[4]) : 1, Date.now() - t2])
if (!m || Number(m[4])) console.log(fz.stdout, fz.stderr)
violations.push(...crash.violations, ...cont.violations)
report()

function report() {
  tick('')
  failed ||= violations.length > 0
  for (const v of violations.slice(0, 50)) console.log(`violation: ${v}`)
  console.log('\n| check | iterations | faults injected | inputs / work | invariant violations | time |')
  console.log('| --- | ---: | ---: | --- | ---: | ---: |')
  for (const [name, it, faults, work, viol, ms] of rows) {
    if (viol) failed = true
    console.log(`| ${name} | ${it} | ${faults} | ${work} | ${viol} | ${(ms / 1000).toFixed(0)} s |`)
  }
  console.log(`\nTwo gateways${postgres ? ' on PostgreSQL' : ' on one SQLite file'}:\n`)
  for (const [what, value] of figures) console.log(`- ${what}: ${value}`)
  // a failed run keeps its files (the stores, each gateway's lines) for a post-mortem
  if (failed) console.log(`\nkept for a post-mortem: ${dir}`)
  else fs.rmSync(dir, { recursive: true, force: true })
  process.exit(failed ? 1 : 0)
}
