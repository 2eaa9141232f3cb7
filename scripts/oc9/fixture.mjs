// Finishes a 2026.9 fixture folder written by make-state.mjs (see __test__/fixtures/openclaw-2026.9/README.md):
// appends one long message (stored zstd-compressed by the gateway) through the package's public
// transcript API, records what the package's own readers return (expected.json), and folds every
// WAL back into its database so the folder can be committed without -wal/-shm files.
//
// Run with Node >= 24.16 from a folder where openclaw@2026.9.6 resolves:
//   node scripts/oc9/fixture.mjs <state dir> && node scripts/oc9/fixture.mjs --fold <state dir>
// (the second step runs once the package's own connections are gone, so closing the last
// connection removes each -wal and -shm file)
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'

const fold = process.argv[2] === '--fold'
const dir = path.resolve(process.argv[fold ? 3 : 2] ?? '')
if (fold) {
  const { DatabaseSync } = await import('node:sqlite')
  for (const f of ['state/openclaw.sqlite', 'state/openclaw-quarantine.sqlite', 'agents/main/agent/openclaw-agent.sqlite', 'agents/research/agent/openclaw-agent.sqlite']) {
    const db = new DatabaseSync(path.join(dir, f))
    db.exec('PRAGMA wal_checkpoint(TRUNCATE)')
    db.close()
  }
  process.exit(0)
}
const from = process.env.OPENCLAW_2026_9_DIR ?? process.cwd()
const require = createRequire(path.join(from, 'package.json'))
process.env.OPENCLAW_STATE_DIR = dir
process.env.HOME = dir
const store = await import(require.resolve('openclaw/plugin-sdk/session-store-runtime'))
const transcripts = await import(require.resolve('openclaw/plugin-sdk/session-transcript-runtime'))
const { DatabaseSync } = await import('node:sqlite')

const LONG_KEY = 'agent:research:telegram:group:-1001234'
const longEntry = store.getSessionEntry({ agentId: 'research', sessionKey: LONG_KEY })
const words = Array.from({ length: 400 }, (_, i) => `paper-${i} on write-ahead logging and checkpoints`).join('; ')
await transcripts.appendSessionTranscriptMessagesByIdentity({
  agentId: 'research',
  sessionKey: LONG_KEY,
  sessionId: longEntry.sessionId,
  messages: [{ message: { role: 'user', content: [{ type: 'text', text: `Reading list: ${words}` }], timestamp: Date.UTC(2026, 8, 20, 11, 30) }, eventId: 'fixture-long-0001', now: Date.UTC(2026, 8, 20, 11, 30) }],
})

const expected = { agents: {}, runs: [], tasks: [] }
for (const agentId of ['main', 'research']) {
  const listed = store.listSessionEntries({ agentId }).sort((a, b) => a.sessionKey.localeCompare(b.sessionKey))
  const sessions = {}
  for (const { sessionKey, entry } of listed) {
    const visible = await transcripts.readVisibleSessionTranscriptMessageEntries({ agentId, sessionKey, sessionId: entry.sessionId })
    sessions[sessionKey] = {
      sessionId: entry.sessionId,
      updatedAt: entry.updatedAt,
      label: entry.label ?? null,
      pinnedAt: entry.pinnedAt ?? null,
      archivedAt: entry.archivedAt ?? null,
      messages: visible.length,
      roles: visible.map((e) => e.role).join(','),
    }
  }
  expected.agents[agentId] = sessions
  const db = new DatabaseSync(path.join(dir, 'agents', agentId, 'agent', 'openclaw-agent.sqlite'), { readOnly: true })
  expected.agents[agentId + ':zstdEvents'] = db.prepare('SELECT count(*) n FROM transcript_events WHERE event_zstd IS NOT NULL').get().n
  db.close()
}
const sdb = new DatabaseSync(path.join(dir, 'state', 'openclaw.sqlite'), { readOnly: true })
expected.runs = sdb.prepare('SELECT run_id FROM subagent_runs ORDER BY run_id').all().map((r) => r.run_id)
expected.tasks = sdb.prepare('SELECT task_id, run_id, status FROM task_runs ORDER BY task_id').all().map((r) => ({ ...r }))
sdb.close()
fs.writeFileSync(path.join(dir, '..', 'expected.json'), JSON.stringify(expected, null, 2) + '\n')

setTimeout(() => process.exit(0), 500)
