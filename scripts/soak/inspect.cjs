// Reads a store file directly with better-sqlite3, in its own process: SQLite's POSIX locks are
// per process, so a second copy of SQLite in the process that has the addon open on the same
// file would break both (SQLite's "how to corrupt" §2.2.1; here it showed as SIGBUS). Takes the
// database path and a JSON request on argv, prints a JSON answer:
//   { messages: [key…], entries: [key…], scalars: { name: sql } }
//   → { integrity, messages: { key: [{ seq, text }] }, entries: { key: entry }, scalars: { name: value } }
const Database = require('better-sqlite3')

const [db, request] = process.argv.slice(2)
const q = JSON.parse(request)
const fs = require('node:fs')
/** An empty store: every acknowledged write the caller checks for shows up as missing, and
 * every count is 0. */
function emptyStore(integrity) {
  const none = { missing: true, integrity, messages: {}, entries: {}, scalars: {} }
  for (const key of q.messages ?? []) none.messages[key] = []
  for (const key of q.entries ?? []) none.entries[key] = null
  for (const name of Object.keys(q.scalars ?? {})) none.scalars[name] = 0
  process.stdout.write(JSON.stringify(none))
  process.exit(0)
}
// A worker killed before it created the file
if (!fs.existsSync(db)) emptyStore('ok')
const conn = new Database(db, { fileMustExist: true })
// … or before its first open committed the schema (the file exists, its tables do not yet)
if (!conn.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sessions'").pluck().get()) {
  const integrity = conn.pragma('integrity_check', { simple: true })
  conn.close()
  emptyStore(integrity)
}
const out = { integrity: conn.pragma('integrity_check', { simple: true }), messages: {}, entries: {}, scalars: {} }
if (conn.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sessions'").pluck().get() === 0) {
  // A worker killed while its first open was still migrating: the migration rolled back, the
  // file holds no schema yet, which is the empty store again (an acknowledged write implies a
  // committed schema, so this hides nothing).
  out.missing = true
  for (const key of q.messages ?? []) out.messages[key] = []
  for (const key of q.entries ?? []) out.entries[key] = null
  for (const name of Object.keys(q.scalars ?? {})) out.scalars[name] = 0
  conn.close()
  process.stdout.write(JSON.stringify(out))
  process.exit(0)
}
const sid = conn.prepare('SELECT session_id FROM sessions WHERE key = ?').pluck()
const msgs = conn.prepare('SELECT seq, message FROM messages WHERE session_id = ? ORDER BY seq')
const entry = conn.prepare('SELECT entry FROM sessions WHERE key = ?').pluck()
for (const key of q.messages ?? []) {
  const s = sid.get(key)
  out.messages[key] = s ? msgs.all(s).map((r) => ({ seq: r.seq, text: JSON.parse(r.message).content })) : []
}
for (const key of q.entries ?? []) {
  const e = entry.get(key)
  out.entries[key] = e ? JSON.parse(e) : null
}
for (const [name, sql] of Object.entries(q.scalars ?? {})) out.scalars[name] = conn.prepare(sql).pluck().get()
conn.close()
process.stdout.write(JSON.stringify(out))
