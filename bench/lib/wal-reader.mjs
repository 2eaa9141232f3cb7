// Child process of the WAL workload: a reader that is always there. Back to back, it opens a
// read transaction on the database, reads, and keeps the transaction (its snapshot) open for
// `holdMs` before ending it, as a slow export or a listing of a busy gateway does, until stdin
// closes. Prints how many transactions it ran. Its own process: SQLite forbids two copies of
// itself on one file in one process (better-sqlite3 and the addon each bundle one).
//   node wal-reader.mjs <db file> <holdMs>
import Database from 'better-sqlite3'

const [file, holdArg] = process.argv.slice(2)
const holdMs = Number(holdArg)
const db = new Database(file, { readonly: true, fileMustExist: true })
db.pragma('busy_timeout = 5000')
const count = db.prepare('SELECT count(*) AS n FROM sessions')
const sleeper = new Int32Array(new SharedArrayBuffer(4))
let stop = false
process.stdin.on('end', () => { stop = true })
process.stdin.resume()
let transactions = 0
while (!stop) {
  db.exec('BEGIN')
  count.get()
  // hold the snapshot, in slices so that stdin's end is noticed
  const until = Date.now() + holdMs
  while (Date.now() < until) Atomics.wait(sleeper, 0, 0, Math.min(50, until - Date.now()))
  db.exec('COMMIT')
  transactions++
  await new Promise((r) => setImmediate(r))
}
db.close()
console.log(JSON.stringify({ transactions }))
