// The 2026.9 state folder (issue 15, OPENCLAW-2026.9.md §4) through the whole JS path: the
// committed fixture (written by the real openclaw@2026.9.6; expected.json is what that package's
// own readers return for it) imported, bad input skipped, a half-done migration, the export back
// into a folder the package initialised, and the CLI. scripts/check-2026.9-export.mjs proves with
// the package itself that it opens, lists and appends to such an export (npm test runs it when
// OPENCLAW_2026_9_DIR is set).
import { describe, expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { openFile, openMem, tmpDir } from './helpers'

const FIXTURES = fileURLToPath(new URL('./fixtures/openclaw-2026.9', import.meta.url))
const STATE = path.join(FIXTURES, 'state')
const INITIALISED = path.join(FIXTURES, 'initialised')
const CLI = fileURLToPath(new URL('../bin/session-tools.js', import.meta.url))
const expected = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'expected.json'), 'utf8'))
const AGENTS = ['main', 'research']
const SESSIONS: [string, any][] = AGENTS.flatMap((a) => Object.entries(expected.agents[a]) as [string, any][])
const MESSAGES = SESSIONS.reduce((n, [, s]) => n + s.messages, 0)

function copy(from: string): string {
  const to = path.join(tmpDir(), 'state')
  fs.cpSync(from, to, { recursive: true })
  return to
}

/** sha256 of every file below `root`, by relative path. */
function hashes(root: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const rel of fs.readdirSync(root, { recursive: true }) as string[]) {
    const p = path.join(root, rel)
    if (fs.lstatSync(p).isFile()) out[rel] = crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex')
  }
  return out
}

/** Sets `PRAGMA user_version` by writing the header field (bytes 60..63, big-endian). */
function setUserVersion(db: string, v: number) {
  const fd = fs.openSync(db, 'r+')
  const b = Buffer.alloc(4)
  b.writeUInt32BE(v)
  fs.writeSync(fd, b, 0, 4, 60)
  fs.closeSync(fd)
}

describe('2026.9 state folder (issue 15)', () => {
  test('given the fixture when imported then every session, message, run and task the package reads is in the store, and the folder is byte-identical', async () => {
    const dir = copy(STATE)
    const before = hashes(dir)
    const st = await openMem()
    const r = await st.importStateDir(dir)
    expect(r).toEqual({
      sessions: SESSIONS.length,
      messages: MESSAGES,
      runs: expected.runs.length,
      tasks: expected.tasks.length,
      layouts: [{ layout: '2026.9', sessions: 20, messages: 30, runs: 2, tasks: 2 }],
      skipped: [],
      merged: [],
    })
    expect(SESSIONS.length).toBe(20)
    expect(hashes(dir)).toEqual(before)

    for (const [key, want] of SESSIONS) {
      const h = await st.chatHistory(key, { limit: 1000 })
      expect(h.sessionId, key).toBe(want.sessionId)
      expect(h.messages.map((m: any) => m.role).join(','), key).toBe(want.roles)
    }
    const listed = await st.listSessions({ limit: 100 })
    const byKey = new Map(listed.sessions.map((s: any) => [s.key, s]))
    for (const [key, want] of SESSIONS) {
      const e: any = byKey.get(key)
      expect(e?.updatedAt, key).toBe(want.updatedAt)
    }
    const runs = await st.listSubagentRuns()
    expect(runs.map((x: any) => x.runId).sort()).toEqual(expected.runs)
    // The terminal run: its 2026.9 execution record gives the registry's endedAt and outcome.
    const ended = runs.filter((x: any) => x.endedAt)
    expect(ended.map((x: any) => x.outcome)).toEqual([{ status: 'ok' }])

    const again = await st.importStateDir(dir)
    expect(again).toMatchObject({ sessions: 0, messages: 0, runs: 0, tasks: 0, skipped: [] })
  })

  test('given bad databases when imported then each is skipped with its reason, the rest imported, nothing changed', async () => {
    const dir = copy(STATE)
    setUserVersion(path.join(dir, 'agents/main/agent/openclaw-agent.sqlite'), 31)
    const research = path.join(dir, 'agents/research/agent/openclaw-agent.sqlite')
    fs.truncateSync(research, 4096 * 3)
    fs.mkdirSync(path.join(dir, 'agents/ghost'))
    const outside = path.join(tmpDir(), 'elsewhere.sqlite')
    fs.copyFileSync(path.join(STATE, 'agents/main/agent/openclaw-agent.sqlite'), outside)
    fs.mkdirSync(path.join(dir, 'agents/linked/agent'), { recursive: true })
    fs.symlinkSync(outside, path.join(dir, 'agents/linked/agent/openclaw-agent.sqlite'))
    const before = hashes(dir)

    const st = await openMem()
    const r = await st.importStateDir(dir)
    const reasons = Object.fromEntries(r.skipped.map((s: any) => [s.file, s.reason]))
    expect(Object.keys(reasons).sort()).toEqual([
      'agents/ghost',
      'agents/linked/agent/openclaw-agent.sqlite',
      'agents/main/agent/openclaw-agent.sqlite',
      'agents/research/agent/openclaw-agent.sqlite',
    ])
    expect(reasons['agents/main/agent/openclaw-agent.sqlite']).toMatch(/schema 31.*nothing was read/)
    expect(reasons['agents/research/agent/openclaw-agent.sqlite']).toMatch(/damaged|not a SQLite database|cannot read/)
    expect(reasons['agents/linked/agent/openclaw-agent.sqlite']).toMatch(/outside the state folder/)
    expect(reasons['agents/ghost']).toMatch(/neither a 2026.9 database .* nor a sessions.json/)
    // The global database still imports: its runs and tasks.
    expect(r).toMatchObject({ sessions: 0, messages: 0, runs: 2, tasks: 2 })
    expect(hashes(dir)).toEqual(before)
    expect(fs.readdirSync(path.dirname(outside))).toEqual(['elsewhere.sqlite'])
  })

  test('given a half-done migration (sessions.json beside the databases) when imported then both layouts are read and the newer entry wins', async () => {
    const dir = copy(STATE)
    const main = expected.agents.main['agent:main:main']
    fs.mkdirSync(path.join(dir, 'agents/main/sessions'), { recursive: true })
    fs.writeFileSync(
      path.join(dir, 'agents/main/sessions/sessions.json'),
      JSON.stringify({
        'agent:main:main': { sessionId: 'old-main', updatedAt: main.updatedAt - 1000 },
        'agent:main:legacy-only': { sessionId: 'legacy-1', updatedAt: 5 },
      }),
    )
    fs.writeFileSync(path.join(dir, 'agents/main/sessions/legacy-1.jsonl'), JSON.stringify({ type: 'message', message: { role: 'user', content: 'from 2026.1' } }) + '\n')
    const st = await openMem()
    const r = await st.importStateDir(dir)
    expect(r.skipped).toEqual([])
    expect(r.layouts).toEqual([
      { layout: '2026.1', sessions: 1, messages: 1, runs: 0, tasks: 0 },
      { layout: '2026.9', sessions: 20, messages: 30, runs: 2, tasks: 2 },
    ])
    expect((await st.chatHistory('agent:main:main')).sessionId).toBe(main.sessionId)
    expect((await st.chatHistory('agent:main:legacy-only')).messages).toHaveLength(1)
  })

  test('given the store when exported as 2026.9 into a folder the package initialised then it reads back whole; an uninitialised folder is refused', async () => {
    const { st } = await openFile()
    await st.importStateDir(copy(STATE))
    const out = copy(INITIALISED)
    const r = await st.exportStateDir(out, { layout: '2026.9' })
    expect(r).toEqual({ layout: '2026.9', sessions: 20, messages: 30, runs: 2, tasks: 2, files: 3, skipped: [] })
    expect(fs.readdirSync(path.join(out, 'agents/main/agent'))).toEqual(['openclaw-agent.sqlite'])

    const back = await openMem()
    expect(await back.importStateDir(out)).toMatchObject({ sessions: 20, messages: 30, runs: 2, tasks: 2, skipped: [] })
    for (const [key] of SESSIONS) {
      expect((await back.chatHistory(key, { limit: 1000 })).messages, key).toEqual((await st.chatHistory(key, { limit: 1000 })).messages)
    }

    const empty = tmpDir()
    await expect(st.exportStateDir(empty, { layout: '2026.9' })).rejects.toThrow(/start the 2026.9 gateway once/)
    expect(fs.readdirSync(empty)).toEqual([])
    await expect(st.exportStateDir(empty, { layout: '2027.1' as any })).rejects.toMatchObject({ code: 'INVALID_REQUEST' })
  })

  test('given the fixture imported under contract 2026.9 when subagents is called then its tasks are the ledger\'s own, under their 2026.9 ids, and export back', async () => {
    const st = await openMem(null, { contract: '2026.9' } as any)
    expect(await st.importStateDir(copy(STATE))).toMatchObject({ runs: 2, tasks: 2, skipped: [] })
    const MAIN = { agentSessionKey: 'agent:main:main' }
    const tool = async (args: unknown, ctx: unknown = MAIN): Promise<any> => (await st.executeTool('subagents', args, ctx as any)).details
    const [done, going] = expected.tasks.map((t: any) => t.task_id)
    const list = await tool({ recentMinutes: 1440 })
    // the running one is in main's tree; the finished one is past its 2026.9 retention (cleanupAfter)
    expect(list.tasks.map((t: any) => [t.taskId, t.status, t.label])).toEqual([[going, 'running', 'Find papers on SQLite WAL']])
    expect(list.active.map((r: any) => r.runId)).toEqual([expected.tasks[1].run_id])
    expect(await tool({ action: 'wait', taskIds: [going, done], timeoutSeconds: 0 })).toMatchObject({ reason: 'unavailable', unavailable: [done] })
    expect(await tool({ action: 'cancel', taskId: going }, { agentSessionKey: 'agent:main:other' })).toEqual({ status: 'forbidden', error: 'Task outside session tree.' })
    // exported back, both tasks go into the package's ledger as read
    const out = copy(INITIALISED)
    expect(await st.exportStateDir(out, { layout: '2026.9' })).toMatchObject({ runs: 2, tasks: 2, skipped: [] })
    const back = await openMem()
    expect(await back.importStateDir(out)).toMatchObject({ runs: 2, tasks: 2, skipped: [] })
  })

  test('given a 2026.9 folder when imported and exported through the CLI then it names the layout and the counts', () => {
    const cwd = tmpDir()
    const run = (args: string[]) => spawnSync(process.execPath, [CLI, ...args], { cwd, encoding: 'utf8', timeout: 60_000 })
    const imp = run(['import', copy(STATE), '--db', 'store.db'])
    expect(imp.status, imp.stderr).toBe(0)
    expect(imp.stdout).toContain('imported 20 session(s), 30 message(s), 2 run(s)')
    expect(imp.stdout).toContain('layout 2026.9: 20 session(s), 30 message(s), 2 run(s), 2 task(s)')
    const out = copy(INITIALISED)
    const exp = run(['export', out, '--layout', '2026.9', '--db', 'store.db', '--json'])
    expect(exp.status, exp.stderr).toBe(0)
    expect(JSON.parse(exp.stdout)).toMatchObject({ layout: '2026.9', sessions: 20, messages: 30, runs: 2, tasks: 2 })
    const bad = run(['export', out, '--layout', '2025', '--db', 'store.db'])
    expect(bad.status).toBe(2)
  })
})
