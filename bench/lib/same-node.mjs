// session-tools inside the OpenClaw child (openclaw-child.mjs): the addon loaded in that process,
// under its Node, seeded with the same generated data as ../run.mjs seeds it, so that the
// comparison with OpenClaw's store runs on one Node, in one process. Never run on its own.
import path from 'node:path'
import { createRequire } from 'node:module'
import { seedSessions, seedTranscript } from './seed.mjs'

const LONG_KEY = 'agent:main:main'

/** Our store in `dir`, opened with the addon whose index.js is `addon`. */
export async function openOurs(addon, dir) {
  const { SessionTools } = createRequire(import.meta.url)(path.resolve(addon))
  const st = await SessionTools.open({ path: path.join(dir, 'sessions.db') })
  return {
    st,
    ctx: { agentSessionKey: LONG_KEY },
    /** Sessions `from` to `to` of the generated set, as run.mjs seeds them. */
    seed: (from, to) => seedSessions(st, from, to),
    /** The long transcript of run.mjs's history rows: `n` messages on the main session. */
    async seedHistory(n) {
      await st.upsertSession(LONG_KEY, { lastChannel: 'whatsapp' })
      await seedTranscript(st, LONG_KEY, n)
    },
  }
}
