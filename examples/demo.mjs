// `npm run demo`: a scripted scenario with built-in fake agents on a throwaway in-memory store.
// No API keys, no network. It shows:
//   1. sessions_send: Ada (the main session) asks the dev group's agent a question, waits for the
//      reply, the two agents talk back and forth once, and the answer is announced to the
//      group's Discord channel through `deliver`;
//   2. sessions_spawn: Ada spawns a research sub-agent in the background; when it finishes, its
//      result is announced back to Ada, who tells the user on WhatsApp in her own words;
//   3. the sessions list and the transcripts that all of this left behind.
import { createRequire } from 'node:module'
import { readdirSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..')
if (!readdirSync(root).some((f) => f.endsWith('.node'))) {
  console.log('building the addon first (once)…')
  const r = spawnSync('npx', ['napi', 'build', '--platform', '--release'], { cwd: root, stdio: 'inherit' })
  if (r.status !== 0) process.exit(1)
}
const { SessionTools } = createRequire(import.meta.url)(path.join(root, 'index.js'))

const ADA = 'agent:main:main'
const DEV = 'agent:main:discord:group:dev'
const dim = (s) => (process.stdout.isTTY ? `\x1b[2m${s}\x1b[0m` : s)
const bold = (s) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s)
const say = (who, text) => console.log(`  ${bold(who.padEnd(14))} ${text}`)
const short = (key) => key.replace(/^agent:(\w+):/, '$1/')

// ---- the fake agents -----------------------------------------------------------------------
// Each answers from a script, keyed by the session and what it was asked; a real gateway would
// run a model here. `deliver: true` runs are what the agent tells its own channel.
function fakeAgent(req) {
  const m = req.message
  if (req.sessionKey === DEV) {
    if (m.startsWith('Agent-to-agent announce step')) return 'Deploy 42 finished at 14:02 UTC, all checks green.'
    if (req.extraSystemPrompt?.includes('reply step')) return 'REPLY_SKIP'
    return 'Deploy 42 finished at 14:02 UTC; all 318 checks passed.'
  }
  if (req.sessionKey === ADA && req.lane === 'nested') return 'Thanks! Please post the result in the channel.'
  if (req.sessionKey === ADA && req.lane === 'announce') {
    return 'Quick update: yesterday there were 3 errors, all from the cache, and a restart fixed them.'
  }
  if (req.lane === 'subagent') return 'Found 3 errors yesterday, all cache timeouts between 02:10 and 02:14; a restart cleared them.'
  return 'ok'
}

const delivered = []
let announced
const announcedOnce = new Promise((resolve) => (announced = resolve))
const st = await SessionTools.open({
  path: ':memory:',
  config: {
    agents: { list: [{ id: 'main', default: true, subagents: { allowAgents: ['research'] } }, { id: 'research', name: 'Research' }] },
    session: { agentToAgent: { maxPingPongTurns: 2 } },
  },
  async runAgent(req) {
    await new Promise((r) => setTimeout(r, 20)) // the "model" thinks for a moment
    const reply = fakeAgent(req)
    say(short(req.sessionKey), `${dim(`[${req.lane}]`)} ${reply}`)
    if (req.deliver) say('  → whatsapp', `${req.to}: ${reply}`)
    return { reply, usage: { input: 1200, output: 80 }, model: 'fake/echo-1', provider: 'fake' }
  },
  async deliver(msg) {
    delivered.push(msg)
    say(`  → ${msg.channel}`, `${msg.to}: ${msg.message}`)
    announced()
  },
  onEvent(ev) {
    if (['a2a.turn', 'a2a.announce', 'subagent.announced', 'delivery.blocked', 'run.error'].includes(ev.type)) {
      console.log(dim(`  · ${ev.type} ${ev.sessionKey ? short(ev.sessionKey) : ''}`))
    }
  },
})

await st.upsertSession('main', { lastChannel: 'whatsapp', lastTo: '+15550001', displayName: 'Ada' })
await st.upsertSession(DEV, { chatType: 'group', channel: 'discord', subject: 'Dev Team' })
const ctx = { agentSessionKey: ADA, agentChannel: 'whatsapp', agentTo: '+15550001' }

console.log(bold('\n1. sessions_send: Ada asks the dev group, waits for the reply, and it is announced'))
const sent = await st.sessionsSend({ sessionKey: DEV, message: 'Did deploy 42 finish?', timeoutSeconds: 10 }, ctx)
console.log(dim(`  tool result: ${JSON.stringify(sent)}`))
await announcedOnce

console.log(bold('\n2. sessions_spawn: a research sub-agent works in the background and reports back'))
const spawned = await st.sessionsSpawn({ task: "Summarise yesterday's error logs", label: 'error logs', agentId: 'research' }, ctx)
console.log(dim(`  tool result: ${JSON.stringify(spawned)}`))
for (let i = 0; i < 500; i++) {
  const [run] = await st.listSubagentRuns(ADA)
  if (run?.announce.status !== 'pending') break
  await new Promise((r) => setTimeout(r, 20))
}
const [run] = await st.listSubagentRuns(ADA)
console.log(dim(`  registry: outcome ${run.outcome?.status}, announce ${run.announce.status} after ${run.announce.attempts} attempt(s)`))

console.log(bold('\n3. what the store holds now'))
const list = await st.sessionsList({}, { agentSessionKey: ADA })
for (const s of list.sessions) console.log(`  ${s.key.padEnd(60)} kind ${s.kind.padEnd(6)} ${s.totalTokens ?? 0} tokens`)
for (const key of [ADA, DEV, run.childSessionKey]) {
  const h = await st.chatHistory(key, { limit: 20 })
  console.log(`\n  transcript of ${short(key)} (${h.messages.length} messages)`)
  for (const m of h.messages) {
    const text = typeof m.content === 'string' ? m.content : m.content.map((b) => b.text ?? '').join('')
    const from = m.provenance ? dim(` (${m.provenance.kind} from ${short(m.provenance.sourceSessionKey ?? '?')})`) : ''
    console.log(`    ${m.role.padEnd(9)} ${text.split('\n')[0].slice(0, 90)}${from}`)
  }
}
console.log(`\n  deliveries made: ${delivered.length}; sub-agent announce: ${run.announce.status}`)
await st.close()
