// `node bench/import.mjs [--sessions N] [--messages-per-session N] [--mirror] [--keep] [--url URL]`: builds
// a gateway state folder in a temp dir (default 10,000 sessions over 4 agents, 100 messages each =
// 1,000,000 messages, v3 transcripts), then times `importStateDir` into a fresh file store (with
// `--url postgres://…`: a PostgreSQL store, whose URL should name a new `schema=`), a second
// (idempotent) import and an `exportStateDir`. `--mirror` keeps the default JSONL mirror on
// (every imported message is also written to `transcripts/`); by default it is off. Prints the
// figures; never asserts on time.
//
// Build the release addon first (`npm run build`), or point NAPI_RS_NATIVE_LIBRARY_PATH at a
// release `.node` file. Only Node built-ins.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { buildStateFolder, numberArg as arg } from './lib/state-folder.mjs'

const require = createRequire(import.meta.url)
const { SessionTools } = require(process.env.ADDON ?? '../index.js')

const SESSIONS = arg('--sessions', 10_000)
const PER_SESSION = arg('--messages-per-session', 100)
const AGENTS = ['main', 'ops', 'research', 'support']

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'st-import-bench-'))
const stateDir = path.join(root, 'state')

function build() {
  return buildStateFolder(stateDir, { sessions: SESSIONS, perSession: PER_SESSION, agents: AGENTS })
}

const mb = (b) => `${(b / 1024 / 1024).toFixed(1)} MiB`
const s = (ms) => `${(ms / 1000).toFixed(2)} s`

const built = build()
console.log(`state folder: ${SESSIONS} sessions, ${SESSIONS * PER_SESSION} messages, ${mb(built.bytes)} (built in ${s(built.ms)})`)

const at = process.argv.indexOf('--url')
const url = at > 0 ? process.argv[at + 1] : undefined
const where = url ? { url } : { path: path.join(root, 'sessions.db') }
const mirror = process.argv.includes('--mirror')
const st = await SessionTools.open({ ...where, ...(mirror ? { mirrorDir: path.join(root, 'transcripts') } : { mirrorDir: null }) })
console.log(`store: ${url ? 'PostgreSQL' : 'SQLite file'}; mirror: ${mirror ? 'on' : 'off'}`)
let t = performance.now()
const first = await st.importStateDir(stateDir)
const importMs = performance.now() - t
console.log(`import:        ${s(importMs)}  (${first.sessions} sessions, ${first.messages} messages, ${first.skipped.length} skipped; ${Math.round(first.messages / (importMs / 1000))} messages/s)`)
t = performance.now()
const second = await st.importStateDir(stateDir)
console.log(`second import: ${s(performance.now() - t)}  (adds ${second.sessions} sessions, ${second.messages} messages)`)
t = performance.now()
const ex = await st.exportStateDir(path.join(root, 'export'))
console.log(`export:        ${s(performance.now() - t)}  (${ex.files} files, ${ex.messages} messages)`)
const stats = await st.stats()
console.log(`store:         ${mb(stats.dbBytes)} for ${stats.sessions} sessions, ${stats.messages} messages`)
await st.close()

if (!process.argv.includes('--keep')) fs.rmSync(root, { recursive: true, force: true })
else console.log(`kept: ${root}`)
