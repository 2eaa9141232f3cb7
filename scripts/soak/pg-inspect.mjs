// Reads a PostgreSQL store directly for the soak, with the server's own `psql` (no JS client is
// installed), in a child process: the PostgreSQL twin of inspect.cjs, with the same request and
// the same answer, so the checks that read a SQLite file read the server the same way:
//   { messages: [key…], entries: [key…], scalars: { name: sql } }
//   → { integrity, messages: { key: [{ seq, text }] }, entries: { key: entry }, scalars: { name: value } }
// `integrity` is always 'ok': the server keeps its own files; what the soak checks is our rows.
// The store's URL may carry our own parameters (`schema`, `pool_max_size`): they are taken out
// for psql, and `schema` becomes its search_path.
import { spawnSync } from 'node:child_process'

const OURS = new Set(['schema', 'pool_max_size'])

/** `{ psqlUrl, schema }` of a store URL. */
export function splitUrl(url) {
  const u = new URL(url)
  const schema = u.searchParams.get('schema') ?? 'public'
  for (const k of [...u.searchParams.keys()]) if (OURS.has(k)) u.searchParams.delete(k)
  return { psqlUrl: u.toString(), schema }
}

const literal = (s) => `'${String(s).replace(/'/g, "''")}'`

/** Runs `queries` (each one row of one column) in one psql session; their values, in order. */
export function psql(url, queries) {
  const { psqlUrl, schema } = splitUrl(url)
  const args = ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', psqlUrl, '-c', `SET search_path TO ${schema}`]
  for (const q of queries) args.push('-c', q.replace(/\s+/g, ' '))
  const r = spawnSync('psql', args, { encoding: 'utf8', maxBuffer: 256 * 2 ** 20 })
  if (r.status !== 0) throw new Error(`psql failed: ${r.stderr}`)
  const lines = r.stdout.split('\n')
  return queries.map((_, i) => lines[i] ?? '')
}

/** The PostgreSQL twin of inspect.cjs's answer. */
export function inspectPg(url, { messages = [], entries = [], scalars = {} } = {}) {
  const out = { integrity: 'ok', messages: {}, entries: {}, scalars: {} }
  const [hasSchema] = psql(url, ["SELECT to_regclass('sessions') IS NOT NULL"])
  if (hasSchema !== 't') {
    // before the first open committed the schema: the empty store
    out.missing = true
    for (const key of messages) out.messages[key] = []
    for (const key of entries) out.entries[key] = null
    for (const name of Object.keys(scalars)) out.scalars[name] = 0
    return out
  }
  const queries = [
    ...messages.map(
      (key) => `SELECT coalesce(jsonb_agg(jsonb_build_object('seq', m.seq, 'text', m.message::jsonb -> 'content') ORDER BY m.seq), '[]')
                FROM messages m JOIN sessions s ON s.session_id = m.session_id WHERE s.key = ${literal(key)}`,
    ),
    ...entries.map((key) => `SELECT coalesce((SELECT entry FROM sessions WHERE key = ${literal(key)}), 'null')`),
    ...Object.values(scalars).map((sql) => `SELECT to_jsonb((${sql}))`),
  ]
  const values = queries.length ? psql(url, queries).map((v) => JSON.parse(v || 'null')) : []
  let i = 0
  for (const key of messages) out.messages[key] = values[i++]
  for (const key of entries) out.entries[key] = values[i++]
  for (const name of Object.keys(scalars)) out.scalars[name] = values[i++]
  return out
}
