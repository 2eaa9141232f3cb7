// `npm run fuzz [-- --cases N]`: the property tests of src/fuzz_test.rs (keys, send-policy rules,
// allow-list globs, config, host results, tool params and contexts, store arguments, and the
// state-folder importers) with many more generated inputs than `npm test` runs. Prints one
// summary line; exits non-zero on any failure (proptest prints the minimal failing input, to be
// turned into a regression test).
import { spawnSync } from 'node:child_process'

const i = process.argv.indexOf('--cases')
const cases = i > 0 ? Number(process.argv[i + 1]) : 20000
const started = Date.now()
const r = spawnSync(
  'cargo',
  ['test', '--target', 'x86_64-unknown-linux-gnu', '--lib', 'fuzz_test', '--', '--test-threads', '2'],
  { env: { ...process.env, PROPTEST_CASES: String(cases) }, encoding: 'utf8' },
)
const out = `${r.stdout}\n${r.stderr}`
const m = out.match(/test result: \w+\. (\d+) passed; (\d+) failed/)
if (!m) {
  console.log(out)
  process.exit(1)
}
const [passed, failed] = [Number(m[1]), Number(m[2])]
if (failed) console.log(out)
console.log(`fuzz: ${passed + failed} properties × ${cases} cases (${(passed + failed) * cases} inputs) in ${((Date.now() - started) / 1000).toFixed(0)} s; ${failed} failed`)
process.exit(failed ? 1 : 0)
