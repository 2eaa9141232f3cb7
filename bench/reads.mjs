#!/usr/bin/env node
// Focused read bench (issue 17): sessions_list limit 50 and sessions_history limit 20 of
// session-tools beside the better-sqlite3 baseline (lib/sqlite-baseline.mjs) and a raw indexed
// `SELECT key, entry … ORDER BY updated_at DESC LIMIT 50` + JSON.parse of each entry on
// better-sqlite3 (a stand-in for the 2026.9 gateway's floor, which runs under node:sqlite), in one
// process, in interleaved rounds; prints medians (wall and process CPU per call) and the ratios.
// `list-cold` lists right after a setConfig (outside the timed window), so no row is remembered:
// the cost of a listing whose every row changed since the last one.
//   node bench/reads.mjs [--sizes 1000,10000,50000] [--rounds 6] [--per 100] [--messages 100000] [--data <dir>]
// Env: ADDON / NAPI_RS_NATIVE_LIBRARY_PATH as for run.mjs. Seeded stores are kept in --data
// (default: a temp folder, removed at the end) so that two builds can be compared on the same
// files, one process each (two builds of the addon cannot be loaded in one process).
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import { SqliteStore } from './lib/sqlite-baseline.mjs'
import { makeTranscriptMessage } from './lib/data.mjs'
import { compare as compareSides, dataFolder, loadAddon, option as opt, seedOurs as seed, seedSqlite } from './lib/ab.mjs'

const SIZES = opt('--sizes', '1000,10000,50000').split(',').map(Number)
const ROUNDS = Number(opt('--rounds', 6))
const PER = Number(opt('--per', 100))
const MESSAGES = Number(opt('--messages', 100_000))
const data = dataFolder('st-reads-')
const DATA = data.dir
const { SessionTools } = loadAddon()
const CTX = { agentSessionKey: 'agent:main:main' }

const seedOurs = (file, size) => seed(SessionTools, file, size)
const compare = (label, sides) => compareSides(label, sides, { rounds: ROUNDS, per: PER })

for (const size of SIZES) {
  const st = await seedOurs(path.join(DATA, `ours-${size}`, 'sessions.db'), size)
  const sqFile = path.join(DATA, `sqlite-${size}`, 'sessions.db')
  const sq = seedSqlite(sqFile, size)
  const raw = new Database(sqFile, { readonly: true })
  const q = raw.prepare("SELECT key, entry FROM sessions WHERE agent_id = 'main' ORDER BY updated_at DESC LIMIT 50")
  const list = () => st.sessionsList({ limit: 50 }, CTX)
  await compare(`sessions_list 50 @ ${size}`, [
    { name: 'ours', fn: list },
    { name: 'ours-cold', fn: list, pre: () => st.setConfig(null) },
    { name: 'sqlite', fn: () => sq.sessionsList({ limit: 50 }, CTX) },
    { name: 'raw', fn: () => q.all().map((r) => ({ key: r.key, entry: JSON.parse(r.entry) })) },
  ])
  await st.close()
  sq.close()
  raw.close()
}

{
  const file = path.join(DATA, `history-ours-${MESSAGES}`, 'sessions.db')
  const fresh = !fs.existsSync(file)
  const st = await SessionTools.open({ path: file })
  const sqDir = path.join(DATA, `history-sqlite-${MESSAGES}`)
  fs.mkdirSync(sqDir, { recursive: true })
  const sq = new SqliteStore(path.join(sqDir, 'sessions.db'))
  if (fresh) {
    await st.upsertSession('agent:main:main', { lastChannel: 'whatsapp' })
    sq.upsertSession('agent:main:main', { lastChannel: 'whatsapp' })
    for (let i = 0; i < MESSAGES; i += 10_000) {
      const msgs = []
      for (let j = i; j < Math.min(MESSAGES, i + 10_000); j++) msgs.push(makeTranscriptMessage(j))
      await st.appendMessages('agent:main:main', msgs)
      sq.appendMessages('agent:main:main', msgs)
    }
  }
  const params = { sessionKey: 'main', limit: 20 }
  await compare(`sessions_history 20 of ${MESSAGES}`, [
    { name: 'ours', fn: () => st.sessionsHistory(params, CTX) },
    { name: 'sqlite', fn: () => sq.sessionsHistory(params, CTX) },
  ])
  await st.close()
  sq.close()
}
data.done()
