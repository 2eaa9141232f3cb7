// Baseline: our own JavaScript re-implementation of the gateway's file session store as
// REFERENCE.md §2.2-§2.6 describe it (not gateway code). One sessions.json rewritten whole on
// every change, a lock file, a 45 s mtime-checked cache, JSONL transcripts read whole.
import fsp from 'node:fs/promises'
import path from 'node:path'
import { randomUUID } from 'node:crypto'
import { parseJson5 } from './json5.mjs'

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const LOCK_POLL_MS = 25
const LOCK_TIMEOUT_MS = 10_000
const LOCK_STALE_MS = 30_000

export class FileStore {
  constructor(storePath, { ttlMs = 45_000, mainKey = 'main', agentId = 'main' } = {}) {
    this.path = storePath
    this.lockPath = `${storePath}.lock`
    this.ttlMs = ttlMs
    this.cache = null
    this.mainKey = mainKey
    this.agentId = agentId
  }

  // §2.3 load path
  async load({ skipCache = false } = {}) {
    if (!skipCache && this.ttlMs > 0 && this.cache) {
      if (Date.now() - this.cache.loadedAt <= this.ttlMs) {
        const st = await fsp.stat(this.path).catch(() => null)
        if (st && st.mtimeMs === this.cache.mtimeMs) return structuredClone(this.cache.store)
      }
      this.cache = null
    }
    let store = {}
    let mtimeMs = null
    try {
      const text = await fsp.readFile(this.path, 'utf8')
      mtimeMs = (await fsp.stat(this.path)).mtimeMs
      const parsed = parseJson5(text)
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) store = parsed
    } catch {
      store = {}
    }
    for (const entry of Object.values(store)) migrateLegacy(entry)
    if (this.ttlMs > 0 && mtimeMs !== null) this.cache = { store: structuredClone(store), mtimeMs, loadedAt: Date.now() }
    return store // the cache holds its own deep copy
  }

  // §2.4 locking
  async withLock(fn) {
    await fsp.mkdir(path.dirname(this.path), { recursive: true })
    const started = Date.now()
    for (;;) {
      try {
        const fh = await fsp.open(this.lockPath, 'wx')
        try {
          await fh.writeFile(JSON.stringify({ pid: process.pid, startedAt: Date.now() }))
        } catch {}
        await fh.close()
        break
      } catch (err) {
        if (err.code === 'ENOENT') {
          await fsp.mkdir(path.dirname(this.path), { recursive: true })
          continue
        }
        if (err.code !== 'EEXIST') throw err
        const st = await fsp.stat(this.lockPath).catch(() => null)
        if (st && Date.now() - st.mtimeMs > LOCK_STALE_MS) {
          await fsp.rm(this.lockPath, { force: true })
          continue
        }
        if (Date.now() - started > LOCK_TIMEOUT_MS) throw new Error(`timeout acquiring session store lock: ${this.lockPath}`)
        await sleep(LOCK_POLL_MS)
      }
    }
    try {
      return await fn()
    } finally {
      await fsp.unlink(this.lockPath).catch(() => {})
    }
  }

  // §2.4 write path: normalize every entry, temp file + atomic rename, 2-space JSON, 0600
  async writeStore(store) {
    for (const key of Object.keys(store)) {
      const e = store[key]
      if (e && typeof e === 'object') store[key] = normalizeEntryDelivery(e)
    }
    const json = JSON.stringify(store, null, 2)
    const tmp = `${this.path}.${process.pid}.${randomUUID()}.tmp`
    this.cache = null
    try {
      await fsp.writeFile(tmp, json, { encoding: 'utf8', mode: 0o600 })
      await fsp.rename(tmp, this.path)
      await fsp.chmod(this.path, 0o600)
    } finally {
      await fsp.rm(tmp, { force: true }).catch(() => {})
      this.cache = null
    }
  }

  // §2.5 updateEntry: lock -> read (cache allowed) -> merge -> write -> unlock
  async updateEntry(key, patchFn) {
    return this.withLock(async () => {
      const store = await this.load()
      const existing = store[key]
      if (!existing) return null
      const patch = await patchFn(existing)
      if (!patch) return existing
      const next = mergeSessionEntry(existing, patch)
      store[key] = next
      await this.writeStore(store)
      return next
    })
  }

  upsertExisting(key, patch) {
    return this.updateEntry(key, () => patch)
  }

  // sessions.list (§2.7) + the sessions_list tool (§3.1), row building simplified.
  async sessionsList(params = {}, ctx = {}) {
    const store = await this.load()
    const requesterAgent = agentIdOf(ctx.agentSessionKey) ?? 'main'
    let kinds = Array.isArray(params.kinds)
      ? params.kinds.map((k) => String(k).trim().toLowerCase()).filter((k) => TOOL_KINDS.has(k))
      : []
    const kindFilter = kinds.length ? new Set(kinds) : null
    const limit = Number.isFinite(params.limit) ? Math.max(1, Math.floor(params.limit)) : undefined
    const activeMinutes = Number.isFinite(params.activeMinutes) ? Math.max(1, Math.floor(params.activeMinutes)) : undefined

    // gateway sessions.list: includeGlobal/includeUnknown true (not sandboxed)
    let rows = []
    for (const [key, entry] of Object.entries(store)) rows.push(gatewayRow(key, entry))
    rows.sort((a, b) => (b.updatedAt ?? 0) - (a.updatedAt ?? 0))
    if (activeMinutes !== undefined) {
      const cutoff = Date.now() - activeMinutes * 60_000
      rows = rows.filter((r) => (r.updatedAt ?? 0) >= cutoff)
    }
    if (limit !== undefined) rows = rows.slice(0, limit) // the gateway limits before the tool filters
    const dir = path.dirname(this.path)
    const out = []
    for (const row of rows) {
      if (typeof row.key !== 'string') continue
      if ((agentIdOf(row.key) ?? 'main') !== requesterAgent) continue // a2a off: other agents skipped
      if (row.kind === 'unknown' || row.kind === 'global') continue
      const kind = classifyKind(row.key, row.kind, this.mainKey)
      if (kindFilter && !kindFilter.has(kind)) continue
      out.push(toolRow(row, kind, dir))
    }
    return { count: out.length, sessions: out }
  }

  // chat.history (§4.2) behind sessions_history (§4.1): read the JSONL whole, keep the last N.
  async sessionsHistory(params, ctx = {}) {
    let key = String(params.sessionKey)
    if (key === 'main' || key === this.mainKey) key = `agent:${this.agentId}:${this.mainKey}`
    else if (!key.startsWith('agent:')) key = `agent:${this.agentId}:${key}`
    const limit = Number.isFinite(params.limit) ? Math.max(1, Math.floor(params.limit)) : undefined
    const store = await this.load()
    const entry = store[key]
    if (!entry || !entry.sessionId) return { sessionKey: params.sessionKey, messages: [] }
    const file = typeof entry.sessionFile === 'string' && entry.sessionFile.trim()
      ? entry.sessionFile.trim()
      : path.join(path.dirname(this.path), `${entry.sessionId}.jsonl`)
    let messages = []
    try {
      const text = await fsp.readFile(file, 'utf8')
      for (const line of text.split(/\r?\n/)) {
        if (!line.trim()) continue
        try {
          const obj = JSON.parse(line)
          if (obj && obj.message) messages.push(obj.message)
        } catch {}
      }
    } catch {}
    messages = messages.slice(-Math.min(1000, limit ?? 200)).map(stripEnvelope)
    messages = capBytes(messages, 6 * 1024 * 1024)
    if (!params.includeTools) messages = messages.filter((m) => m?.role !== 'toolResult')
    return { sessionKey: params.sessionKey, messages }
  }
}

export const TOOL_KINDS = new Set(['main', 'group', 'cron', 'hook', 'node', 'other'])

function migrateLegacy(e) {
  if (!e || typeof e !== 'object') return
  if ('provider' in e) { if (typeof e.channel !== 'string') e.channel = e.provider; delete e.provider }
  if ('lastProvider' in e) { if (typeof e.lastChannel !== 'string') e.lastChannel = e.lastProvider; delete e.lastProvider }
  if ('room' in e) { if (typeof e.groupChannel !== 'string') e.groupChannel = e.room; delete e.room }
}

export function mergeSessionEntry(existing, patch) {
  return {
    ...existing,
    ...patch,
    sessionId: patch.sessionId ?? existing?.sessionId ?? randomUUID(),
    updatedAt: Math.max(existing?.updatedAt ?? 0, patch.updatedAt ?? 0, Date.now()),
  }
}

const str = (v) => (typeof v === 'string' && v.trim() ? v.trim() : undefined)

function normCtx(c) {
  if (!c || typeof c !== 'object') return undefined
  const out = {}
  const ch = str(c.channel)
  if (ch) out.channel = ch.toLowerCase() // channel aliases / plugin ids not mapped (simplified)
  const to = str(c.to)
  if (to) out.to = to
  const acc = str(c.accountId)
  if (acc) out.accountId = acc
  if (typeof c.threadId === 'number' && Number.isFinite(c.threadId)) out.threadId = Math.trunc(c.threadId)
  else if (str(c.threadId)) out.threadId = str(c.threadId)
  return Object.keys(out).length ? out : undefined
}

function sameCtx(a, b) {
  if (!a || !b || typeof b !== 'object') return !a && !b
  const ka = Object.keys(a)
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k])
}

export function normalizeEntryDelivery(e) {
  const primary = normCtx({ channel: e.lastChannel ?? e.channel, to: e.lastTo, accountId: e.lastAccountId, threadId: e.lastThreadId })
  const fallback = normCtx(e.deliveryContext)
  const merged = primary || fallback ? { ...fallback, ...primary } : undefined
  const same =
    sameCtx(merged, e.deliveryContext) &&
    (merged?.channel ?? undefined) === e.lastChannel &&
    (merged?.to ?? undefined) === e.lastTo &&
    (merged?.accountId ?? undefined) === e.lastAccountId &&
    (merged?.threadId ?? undefined) === e.lastThreadId
  if (same) return e
  const next = { ...e }
  delete next.deliveryContext
  delete next.lastChannel
  delete next.lastTo
  delete next.lastAccountId
  delete next.lastThreadId
  if (merged) {
    next.deliveryContext = merged
    if (merged.channel !== undefined) next.lastChannel = merged.channel
    if (merged.to !== undefined) next.lastTo = merged.to
    if (merged.accountId !== undefined) next.lastAccountId = merged.accountId
    if (merged.threadId !== undefined) next.lastThreadId = merged.threadId
  }
  return next
}

export function agentIdOf(key) {
  if (typeof key !== 'string' || !key.startsWith('agent:')) return undefined
  const parts = key.split(':')
  return parts.length >= 3 && parts[1] ? parts[1].toLowerCase() : undefined
}

export function gatewayKind(key, entry) {
  if (key === 'global') return 'global'
  if (key === 'unknown') return 'unknown'
  if (entry?.chatType === 'group' || entry?.chatType === 'channel') return 'group'
  if (key.includes(':group:') || key.includes(':channel:')) return 'group'
  return 'direct'
}

export function gatewayRow(key, e) {
  const dc = e?.deliveryContext
  const total = typeof e?.totalTokens === 'number' ? e.totalTokens : (e?.inputTokens ?? 0) + (e?.outputTokens ?? 0)
  return {
    key,
    kind: gatewayKind(key, e),
    label: e?.label,
    displayName: e?.displayName,
    channel: e?.channel,
    subject: e?.subject,
    groupChannel: e?.groupChannel,
    space: e?.space,
    chatType: e?.chatType,
    origin: e?.origin,
    updatedAt: typeof e?.updatedAt === 'number' ? e.updatedAt : null,
    sessionId: e?.sessionId,
    systemSent: e?.systemSent,
    abortedLastRun: e?.abortedLastRun,
    thinkingLevel: e?.thinkingLevel,
    verboseLevel: e?.verboseLevel,
    reasoningLevel: e?.reasoningLevel,
    elevatedLevel: e?.elevatedLevel,
    sendPolicy: e?.sendPolicy,
    inputTokens: e?.inputTokens,
    outputTokens: e?.outputTokens,
    totalTokens: total,
    responseUsage: e?.responseUsage,
    modelProvider: e?.modelProvider,
    model: e?.model,
    contextTokens: e?.contextTokens,
    deliveryContext: dc,
    lastChannel: dc?.channel ?? e?.lastChannel,
    lastTo: dc?.to ?? e?.lastTo,
    lastAccountId: dc?.accountId ?? e?.lastAccountId,
  }
}

export function classifyKind(key, gwKind, mainKey) {
  if (key === 'main' || key === mainKey) return 'main'
  if (key.startsWith('cron:')) return 'cron'
  if (key.startsWith('hook:')) return 'hook'
  if (key.startsWith('node-') || key.startsWith('node:')) return 'node'
  if (gwKind === 'group') return 'group'
  if (key.includes(':group:') || key.includes(':channel:')) return 'group'
  return 'other'
}

function deriveChannel(key, kind, channel, lastChannel) {
  if (kind === 'cron' || kind === 'hook' || kind === 'node') return 'internal'
  const c = str(channel) ?? str(lastChannel)
  if (c) return c
  const parts = key.split(':').filter(Boolean)
  if (parts.length >= 3 && (parts[1] === 'group' || parts[1] === 'channel')) return parts[0]
  return 'unknown'
}

export function toolRow(row, kind, dir) {
  const out = { key: row.key, kind, channel: deriveChannel(row.key, kind, row.channel, row.lastChannel) }
  const s = (k, v) => { if (typeof v === 'string') out[k] = v }
  const n = (k, v) => { if (typeof v === 'number') out[k] = v }
  const b = (k, v) => { if (typeof v === 'boolean') out[k] = v }
  s('label', row.label)
  s('displayName', row.displayName)
  const dc = row.deliveryContext
  if (dc && ['channel', 'to', 'accountId'].some((k) => typeof dc[k] === 'string')) {
    out.deliveryContext = {}
    for (const k of ['channel', 'to', 'accountId']) if (typeof dc[k] === 'string') out.deliveryContext[k] = dc[k]
  }
  n('updatedAt', row.updatedAt)
  s('sessionId', row.sessionId)
  s('model', row.model)
  n('contextTokens', row.contextTokens)
  n('totalTokens', row.totalTokens)
  s('thinkingLevel', row.thinkingLevel)
  s('verboseLevel', row.verboseLevel)
  b('systemSent', row.systemSent)
  b('abortedLastRun', row.abortedLastRun)
  s('sendPolicy', row.sendPolicy)
  s('lastChannel', row.lastChannel)
  s('lastTo', row.lastTo)
  s('lastAccountId', row.lastAccountId)
  if (typeof row.sessionId === 'string') out.transcriptPath = path.join(dir, `${row.sessionId}.jsonl`)
  return out
}

const ENVELOPE = /^\[([^\]]*)\] /
const ENVELOPE_TS = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}Z|\d{4}-\d{2}-\d{2} \d{2}:\d{2}/
const CHANNEL_LABELS = ['WebChat', 'WhatsApp', 'Telegram', 'Signal', 'Slack', 'Discord', 'Google Chat', 'iMessage', 'Teams', 'Matrix', 'Zalo', 'Zalo Personal', 'BlueBubbles']
const MESSAGE_ID_LINE = /^\[message_id: [^\]]*\]$/

function stripText(t) {
  const m = ENVELOPE.exec(t)
  if (m && (ENVELOPE_TS.test(m[1]) || CHANNEL_LABELS.some((l) => m[1].startsWith(l + ' ')))) t = t.slice(m[0].length)
  if (t.includes('[message_id:')) t = t.split('\n').filter((l) => !MESSAGE_ID_LINE.test(l.trim())).join('\n')
  return t
}

export function stripEnvelope(m) {
  if (!m || m.role !== 'user') return m
  if (typeof m.content === 'string') return { ...m, content: stripText(m.content) }
  if (Array.isArray(m.content)) return { ...m, content: m.content.map((b) => (b?.type === 'text' && typeof b.text === 'string' ? { ...b, text: stripText(b.text) } : b)) }
  return m
}

export function capBytes(messages, max) {
  const sizes = messages.map((m) => Buffer.byteLength(JSON.stringify(m)))
  let total = 2 + sizes.reduce((a, b) => a + b, 0) + Math.max(0, messages.length - 1)
  let start = 0
  while (total > max && messages.length - start > 1) total -= sizes[start++] + 1
  return start ? messages.slice(start) : messages
}
