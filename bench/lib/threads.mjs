// This process's threads as the kernel accounts for them (Linux, /proc/self/task): each one's
// name, scheduling policy, nice value, and time run on a core and spent waiting for one. Used by
// bursts.mjs (whose thread a late tick waited behind) and by the spec of the store's thread
// priorities. Off Linux, no threads.
import fs from 'node:fs'

/** The fields of a `/proc/.../stat` line from field 3 (state) on: after the name's `)`. */
const fieldsAfterName = (stat) => stat.slice(stat.lastIndexOf(')') + 2).split(' ')

/**
 * `{ [tid]: { name, policy, nice, runMs, waitMs } }` for every thread of this process (the JS
 * thread's tid is the process id); a name is cut to 15 bytes, as the kernel keeps it. `runMs` and
 * `waitMs` are null where the kernel keeps no schedstat. A thread that ended meanwhile is left out.
 */
export function threads() {
  const out = {}
  let tids = []
  try { tids = fs.readdirSync('/proc/self/task') } catch { return out }
  for (const tid of tids) {
    let stat
    try { stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8') } catch { continue }
    const fields = fieldsAfterName(stat)
    let runMs = null
    let waitMs = null
    try {
      const [run, wait] = fs.readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ').map(Number)
      runMs = run / 1e6
      waitMs = wait / 1e6
    } catch {}
    out[tid] = {
      name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
      policy: Number(fields[41 - 3]),
      nice: Number(fields[19 - 3]),
      runMs,
      waitMs,
    }
  }
  return out
}
