// The side-by-side harness of the focused benches (reads.mjs, writers.mjs): options, the addon
// to load, the seeded stores kept in a data folder (so two builds run on the same files, one
// process each), and the comparison of sides in interleaved rounds. Nothing here asserts timing.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { SqliteStore } from './sqlite-baseline.mjs'
import { makeEntry } from './data.mjs'
import { seedSessions } from './seed.mjs'

const BENCH_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

/** `--name value` of the command line, else `def`. */
export function option(name, def) {
  const argv = process.argv.slice(2)
  const i = argv.indexOf(name)
  return i >= 0 && argv[i + 1] ? argv[i + 1] : def
}

/** The addon (`ADDON`, else ../index.js; `NAPI_RS_NATIVE_LIBRARY_PATH` picks the native file). */
export function loadAddon() {
  const addon = process.env.ADDON ? path.resolve(process.env.ADDON) : path.resolve(BENCH_DIR, '../index.js')
  return createRequire(import.meta.url)(addon)
}

/** The data folder: `--data <dir>` (kept), else a temp folder named `prefix…` (removed by `done`). */
export function dataFolder(prefix) {
  const keep = process.argv.includes('--data')
  const dir = path.resolve(option('--data', fs.mkdtempSync(path.join(os.tmpdir(), prefix))))
  return { dir, done: () => keep || fs.rmSync(dir, { recursive: true, force: true }) }
}

export const tick = () => new Promise((r) => setImmediate(r))
export const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]

/** Our store at `file`, seeded with `size` generated sessions when the file is new. */
export async function seedOurs(SessionTools, file, size) {
  const fresh = !fs.existsSync(file)
  const st = await SessionTools.open({ path: file })
  if (fresh) await seedSessions(st, 0, size)
  return st
}

/** The better-sqlite3 baseline at `file`, seeded likewise when the file is new. */
export function seedSqlite(file, size) {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  const fresh = !fs.existsSync(file)
  const sq = new SqliteStore(file)
  const items = []
  for (let j = 0; fresh && j < size; j++) {
    const { key, entry } = makeEntry(j)
    const { updatedAt, ...patch } = entry
    items.push({ key, patch })
  }
  for (let i = 0; i < items.length; i += 500) sq.seed(items.slice(i, i + 500))
  return sq
}

/**
 * Each side (`{ name, fn(n), pre?() }`, one named `sqlite`) makes `per` calls a round, `rounds`
 * rounds, the order reversed every other round, after 50 warm-up calls each; prints the medians
 * (wall and process CPU per call) and the ratios to sqlite, and answers each side's median (ms).
 */
export async function compare(label, sides, { rounds, per }) {
  for (const s of sides) for (let i = 0; i < 50; i++) await s.fn(i)
  const all = Object.fromEntries(sides.map((s) => [s.name, { times: [], cpu: [] }]))
  let n = 0
  for (let r = 0; r < rounds; r++) {
    for (const s of r % 2 ? [...sides].reverse() : sides) {
      globalThis.gc?.()
      const c0 = process.cpuUsage()
      for (let i = 0; i < per; i++) {
        await tick()
        s.pre?.()
        const t = performance.now()
        await s.fn(n++)
        all[s.name].times.push(performance.now() - t)
      }
      const c = process.cpuUsage(c0)
      all[s.name].cpu.push((c.user + c.system) / per)
    }
  }
  const ref = median(all.sqlite.times)
  const out = {}
  const cells = sides.map((s) => {
    const m = median(all[s.name].times)
    out[s.name] = m
    const ratio = s.name === 'sqlite' ? '' : ` (sqlite/this ${(ref / m).toFixed(2)})`
    return `${s.name} ${(m * 1000).toFixed(0)} µs, cpu ${median(all[s.name].cpu).toFixed(0)} µs${ratio}`
  })
  console.log(`${label}: ${cells.join(' | ')}`)
  return out
}
