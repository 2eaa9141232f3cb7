#!/usr/bin/env node
// sessions_list at 50,000 sessions and sessions_history at 100,000 messages, under both
// contracts, on one store (the contract is switched with setConfig between the runs).
//   npx napi build --platform --release && node bench/contract9.mjs [--quick]
// Prints medians and p95 in µs; asserts nothing.
import os from 'node:os'
import path from 'node:path'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'

const QUICK = process.argv.includes('--quick')
const SESSIONS = QUICK ? 5_000 : 50_000
const MESSAGES = QUICK ? 10_000 : 100_000
const ITERS = QUICK ? 15 : 60
const require = createRequire(import.meta.url)
const { SessionTools } = require(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../index.js'))

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'st-c9-'))
const st = await SessionTools.open({ path: path.join(dir, 'bench.db'), mirrorDir: null })
const CTX = { agentSessionKey: 'agent:main:main' }
const AGENTS = ['main', 'ops', 'research', 'coder']
const base = Date.now() + 3_600_000

console.error(`seeding ${SESSIONS} sessions, ${MESSAGES} messages …`)
for (let i = 0; i < SESSIONS; i += 500) {
  const batch = []
  for (let j = i; j < Math.min(SESSIONS, i + 500); j++) {
    const agent = AGENTS[j % AGENTS.length]
    batch.push(
      st.upsertSession(`agent:${agent}:telegram:direct:${j}`, {
        updatedAt: base - j * 1000,
        label: j % 97 === 0 ? `label-${j}` : undefined,
        displayName: `Session ${j}`,
        chatType: j % 5 === 0 ? 'group' : 'direct',
        archivedAt: j % 10 === 0 ? base : undefined,
        pinnedAt: j % 1000 === 0 ? base : undefined,
        owner: j % 50 === 0 ? { actor: { type: 'profile', id: `u${j % 7}` } } : undefined,
        projectId: j % 200 === 0 ? 'proj-1' : undefined,
      }),
    )
  }
  await Promise.all(batch)
}
await st.upsertSession('agent:main:main', { updatedAt: base + 1 })
for (let i = 0; i < MESSAGES; i += 1000) {
  const msgs = []
  for (let j = i; j < i + 1000; j++) {
    msgs.push(j % 2 ? { role: 'assistant', content: [{ type: 'text', text: `reply ${j} ` + 'x'.repeat(200) }], usage: { input: 10 } } : { role: 'user', content: `question ${j}` })
  }
  await st.appendMessages('agent:main:history', msgs)
}

async function time(label, fn) {
  for (let i = 0; i < 5; i++) await fn()
  const t = []
  for (let i = 0; i < ITERS; i++) {
    const s = performance.now()
    await fn()
    t.push((performance.now() - s) * 1000)
  }
  t.sort((a, b) => a - b)
  const med = t[Math.floor(t.length / 2)]
  const p95 = t[Math.min(t.length - 1, Math.ceil(t.length * 0.95) - 1)]
  console.log(`| ${label} | ${Math.round(med).toLocaleString('en')} | ${Math.round(p95).toLocaleString('en')} |`)
}

console.log(`\n${SESSIONS.toLocaleString('en')} sessions, ${MESSAGES.toLocaleString('en')} messages in one transcript; µs, median | p95 of ${ITERS}\n`)
console.log('| call | median µs | p95 µs |\n| --- | --- | --- |')
st.setConfig(null, { contract: '2026.1' })
await time('2026.1 sessions_list limit 50', () => st.sessionsList({ limit: 50 }, CTX))
await time('2026.1 sessions_list limit 200', () => st.sessionsList({}, CTX))
await time('2026.1 sessions_history limit 20', () => st.sessionsHistory({ sessionKey: 'agent:main:history', limit: 20 }, CTX))
await time('2026.1 sessions_history limit 200', () => st.sessionsHistory({ sessionKey: 'agent:main:history' }, CTX))
st.setConfig(null, { contract: '2026.9' })
await time('2026.9 sessions_list limit 50', () => st.sessionsList({ limit: 50 }, CTX))
await time('2026.9 sessions_list default (100)', () => st.sessionsList({}, CTX))
await time('2026.9 sessions_list limit 200', () => st.sessionsList({ limit: 200 }, CTX))
await time(`2026.9 sessions_list limit 50 offset ${SESSIONS - 1000}`, () => st.sessionsList({ limit: 50, offset: SESSIONS - 1000 }, CTX))
await time('2026.9 sessions_list label', () => st.sessionsList({ label: 'label-970' }, CTX))
await time('2026.9 sessions_list ownerId', () => st.sessionsList({ ownerId: 'u3', limit: 50 }, CTX))
await time('2026.9 sessions_list projectId', () => st.sessionsList({ projectId: 'proj-1', limit: 50 }, CTX))
await time('2026.9 sessions_list pinned', () => st.sessionsList({ pinned: true, limit: 50 }, CTX))
await time('2026.9 sessions_list archived=true', () => st.sessionsList({ archived: true, limit: 50 }, CTX))
await time('2026.9 sessions_list agentId', () => st.sessionsList({ agentId: 'ops', limit: 50 }, CTX))
await time('2026.9 sessions_list kinds group', () => st.sessionsList({ kinds: ['group'], limit: 50 }, CTX))
await time('2026.9 sessions_list search (rare)', () => st.sessionsList({ search: 'session 4999', limit: 50 }, CTX))
await time('2026.9 sessions_list visibility agent (a2a scan)', async () => {
  st.setConfig({ tools: { sessions: { visibility: 'agent' } } })
  await st.sessionsList({ limit: 50 }, CTX)
})
await time('2026.9 sessions_list a2a allow=[main] (scan-limit)', async () => {
  st.setConfig({ tools: { agentToAgent: { allow: ['main', 'zzz'] } } })
  await st.sessionsList({ limit: 200 }, { agentSessionKey: 'agent:main:telegram:direct:0' })
})
st.setConfig(null)
await time('2026.9 sessions_history limit 20', () => st.sessionsHistory({ sessionKey: 'agent:main:history', limit: 20 }, CTX))
await time('2026.9 sessions_history default (200)', () => st.sessionsHistory({ sessionKey: 'agent:main:history' }, CTX))
await time('2026.9 sessions_history limit 20 offset 0', () => st.sessionsHistory({ sessionKey: 'agent:main:history', limit: 20, offset: 0 }, CTX))
await time(`2026.9 sessions_history limit 20 offset ${MESSAGES - 100}`, () => st.sessionsHistory({ sessionKey: 'agent:main:history', limit: 20, offset: MESSAGES - 100 }, CTX))
await time('2026.9 sessions_history messageId (positional)', () => st.sessionsHistory({ sessionKey: 'agent:main:history', limit: 20, messageId: '00000100' }, CTX))
await time('2026.9 sessions_history messageId (unknown id: index miss)', () => st.sessionsHistory({ sessionKey: 'agent:main:history', limit: 20, messageId: 'no-such-id' }, CTX))
await st.close()
fs.rmSync(dir, { recursive: true, force: true })
