// A 2026.1 gateway state folder for the import benches: `sessions` sessions spread over
// `agents` (the first of each agent is its main session), `perSession` messages each as version-3
// JSONL transcripts (alternating user and assistant messages with usage), and one
// `sessions.json` per agent. Only Node built-ins.
import fs from 'node:fs'
import path from 'node:path'

function uuid(i) {
  const h = i.toString(16).padStart(12, '0')
  return `0b5e55ed-0000-4000-8000-${h}`
}

/** Writes the folder at `stateDir`; returns how long it took and how many bytes it wrote. */
export function buildStateFolder(stateDir, { sessions: SESSIONS, perSession: PER_SESSION, agents: AGENTS }) {
  const t0 = performance.now()
  const stores = Object.fromEntries(AGENTS.map((a) => [a, {}]))
  let bytes = 0
  for (let i = 0; i < SESSIONS; i++) {
    const agent = AGENTS[i % AGENTS.length]
    const dir = path.join(stateDir, 'agents', agent, 'sessions')
    if (i < AGENTS.length) fs.mkdirSync(dir, { recursive: true })
    const sid = uuid(i)
    const key = i < AGENTS.length ? `agent:${agent}:main` : `agent:${agent}:telegram:direct:user-${i}`
    const updatedAt = 1_700_000_000_000 + i * 1000
    stores[agent][key] = { sessionId: sid, updatedAt, lastChannel: 'telegram', lastTo: `user-${i}`, inputTokens: i, outputTokens: 2 * i, model: 'claude-sonnet' }
    const lines = [JSON.stringify({ type: 'session', version: 3, id: sid, timestamp: new Date(updatedAt).toISOString(), cwd: '/srv/gateway' })]
    let parent = null
    for (let j = 0; j < PER_SESSION; j++) {
      const id = (i * PER_SESSION + j).toString(16).padStart(8, '0').slice(-8)
      const message =
        j % 2 === 0
          ? { role: 'user', content: `Question ${j} of session ${i}: what is the status of ticket #${i * 7 + j}?`, timestamp: updatedAt + j }
          : {
              role: 'assistant',
              content: [{ type: 'text', text: `Ticket #${i * 7 + j - 1} is in progress; the next update is due tomorrow morning.` }],
              api: 'anthropic-messages',
              provider: 'anthropic',
              model: 'claude-sonnet',
              usage: { input: 120, output: 30, cacheRead: 0, cacheWrite: 0, totalTokens: 150, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
              stopReason: 'stop',
              timestamp: updatedAt + j,
            }
      lines.push(JSON.stringify({ type: 'message', id, parentId: parent, timestamp: new Date(updatedAt + j).toISOString(), message }))
      parent = id
    }
    const text = lines.join('\n') + '\n'
    bytes += text.length
    fs.writeFileSync(path.join(dir, `${sid}.jsonl`), text)
  }
  for (const a of AGENTS) {
    const text = JSON.stringify(stores[a], null, 2)
    bytes += text.length
    fs.writeFileSync(path.join(stateDir, 'agents', a, 'sessions', 'sessions.json'), text)
  }
  return { ms: performance.now() - t0, bytes }
}

/** The number after `name` on the command line, else `dflt` (the import benches' sizes). */
export function numberArg(name, dflt) {
  const i = process.argv.indexOf(name)
  return i >= 0 ? Number(process.argv[i + 1]) : dflt
}
