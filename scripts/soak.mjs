// `npm run soak [-- --iterations 200 --seconds 30 --cases 20000]`: the long reliability run of
// issue 6. A crash loop (workers SIGKILLed at random points mid-append, mid-run, mid-announce and
// mid-import, then the file checked and reopened), 4 processes × 2 stores contending for one file, and the
// property tests with many cases. Prints a summary table; exits 1 on any invariant violation.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { contention, crashLoop } from './soak/lib.mjs'

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : dflt
}
const iterations = arg('iterations', 200)
const seconds = arg('seconds', 30)
const cases = arg('cases', 20000)
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'st-soak-'))
const rows = []
let failed = false
const tick = (s) => process.stderr.isTTY && process.stderr.write(`\r${s.padEnd(70)}`)

const t0 = Date.now()
const crash = await crashLoop({ db: path.join(dir, 'crash.db'), iterations, log: tick })
rows.push(['crash loop (SIGKILL)', crash.iterations, crash.kills, `${crash.acked} acknowledged writes, ${crash.subagents} sub-agents, ${crash.yields} yields, ${crash.cancels} cancels`, crash.violations.length, Date.now() - t0])

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
tick('')

for (const v of [...crash.violations, ...cont.violations].slice(0, 50)) console.log(`violation: ${v}`)
console.log('\n| check | iterations | faults injected | inputs / work | invariant violations | time |')
console.log('| --- | ---: | ---: | --- | ---: | ---: |')
for (const [name, it, faults, work, viol, ms] of rows) {
  if (viol) failed = true
  console.log(`| ${name} | ${it} | ${faults} | ${work} | ${viol} | ${(ms / 1000).toFixed(0)} s |`)
}
fs.rmSync(dir, { recursive: true, force: true })
process.exit(failed ? 1 : 0)
