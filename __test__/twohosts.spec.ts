// Two gateways on one store, one of them SIGKILLed a few times (the fast part of the two-gateway
// soak, scripts/soak/hosts.mjs; `npm run soak` / `npm run soak:pg` run it with 50 kills): each
// gateway a process in a pid namespace of its own (its own host id), so the killed one's work is
// taken over by lease expiry. On a SQLite file, and on PostgreSQL in the PostgreSQL pass of
// `npm test` (SESSION_TOOLS_TEST_STORE=postgres). Checked: no acknowledged write lost, no
// idempotency key announced twice (an attempt repeated only when a kill cut it off), every
// interrupted sub-agent ended and announced once, by the survivor, and everything settled.
import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'

import { twoHosts } from '../scripts/soak/hosts.mjs'
import { ON_POSTGRES, freshPgUrl, tmpDir } from './helpers'

const where = ON_POSTGRES ? 'PostgreSQL' : 'one SQLite file'

describe(`two gateways on ${where}, one SIGKILLed`, () => {
  it('given gateway B killed 3 times at random points while A keeps working when A takes over each time then nothing acknowledged is lost and no announce is made twice', async () => {
    const dir = tmpDir()
    const db = ON_POSTGRES ? freshPgUrl() : path.join(dir, 'hosts.db')
    // Short leases keep the takeovers quick, but a lease must outlast any stall of its gateway
    // (docs/API.md §1.7): on a loaded CI machine, with the other PostgreSQL test files writing
    // beside it, a 2 s lease renewed every 0.67 s once lapsed on the survivor (a store.error).
    // The victims hold 3 s, the survivor, which runs the whole time, 6 s.
    const r = await twoHosts({ db, dir, kills: 3, leaseMs: 3_000, survivorLeaseMs: 6_000 })
    expect(r.violations).toEqual([])
    expect(r.kills).toBe(3)
    expect(r.lost).toBe(0)
    expect(r.duplicates).toBe(0)
    expect(r.acked).toBeGreaterThan(0)
    expect(r.announces).toBeGreaterThan(0)
    fs.rmSync(dir, { recursive: true, force: true })
  }, 90_000)
})
