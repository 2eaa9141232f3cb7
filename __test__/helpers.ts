// Shared helpers for the vitest suite: opening stores that are closed after each test, temp
// folders, and assertions on rejections that carry an `err.code`.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, expect } from 'vitest'

import { SessionTools } from '../index.js'
import type { GatewayConfig, OpenOptions } from '../index.js'

export { SessionTools }

/** Absolute path of the addon's entry point, for child processes. */
export const INDEX_JS = fileURLToPath(new URL('../index.js', import.meta.url))

/** What a child process did: its exit code or signal and what it printed. */
export interface ChildRun {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

/** Runs `code` in a child node process (killed after 60 s), with the addon's path in `ST_INDEX`
 * and `env` added to this process's environment. */
export function runChild(code: string, env: Record<string, string> = {}): Promise<ChildRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', code], { env: { ...process.env, ST_INDEX: INDEX_JS, ...env } })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })
}

const opened: SessionTools[] = []
const dirs: string[] = []
const unsettled: Promise<unknown>[] = []

afterEach(async () => {
  while (opened.length) {
    const st = opened.pop()!
    await st.close().catch(() => {})
  }
  while (dirs.length) {
    fs.rmSync(dirs.pop()!, { recursive: true, force: true })
  }
  unsettled.length = 0
})

/**
 * A promise that never settles and stays reachable until the test ends, as a host's call still
 * in flight is. A bare `new Promise(() => {})` nobody references may be garbage collected at any
 * moment, and the store then ends its run at once as an error ("the callback's promise was
 * dropped"): a run the test means to hold would end early, at a time set by the collector.
 */
export function neverSettles<T = never>(): Promise<T> {
  const p = new Promise<T>(() => {})
  unsettled.push(p)
  return p
}

/** A fresh temp folder, removed after the test. */
export function tmpDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'st-'))
  dirs.push(d)
  return d
}

/** Registers a store to be closed after the test. */
export function track(st: SessionTools): SessionTools {
  opened.push(st)
  return st
}

/**
 * Whether this run puts every `openMem` store on PostgreSQL (`npm test` runs the contract files a
 * second time so, with SESSION_TOOLS_TEST_STORE=postgres and SESSION_TOOLS_TEST_PG_URL set).
 */
export const ON_POSTGRES = process.env.SESSION_TOOLS_TEST_STORE === 'postgres'

let schemas = 0
/** A URL of the test PostgreSQL server with a schema of its own, new for each call. */
export function freshPgUrl(): string {
  const base = process.env.SESSION_TOOLS_TEST_PG_URL
  if (!base) throw new Error('SESSION_TOOLS_TEST_PG_URL is not set (npm test starts a throwaway cluster and sets it)')
  return `${base}${base.includes('?') ? '&' : '?'}schema=v${process.pid}_${schemas++}`
}

/** A throwaway store (in memory; on PostgreSQL a fresh schema), closed after the test. */
export async function openMem(config?: GatewayConfig | null, extra: Partial<OpenOptions> = {}): Promise<SessionTools> {
  const where = ON_POSTGRES ? { url: freshPgUrl() } : { path: ':memory:' }
  return track(await SessionTools.open({ ...where, config, ...extra }))
}

/** A file store in a fresh temp folder, closed after the test. */
export async function openFile(
  config?: GatewayConfig | null,
  extra: Partial<OpenOptions> = {},
): Promise<{ st: SessionTools; dir: string; db: string }> {
  const dir = tmpDir()
  const db = path.join(dir, 'sessions.db')
  const st = track(await SessionTools.open({ path: db, config, ...extra }))
  return { st, dir, db }
}

export type Settled = { ok: true; value: any } | { ok: false; error: any } | { threw: true; error: any }

/** Calls `fn` and reports how it settled, telling a synchronous throw apart from a rejection. */
export async function settle(fn: () => unknown): Promise<Settled> {
  let p: unknown
  try {
    p = fn()
  } catch (error) {
    return { threw: true, error }
  }
  try {
    return { ok: true, value: await p }
  } catch (error) {
    return { ok: false, error }
  }
}

/** Asserts that `p` rejects with an Error whose `code` is `code` (and message matches `message`). */
export async function expectReject(p: Promise<unknown>, code: string, message?: string | RegExp): Promise<Error & { code: string }> {
  let error: any
  let resolved: unknown
  let didReject = false
  try {
    resolved = await p
  } catch (e) {
    didReject = true
    error = e
  }
  expect(didReject, `expected a rejection with code ${code}, but it resolved with ${safeJson(resolved)}`).toBe(true)
  expect(error).toBeInstanceOf(Error)
  expect(error.code, `message: ${error?.message}`).toBe(code)
  if (typeof message === 'string') expect(error.message).toBe(message)
  else if (message) expect(error.message).toMatch(message)
  return error
}

/** Asserts that `fn` throws synchronously an Error with `code`. */
export function expectThrowCode(fn: () => unknown, code: string, message?: string | RegExp): any {
  let error: any
  let threw = false
  try {
    fn()
  } catch (e) {
    threw = true
    error = e
  }
  expect(threw, `expected a synchronous throw with code ${code}`).toBe(true)
  expect(error.code, `message: ${error?.message}`).toBe(code)
  if (typeof message === 'string') expect(error.message).toBe(message)
  else if (message) expect(error.message).toMatch(message)
  return error
}

export function safeJson(v: unknown): string {
  try {
    const s = JSON.stringify(v)
    return s === undefined ? String(v) : s.length > 300 ? s.slice(0, 300) + '…' : s
  } catch {
    return String(v)
  }
}

/** Checks that `keys` appear in the same relative order as in `order` and that all are known. */
export function expectKeyOrder(obj: Record<string, unknown>, order: readonly string[]): void {
  const keys = Object.keys(obj)
  const positions = keys.map((k) => order.indexOf(k))
  expect(positions.filter((p) => p < 0).length, `unexpected keys in ${keys.join(',')}`).toBe(0)
  expect([...positions].sort((a, b) => a - b)).toEqual(positions)
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A user message with string content. */
export function user(text: string, extra: Record<string, unknown> = {}) {
  return { role: 'user', content: text, timestamp: Date.now(), ...extra }
}

/** An assistant message with one text block. */
export function assistant(text: string, extra: Record<string, unknown> = {}) {
  return { role: 'assistant', content: [{ type: 'text', text }], timestamp: Date.now(), ...extra }
}

/** A toolResult message. */
export function toolResult(text: string) {
  return { role: 'toolResult', toolCallId: 'call-1', toolName: 'weather', content: [{ type: 'text', text }], isError: false, timestamp: Date.now() }
}

/** The text of a message whose content is a string or text blocks. */
export function textOf(m: any): string {
  if (typeof m?.content === 'string') return m.content
  if (Array.isArray(m?.content)) return m.content.filter((b: any) => b?.type === 'text').map((b: any) => b.text).join('')
  return ''
}

/** A 1 KiB SQLite database with one foreign table (`notes`), made with the sqlite3 CLI. */
export const FOREIGN_SQLITE_DB_BASE64 =
  'U1FMaXRlIGZvcm1hdCAzAAIAAQEAQCAgAAAAAgAAAAIAAAAAAAAAAAAAAAEAAAAEAAAAAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACAC5jAQ0AAAABAbMAAbMAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAASwEGFxcXAXd0YWJsZW5vdGVzbm90ZXMCQ1JFQVRFIFRBQkxFIG5vdGVzKGlkIElOVEVHRVIgUFJJTUFSWSBLRVksIGJvZHkgVEVYVCkNAAAAAQH5AAH5AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABQEDABFoaQ=='

/** Polls `f` every 10 ms until it gives a truthy value (returned), failing after `ms`. For
 * effects that happen in the background (a reply-back exchange, an announce, a retry). The
 * default is generous (a loaded CI machine is slow; a state reached ends the wait at once), and
 * below the 20 s test timeout so a miss fails with this message. */
export async function until<T>(f: () => T | undefined | null | false | Promise<T | undefined | null | false>, ms = 15_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = await f()
    if (v) return v as T
    if (Date.now() > end) throw new Error('condition not reached in time')
    await new Promise((r) => setTimeout(r, 10))
  }
}
