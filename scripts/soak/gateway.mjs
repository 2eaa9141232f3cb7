// One long-lived soak worker (worker.cjs) standing in for a gateway on a host of its own: it
// runs in a pid namespace of its own (`unshare --pid`, when this process may make one), so the
// engine records a host id no other worker shares and a crashed worker's work is taken over by
// lease expiry, as across machines, never by the same-host pid shortcut. Its stdout lines are
// collected as they come; the parent can wait for one, and SIGKILL the worker.
import { spawn, spawnSync } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const WORKER = path.join(here, 'worker.cjs')
const INDEX = path.join(here, '..', '..', 'index.js')

let ownHosts = null
/** Whether workers can get a pid namespace (and so a host id) of their own here. */
export function separateHosts() {
  ownHosts ??= spawnSync('unshare', ['--pid', '--fork', '--mount-proc', '--kill-child', 'true']).status === 0
  return ownHosts
}

/**
 * Starts a worker with `env` (ST_URL or ST_DB, SOAK_MODE, SOAK_ID, …). Returns a handle:
 * `lines` (every stdout/stderr line so far), `ready` (resolves with the READY line's host id,
 * or null if the worker exited first), `exited` (resolves with `{ code, signal }`), `send(line)`,
 * `kill()`.
 */
export function startGateway(env) {
  const node = [process.execPath, WORKER]
  // --kill-child: SIGKILL to unshare reaches the worker (pid 1 of the namespace) at once
  const [cmd, args] = separateHosts() ? ['unshare', ['--pid', '--fork', '--mount-proc', '--kill-child', ...node]] : [node[0], node.slice(1)]
  const child = spawn(cmd, args, { env: { ...process.env, ST_INDEX: INDEX, ...env } })
  const lines = []
  let partial = ''
  let onReady
  const ready = new Promise((r) => (onReady = r))
  const take = (d) => {
    const parts = (partial + d).split('\n')
    partial = parts.pop()
    for (const l of parts) {
      if (!l) continue
      lines.push(l)
      if (l.startsWith('READY ')) onReady(l.slice(6))
    }
  }
  child.stdout.on('data', take)
  child.stderr.on('data', take)
  const exited = new Promise((resolve) =>
    child.on('exit', (code, signal) => {
      if (partial) lines.push(partial)
      onReady(null)
      resolve({ code, signal })
    }),
  )
  return {
    lines,
    ready,
    exited,
    pid: child.pid,
    /** Writes one line to the worker's stdin (SOAK_CONTROL: `stop`, `close`). */
    send(line) {
      child.stdin.write(`${line}\n`)
    },
    kill() {
      child.kill('SIGKILL')
      return exited
    },
  }
}
