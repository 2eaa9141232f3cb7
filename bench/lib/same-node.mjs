// session-tools inside the OpenClaw child (openclaw-child.mjs): the addon loaded in that process,
// under its Node, seeded with the same generated data as ../run.mjs seeds it, so that the
// comparison with OpenClaw's store runs on one Node, in one process. Never run on its own.
import path from 'node:path'
import { createRequire } from 'node:module'
import { makeEntry, makeTranscriptMessage } from './data.mjs'

const SEED_BATCH = 500
const HISTORY_CHUNK = 10_000
const LONG_KEY = 'agent:main:main'

/** Our store in `dir`, opened with the addon whose index.js is `addon`. */
export async function openOurs(addon, dir) {
  const { SessionTools } = createRequire(import.meta.url)(path.resolve(addon))
  const st = await SessionTools.open({ path: path.join(dir, 'sessions.db') })
  return {
    st,
    ctx: { agentSessionKey: LONG_KEY },
    /** Sessions `from` to `to` of the generated set, as run.mjs seeds them. */
    async seed(from, to) {
      for (let i = from; i < to; i += SEED_BATCH) {
        const batch = []
        for (let j = i; j < Math.min(to, i + SEED_BATCH); j++) {
          const { key, entry } = makeEntry(j)
          const { updatedAt, sessionId, ...patch } = entry // the merge sets updatedAt = now
          batch.push(st.upsertSession(key, { sessionId, ...patch }))
        }
        await Promise.all(batch)
      }
    },
    /** The long transcript of run.mjs's history rows: `n` messages on the main session. */
    async seedHistory(n) {
      await st.upsertSession(LONG_KEY, { lastChannel: 'whatsapp' })
      for (let i = 0; i < n; i += HISTORY_CHUNK) {
        const msgs = []
        for (let j = i; j < Math.min(n, i + HISTORY_CHUNK); j++) msgs.push(makeTranscriptMessage(j))
        await st.appendMessages(LONG_KEY, msgs)
      }
    },
  }
}
