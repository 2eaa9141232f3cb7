// The 2026.9 round trip, proved with the real openclaw@2026.9.6 package (issue 15):
//   committed fixture folder (written by the package) → importStateDir → store
//   → a state folder the package initialises → exportStateDir({ layout: '2026.9' })
//   → the package opens, lists, reads and appends to it → importStateDir of that folder again;
//   the same store with one sub-agent task of this engine's exported into a second folder, whose
//   task ledger the package loads (the imported tasks as it reads them in the fixture, and ours);
//   a 2026.1 store rolled forward the same way (its runs accepted by the package's registry
//   loader); and imports of the fixture while the package keeps appending to it.
//
// Needs Node >= 24.16 (the package's floor) and the package installed:
//   OPENCLAW_2026_9_DIR=/path/with/node_modules/openclaw <node 24> scripts/check-2026.9-export.mjs
// Without OPENCLAW_2026_9_DIR it prints that it did not run and exits 0 (npm test runs it only
// when the variable is set). Prints one JSON summary; exits 1 when a check failed.
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const repo = path.resolve(here, '..')
const pkgDir = process.env.OPENCLAW_2026_9_DIR
const role = process.argv[2]

// ---- child roles: each runs the package in a process of its own (its caches and workers) -------
async function packageModules(stateDir) {
  process.env.OPENCLAW_STATE_DIR = stateDir
  process.env.HOME = stateDir
  const require = createRequire(path.join(pkgDir, 'package.json'))
  return {
    store: await import(require.resolve('openclaw/plugin-sdk/session-store-runtime')),
    transcripts: await import(require.resolve('openclaw/plugin-sdk/session-transcript-runtime')),
    sqlite: await import(require.resolve('openclaw/plugin-sdk/sqlite-runtime')),
  }
}

/** The task ledger of a folder as the package's own snapshot reader returns it (an internal chunk
 * of 2026.9.6; `undefined` on other builds). */
async function packageTasks(stateDir) {
  const require = createRequire(path.join(pkgDir, 'package.json'))
  const dist = path.join(path.dirname(require.resolve('openclaw/plugin-sdk/session-store-runtime')), '..')
  const chunk = path.join(dist, 'task-registry.store.kernel-BuNI8UuR.mjs')
  if (!fs.existsSync(chunk)) return undefined
  const { DatabaseSync } = await import('node:sqlite')
  const file = path.join(stateDir, 'state', 'openclaw.sqlite')
  const db = new DatabaseSync(file, { readOnly: true })
  const snapshot = (await import(chunk)).p({ db, path: file })
  db.close()
  return [...snapshot.tasks.values()]
}

if (role === '--tasks') {
  console.log(JSON.stringify(await packageTasks(process.argv[3]) ?? null))
  setTimeout(() => process.exit(0), 300)
} else if (role === '--init') {
  // What a gateway's first start does to a folder: create its databases.
  const [stateDir, ...agents] = process.argv.slice(3)
  const { sqlite } = await packageModules(stateDir)
  for (const agentId of agents) sqlite.openOpenClawAgentDatabase({ agentId })
  setTimeout(() => process.exit(0), 300)
} else if (role === '--read') {
  // List, read, append and upsert with the package's public entry points; report what it saw.
  const [stateDir, ...agents] = process.argv.slice(3)
  const { store, transcripts } = await packageModules(stateDir)
  const out = { agents: {} }
  for (const agentId of agents) {
    const listed = store.listSessionEntries({ agentId })
    const sessions = {}
    for (const { sessionKey, entry } of listed) {
      const visible = await transcripts.readVisibleSessionTranscriptMessageEntries({ agentId, sessionKey, sessionId: entry.sessionId })
      sessions[sessionKey] = { messages: visible.length, pinnedAt: entry.pinnedAt ?? null, archivedAt: entry.archivedAt ?? null, label: entry.label ?? null }
    }
    out.agents[agentId] = sessions
  }
  const mainEntry = store.getSessionEntry({ agentId: 'main', sessionKey: 'agent:main:main' })
  const appended = await transcripts.appendSessionTranscriptMessagesByIdentity({
    agentId: 'main',
    sessionKey: 'agent:main:main',
    sessionId: mainEntry.sessionId,
    messages: [{ message: { role: 'user', content: [{ type: 'text', text: 'written by 2026.9.6 after the export' }], timestamp: Date.UTC(2026, 8, 21) } }],
  })
  out.appended = appended.length
  const after = await transcripts.readVisibleSessionTranscriptMessageEntries({ agentId: 'main', sessionKey: 'agent:main:main', sessionId: mainEntry.sessionId })
  out.mainAfterAppend = after.length
  out.mainLastText = after.at(-1)?.message?.content?.[0]?.text ?? null
  await store.upsertSessionEntry({ agentId: 'main', sessionKey: 'agent:main:after-export', entry: { sessionId: '0e0e0e0e-0000-4000-8000-000000000001', updatedAt: Date.UTC(2026, 8, 21) } })
  out.mainListedAfterUpsert = store.listSessionEntries({ agentId: 'main' }).length
  // The package's own registry loader (an internal chunk of 2026.9.6; skipped on other builds):
  // it drops rows whose payload is not a canonical record, so this counts what it accepts.
  const chunk = path.join(path.dirname(createRequire(path.join(pkgDir, 'package.json')).resolve('openclaw/plugin-sdk/session-store-runtime')), '..', 'subagent-registry.store.sqlite-DcyWJbiA.mjs')
  if (fs.existsSync(chunk)) out.registryRuns = (await import(chunk)).r().size
  const { DatabaseSync } = await import('node:sqlite')
  const sdb = new DatabaseSync(path.join(stateDir, 'state', 'openclaw.sqlite'), { readOnly: true })
  out.subagentRuns = sdb.prepare('SELECT count(*) n FROM subagent_runs').get().n
  out.taskRuns = sdb.prepare('SELECT count(*) n FROM task_runs').get().n
  sdb.close()
  console.log(JSON.stringify(out))
  setTimeout(() => process.exit(0), 300)
} else if (role === '--write-loop') {
  // A live gateway: appends to one transcript for `ms` milliseconds, one message at a time.
  const [stateDir, agentId, sessionKey, ms] = process.argv.slice(3)
  const { store, transcripts } = await packageModules(stateDir)
  const entry = store.getSessionEntry({ agentId, sessionKey })
  const until = Date.now() + Number(ms)
  let n = 0
  console.error('writing')
  while (Date.now() < until) {
    n += 1
    await transcripts.appendSessionTranscriptMessagesByIdentity({
      agentId, sessionKey, sessionId: entry.sessionId,
      messages: [{ message: { role: 'user', content: [{ type: 'text', text: `live ${n}` }], timestamp: Date.UTC(2026, 8, 22) + n } }],
    })
  }
  console.log(JSON.stringify({ appended: n }))
  setTimeout(() => process.exit(0), 300)
} else {
  // ---- the driver --------------------------------------------------------------------------
  if (!pkgDir) {
    console.log('check-2026.9-export: NOT RUN (set OPENCLAW_2026_9_DIR to a folder where openclaw@2026.9.6 is installed)')
    process.exit(0)
  }
  const major = Number(process.versions.node.split('.')[0])
  if (major < 24) {
    console.log(`check-2026.9-export: NOT RUN (Node ${process.versions.node}; the 2026.9 package needs Node >= 24.16)`)
    process.exit(0)
  }
  const { SessionTools } = createRequire(import.meta.url)(path.join(repo, 'index.js'))
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'st-check-2026.9-'))
  const fixture = path.join(repo, '__test__/fixtures/openclaw-2026.9/state')
  const expected = JSON.parse(fs.readFileSync(path.join(repo, '__test__/fixtures/openclaw-2026.9/expected.json'), 'utf8'))
  const failures = []
  const check = (ok, what) => {
    if (!ok) failures.push(what)
  }
  const child = (...args) => {
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), ...args], { encoding: 'utf8', env: process.env })
    if (r.status !== 0) throw new Error(`${args[0]} failed: ${r.stderr}`)
    return r.stdout
  }

  const MAIN = { agentSessionKey: 'agent:main:main' }
  const st = await SessionTools.open({ path: path.join(tmp, 'store.db'), contract: '2026.9', runAgent: async () => ({ reply: 'done' }) })
  const imported = await st.importStateDir(fixture)
  check(imported.skipped.length === 0, 'the fixture imports with nothing skipped')
  const agents = Object.keys(expected.agents).filter((a) => !a.includes(':'))
  const expectSessions = agents.reduce((n, a) => n + Object.keys(expected.agents[a]).length, 0)
  const expectMessages = agents.reduce((n, a) => n + Object.values(expected.agents[a]).reduce((m, s) => m + s.messages, 0), 0)
  check(imported.sessions === expectSessions && imported.messages === expectMessages, `import ${imported.sessions}/${imported.messages} = ${expectSessions}/${expectMessages}`)

  const target = path.join(tmp, 'state')
  fs.mkdirSync(target)
  child('--init', target, ...agents)
  const exported = await st.exportStateDir(target, { layout: '2026.9' })
  check(exported.skipped.length === 0, 'the export skips nothing')
  check(exported.sessions === expectSessions && exported.messages === expectMessages, `export ${exported.sessions}/${exported.messages}`)
  check(exported.runs === expected.runs.length && exported.tasks === expected.tasks.length, `export runs ${exported.runs}, tasks ${exported.tasks}`)
  // Then one sub-agent run of this engine beside the imported ones (the `subagents` tool reads
  // them all): its task joins the same ledger, and the whole ledger goes into a second folder.
  const spawned = (await st.executeTool('sessions_spawn', { task: 'check the export', label: 'ours' }, MAIN)).details
  let ours
  for (let i = 0; i < 200 && !ours; i++) {
    const listed = (await st.executeTool('subagents', {}, MAIN)).details
    ours = listed.tasks.find((t) => t.label === 'ours' && t.status !== 'running')
    if (!ours) await new Promise((r) => setTimeout(r, 50))
  }
  check(ours !== undefined, `our sub-agent task (run ${spawned.runId}) finished`)
  const target2 = path.join(tmp, 'state-with-ours')
  fs.mkdirSync(target2)
  child('--init', target2, ...agents)
  const exported2 = await st.exportStateDir(target2, { layout: '2026.9' })
  check(exported2.skipped.length === 0 && exported2.runs === expected.runs.length + 1 && exported2.tasks === expected.tasks.length + 1, `export with ours: runs ${exported2.runs}, tasks ${exported2.tasks}`)
  await st.close()

  const seen = JSON.parse(child('--read', target, ...agents).trim().split('\n').at(-1))
  for (const a of agents) {
    for (const [key, want] of Object.entries(expected.agents[a])) {
      const got = seen.agents[a]?.[key]
      check(got && got.messages === want.messages, `${key}: the package reads ${got?.messages} messages, expected ${want.messages}`)
      check(got && got.pinnedAt === want.pinnedAt && got.archivedAt === want.archivedAt && got.label === want.label, `${key}: pinned/archived/label`)
    }
    check(Object.keys(seen.agents[a] ?? {}).length === Object.keys(expected.agents[a]).length, `${a}: the package lists every session`)
  }
  check(seen.appended === 1 && seen.mainAfterAppend === expected.agents.main['agent:main:main'].messages + 1, 'the package appends to an exported transcript')
  check(seen.mainListedAfterUpsert === Object.keys(expected.agents.main).length + 1, 'the package adds a session beside the exported ones')
  check(seen.subagentRuns === expected.runs.length && seen.taskRuns === expected.tasks.length, 'runs and tasks are in the global database')
  check(seen.registryRuns === undefined || seen.registryRuns === expected.runs.length, `the package's registry loader accepts ${seen.registryRuns} runs`)
  // The package's task ledger of the second export: the imported tasks exactly as it reads them in
  // the fixture (after our `subagents` calls), and ours as it reads a sub-agent task of its own.
  const fixtureCopy = path.join(tmp, 'fixture-copy')
  fs.cpSync(fixture, fixtureCopy, { recursive: true }) // a reader of a WAL database writes beside it
  const fixtureTasks = JSON.parse(child('--tasks', fixtureCopy).trim().split('\n').at(-1))
  const ledger = JSON.parse(child('--tasks', target2).trim().split('\n').at(-1))
  let tasksChecked = 'not checked'
  if (ledger && fixtureTasks) {
    check(ledger.length === fixtureTasks.length + 1, `the package reads ${ledger.length} tasks`)
    const byId = new Map(ledger.map((t) => [t.taskId, t]))
    for (const t of fixtureTasks) check(JSON.stringify(byId.get(t.taskId)) === JSON.stringify(t), `the imported task ${t.taskId} goes back as the package read it`)
    const mine = byId.get(ours?.taskId)
    check(
      mine?.runId === spawned.runId && mine?.sourceId === spawned.runId && mine?.scopeKind === 'session' && mine?.notifyPolicy === 'done_only' &&
        mine?.detail?.kind === 'task_backing_instance' && mine?.ownerKey === 'agent:main:main' && mine?.task === 'check the export',
      `the package reads our task as a sub-agent task of its own: ${JSON.stringify(mine)}`,
    )
    tasksChecked = { fixture: fixtureTasks.length, exported: ledger.length, ours: mine ? { status: mine.status, deliveryStatus: mine.deliveryStatus, terminalOutcome: mine.terminalOutcome } : null }
  }

  // A 2026.1 user's store (sessions.json + JSONL + runs.json v1) rolled forward into 2026.9: the
  // package lists it and its registry loader accepts the runs (their execution/delivery records
  // are derived from the 2026.1 fields).
  const legacy = path.join(tmp, 'legacy')
  fs.mkdirSync(path.join(legacy, 'agents/main/sessions'), { recursive: true })
  fs.mkdirSync(path.join(legacy, 'subagents'))
  fs.writeFileSync(path.join(legacy, 'agents/main/sessions/sessions.json'), JSON.stringify({
    'agent:main:main': { sessionId: 'legacy-main', updatedAt: 1789900000000, label: 'From 2026.1' },
    'agent:main:subagent:helper': { sessionId: 'legacy-helper', updatedAt: 1789900001000, spawnedBy: 'agent:main:main' },
  }))
  fs.writeFileSync(path.join(legacy, 'agents/main/sessions/legacy-main.jsonl'), [
    { type: 'session', version: 3, id: 'legacy-main', timestamp: '2026-09-20T10:00:00.000Z', cwd: '/w' },
    { type: 'message', id: 'm1', parentId: null, timestamp: '2026-09-20T10:00:01.000Z', message: { role: 'user', content: [{ type: 'text', text: 'hello from 2026.1' }], timestamp: 1789898401000 } },
    { type: 'message', id: 'm2', parentId: 'm1', timestamp: '2026-09-20T10:00:02.000Z', message: { role: 'assistant', content: [{ type: 'text', text: 'hi' }], timestamp: 1789898402000 } },
  ].map((l) => JSON.stringify(l)).join('\n') + '\n')
  fs.writeFileSync(path.join(legacy, 'subagents/runs.json'), JSON.stringify({ version: 1, runs: {
    done: { runId: 'done', childSessionKey: 'agent:main:subagent:helper', requesterSessionKey: 'agent:main:main', requesterDisplayKey: 'main', task: 'help', cleanup: 'keep', createdAt: 10, startedAt: 10, endedAt: 20, outcome: { status: 'ok' }, announceCompletedAt: 30 },
    going: { runId: 'going', childSessionKey: 'agent:main:subagent:helper', requesterSessionKey: 'agent:main:main', requesterDisplayKey: 'main', task: 'more', cleanup: 'keep', createdAt: 40, startedAt: 40 },
  } }))
  const st3 = await SessionTools.open({ path: path.join(tmp, 'legacy.db') })
  const legacyIn = await st3.importStateDir(legacy)
  const target1 = path.join(tmp, 'state-from-2026.1')
  fs.mkdirSync(target1)
  child('--init', target1, 'main')
  const legacyOut = await st3.exportStateDir(target1, { layout: '2026.9' })
  await st3.close()
  check(legacyIn.sessions === 2 && legacyIn.messages === 2 && legacyIn.runs === 2, `2026.1 import ${legacyIn.sessions}/${legacyIn.messages}/${legacyIn.runs}`)
  check(legacyOut.sessions === 2 && legacyOut.messages === 2 && legacyOut.runs === 2 && legacyOut.skipped.length === 0, `2026.1 store exported as 2026.9 ${legacyOut.sessions}/${legacyOut.messages}/${legacyOut.runs}`)
  const seen1 = JSON.parse(child('--read', target1, 'main').trim().split('\n').at(-1))
  check(Object.keys(seen1.agents.main).length === 2 && seen1.agents.main['agent:main:main']?.messages === 2, 'the package lists and reads the 2026.1 sessions')
  check(seen1.agents.main['agent:main:main']?.label === 'From 2026.1', 'the 2026.1 entry keeps its label')
  check(seen1.registryRuns === undefined || seen1.registryRuns === 2, `the package's registry loader accepts ${seen1.registryRuns} of the 2 runs from 2026.1`)

  // A live gateway writing while we import: every import reads one consistent snapshot (nothing
  // skipped, the transcript a prefix of what the gateway wrote), and the last one reads it all.
  const live = path.join(tmp, 'live')
  fs.cpSync(fixture, live, { recursive: true })
  const liveKey = 'agent:main:discord:group:dev'
  const base = expected.agents.main[liveKey].messages
  const writer = spawn(process.execPath, [fileURLToPath(import.meta.url), '--write-loop', live, 'main', liveKey, '6000'], { env: process.env })
  let writerOut = ''
  writer.stdout.on('data', (d) => (writerOut += d))
  await new Promise((resolve) => writer.stderr.on('data', (d) => String(d).includes('writing') && resolve()))
  const during = []
  for (let i = 0; i < 3; i++) {
    const s4 = await SessionTools.open({ path: ':memory:', mirrorDir: null })
    const r = await s4.importStateDir(live)
    const h = await s4.chatHistory(liveKey, { limit: 1000 })
    const texts = h.messages.slice(base).map((m) => m.content?.[0]?.text)
    check(r.skipped.length === 0 && r.sessions === expectSessions, `import while the gateway writes: ${r.sessions} sessions, ${r.skipped.length} skipped`)
    check(texts.every((t, j) => t === `live ${j + 1}`), 'what an import read of the live transcript is a prefix of what was written')
    during.push(h.messages.length - base)
    await s4.close()
    await new Promise((res) => setTimeout(res, 800))
  }
  await new Promise((resolve) => writer.on('exit', resolve))
  const appendedLive = JSON.parse(writerOut.trim().split('\n').at(-1)).appended
  const s5 = await SessionTools.open({ path: ':memory:', mirrorDir: null })
  const after = await s5.importStateDir(live)
  await s5.close()
  check(after.messages === expectMessages + appendedLive, `after the writer stopped: ${after.messages} = ${expectMessages} + ${appendedLive}`)

  // And back: the folder the package kept writing to imports again.
  const st2 = await SessionTools.open({ path: path.join(tmp, 'back.db') })
  const back = await st2.importStateDir(target)
  await st2.close()
  check(back.sessions === expectSessions + 1 && back.messages === expectMessages + 1, `re-import ${back.sessions}/${back.messages}`)

  const summary = {
    fixture: { sessions: expectSessions, messages: expectMessages, runs: expected.runs.length, tasks: expected.tasks.length },
    imported: { sessions: imported.sessions, messages: imported.messages, runs: imported.runs, tasks: imported.tasks },
    exported: { sessions: exported.sessions, messages: exported.messages, runs: exported.runs, tasks: exported.tasks },
    packageRead: { sessions: agents.reduce((n, a) => n + Object.keys(seen.agents[a] ?? {}).length, 0), appended: seen.appended, listedAfterUpsert: seen.mainListedAfterUpsert, runs: seen.subagentRuns, registryRuns: seen.registryRuns ?? 'not checked', tasks: seen.taskRuns, taskLedger: tasksChecked },
    reimported: { sessions: back.sessions, messages: back.messages, runs: back.runs, tasks: back.tasks, skipped: back.skipped.length },
    liveWriter: { appended: appendedLive, seenByImportsDuring: during, importedAfter: after.messages },
    from2026_1: { imported: { sessions: legacyIn.sessions, messages: legacyIn.messages, runs: legacyIn.runs }, exported: { sessions: legacyOut.sessions, messages: legacyOut.messages, runs: legacyOut.runs }, packageRead: { sessions: Object.keys(seen1.agents.main).length, registryRuns: seen1.registryRuns ?? 'not checked', appended: seen1.appended } },
    failures,
  }
  console.log(JSON.stringify(summary, null, 2))
  fs.rmSync(tmp, { recursive: true, force: true })
  console.log(failures.length === 0 ? 'check-2026.9-export: OK' : `check-2026.9-export: ${failures.length} FAILED`)
  process.exit(failures.length === 0 ? 0 : 1)
}
