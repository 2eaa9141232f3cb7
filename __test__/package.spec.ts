// Packaging (issue 4, item 4): `npm pack` gives a tarball that a fresh project installs and uses
// from CommonJS, from ESM and from strict TypeScript. Runs against whatever `.node` the last build
// left at the repository root (the debug build of `npm test`), which the tarball ships.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const TSC = path.join(ROOT, 'node_modules', '.bin', 'tsc')
/** The tests that run tsc: a type-check, a compile and a run of the output. */
const TSC_TIMEOUT_MS = 90_000
const PKG = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
const BINARY = `${PKG.napi.binaryName}.linux-x64-gnu.node`

// npm passes its own settings down as npm_* variables when the suite runs under `npm test`;
// the child npm must read only the user's config and the folder it runs in.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_')))

function run(cmd: string, args: string[], cwd: string) {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout: 180_000, maxBuffer: 64 << 20 })
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '', error: r.error }
}

function ok(cmd: string, args: string[], cwd: string) {
  const r = run(cmd, args, cwd)
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}): ${r.error ?? ''}\n${r.stderr}\n${r.stdout}`)
  return r.stdout
}

let work = ''
let consumer = ''
let tarball = ''
let packed: { name: string; version: string; filename: string; files: Array<{ path: string; size: number }> }

beforeAll(() => {
  if (!fs.existsSync(path.join(ROOT, BINARY))) throw new Error(`${BINARY} is missing at the repository root: run npm run build:debug first`)
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'st-pack-'))
  const out = ok('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', work], ROOT)
  packed = JSON.parse(out.slice(out.indexOf('[')))[0]
  tarball = path.join(work, packed.filename)

  consumer = path.join(work, 'consumer')
  fs.mkdirSync(consumer)
  fs.writeFileSync(path.join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', version: '0.0.0', private: true }, null, 2))
  ok('npm', ['install', tarball, '--no-audit', '--no-fund', '--ignore-scripts', '--prefer-offline'], consumer)
}, 300_000)

afterAll(() => {
  if (work) fs.rmSync(work, { recursive: true, force: true })
})

describe('npm pack', () => {
  it('has no pack-time lifecycle script that would build or change the tree', () => {
    for (const s of ['prepack', 'prepare', 'postpack', 'prepublish']) expect(PKG.scripts?.[s], s).toBeUndefined()
  })

  it('ships exactly the loader, the types, the native binary, the README, the docs, the licence and package.json', () => {
    expect(packed.name).toBe('session-tools')
    expect(fs.existsSync(tarball)).toBe(true)
    const files = packed.files.map((f) => f.path).sort()
    const docs = (fs.readdirSync(path.join(ROOT, 'docs'), { recursive: true }) as string[])
      .filter((f) => fs.statSync(path.join(ROOT, 'docs', f)).isFile())
      .map((f) => `docs/${f.split(path.sep).join('/')}`)
    const fixed = ['LICENSE', 'README.md', 'bin/session-tools.js', 'examples/demo.mjs', 'index.d.ts', 'index.js', 'package.json', BINARY]
    expect(files).toEqual([...fixed, ...docs].sort())
    const binary = packed.files.find((f) => f.path === BINARY)!
    expect(binary.size).toBe(fs.statSync(path.join(ROOT, BINARY)).size)
  })

  it('contains the contract, the behaviour notes, the integration guide and the MIT licence', () => {
    const files = packed.files.map((f) => f.path)
    for (const f of ['docs/API.md', 'docs/BEHAVIOUR.md', 'docs/INTEGRATION.md', 'LICENSE']) expect(files, f).toContain(f)
    expect(PKG.license).toBe('MIT')
    const licence = fs.readFileSync(path.join(ROOT, 'LICENSE'), 'utf8')
    expect(licence).toMatch(/^MIT License/)
    expect(licence).toContain('Copyright (c) 2026 the session-tools authors')
  })

  it('keeps the shipped docs small: no generated file over 256 KiB, all of docs/ under 1 MiB', () => {
    const docs = packed.files.filter((f) => f.path.startsWith('docs/'))
    for (const f of docs) expect(f.size, f.path).toBeLessThan(256 << 10)
    expect(docs.reduce((n, f) => n + f.size, 0)).toBeLessThan(1 << 20)
  })

  it('installs into a fresh project with main and types pointing at shipped files', () => {
    const dir = path.join(consumer, 'node_modules', 'session-tools')
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'))
    for (const f of [manifest.main, manifest.types, BINARY, 'README.md', 'LICENSE', 'docs/API.md']) expect(fs.existsSync(path.join(dir, f)), f).toBe(true)
    expect(manifest.dependencies ?? {}).toEqual({})
  })
})

const SCRIPT_BODY = `
  const st = await SessionTools.open({ path: ':memory:' })
  const entry = await st.upsertSession('main', { lastChannel: 'whatsapp', lastTo: '+15550001', label: 'from-FLAVOR' })
  const got = await st.getSession('agent:main:main')
  await st.appendMessages('main', [{ role: 'user', content: 'hi', timestamp: 1 }])
  const hist = await st.chatHistory('main', { limit: 5 })
  await st.close()
  let closed = null
  try { await st.getSession('main') } catch (err) { closed = err.code }
  console.log(JSON.stringify({ resolved: RESOLVED, sessionId: entry.sessionId, got, messages: hist.messages, closed }))
`

function checkScriptOutput(stdout: string, flavor: string) {
  const out = JSON.parse(stdout.trim().split('\n').pop()!)
  // The installed copy was loaded, not the repository's own index.js.
  expect(path.resolve(out.resolved)).toBe(path.join(fs.realpathSync(consumer), 'node_modules', 'session-tools', 'index.js'))
  expect(out.sessionId).toMatch(/^[0-9a-f-]{36}$/)
  expect(out.got).toMatchObject({ sessionId: out.sessionId, lastChannel: 'whatsapp', lastTo: '+15550001', label: `from-${flavor}` })
  expect(out.messages).toEqual([{ role: 'user', content: 'hi', timestamp: 1 }])
  expect(out.closed).toBe('CLOSED')
}

describe('the installed package', () => {
  it('works from CommonJS: require("session-tools")', () => {
    const body = SCRIPT_BODY.replace('FLAVOR', 'cjs').replace('RESOLVED', "require.resolve('session-tools')")
    fs.writeFileSync(path.join(consumer, 'use.cjs'), `const { SessionTools } = require('session-tools')\n;(async () => {${body}})().catch((e) => { console.error(e); process.exit(1) })\n`)
    checkScriptOutput(ok(process.execPath, ['use.cjs'], consumer), 'cjs')
  })

  it('works from ESM: import { SessionTools } from "session-tools"', () => {
    const body = SCRIPT_BODY.replace('FLAVOR', 'esm').replace('RESOLVED', "fileURLToPath(import.meta.resolve('session-tools'))")
    fs.writeFileSync(path.join(consumer, 'use.mjs'), `import { SessionTools } from 'session-tools'\nimport { fileURLToPath } from 'node:url'\n${body}`)
    checkScriptOutput(ok(process.execPath, ['use.mjs'], consumer), 'esm')
  })

  // tsc twice: 34 s once on a loaded 2-core machine (the default is 20 s)
  it('type-checks the typed example under tsc --strict, then compiles and runs it', () => {
    fs.copyFileSync(path.join(ROOT, 'examples', 'typed.ts'), path.join(consumer, 'typed.ts'))
    const flags = ['--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext']
    const check = run(TSC, [...flags, '--noEmit', 'typed.ts'], consumer)
    expect(check.stdout + check.stderr).toBe('')
    expect(check.status).toBe(0)

    ok(TSC, [...flags, '--outDir', 'out', 'typed.ts'], consumer)
    const out = JSON.parse(ok(process.execPath, [path.join('out', 'typed.js')], consumer).trim().split('\n').pop()!)
    expect(out).toMatchObject({ lastChannel: 'whatsapp', history: 2, closedCode: 'CLOSED' })
    expect(out.listed).toEqual(['main:main']) // display key 'main', kind 'main'
    expect(out.tools).toContain('sessions_list')
  }, TSC_TIMEOUT_MS)

  it('makes tsc --strict reject a consumer that misuses the types', () => {
    fs.writeFileSync(
      path.join(consumer, 'wrong.ts'),
      `import { SessionTools, type SessionEntry } from 'session-tools'\n` +
        `export async function f(st: SessionTools): Promise<number> {\n` +
        `  const e: SessionEntry | null = await st.getSession('main')\n` +
        `  return e.sessionId\n` +
        `}\n`,
    )
    const r = run(TSC, ['--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', 'wrong.ts'], consumer)
    expect(r.status).not.toBe(0)
    expect(r.stdout).toContain('TS18047') // 'e' is possibly 'null'
    expect(r.stdout).toContain('TS2322') // string is not assignable to number
  }, TSC_TIMEOUT_MS)
})
