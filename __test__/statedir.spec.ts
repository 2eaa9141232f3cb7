import { describe, expect, test } from 'vitest'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { expectReject, freshPgUrl, openFile, openMem, SessionTools, settle, textOf, tmpDir, track } from './helpers'

function write(root: string, rel: string, text: string) {
  const p = path.join(root, rel)
  fs.mkdirSync(path.dirname(p), { recursive: true })
  fs.writeFileSync(p, text)
}

const jsonl = (...lines: unknown[]) => lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l)) + '\n').join('')
const m = (role: string, content: unknown, extra: Record<string, unknown> = {}) => ({ type: 'message', ...extra, message: { role, content } })

/** Every file below `root` with the SHA-256 of its bytes and its mode. */
function hashes(root: string): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) walk(p)
      else out[path.relative(root, p)] = crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex') + ':' + (fs.statSync(p).mode & 0o777).toString(8)
    }
  }
  walk(root)
  return out
}

/** A gateway state folder: two agents, a legacy single store, JSON5 quirks, v1/v2/v3 transcripts
 * with a corrupt line, a topic transcript, a path-escape attempt and a version-1 registry. */
function gatewayFolder(): string {
  const root = tmpDir()
  write(
    root,
    'agents/main/sessions/sessions.json',
    `{
  // written by hand, JSON5 style
  'agent:main:main': { sessionId: 'sid-main', updatedAt: 2000, lastProvider: 'telegram', custom: { keep: true }, },
  "subagent:helper": { "sessionId": "sid-child", "updatedAt": 1500, "spawnedBy": "main", label: 'helper' },
  "agent:main:telegram:group:-100:topic:7": { "sessionId": "sid-topic", "updatedAt": 1200, },
  "agent:main:evil": { "sessionId": "sid-evil", "updatedAt": 100, "sessionFile": "../../etc/passwd" },
  "agent:main:broken": { "updatedAt": 100 },
}`,
  )
  write(
    root,
    'agents/main/sessions/sid-main.jsonl',
    jsonl(
      { type: 'session', version: 3, id: 'sid-main', timestamp: '2024-01-01T00:00:00.000Z', cwd: '/' },
      m('user', 'first', { id: 'aaaaaaa1', parentId: null }),
      { type: 'thinking_level_change', id: 'aaaaaaa2', parentId: 'aaaaaaa1', thinkingLevel: 'high' },
      '{"type":"message","message":{"role":"user"', // a line cut short
      m('assistant', [{ type: 'text', text: 'second' }], { id: 'aaaaaaa3', parentId: 'aaaaaaa2' }),
      m('user', 'third', { id: 'aaaaaaa4', parentId: 'aaaaaaa3' }),
    ),
  )
  write(root, 'agents/main/sessions/sid-child.jsonl', jsonl({ type: 'session', version: 2, id: 'sid-child' }, m('hookMessage', 'from a hook')))
  write(root, 'agents/main/sessions/sid-topic-topic-7.jsonl', jsonl(m('user', 'in the topic')))
  write(root, 'agents/main/sessions/sid-evil.jsonl', jsonl(m('user', 'the real transcript')))
  write(root, 'agents/Work/sessions/sessions.json', JSON.stringify({ main: { sessionId: 'sid-work', updatedAt: 3000 }, 'slack:channel:C1': { sessionId: 'sid-slack', updatedAt: 2500, room: '#general' } }))
  // version 1: no version in the header, no ids
  write(root, 'agents/Work/sessions/sid-work.jsonl', jsonl({ type: 'session', id: 'sid-work' }, m('user', 'w1'), m('assistant', 'w2'), m('user', 'w3')))
  write(root, 'sessions/sessions.json', JSON.stringify({ '+15550001': { sessionId: 'sid-legacy', updatedAt: 900 }, 'group:123@g.us': { sessionId: 'sid-wa', updatedAt: 800 }, main: { sessionId: 'sid-stale', updatedAt: 1 } }))
  write(root, 'sessions/sid-legacy.jsonl', jsonl(m('user', 'old times')))
  write(
    root,
    'subagents/runs.json',
    JSON.stringify(
      {
        version: 1,
        runs: {
          'run-1': { runId: 'run-1', childSessionKey: 'agent:main:subagent:helper', requesterSessionKey: 'agent:main:main', requesterDisplayKey: 'main', task: 'help', cleanup: 'keep', createdAt: 10, startedAt: 10, endedAt: 20, outcome: { status: 'ok' }, announceCompletedAt: 30, requesterChannel: 'telegram' },
          'run-2': { runId: 'run-2', childSessionKey: 'agent:main:subagent:other', requesterSessionKey: 'agent:main:main', requesterDisplayKey: 'main', task: 'still going', cleanup: 'delete', createdAt: 40, startedAt: 40 },
          'no-id': { childSessionKey: 'agent:main:subagent:x' },
        },
      },
      null,
      2,
    ),
  )
  return root
}

const EXPECTED_KEYS = [
  'agent:main:+15550001',
  'agent:main:broken',
  'agent:main:evil',
  'agent:main:main',
  'agent:main:subagent:helper',
  'agent:main:telegram:group:-100:topic:7',
  'agent:main:whatsapp:group:123@g.us',
  'agent:work:main',
  'agent:work:slack:channel:C1', // one case rule: the agent id lower-case, the rest as written
].filter((k) => k !== 'agent:main:broken')

async function keysOf(st: SessionTools): Promise<string[]> {
  const r = await st.listSessions({ includeGlobal: true, includeUnknown: true })
  return r.sessions.map((s: any) => s.key).sort()
}

async function dump(st: SessionTools) {
  const keys = await keysOf(st)
  const out: Record<string, unknown> = {}
  for (const k of keys) {
    const entry = await st.getSession(k)
    const h = await st.chatHistory(k, { limit: 1000 })
    out[k] = { entry, messages: h.messages }
  }
  return out
}

describe('importStateDir (API.md §5, REFERENCE.md §2.8)', () => {
  test('given a realistic gateway folder when imported then keys are canonical, messages in order and bad parts reported', async () => {
    const root = gatewayFolder()
    const before = hashes(root)
    const st = await openMem()
    const r = await st.importStateDir(root)
    expect(await keysOf(st)).toEqual(EXPECTED_KEYS)
    expect(r.sessions).toBe(EXPECTED_KEYS.length)
    expect(r.messages).toBe(3 + 1 + 1 + 1 + 3 + 1)
    expect(r.runs).toBe(2)

    const main = await st.getSession('agent:main:main')
    expect(main).toMatchObject({ sessionId: 'sid-main', lastChannel: 'telegram', custom: { keep: true } })
    expect(main).not.toHaveProperty('lastProvider')
    expect((await st.getSession('agent:main:subagent:helper'))!.spawnedBy).toBe('agent:main:main')
    expect((await st.getSession('agent:work:slack:channel:C1'))!.groupChannel).toBe('#general')

    const h = await st.chatHistory('agent:main:main')
    expect(h.messages.map(textOf)).toEqual(['first', 'second', 'third'])
    expect((await st.chatHistory('agent:main:subagent:helper')).messages[0].role).toBe('custom')
    expect((await st.chatHistory('agent:work:main')).messages.map(textOf)).toEqual(['w1', 'w2', 'w3'])
    expect((await st.chatHistory('agent:main:telegram:group:-100:topic:7')).messages.map(textOf)).toEqual(['in the topic'])
    expect((await st.chatHistory('agent:main:+15550001')).messages.map(textOf)).toEqual(['old times'])
    // the escaping sessionFile is refused; the transcript beside the store is read instead
    expect((await st.chatHistory('agent:main:evil')).messages.map(textOf)).toEqual(['the real transcript'])

    const byFile = (f: string) => r.skipped.filter((s) => s.file === f)
    expect(byFile('agents/main/sessions/sid-main.jsonl')).toEqual([{ file: 'agents/main/sessions/sid-main.jsonl', line: 4, reason: expect.stringContaining('not valid JSON') }])
    const storeSkips = byFile('agents/main/sessions/sessions.json').map((s) => s.reason)
    expect(storeSkips.some((s) => s.includes('../../etc/passwd') && s.includes('outside'))).toBe(true)
    expect(storeSkips.some((s) => s.includes('agent:main:broken') && s.includes('sessionId'))).toBe(true)
    expect(byFile('subagents/runs.json')).toHaveLength(1)
    expect(r.skipped).toHaveLength(4)
    for (const s of r.skipped) expect(path.isAbsolute(s.file)).toBe(false)

    expect(hashes(root)).toEqual(before)
  })

  test('given a folder imported once when imported again then nothing is added and the store is unchanged', async () => {
    const root = gatewayFolder()
    const st = await openMem()
    await st.importStateDir(root)
    const first = await dump(st)
    const again = await st.importStateDir(root)
    expect(again).toMatchObject({ sessions: 0, messages: 0, runs: 0 })
    expect(await dump(st)).toEqual(first)
    expect((await st.stats()).runs).toBe(2)
  })

  test('given a transcript that grew since the last import when imported again then only the new messages are added', async () => {
    const root = gatewayFolder()
    const st = await openMem()
    await st.importStateDir(root)
    fs.appendFileSync(path.join(root, 'agents/Work/sessions/sid-work.jsonl'), jsonl(m('assistant', 'w4')))
    const r = await st.importStateDir(root)
    expect(r).toMatchObject({ sessions: 0, messages: 1 })
    expect((await st.chatHistory('agent:work:main')).messages.map(textOf)).toEqual(['w1', 'w2', 'w3', 'w4'])
  })

  test('given a folder when imported, exported and imported into a fresh store then both stores are the same', async () => {
    const root = gatewayFolder()
    const a = await openMem()
    await a.importStateDir(root)
    const out = path.join(tmpDir(), 'exported')
    const ex = await a.exportStateDir(out)
    expect(ex).toMatchObject({ sessions: EXPECTED_KEYS.length, messages: 10, runs: 2, skipped: [] })
    const b = await openMem()
    const r = await b.importStateDir(out)
    expect(r.skipped).toEqual([])
    expect(r).toMatchObject({ sessions: EXPECTED_KEYS.length, messages: 10, runs: 2 })
    expect(await dump(b)).toEqual(await dump(a))
    expect(await b.stats()).toMatchObject({ sessions: EXPECTED_KEYS.length, messages: 10, runs: 2 })
  })

  test('given an exported folder then it is in the gateway layout and formats', async () => {
    const a = await openMem()
    await a.importStateDir(gatewayFolder())
    const out = tmpDir()
    const ex = await a.exportStateDir(out)
    const text = fs.readFileSync(path.join(out, 'agents/main/sessions/sessions.json'), 'utf8')
    expect(text.startsWith('{\n  "')).toBe(true)
    expect(text.endsWith('\n')).toBe(false)
    expect(JSON.parse(text)['agent:main:main'].sessionId).toBe('sid-main')
    expect(Object.keys(JSON.parse(fs.readFileSync(path.join(out, 'agents/work/sessions/sessions.json'), 'utf8'))).sort()).toEqual(['agent:work:main', 'agent:work:slack:channel:C1'])
    const lines = fs.readFileSync(path.join(out, 'agents/main/sessions/sid-main.jsonl'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l))
    expect(lines[0]).toMatchObject({ type: 'session', version: 3, id: 'sid-main' })
    // every entry the file had, in order with its id and parent link (issue 12 item 3)
    expect(lines.slice(1).map((l) => l.id)).toEqual(['aaaaaaa1', 'aaaaaaa2', 'aaaaaaa3', 'aaaaaaa4'])
    expect(lines[2]).toMatchObject({ type: 'thinking_level_change', parentId: 'aaaaaaa1', thinkingLevel: 'high' })
    expect(lines.slice(1).filter((l) => l.message).map((l) => textOf(l.message))).toEqual(['first', 'second', 'third'])
    expect(lines[3].parentId).toBe(lines[2].id)
    // a topic session keeps its transcript under the topic name, named by sessionFile
    const topicFile = path.join(out, 'agents/main/sessions/sid-topic-topic-7.jsonl')
    expect(fs.existsSync(topicFile)).toBe(true)
    expect(JSON.parse(text)['agent:main:telegram:group:-100:topic:7'].sessionFile).toBe(fs.realpathSync(topicFile))
    const runs = fs.readFileSync(path.join(out, 'subagents/runs.json'), 'utf8')
    expect(runs.endsWith('}\n')).toBe(true)
    const doc = JSON.parse(runs)
    expect(doc.version).toBe(2)
    expect(doc.runs['run-1']).toMatchObject({ cleanupCompletedAt: 30, cleanupHandled: true, requesterOrigin: { channel: 'telegram' } })
    expect(doc.runs['run-2']).toMatchObject({ cleanupHandled: false, announce: { status: 'pending', attempts: 0, idempotencyKey: 'import:run-2' } })
    expect(fs.statSync(path.join(out, 'subagents/runs.json')).mode & 0o777).toBe(0o600)
    expect(fs.statSync(path.join(out, 'agents/main/sessions/sid-main.jsonl')).mode & 0o777).toBe(0o600)
    expect(fs.statSync(path.join(out, 'agents/main/sessions')).mode & 0o777).toBe(0o700)
    expect(ex.files).toBe(Object.keys(hashes(out)).length)
  })

  test('given sessions written through the API when exported and imported then they survive', async () => {
    const { st } = await openFile()
    await st.appendMessages('main', [{ role: 'user', content: 'hi' }, { role: 'assistant', content: [{ type: 'text', text: 'hello' }] }])
    await st.upsertSession('agent:ops:cron:nightly', { label: 'nightly' })
    const out = tmpDir()
    await st.exportStateDir(out)
    const b = await openMem()
    await b.importStateDir(out)
    expect(await dump(b)).toEqual(await dump(st))
  })

  test('given a file store with the default mirror when a folder is imported then imported transcripts are mirrored too', async () => {
    const { st, dir } = await openFile()
    await st.importStateDir(gatewayFolder())
    const list: any = await st.sessionsList({}, { agentSessionKey: 'agent:main:main' })
    const main = list.sessions.find((s: any) => s.key === 'main')
    expect(main.transcriptPath).toBe(path.join(dir, 'transcripts', 'sid-main.jsonl'))
    const lines = fs.readFileSync(main.transcriptPath, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l))
    expect(lines[0]).toMatchObject({ type: 'session', version: 3, id: 'sid-main' })
    expect(lines.slice(1).filter((l) => l.message).map((l) => textOf(l.message))).toEqual(['first', 'second', 'third'])
    expect(lines.slice(1).map((l) => l.id)).toEqual(['aaaaaaa1', 'aaaaaaa2', 'aaaaaaa3', 'aaaaaaa4'])
  })

  test('given JSON5 quirks, broken stores and a bad registry when imported then each bad part is reported and the rest imported', async () => {
    const root = tmpDir()
    write(root, 'agents/a/sessions/sessions.json', "{unquoted: {sessionId: 'x1', updatedAt: 0x10, note: 'it\\'s', }, /* c */ }")
    write(root, 'agents/b/sessions/sessions.json', '{ "k": ')
    write(root, 'agents/c/sessions/sessions.json', '[1, 2]')
    write(root, 'subagents/runs.json', '{"version": 9, "runs": {}}')
    const st = await openMem()
    const r = await st.importStateDir(root)
    expect(r.sessions).toBe(1)
    expect(await st.getSession('agent:a:unquoted')).toMatchObject({ sessionId: 'x1', updatedAt: 16, note: "it's" })
    expect(r.skipped.map((s) => s.file).sort()).toEqual(['agents/b/sessions/sessions.json', 'agents/c/sessions/sessions.json', 'subagents/runs.json'])
  })

  test('given bad arguments or a closed store then it rejects with a code and never throws', async () => {
    const st = await openMem()
    const cyclic: any = {}
    cyclic.self = cyclic
    const proxy = new Proxy({}, { get() { throw new Error('trap') }, ownKeys() { throw new Error('trap') } })
    for (const bad of [undefined, null, 42, '', '   ', 'a\u0000b', {}, [], Symbol('s'), () => 1, 1n, cyclic, proxy]) {
      const s = await settle(() => (st as any).importStateDir(bad))
      expect(s).toMatchObject({ ok: false })
      expect((s as any).error.code).toBe('INVALID_REQUEST')
      const e = await settle(() => (st as any).exportStateDir(bad))
      expect((e as any).error.code).toBe('INVALID_REQUEST')
    }
    await expectReject(st.importStateDir(path.join(tmpDir(), 'missing')), 'STORE_ERROR', /missing/)
    const file = path.join(tmpDir(), 'a-file')
    fs.writeFileSync(file, 'x')
    await expectReject(st.exportStateDir(path.join(file, 'below')), 'STORE_ERROR')
    const closed = track(await SessionTools.open({ path: ':memory:' }))
    await closed.close()
    await expectReject(closed.importStateDir(tmpDir()), 'CLOSED')
    await expectReject(closed.exportStateDir(tmpDir()), 'CLOSED')
    await expectReject(closed.stats(), 'CLOSED')
  })
})

describe('stats', () => {
  test('given sessions and messages then stats counts them and reports the database size', async () => {
    const { st } = await openFile()
    await st.appendMessages('main', [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }])
    await st.upsertSession('agent:main:other', {})
    const s = await st.stats()
    expect(s).toEqual({ sessions: 2, messages: 2, runs: 0, outboxPending: 0, dbBytes: expect.any(Number) })
    expect(s.dbBytes).toBeGreaterThan(0)
  })
})

describe('moving in and out of a PostgreSQL store (API.md §1.8, §5)', () => {
  test('given a folder when imported into PostgreSQL and into SQLite and exported then the files are the same, byte for byte', async () => {
    const root = gatewayFolder()
    const lite = track(await SessionTools.open({ path: ':memory:' }))
    const pg = track(await SessionTools.open({ url: freshPgUrl() }))
    const [a, b] = [await lite.importStateDir(root), await pg.importStateDir(root)]
    expect(b).toEqual(a)
    // one folder for both: the exported entries name their transcript files by absolute path
    const out = path.join(tmpDir(), 'out')
    const fromLite = await lite.exportStateDir(out)
    const liteFiles = hashes(out)
    fs.rmSync(out, { recursive: true })
    expect(await pg.exportStateDir(out)).toEqual(fromLite)
    expect(hashes(out)).toEqual(liteFiles)
    const stats = await pg.stats()
    expect(stats).toMatchObject({ sessions: EXPECTED_KEYS.length, messages: 10, runs: 2 })
    expect(stats.dbBytes).toBeGreaterThan(0)
  })
})
