// The fast part of the reliability run (issue 6; `npm run soak` is the long one): workers
// SIGKILLed at random points mid-append, mid-run, mid-announce and mid-import, the file checked after each
// kill (PRAGMA integrity_check, every acknowledged write present, transcripts in sequence, no
// duplicate rows) and reopened (every run ends, every announce settles, once per key); then
// 4 processes × 2 stores writing one file at once, readers alongside: no error reaches a caller,
// no update is lost.
import path from 'node:path'
import { describe, expect, it } from 'vitest'

import { contention, crashLoop } from '../scripts/soak/lib.mjs'
import { tmpDir } from './helpers'

describe('reliability under kills and contention (fast part of npm run soak)', () => {
  it('given workers killed with SIGKILL at random points when the file is checked and reopened then no invariant is violated', async () => {
    const r = await crashLoop({ db: path.join(tmpDir(), 'crash.db'), iterations: 6 })
    expect(r.violations).toEqual([])
    expect(r.kills).toBe(6)
    expect(r.acked).toBeGreaterThan(0)
  }, 120_000)

  it('given 4 processes with 2 stores each writing one file for 2 s then nothing is lost and no caller sees an error', async () => {
    const r = await contention({ db: path.join(tmpDir(), 'contention.db'), procs: 4, seconds: 2 })
    expect(r.violations).toEqual([])
    // every process had its writes acknowledged (how many fit in 2 s is the machine's speed)
    expect(r.perProcess).toHaveLength(4)
    for (const n of r.perProcess) expect(n).toBeGreaterThan(0)
  }, 60_000)
})
