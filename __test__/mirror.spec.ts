import { describe, expect, test } from 'vitest'
import fs from 'node:fs'
import path from 'node:path'
import { assistant, openFile, openMem, tmpDir, user } from './helpers'

describe('JSONL mirror (DECISIONS #8)', () => {
  test('given a file store with the default mirror when messages are appended then transcriptPath names a gateway-format JSONL file', async () => {
    const { st, dir } = await openFile()
    const reply = assistant('hi there')
    await st.appendMessages('main', [user('hello'), reply])
    const list: any = await st.sessionsList({}, { agentSessionKey: 'agent:main:main' })
    const file = list.sessions[0].transcriptPath as string
    expect(file).toBe(path.join(dir, 'transcripts', `${list.sessions[0].sessionId}.jsonl`))
    const lines = fs.readFileSync(file, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l))
    expect(lines[0]).toMatchObject({ type: 'session', version: 3, id: list.sessions[0].sessionId })
    expect(lines.slice(1).map((l) => l.type)).toEqual(['message', 'message'])
    expect(lines[2].parentId).toBe(lines[1].id)
    expect(lines[2].message).toEqual(reply)
    expect(fs.statSync(file).mode & 0o777).toBe(0o600)
  })

  test('given mirrorDir null when messages are appended then no file is written and history still reads from the store', async () => {
    const { st, dir } = await openFile(null, { mirrorDir: null })
    await st.appendMessages('main', [user('only in sqlite')])
    expect(fs.existsSync(path.join(dir, 'transcripts'))).toBe(false)
    const h = await st.chatHistory('main')
    expect(h.messages).toHaveLength(1)
  })

  test('given a sessionId that tries to escape the folder when appended then nothing is written outside it', async () => {
    const dir = tmpDir()
    const mirror = path.join(dir, 'm')
    const st = await openMem(null, { mirrorDir: mirror })
    await st.upsertSession('x', { sessionId: '../../escaped' })
    await st.appendMessages('x', [user('x')])
    expect(fs.existsSync(path.join(dir, 'escaped.jsonl'))).toBe(false)
    expect(fs.existsSync(path.join(path.dirname(dir), 'escaped.jsonl'))).toBe(false)
    const list: any = await st.sessionsList({})
    expect(list.sessions[0].transcriptPath).toBeUndefined()
    expect((await st.chatHistory('x')).messages).toHaveLength(1)
  })
})
