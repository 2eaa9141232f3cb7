#!/usr/bin/env node
// The command line (API.md §6): `session-tools <command> [--db <path or postgres:// URL>] [--json]`.
// Exit codes: 0 success, 2 bad usage, 1 failure (one line on stderr).
'use strict'

const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')

const ROOT = path.join(__dirname, '..')

const USAGE = `Usage: session-tools <command> [options]

Commands:
  list                 the stored sessions, newest first
  history <key>        the transcript of a session (its last messages)
  import <stateDir>    read a gateway state folder into the store (idempotent); both layouts:
                       2026.1 (sessions.json + JSONL) and 2026.9 (SQLite databases)
  export <dir>         write the store as a gateway state folder (--layout 2026.9: into the
                       databases of a folder the 2026.9 gateway has initialised)
  stats                counts of sessions, messages, runs, pending announces; database size
  demo                 a scripted tour on a throwaway in-memory store

Options (anywhere on the line):
  --db <path|url>      the store: a SQLite file (default ./sessions.db) or a postgres:// URL
  --json               print one JSON document instead of text
  --limit <n>          list, history: how many (history: 1..1000, default 200)
  --state-dir <path>   export: the absolute path the folder will be used from once moved
                       into place (topic sessions' sessionFile points there; default <dir>)
  --layout <l>         export: 2026.1 (default) or 2026.9
  -h, --help           this text

Exit codes: 0 success, 2 bad usage, 1 failure.`

/** A mistake in the command line: exit code 2. */
class UsageError extends Error {}

const COMMANDS = { list: 0, history: 1, import: 1, export: 1, stats: 0, demo: 0 }
const ARG_NAMES = { history: '<key>', import: '<stateDir>', export: '<dir>' }

function parse(argv) {
  const opts = { db: './sessions.db', json: false, help: false, limit: undefined, layout: undefined, stateDir: undefined }
  const rest = []
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const eq = a.startsWith('--') ? a.indexOf('=') : -1
    const name = eq > 0 ? a.slice(0, eq) : a
    const inline = eq > 0 ? a.slice(eq + 1) : undefined
    const value = () => {
      if (inline !== undefined) return inline
      if (i + 1 >= argv.length) throw new UsageError(`${name} needs a value`)
      return argv[++i]
    }
    if (name === '--help' || name === '-h') opts.help = true
    else if (name === '--json') {
      if (inline !== undefined) throw new UsageError('--json takes no value')
      opts.json = true
    } else if (name === '--db') {
      opts.db = value()
      if (!opts.db) throw new UsageError('--db needs a path')
    } else if (name === '--limit') {
      const v = value()
      if (!/^\d+$/.test(v) || Number(v) < 1) throw new UsageError(`--limit must be a positive integer, got ${JSON.stringify(v)}`)
      opts.limit = Number(v)
    } else if (name === '--state-dir') {
      opts.stateDir = value()
      if (!path.isAbsolute(opts.stateDir)) throw new UsageError(`--state-dir must be an absolute path, got ${JSON.stringify(opts.stateDir)}`)
    } else if (name === '--layout') {
      const v = value()
      if (v !== '2026.1' && v !== '2026.9') throw new UsageError(`--layout must be 2026.1 or 2026.9, got ${JSON.stringify(v)}`)
      opts.layout = v
    } else if (a === '--') {
      rest.push(...argv.slice(i + 1))
      break
    } else if (a.startsWith('-') && a !== '-') throw new UsageError(`unknown option ${a}`)
    else rest.push(a)
  }
  if (opts.help) return { opts, help: true }
  const [command, ...args] = rest
  if (!command) throw new UsageError('a command is required')
  if (!(command in COMMANDS)) throw new UsageError(`unknown command ${JSON.stringify(command)}`)
  const want = COMMANDS[command]
  if (args.length < want) throw new UsageError(`${command} needs ${ARG_NAMES[command]}`)
  if (args.length > want) throw new UsageError(`${command}: unexpected argument ${JSON.stringify(args[want])}`)
  return { opts, command, args }
}

/** A spinner with the elapsed time on stderr while `promise` runs, on a terminal only. */
async function withProgress(label, promise) {
  if (!process.stderr.isTTY) return promise
  const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏']
  const start = Date.now()
  let n = 0
  const draw = () => process.stderr.write(`\r${frames[n++ % frames.length]} ${label} ${((Date.now() - start) / 1000).toFixed(1)} s`)
  draw()
  const timer = setInterval(draw, 100)
  try {
    return await promise
  } finally {
    clearInterval(timer)
    process.stderr.write('\r\x1b[2K')
  }
}

const iso = (ms) => (typeof ms === 'number' && Number.isFinite(ms) && ms > 0 ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) : '-')

function table(rows, columns) {
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c] ?? '').length)))
  const line = (r) => columns.map((c, i) => String(r[c] ?? '').padEnd(widths[i])).join('  ').trimEnd()
  return [line(Object.fromEntries(columns.map((c) => [c, c]))), ...rows.map(line)].join('\n')
}

function textOf(message) {
  const c = message && message.content
  if (typeof c === 'string') return c
  if (!Array.isArray(c)) return ''
  return c
    .map((b) => {
      if (!b || typeof b !== 'object') return ''
      if (b.type === 'text') return b.text
      if (b.type === 'toolCall') return `[tool call ${b.name}]`
      if (b.type === 'thinking') return ''
      return `[${b.type}]`
    })
    .filter(Boolean)
    .join(' ')
}

function mergedLines(merged = []) {
  return merged.map((m) => `  merged ${m.file} ${m.key} into ${m.into}${m.keptAs ? `, kept as ${m.keptAs}` : ', dropped for the newer entry'}`)
}

function skippedLines(skipped) {
  return skipped.map((s) => `  skipped ${s.file}${s.line ? `:${s.line}` : ''}: ${s.reason}`)
}

async function open(command, db) {
  const { SessionTools } = require(path.join(ROOT, 'index.js'))
  if (/^postgres(ql)?:\/\//.test(db)) return SessionTools.open({ url: db })
  if (command !== 'import' && db !== ':memory:' && !fs.existsSync(db)) {
    throw new Error(`no store at ${db} (import a state folder first, or pass --db <path>)`)
  }
  return SessionTools.open({ path: db })
}

async function run(command, args, opts) {
  const print = (doc, text) => process.stdout.write((opts.json ? JSON.stringify(doc, null, 2) : text) + '\n')
  const st = await open(command, opts.db)
  try {
    switch (command) {
      case 'list': {
        const r = await st.listSessions({ includeGlobal: true, includeUnknown: true, ...(opts.limit ? { limit: opts.limit } : {}) })
        const rows = r.sessions.map((s) => ({
          KEY: s.key,
          KIND: s.kind,
          UPDATED: iso(s.updatedAt),
          NAME: s.displayName ?? s.label ?? '',
          TOKENS: s.totalTokens ?? 0,
        }))
        print(r, rows.length ? table(rows, ['KEY', 'KIND', 'UPDATED', 'NAME', 'TOKENS']) + `\n${r.count} session(s)` : 'no sessions')
        break
      }
      case 'history': {
        const r = await st.chatHistory(args[0], opts.limit ? { limit: opts.limit } : {})
        const lines = r.messages.map((m) => `[${iso(m.timestamp)}] ${m.role}: ${textOf(m).replace(/\s+/g, ' ').trim()}`)
        const head = r.sessionId ? `${r.sessionKey} (${r.sessionId}), ${r.messages.length} message(s)${r.nextBefore ? ', older ones not shown' : ''}` : `${r.sessionKey}: no such session`
        print(r, [head, ...lines].join('\n'))
        break
      }
      case 'import': {
        const r = await withProgress(`importing ${args[0]}`, st.importStateDir(args[0]))
        const found = r.layouts.length
          ? r.layouts.map((l) => `  layout ${l.layout}: ${l.sessions} session(s), ${l.messages} message(s), ${l.runs} run(s)${l.layout === '2026.9' ? `, ${l.tasks} task(s)` : ''}`)
          : ['  no gateway state found (neither sessions.json files nor 2026.9 databases)']
        print(r, [`imported ${r.sessions} session(s), ${r.messages} message(s), ${r.runs} run(s) from ${args[0]}; ${r.skipped.length} skipped`, ...found, ...skippedLines(r.skipped), ...mergedLines(r.merged)].join('\n'))
        break
      }
      case 'export': {
        const r = await withProgress(`exporting to ${args[0]}`, st.exportStateDir(args[0], { ...(opts.layout ? { layout: opts.layout } : {}), ...(opts.stateDir ? { stateDir: opts.stateDir } : {}) }))
        const tasks = r.layout === '2026.9' ? `, ${r.tasks} task(s)` : ''
        print(r, [`exported ${r.sessions} session(s), ${r.messages} message(s), ${r.runs} run(s)${tasks} to ${args[0]} as layout ${r.layout} (${r.files} files)`, ...skippedLines(r.skipped)].join('\n'))
        break
      }
      case 'stats': {
        const r = await st.stats()
        print(r, `sessions        ${r.sessions}\nmessages        ${r.messages}\nruns            ${r.runs}\noutbox pending  ${r.outboxPending}\ndatabase        ${r.dbBytes} bytes`)
        break
      }
    }
  } finally {
    await st.close()
  }
}

async function main(argv) {
  let parsed
  try {
    parsed = parse(argv)
  } catch (e) {
    if (!(e instanceof UsageError)) throw e
    process.stderr.write(`session-tools: ${e.message}\nRun 'session-tools --help' for usage.\n`)
    return 2
  }
  if (parsed.help) {
    process.stdout.write(USAGE + '\n')
    return 0
  }
  const { command, args, opts } = parsed
  if (command === 'demo') {
    const r = spawnSync(process.execPath, [path.join(ROOT, 'examples', 'demo.mjs')], { stdio: 'inherit' })
    if (r.error) throw r.error
    return r.status ?? 1
  }
  await run(command, args, opts)
  return 0
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (e) => {
    const msg = String((e && e.message) || e).split('\n')[0]
    process.stderr.write(`session-tools: ${e && e.code ? `${e.code}: ` : ''}${msg}\n`)
    process.exitCode = 1
  },
)
