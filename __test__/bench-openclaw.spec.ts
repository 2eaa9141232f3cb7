// The OpenClaw bench baseline runs only where the real package is installed, and says why not
// otherwise (the run goes on without it).
import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, test } from 'vitest'

// @ts-expect-error: plain .mjs bench modules, no type declarations
import { findOpenclaw, openclawRows, openclawTable, runOpenclaw } from '../bench/lib/openclaw.mjs'
import { tmpDir } from './helpers'

describe('bench: the OpenClaw baseline', () => {
  test('given no folder when looked for then it is skipped, naming the option and the variable', () => {
    const found = findOpenclaw([], {})
    expect(found.skipped).toMatch(/--openclaw <dir>/)
    expect(found.skipped).toMatch(/OPENCLAW_DIR/)
    expect(runOpenclaw(found, {})).toBe(found)
    expect(openclawRows(found, () => null)).toEqual([])
    expect(openclawTable(found, [])).toMatch(/^OpenClaw baseline skipped: /)
  })

  test('given a folder without the package when looked for then it is skipped, naming the folder', () => {
    const dir = tmpDir()
    expect(findOpenclaw(['--openclaw', dir], {}).skipped).toBe(`no node_modules/openclaw under ${path.resolve(dir)}`)
  })

  test('given the package but no Node for it when looked for then it is skipped, naming OPENCLAW_NODE', () => {
    const dir = tmpDir()
    fs.mkdirSync(path.join(dir, 'node_modules', 'openclaw'), { recursive: true })
    const found = findOpenclaw([], { OPENCLAW_DIR: dir })
    expect(found.skipped).toMatch(/OPENCLAW_NODE/)
    expect(findOpenclaw([], { OPENCLAW_DIR: dir, OPENCLAW_NODE: process.execPath })).toEqual({ dir: path.resolve(dir), node: process.execPath })
  })
})
