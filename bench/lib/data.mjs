// Deterministic synthetic data: session entries and transcript messages.
const NOW = Date.now()
const WEEK = 7 * 24 * 3600 * 1000

export function rng(seed) {
  let a = seed >>> 0 || 1
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const hex = (r, n) => { let s = ''; for (let i = 0; i < n; i++) s += Math.floor(r() * 16).toString(16); return s }
const uuid = (r) => `${hex(r, 8)}-${hex(r, 4)}-4${hex(r, 3)}-a${hex(r, 3)}-${hex(r, 12)}`
const CHANNELS = ['telegram', 'whatsapp', 'discord', 'slack', 'signal']
const MODELS = ['claude-opus-4-5', 'gpt-5.2', 'claude-sonnet-4-5']

/** Session j: 60% direct, 30% group, 10% cron, all under agent main. */
export function makeEntry(j) {
  const r = rng(j * 2654435761 + 7)
  const m = j % 10
  const channel = CHANNELS[j % CHANNELS.length]
  const updatedAt = NOW - Math.floor(r() * WEEK)
  const base = {
    sessionId: uuid(r),
    updatedAt,
    systemSent: true,
    abortedLastRun: false,
    thinkingLevel: 'low',
    inputTokens: Math.floor(r() * 100000),
    outputTokens: Math.floor(r() * 20000),
    totalTokens: Math.floor(r() * 120000),
    contextTokens: 200000,
    modelProvider: 'anthropic',
    model: MODELS[j % MODELS.length],
    compactionCount: j % 4,
  }
  if (m < 6) {
    const to = `+1555${String(j).padStart(7, '0')}`
    return {
      key: `agent:main:${channel}:dm:u${j}`,
      entry: {
        ...base, chatType: 'direct', lastChannel: channel, lastTo: to, lastAccountId: 'default',
        deliveryContext: { channel, to, accountId: 'default' },
        origin: { label: `User ${j}`, provider: channel, surface: channel, chatType: 'direct', from: to, to: 'bot' },
      },
    }
  }
  if (m < 9) {
    const to = `group-${j}`
    return {
      key: `agent:main:${channel}:group:g${j}`,
      entry: {
        ...base, chatType: 'group', channel, subject: `Group chat ${j}`, displayName: `${channel}:g${j}`,
        groupId: `g${j}`, groupChannel: `#room-${j}`, label: j % 3 === 0 ? `team-${j}` : undefined,
        lastChannel: channel, lastTo: to, deliveryContext: { channel, to },
        origin: { label: `Group ${j}`, provider: channel, surface: channel, chatType: 'group', from: to, to },
      },
    }
  }
  return {
    key: `agent:main:cron:job-${j}`,
    entry: { ...base, label: `nightly-${j}`, spawnedBy: 'agent:main:main' },
  }
}

const KEYS = []

/**
 * The keys of sessions 0 … size-1, made once: a timed call picks its key from this table, so
 * the figures do not include `makeEntry` (about 5 µs a key, as much as a tenth of an upsert
 * and half of a burst's launch loop before this table).
 */
export function keyTable(size) {
  for (let j = KEYS.length; j < size; j++) KEYS.push(makeEntry(j).key)
  return KEYS
}

/** The patch of a timed upsert `i` (an existing key's new route and counters; the gateway's
 * updateEntry path), the same on every side and in every harness. */
export const upsertPatch = (i) => ({ lastChannel: 'telegram', lastTo: `+1555${1000 + (i & 1023)}`, inputTokens: 100 + i, outputTokens: 50 })

/** The `n` keys of burst `i` (warm-up bursts have `i < 0`) among `keys`, the table of `size`
 * sessions: spread over the store, a different run of them for each burst. */
export const burstKeys = (keys, size, i, n) => Array.from({ length: n }, (_, w) => keys[(((i * 7919 + w * 31) % size) + size) % size])

/** Transcript message j (alternating user / assistant). */
export function makeTranscriptMessage(j) {
  const ts = NOW - (1_000_000 - j) * 1000
  if (j % 2 === 0) return { role: 'user', content: `[WhatsApp +15550001 2026-01-01T10:00Z] question number ${j}: how is the build going?`, timestamp: ts }
  return {
    role: 'assistant',
    content: [{ type: 'text', text: `Answer ${j}: the build is green, 42 tests passed and nothing is pending.` }],
    api: 'anthropic-messages', provider: 'anthropic', model: 'claude-opus-4-5',
    usage: { input: 1200, output: 40, cacheRead: 0, cacheWrite: 0, totalTokens: 1240, cost: { input: 0.0018, output: 0.0006, cacheRead: 0, cacheWrite: 0, total: 0.0024 } },
    stopReason: 'stop', timestamp: ts,
  }
}

/** Gateway transcript line (v3 message entry) for message j. */
export function transcriptLine(j, parentId) {
  const id = (j + 0x10000000).toString(16).slice(-8)
  const message = makeTranscriptMessage(j)
  return { id, line: JSON.stringify({ type: 'message', id, parentId, timestamp: new Date(message.timestamp).toISOString(), message }) }
}
