// `npm run demo`: a scripted tour of the store and the read-side session tools, on a throwaway
// in-memory store. No API keys, no network.
import { createRequire } from 'node:module'
import { existsSync, readdirSync } from 'node:fs'
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

const config = {
  agents: { list: [{ id: 'main', default: true, subagents: { allowAgents: ['research'] } }, { id: 'research', name: 'Research' }] },
  session: { sendPolicy: { rules: [{ action: 'deny', match: { channel: 'discord', chatType: 'group' } }] } },
}
const st = await SessionTools.open({ path: ':memory:', config })
const show = (title, v) => console.log(`\n== ${title}\n${JSON.stringify(v, null, 2)}`)

const now = Date.now()
await st.upsertSession('main', { lastChannel: ' WhatsApp ', lastTo: '+15550001' })
await st.upsertSession('discord:group:dev', { chatType: 'group', channel: 'discord', subject: 'Dev Team' })
await st.upsertSession('cron:nightly', { updatedAt: now - 3_600_000 })
await st.appendMessages('main', [
  { role: 'user', content: '[WhatsApp 2026-01-24 13:36] what is on today?\n[message_id: 7b8b]', timestamp: now },
  { role: 'assistant', content: [{ type: 'text', text: 'Two meetings and a deploy.' }], timestamp: now },
  { role: 'toolResult', toolCallId: 't1', toolName: 'calendar', content: [{ type: 'text', text: '{…}' }], isError: false },
])

show('sessions_list (requester: main session of agent main)', await st.sessionsList({ messageLimit: 2 }, { agentSessionKey: 'agent:main:main' }))
show('sessions_history main (envelopes stripped, tool results left out)', await st.sessionsHistory({ sessionKey: 'main' }))
show('send policy of the discord group', await st.resolveSendPolicy({ sessionKey: 'discord:group:dev' }))
show('/send off from the owner', await st.handleSendCommand({ sessionKey: 'main', text: '/send off', isOwner: true }))
show('send policy of main now', await st.resolveSendPolicy({ sessionKey: 'main' }))
show('agents_list', await st.agentsList({ agentSessionKey: 'main' }))
show('a bad request is a clear error', await st.chatHistory('main', { limit: 5000 }).catch((e) => ({ code: e.code, message: e.message })))
await st.close()
