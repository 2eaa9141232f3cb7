// `node bench/import9.mjs [--sessions N] [--messages-per-session N] [--mirror] [--keep]`: times
// `importStateDir` of a 2026.9 state folder (SQLite) of 10,000 sessions and 1,000,000 messages
// (defaults: 2 agents, 100 messages per session).
//
// The folder is made at scale with our own writers of the gateway's tables: a 2026.1 folder
// (bench/lib/state-folder.mjs) is imported into a seed store, which is exported with
// `exportStateDir(dir, { layout: '2026.9' })` into a copy of the committed folder the real
// 2026.9.6 package initialised (__test__/fixtures/openclaw-2026.9/initialised: agents `main` and
// `research`). That the package reads such an export is what scripts/check-2026.9-export.mjs
// proves. Events are JSON (the gateway would store events of 1 KiB and more zstd-compressed;
// these are smaller). Then: a first import into a fresh file store, a second (idempotent) one.
// Prints the figures; never asserts on time. Build the release addon first (`npm run build`).
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { buildStateFolder, numberArg as arg } from './lib/state-folder.mjs'

const require = createRequire(import.meta.url)
const { SessionTools } = require(process.env.ADDON ?? '../index.js')

const SESSIONS = arg('--sessions', 10_000)
const PER_SESSION = arg('--messages-per-session', 100)
const AGENTS = ['main', 'research']
const INITIALISED = fileURLToPath(new URL('../__test__/fixtures/openclaw-2026.9/initialised', import.meta.url))

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'st-import9-bench-'))
const mb = (b) => `${(b / 1024 / 1024).toFixed(1)} MiB`
const s = (ms) => `${(ms / 1000).toFixed(2)} s`
const sizeOf = (dir) =>
  (fs.readdirSync(dir, { recursive: true })).reduce((n, rel) => {
    const st = fs.statSync(path.join(dir, rel))
    return st.isFile() ? n + st.size : n
  }, 0)

// ---- make the 2026.9 folder ----------------------------------------------------------------
let t = performance.now()
const legacy = path.join(root, 'legacy')
buildStateFolder(legacy, { sessions: SESSIONS, perSession: PER_SESSION, agents: AGENTS })
const seed = await SessionTools.open({ path: path.join(root, 'seed.db'), mirrorDir: null })
await seed.importStateDir(legacy)
const state = path.join(root, 'state')
fs.cpSync(INITIALISED, state, { recursive: true })
const made = await seed.exportStateDir(state, { layout: '2026.9' })
await seed.close()
fs.rmSync(legacy, { recursive: true, force: true })
console.log(`2026.9 folder: ${made.sessions} sessions, ${made.messages} messages, ${mb(sizeOf(state))} (made in ${s(performance.now() - t)})`)

// ---- the import ----------------------------------------------------------------------------
const mirror = process.argv.includes('--mirror')
const st = await SessionTools.open({ path: path.join(root, 'sessions.db'), ...(mirror ? {} : { mirrorDir: null }) })
console.log(`mirror: ${mirror ? 'on' : 'off'}`)
t = performance.now()
const first = await st.importStateDir(state)
const importMs = performance.now() - t
console.log(`import:        ${s(importMs)}  (${first.sessions} sessions, ${first.messages} messages, ${first.skipped.length} skipped; ${Math.round(first.messages / (importMs / 1000))} messages/s)`)
t = performance.now()
const second = await st.importStateDir(state)
console.log(`second import: ${s(performance.now() - t)}  (adds ${second.sessions} sessions, ${second.messages} messages)`)
const stats = await st.stats()
console.log(`store:         ${mb(stats.dbBytes)} for ${stats.sessions} sessions, ${stats.messages} messages`)
await st.close()

if (!process.argv.includes('--keep')) fs.rmSync(root, { recursive: true, force: true })
else console.log(`kept: ${root}`)
