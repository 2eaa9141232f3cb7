// A throwaway PostgreSQL cluster for the test suite, the soak and the bench: `initdb` into a
// temp folder, `pg_ctl start` listening only on a Unix socket there, stopped and removed by
// `stop()`. The server binaries come from PATH or /usr/lib/postgresql/<version>/bin. As root
// (initdb refuses root) the cluster runs as the `postgres` user, else `nobody`.
import { execFileSync, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

export const MISSING =
  'the PostgreSQL tests need a server: set SESSION_TOOLS_TEST_PG_URL to one, or install the PostgreSQL ' +
  'server binaries (initdb, pg_ctl, postgres; Debian: apt install postgresql) so a throwaway cluster can be started'

function findBin(name) {
  const dirs = (process.env.PATH ?? '').split(path.delimiter)
  try {
    const versions = fs.readdirSync('/usr/lib/postgresql').sort().reverse()
    for (const v of versions) dirs.push(path.join('/usr/lib/postgresql', v, 'bin'))
  } catch {}
  for (const d of dirs) {
    const p = path.join(d, name)
    if (d && fs.existsSync(p)) return p
  }
  return null
}

function serverUser() {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return null
  const known = (u) => spawnSync('id', [u]).status === 0
  return known('postgres') ? 'postgres' : 'nobody'
}

function asUser(user, bin, args) {
  return user ? ['runuser', ['-u', user, '--', bin, ...args]] : [bin, args]
}

/**
 * Starts a cluster; `{ url, stop() }`. `url` names the server (database `postgres`, user
 * `postgres`, over the socket). Throws with {@link MISSING} when the binaries are not there.
 * `durable`: fsync, synchronous commits and full-page writes on, as in production (the soak's
 * server restart, the bench's figures); else off, for speed (the tests).
 */
export function startCluster({ port = 5432, durable = false } = {}) {
  const initdb = findBin('initdb')
  const pgCtl = findBin('pg_ctl')
  if (!initdb || !pgCtl) throw new Error(MISSING)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'st-pg-'))
  const data = path.join(dir, 'data')
  const user = serverUser()
  if (user) execFileSync('chown', [user, dir])
  const run = (bin, args) => {
    const [cmd, argv] = asUser(user, bin, args)
    execFileSync(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] })
  }
  run(initdb, ['-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale=C', '-D', data])
  const opts = [
    `-c listen_addresses=''`,
    `-c unix_socket_directories='${dir}'`,
    `-c port=${port}`,
    ...(durable ? [] : ['-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off']),
    '-c max_connections=300',
  ].join(' ')
  run(pgCtl, ['-D', data, '-w', '-s', '-l', path.join(dir, 'log'), '-o', opts, 'start'])
  const url = `postgres://postgres@localhost:${port}/postgres?host=${dir}`
  let stopped = false
  const control = (action, mode = 'fast') => {
    const [cmd, argv] = asUser(user, pgCtl, ['-D', data, '-w', '-s', '-m', mode, '-l', path.join(dir, 'log'), '-o', opts, action])
    return spawnSync(cmd, argv, { stdio: 'ignore' }).status === 0
  }
  return {
    url,
    dir,
    durable,
    /** Stops the server (it can be started again with `start`). */
    halt: (mode = 'fast') => control('stop', mode),
    start: () => control('start'),
    stop() {
      if (stopped) return
      stopped = true
      control('stop', 'immediate')
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}
