// Child process for the memory workload: open one store, touch it, report memory as JSON.
//   node --expose-gc memory-child.mjs <baseline|sqlite|ours> <file> <addon index.js>
import { createRequire } from 'node:module'
import { FileStore } from './baseline.mjs'

const [side, file, addon] = process.argv.slice(2)
let keep
if (side === 'baseline') {
  const store = new FileStore(file)
  await store.load() // the parsed store stays in the cache, as in the gateway process
  await store.sessionsList({ limit: 50 }, { agentSessionKey: 'agent:main:main' })
  keep = store
} else if (side === 'sqlite') {
  const { SqliteStore } = await import('./sqlite-baseline.mjs')
  const store = new SqliteStore(file)
  store.sessionsList({ limit: 50 }, { agentSessionKey: 'agent:main:main' })
  keep = store
} else {
  const { SessionTools } = createRequire(import.meta.url)(addon)
  const st = await SessionTools.open({ path: file })
  await st.sessionsList({ limit: 50 }, { agentSessionKey: 'agent:main:main' })
  keep = st
}
for (let i = 0; i < 3; i++) { globalThis.gc?.(); await new Promise((r) => setTimeout(r, 50)) }
const m = process.memoryUsage()
console.log(JSON.stringify({ rssBytes: m.rss, heapUsedBytes: m.heapUsed, externalBytes: m.external, kept: !!keep }))
if (side !== 'baseline') await keep.close()
