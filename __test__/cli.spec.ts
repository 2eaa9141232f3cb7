import { describe, expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { expectKeyOrder, tmpDir } from './helpers'

const CLI = fileURLToPath(new URL('../bin/session-tools.js', import.meta.url))

function cli(args: string[], cwd: string) {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd, encoding: 'utf8', timeout: 60_000 })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** A small gateway state folder: one agent with two sessions, one with a corrupt line. */
function stateFolder(): string {
  const root = tmpDir()
  const dir = path.join(root, 'agents', 'main', 'sessions')
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(
    path.join(dir, 'sessions.json'),
    `{ // JSON5
  "agent:main:main": { sessionId: "s-main", updatedAt: 1700000000000, label: "home" },
  "discord:group:dev": { sessionId: "s-dev", updatedAt: 1700000001000, chatType: "group" },
}`,
  )
  const line = (v: unknown) => JSON.stringify(v) + '\n'
  fs.writeFileSync(
    path.join(dir, 's-main.jsonl'),
    line({ type: 'session', version: 3, id: 's-main' }) +
      line({ type: 'message', message: { role: 'user', content: 'hello there', timestamp: 1700000000000 } }) +
      'garbage\n' +
      line({ type: 'message', message: { role: 'assistant', content: [{ type: 'text', text: 'hi!' }], timestamp: 1700000000500 } }),
  )
  return root
}

describe('command line (API.md §6)', () => {
  test('given --help anywhere then usage is printed and the exit code is 0', () => {
    const cwd = tmpDir()
    for (const args of [['--help'], ['list', '--help'], ['-h'], ['bogus', '--help']]) {
      const r = cli(args, cwd)
      expect(r.code).toBe(0)
      expect(r.stdout).toContain('Usage: session-tools <command>')
      for (const c of ['list', 'history <key>', 'import <stateDir>', 'export <dir>', 'stats', 'demo', '--db', '--json']) expect(r.stdout).toContain(c)
    }
  })

  test('given bad usage then the exit code is 2 with a hint on stderr and nothing on stdout', () => {
    const cwd = tmpDir()
    for (const args of [[], ['bogus'], ['list', '--nope'], ['history'], ['import'], ['export'], ['stats', 'extra'], ['list', '--db'], ['list', '--limit', 'x'], ['list', '--json=yes']]) {
      const r = cli(args, cwd)
      expect(r.code, args.join(' ')).toBe(2)
      expect(r.stdout).toBe('')
      expect(r.stderr).toMatch(/^session-tools: .+\nRun 'session-tools --help' for usage\.\n$/)
    }
    expect(fs.readdirSync(cwd)).toEqual([])
  })

  test('given a --db that is not a SQLite file or no store at all then the exit code is 1 with one line on stderr', () => {
    const cwd = tmpDir()
    fs.writeFileSync(path.join(cwd, 'notes.db'), 'not a database '.repeat(100))
    const r = cli(['stats', '--db', 'notes.db'], cwd)
    expect(r.code).toBe(1)
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1)
    expect(r.stderr).toMatch(/STORE_ERROR/)
    expect(fs.readFileSync(path.join(cwd, 'notes.db'), 'utf8')).toBe('not a database '.repeat(100))
    const missing = cli(['list'], cwd)
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(/no store at \.\/sessions\.db/)
    expect(fs.existsSync(path.join(cwd, 'sessions.db'))).toBe(false)
    const badDir = cli(['import', 'no-such-folder'], cwd)
    expect(badDir.code).toBe(1)
    expect(badDir.stderr.trimEnd().split('\n')).toHaveLength(1)
  })

  test('given a state folder when imported, listed, read, counted and exported through the CLI then each --json document has its shape', () => {
    const cwd = tmpDir()
    const state = stateFolder()
    // flags before, between and after the arguments
    const imp = cli(['--json', 'import', state, '--db', 'store.db'], cwd)
    expect(imp.code, imp.stderr).toBe(0)
    const report = JSON.parse(imp.stdout)
    expect(report).toEqual({
      sessions: 2,
      messages: 2,
      runs: 0,
      tasks: 0,
      layouts: [{ layout: '2026.1', sessions: 2, messages: 2, runs: 0, tasks: 0 }],
      skipped: [{ file: 'agents/main/sessions/s-main.jsonl', line: 3, reason: expect.any(String) }],
      merged: [],
    })
    expect(imp.stderr).toBe('') // no progress when stderr is not a terminal

    const again = JSON.parse(cli(['import', '--db=store.db', state, '--json'], cwd).stdout)
    expect(again).toMatchObject({ sessions: 0, messages: 0, runs: 0 })

    const list = JSON.parse(cli(['list', '--json', '--db', 'store.db'], cwd).stdout)
    expect(Object.keys(list)).toEqual(expect.arrayContaining(['ts', 'path', 'count', 'sessions']))
    expect(list.count).toBe(2)
    expect(list.sessions.map((s: any) => s.key)).toEqual(['agent:main:discord:group:dev', 'agent:main:main'])

    const hist = JSON.parse(cli(['--db', 'store.db', 'history', 'main', '--json'], cwd).stdout)
    expectKeyOrder(hist, ['sessionKey', 'sessionId', 'messages', 'nextBefore'])
    expect(hist.sessionKey).toBe('agent:main:main')
    expect(hist.messages.map((m: any) => m.role)).toEqual(['user', 'assistant'])

    const stats = JSON.parse(cli(['stats', '--json', '--db', 'store.db'], cwd).stdout)
    expect(Object.keys(stats)).toEqual(['sessions', 'messages', 'runs', 'outboxPending', 'dbBytes'])
    expect(stats).toMatchObject({ sessions: 2, messages: 2, runs: 0, outboxPending: 0 })
    expect(stats.dbBytes).toBeGreaterThan(0)

    const out = path.join(tmpDir(), 'exported')
    const ex = JSON.parse(cli(['export', out, '--db', 'store.db', '--json'], cwd).stdout)
    expect(ex).toMatchObject({ sessions: 2, messages: 2, runs: 0, files: 2 })
    const back = JSON.parse(cli(['import', out, '--db', 'copy.db', '--json'], cwd).stdout)
    expect(back).toMatchObject({ sessions: 2, messages: 2, runs: 0, tasks: 0, skipped: [], merged: [] })
    const copy = JSON.parse(cli(['history', 'main', '--json', '--db', 'copy.db'], cwd).stdout)
    expect(copy.messages).toEqual(hist.messages)

    // --state-dir: where the export will live; sessionFile points there (issue 12)
    const live = path.join(tmpDir(), 'live-state')
    const moved = path.join(tmpDir(), 'to-move')
    expect(cli(['export', moved, '--state-dir', live, '--db', 'store.db'], cwd).code).toBe(0)
    const written = JSON.parse(fs.readFileSync(path.join(moved, 'agents/main/sessions/sessions.json'), 'utf8'))
    expect(written['agent:main:main'].sessionFile).toBe(path.join(live, 'agents/main/sessions', `${written['agent:main:main'].sessionId}.jsonl`))
    const relative = cli(['export', path.join(tmpDir(), 'x'), '--state-dir', 'relative/state', '--db', 'store.db'], cwd)
    expect(relative.code).toBe(2)
    expect(relative.stderr).toMatch(/--state-dir must be an absolute path/)
  })

  test('given a store then the human output is readable text', () => {
    const cwd = tmpDir()
    const state = stateFolder()
    const imp = cli(['import', state], cwd)
    expect(imp.code).toBe(0)
    expect(imp.stdout).toMatch(/^imported 2 session\(s\), 2 message\(s\), 0 run\(s\) from .+; 1 skipped\n {2}layout 2026\.1: 2 session\(s\), 2 message\(s\), 0 run\(s\)\n {2}skipped agents\/main\/sessions\/s-main\.jsonl:3: /)
    const list = cli(['list'], cwd)
    expect(list.stdout.split('\n')[0]).toMatch(/^KEY\s+KIND\s+UPDATED\s+NAME\s+TOKENS$/)
    expect(list.stdout).toContain('agent:main:main')
    expect(list.stdout).toContain('2 session(s)')
    const hist = cli(['history', 'main'], cwd)
    expect(hist.stdout).toContain('user: hello there')
    expect(hist.stdout).toContain('assistant: hi!')
    expect(cli(['stats'], cwd).stdout).toMatch(/^sessions\s+2\nmessages\s+2\n/)
    const limited = cli(['list', '--limit', '1', '--json'], cwd)
    expect(JSON.parse(limited.stdout).sessions).toHaveLength(1)
  })

  test('given demo then the example runs and its exit code is passed through', () => {
    const r = cli(['demo'], tmpDir())
    expect(r.code, r.stderr).toBe(0)
    // the scripted scenario: a send with its exchange and announce, a sub-agent's announce
    for (const line of ['sessions_send', '→ discord', 'sessions_spawn', 'announce delivered', 'transcript of main/main']) expect(r.stdout).toContain(line)
  })
})
