// Second baseline: the same session store as a TypeScript team would write it today, in plain
// JavaScript on better-sqlite3, synchronous on the main thread (not gateway code, not ours).
// A sessions table (one row per session, the entry as a JSON text column, indexed columns for
// what the queries filter and sort on) and a messages table (one row per transcript message).
// Every write is one transaction. The row building, merge rule and history clean-up are the
// file baseline's (./baseline.mjs), so the two baselines differ only in how they store.
// Result semantics follow session-tools, so the rows compare like with like: sessions_list
// filters by kind before `limit` (default 200, at most 1000), keys are classified after their
// `agent:<id>:` prefix.
import path from 'node:path'
import { createRequire } from 'node:module'
import Database from 'better-sqlite3'
import {
  TOOL_KINDS,
  agentIdOf,
  capBytes,
  classifyKind,
  gatewayRow,
  mergeSessionEntry,
  normalizeEntryDelivery,
  stripEnvelope,
  toolRow,
} from './baseline.mjs'

/** e.g. `12.11.1 (SQLite 3.53.2)`, for the notes. */
export const SQLITE_VERSION = (() => {
  const db = new Database(':memory:')
  try {
    return `${createRequire(import.meta.url)('better-sqlite3/package.json').version} (SQLite ${db.prepare('SELECT sqlite_version() AS v').get().v})`
  } finally {
    db.close()
  }
})()

const SCHEMA = `
CREATE TABLE IF NOT EXISTS sessions (
  key        TEXT PRIMARY KEY,
  agent_id   TEXT NOT NULL,
  session_id TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  entry      TEXT NOT NULL            -- the SessionEntry as JSON
);
CREATE INDEX IF NOT EXISTS sessions_by_agent_updated ON sessions (agent_id, updated_at DESC);
CREATE INDEX IF NOT EXISTS sessions_by_session_id ON sessions (session_id);
CREATE TABLE IF NOT EXISTS messages (
  id         INTEGER PRIMARY KEY,     -- rowid: append order
  session_id TEXT NOT NULL,
  message    TEXT NOT NULL            -- the transcript message as JSON
);
CREATE INDEX IF NOT EXISTS messages_by_session ON messages (session_id, id);
`

export class SqliteStore {
  constructor(dbPath, { mainKey = 'main', agentId = 'main' } = {}) {
    this.path = dbPath
    this.mainKey = mainKey
    this.agentId = agentId
    const db = new Database(dbPath)
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = NORMAL')
    db.pragma('busy_timeout = 5000')
    db.exec(SCHEMA)
    this.db = db
    this.stmt = {
      get: db.prepare('SELECT entry FROM sessions WHERE key = ?'),
      put: db.prepare(
        `INSERT INTO sessions (key, agent_id, session_id, updated_at, entry) VALUES (@key, @agentId, @sessionId, @updatedAt, @entry)
         ON CONFLICT (key) DO UPDATE SET agent_id = excluded.agent_id, session_id = excluded.session_id,
           updated_at = excluded.updated_at, entry = excluded.entry`,
      ),
      list: db.prepare('SELECT key, entry FROM sessions WHERE agent_id = ? AND updated_at >= ? ORDER BY updated_at DESC'),
      lastMessages: db.prepare('SELECT message FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT ?'),
      addMessage: db.prepare('INSERT INTO messages (session_id, message) VALUES (?, ?)'),
    }
    // read -> merge -> write in one transaction (BEGIN IMMEDIATE: no lost update across processes)
    this.upsertTx = db.transaction((key, patch) => this.#upsertOne(key, patch))
    this.manyTx = db.transaction((items) => items.map(({ key, patch }) => this.#upsertOne(key, patch)))
    this.appendTx = db.transaction((key, messages) => {
      const entry = this.#upsertOne(key, {})
      for (const m of messages) this.stmt.addMessage.run(entry.sessionId, JSON.stringify(m))
      return { sessionKey: key, sessionId: entry.sessionId, appended: messages.length }
    })
  }

  /** `main` -> the main key, bare keys -> the default agent (REFERENCE.md §1.5, simplified). */
  canonical(key) {
    const k = String(key).trim().toLowerCase()
    if (k === 'main' || k === this.mainKey) return `agent:${this.agentId}:${this.mainKey}`
    return k.startsWith('agent:') ? k : `agent:${this.agentId}:${k}`
  }

  #upsertOne(key, patch) {
    const row = this.stmt.get.get(key)
    const existing = row ? JSON.parse(row.entry) : undefined
    const next = normalizeEntryDelivery(mergeSessionEntry(existing, patch))
    this.stmt.put.run({ key, agentId: agentIdOf(key) ?? this.agentId, sessionId: next.sessionId, updatedAt: next.updatedAt, entry: JSON.stringify(next) })
    return next
  }

  getSession(key) {
    const row = this.stmt.get.get(this.canonical(key))
    return row ? JSON.parse(row.entry) : null
  }

  /** The merge rule of REFERENCE.md §2.5, creating the session when missing. */
  upsertSession(key, patch) {
    return this.upsertTx.immediate(this.canonical(key), patch)
  }

  /** Many upserts in one transaction, answering each merged entry: group commit done by hand,
   * synchronously (bench/writers.mjs: the floor of a round of 8 on this driver). */
  upsertMany(items) {
    return this.manyTx.immediate(items.map(({ key, patch }) => ({ key: this.canonical(key), patch })))
  }

  /** Many upserts in one transaction (seeding). */
  seed(items) {
    this.upsertMany(items)
  }

  appendMessages(key, messages) {
    return this.appendTx.immediate(this.canonical(key), messages)
  }

  /** The sessions_list tool: rows of the requester's agent, newest first. */
  sessionsList(params = {}, ctx = {}) {
    const requesterAgent = agentIdOf(ctx.agentSessionKey) ?? this.agentId
    const kinds = Array.isArray(params.kinds)
      ? params.kinds.map((k) => String(k).trim().toLowerCase()).filter((k) => TOOL_KINDS.has(k))
      : []
    const kindFilter = kinds.length ? new Set(kinds) : null
    const limit = Number.isFinite(params.limit) ? Math.min(1000, Math.max(1, Math.floor(params.limit))) : 200
    const cutoff = Number.isFinite(params.activeMinutes) ? Date.now() - Math.max(1, Math.floor(params.activeMinutes)) * 60_000 : 0
    const dir = path.dirname(this.path)
    const prefix = `agent:${requesterAgent}:`
    const out = []
    for (const { key, entry } of this.stmt.list.iterate(requesterAgent, cutoff)) {
      const row = gatewayRow(key, JSON.parse(entry))
      if (row.kind === 'unknown' || row.kind === 'global') continue
      const kind = classifyKind(key.startsWith(prefix) ? key.slice(prefix.length) : key, row.kind, this.mainKey)
      if (kindFilter && !kindFilter.has(kind)) continue
      out.push(toolRow(row, kind, dir))
      if (out.length >= limit) break // leaving the loop ends the statement
    }
    return { count: out.length, sessions: out }
  }

  /** The sessions_history tool: the last `limit` messages, read newest first by index. */
  sessionsHistory(params, _ctx = {}) {
    const limit = Number.isFinite(params.limit) ? Math.min(1000, Math.max(1, Math.floor(params.limit))) : 200
    const entry = this.getSession(params.sessionKey)
    if (!entry || !entry.sessionId) return { sessionKey: params.sessionKey, messages: [] }
    let messages = this.stmt.lastMessages.all(entry.sessionId, limit).reverse().map((r) => stripEnvelope(JSON.parse(r.message)))
    messages = capBytes(messages, 6 * 1024 * 1024)
    if (!params.includeTools) messages = messages.filter((m) => m?.role !== 'toolResult')
    return { sessionKey: params.sessionKey, messages }
  }

  close() {
    this.db.close()
  }
}
