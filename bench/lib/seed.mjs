// Seeding session-tools through its own API with the generated data (data.mjs), as every harness
// seeds it: the sessions, and the messages of the long transcript. It loads no native module of
// its own, so the OpenClaw child (under Node 24) uses it too.
import { makeEntry, makeTranscriptMessage } from './data.mjs'

/** Sessions `from` to `to` of the generated set, `batch` upserts at a time (the merge rule sets
 * `updatedAt` to now, so the generated one is left out). */
export async function seedSessions(st, from, to, batch = 500) {
  for (let i = from; i < to; i += batch) {
    const calls = []
    for (let j = i; j < Math.min(to, i + batch); j++) {
      const { key, entry } = makeEntry(j)
      const { updatedAt, sessionId, ...patch } = entry
      calls.push(st.upsertSession(key, { sessionId, ...patch }))
    }
    await Promise.all(calls)
  }
}

/** `n` generated messages appended to `key`'s transcript, 10,000 a call. */
export async function seedTranscript(st, key, n) {
  for (let i = 0; i < n; i += 10_000) {
    const msgs = []
    for (let j = i; j < Math.min(n, i + 10_000); j++) msgs.push(makeTranscriptMessage(j))
    await st.appendMessages(key, msgs)
  }
}
