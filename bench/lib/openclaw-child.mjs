// Child process of the third baseline: the session store of the real OpenClaw 2026.9.6 package
// (SQLite through node:sqlite), driven through its own exports under the Node it ships for
// (Node 24), on the same synthetic data as the other sides. Run by ../run.mjs, never imported.
//   <node 24> openclaw-child.mjs '<json: { dir, work, sizes, historyMessages, run, addon? }>'
// `dir` is a folder whose node_modules holds openclaw@2026.9.6. Prints one line
// `@@RESULT@@{...}` on stdout. Nothing of the package is copied here: it is loaded from `dir`.
// With `addon` (the path of session-tools' index.js), session-tools is timed here too, in this
// process, under this Node (the one a drop-in inside the 2026.9 gateway runs on), on the same
// data: each of its workloads in alternating rounds with OpenClaw's (`ours` in each result).
//
// What is timed, per size (sessions seeded one upsertSessionEntry at a time, as a plugin would):
//   upsert      upsertSessionEntry: replace one existing entry (the caller merges)
//   patch       patchSessionEntry: its read-merge-write of one existing entry
//   list_sdk    listSessionEntries({ agentId }) sorted by updatedAt, the 50 newest (its only
//               public list call: every entry is read and parsed)
//   list_sql    the floor: one indexed SELECT of the 50 most recent rows of its own table on a
//               read-only node:sqlite connection, entries parsed (its gateway's sessions.list
//               serves from an in-memory projection that needs a running gateway)
// once, on one transcript of `historyMessages` messages:
//   history_recent  its newest-tail reader behind sessions_history (caches the last page per
//                   transcript revision, so repeated reads of one transcript are cache hits)
//   history_page    its page reader (offset 0, 20 messages), uncached
//   append1         appendSessionTranscriptMessageByIdentity, one message (timed last)
// session-tools (with `addon`): upsertSession(key, patch), sessionsList({ limit: 50 }),
// sessionsHistory({ sessionKey, limit: 20 }) and appendMessages(key, [message]), as ../run.mjs.
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import { keyTable, makeEntry, makeTranscriptMessage, rng, upsertPatch as patchFor } from './data.mjs'
import { measure, measureAlternating } from './measure.mjs'
import { openOurs } from './same-node.mjs'

const opts = JSON.parse(process.argv[2])
const RUN = opts.run
const AGENT = 'main'
const LONG_KEY = 'agent:main:main'
const LONG_ID = '0b6f0f2e-5a0c-4f57-9d7e-3f1c2b7a9e10'

const stateDir = path.join(opts.work, 'openclaw-state')
fs.rmSync(stateDir, { recursive: true, force: true })
fs.mkdirSync(stateDir, { recursive: true })
process.env.OPENCLAW_STATE_DIR = stateDir
process.env.HOME = stateDir

const req = createRequire(path.join(path.resolve(opts.dir), 'package.json'))
const pkgJson = packageJsonOf(req.resolve('openclaw/plugin-sdk/session-store-runtime'))
const version = JSON.parse(fs.readFileSync(pkgJson, 'utf8')).version
const load = (spec) => import(pathToFileURL(req.resolve(spec)).href)
const store = await load('openclaw/plugin-sdk/session-store-runtime')
const transcripts = await load('openclaw/plugin-sdk/session-transcript-runtime')

// The newest-tail and page readers are internal: find the chunk and its export names from the
// package's own export statement, so a rebuilt package with other chunk hashes still works.
function internalReaders() {
  const dist = path.join(path.dirname(pkgJson), 'dist')
  const file = fs.readdirSync(dist).find((f) => /^session-accessor\.sqlite-history-events-.*\.mjs$/.test(f))
  if (!file) return null
  const text = fs.readFileSync(path.join(dist, file), 'utf8')
  const alias = (name) => text.match(new RegExp(`\\b${name} as (\\w+)`))?.[1]
  return { file: path.join(dist, file), recent: alias('readRecentSessionTranscriptHistoryEvents'), page: alias('readSessionTranscriptHistoryEventPage') }
}

const ours = opts.addon ? await openOurs(opts.addon, path.join(opts.work, 'ours-same-node')) : null
const out = { version, node: process.version, results: [] }
const yieldLoop = () => new Promise((r) => setImmediate(r))
/** Its call timed alone, or, with ours, the two in alternating rounds: `[its, ours | null]`. */
const pair = async (its, mine) => (ours ? measureAlternating(RUN, [its, mine]) : [await measure(RUN, its), null])

let seeded = 0
for (const size of opts.sizes) {
  const s0 = performance.now()
  for (let j = seeded; j < size; j++) {
    const { key, entry } = makeEntry(j)
    await store.upsertSessionEntry({ agentId: AGENT, sessionKey: key, entry: { ...entry, updatedAt: Date.now() } })
    if (j % 200 === 199) await yieldLoop()
  }
  const seedMs = performance.now() - s0
  await ours?.seed(seeded, size)
  seeded = size
  const pick = rng(size)
  const randomItem = () => makeEntry(Math.floor(pick() * size))
  const keys = keyTable(size)
  const oursPick = rng(size)
  const oursKey = () => keys[Math.floor(oursPick() * size)]
  const mine = {}

  const [upsert, upsertOurs] = await pair(async (i) => {
    const { key, entry } = randomItem()
    await store.upsertSessionEntry({ agentId: AGENT, sessionKey: key, entry: { ...entry, ...patchFor(i), updatedAt: Date.now() } })
  }, (i) => ours.st.upsertSession(oursKey(), patchFor(i)))
  if (ours) mine.upsert = upsertOurs
  const patch = await measure(RUN, async (i) => {
    const { key } = randomItem()
    await store.patchSessionEntry({ agentId: AGENT, sessionKey: key, update: () => ({ ...patchFor(i), updatedAt: Date.now() }) })
  })
  let rows = 0
  const listSdk = await measure(RUN, () => {
    const all = store.listSessionEntries({ agentId: AGENT })
    all.sort((a, b) => (b.entry.updatedAt ?? 0) - (a.entry.updatedAt ?? 0))
    rows = all.slice(0, 50).length
  })
  listSdk.rows = rows
  const dbFile = findAgentDb(stateDir)
  let listSql = null
  if (dbFile) {
    const { DatabaseSync } = await import('node:sqlite')
    const ro = new DatabaseSync(dbFile, { readOnly: true })
    const q = ro.prepare('SELECT session_key, entry_json FROM session_nodes ORDER BY updated_at DESC, session_key LIMIT 50')
    let oursRows = 0
    const [theirs, list] = await pair(() => {
      rows = q.all().map((r) => ({ key: r.session_key, entry: JSON.parse(r.entry_json) })).length
    }, async () => { oursRows = (await ours.st.sessionsList({ limit: 50 }, ours.ctx)).count })
    listSql = theirs
    listSql.rows = rows
    if (ours) mine.list = { ...list, rows: oursRows }
    ro.close()
  }
  out.results.push({ size, seedMs: Math.round(seedMs), upsert, patch, list_sdk: listSdk, list_sql: listSql, ...(ours ? { ours: mine } : {}) })
  process.stderr.write(`openclaw ${size}: upsert ${upsert.medianMs} ms, patch ${patch.medianMs}, list_sdk ${listSdk.medianMs}, list_sql ${listSql?.medianMs}\n`)
}

// one long transcript
await store.upsertSessionEntry({ agentId: AGENT, sessionKey: LONG_KEY, entry: { sessionId: LONG_ID, updatedAt: Date.now(), lastChannel: 'whatsapp' } })
let storePath
const t0 = performance.now()
for (let i = 0; i < opts.historyMessages; i += 1000) {
  const messages = []
  for (let j = i; j < Math.min(opts.historyMessages, i + 1000); j++) messages.push({ message: makeTranscriptMessage(j), now: Date.now() })
  const r = await transcripts.appendSessionTranscriptMessagesByIdentity({ agentId: AGENT, sessionKey: LONG_KEY, sessionId: LONG_ID, cwd: '/workspace', messages })
  storePath ??= r?.[0]?.anchor?.storePath
  await yieldLoop()
}
out.history = { messages: opts.historyMessages, seedMs: Math.round(performance.now() - t0) }
await ours?.seedHistory(opts.historyMessages)
const readers = internalReaders()
if (readers?.recent && readers?.page && storePath) {
  const mod = await import(pathToFileURL(readers.file).href)
  const scope = { agentId: AGENT, sessionKey: LONG_KEY, sessionId: LONG_ID, storePath }
  let got = 0
  out.history.recent = await measure(RUN, () => {
    got = mod[readers.recent](scope, { maxMessages: 20, maxLines: 420, maxBytes: 8 * 1024 * 1024 }).events.length
  })
  out.history.recent.messages = got
  let oursGot = 0
  const [page, history] = await pair(() => { got = mod[readers.page](scope, { offset: 0, maxMessages: 20 }).events.length },
    async () => { oursGot = (await ours.st.sessionsHistory({ sessionKey: 'main', limit: 20 }, ours.ctx)).messages.length })
  out.history.page = { ...page, messages: got }
  if (ours) out.history.ours = { ...history, messages: oursGot }
} else {
  out.history.note = 'its internal history readers were not found in this build of the package'
}
let m = opts.historyMessages
let n = opts.historyMessages
const [append1, append1Ours] = await pair(async () => {
  await transcripts.appendSessionTranscriptMessageByIdentity({ agentId: AGENT, sessionKey: LONG_KEY, sessionId: LONG_ID, cwd: '/workspace', message: makeTranscriptMessage(m++) })
}, () => ours.st.appendMessages(LONG_KEY, [makeTranscriptMessage(n++)]))
out.append1 = append1
if (ours) {
  out.append1Ours = append1Ours
  await ours.st.close()
  out.oursNode = process.version
}
out.walBytes = walBytes(stateDir)
process.stdout.write(`\n@@RESULT@@${JSON.stringify(out)}\n`)
setTimeout(() => process.exit(0), 100) // its SQLite worker threads keep the process alive

/** The package.json of the package holding `file` (its exports do not list it). */
function packageJsonOf(file) {
  for (let d = path.dirname(file); d !== path.dirname(d); d = path.dirname(d)) {
    const p = path.join(d, 'package.json')
    if (fs.existsSync(p) && JSON.parse(fs.readFileSync(p, 'utf8')).name === 'openclaw') return p
  }
  throw new Error(`no openclaw package.json above ${file}`)
}

/** The agent's SQLite database under the state folder (the file holding `session_nodes`). */
function findAgentDb(dir) {
  const stack = [dir]
  while (stack.length) {
    const d = stack.pop()
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) stack.push(p)
      else if (/\.(sqlite|db)$/.test(e.name) && p.includes(`${path.sep}agents${path.sep}${AGENT}${path.sep}`)) return p
    }
  }
  return null
}

/** The largest -wal file under the state folder. */
function walBytes(dir) {
  let max = 0
  const stack = [dir]
  while (stack.length) {
    const d = stack.pop()
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) stack.push(p)
      else if (e.name.endsWith('-wal')) max = Math.max(max, fs.statSync(p).size)
    }
  }
  return max
}
