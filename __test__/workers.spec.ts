// Worker threads (node:worker_threads, as vitest's `threads` pool uses them): the addon loaded and
// used by workers that come and go, several at once, and by the main thread after them. Node
// unloads an addon when the last worker that loaded it exits unless the library is kept loaded
// (src/napi/pin.rs); before that, the second round of workers crashed the process with a
// segmentation fault. Each case runs in a child process, so a crash is an exit signal here, not
// the end of the test runner.
import { describe, expect, test } from 'vitest'

import { runChild, tmpDir } from './helpers'

/** The child's code: `runWorker(dir, n)` runs a worker that opens a store in `dir`, makes `n`
 * upserts and one listing, closes it and posts what it read back. */
const PRELUDE = `
const { Worker } = require('node:worker_threads')
const path = require('node:path')
const WORKER = \`
const { parentPort, workerData } = require('node:worker_threads')
const { SessionTools } = require(workerData.index)
;(async () => {
  const st = await SessionTools.open({ path: workerData.db })
  const writes = []
  for (let i = 0; i < workerData.n; i++) writes.push(st.upsertSession('agent:main:w' + i, { label: 'w' + i }))
  await Promise.all(writes)
  const got = await st.getSession('agent:main:w' + (workerData.n - 1))
  if (workerData.leaveOpen) { parentPort.postMessage(got && got.label); return }
  await st.close()
  const gathered = !Function.prototype.toString.call(SessionTools.prototype.upsertSession).includes('[native code]')
  parentPort.postMessage(gathered ? got && got.label : 'native upsertSession in a worker')
})().catch((e) => parentPort.postMessage('error: ' + e.message))
\`
function runWorker(db, n, extra = {}) {
  return new Promise((resolve, reject) => {
    const w = new Worker(WORKER, { eval: true, workerData: { index: process.env.ST_INDEX, db, n, ...extra } })
    let answer
    w.on('message', (m) => { answer = m; if (extra.terminate) w.terminate() })
    w.on('error', reject)
    w.on('exit', () => resolve(answer))
  })
}
const dir = process.env.ST_DIR;
`

/** Runs the prelude and `code` in a child process with a fresh folder of its own. */
const runCase = (code: string) => runChild(PRELUDE + code, { ST_DIR: tmpDir() })

describe('the addon in worker threads', () => {
  test('given a worker that used the addon and exited when two and then three more load it at once then each works and the process ends cleanly', async () => {
    const r = await runCase(`
(async () => {
  const out = []
  out.push(await runWorker(path.join(dir, 'a.db'), 20))
  out.push(...(await Promise.all([runWorker(path.join(dir, 'b.db'), 20), runWorker(path.join(dir, 'c.db'), 20)])))
  out.push(...(await Promise.all([1, 2, 3].map((i) => runWorker(path.join(dir, 'd' + i + '.db'), 20)))))
  // every worker that loaded it is gone and the main thread never loaded it: the library stays mapped
  const mapped = /session-tools[^/\\n]*\\.node/.test(require('node:fs').readFileSync('/proc/self/maps', 'utf8'))
  console.log(JSON.stringify({ out, mapped }))
})()`)
    expect({ code: r.code, signal: r.signal, stderr: r.stderr }).toEqual({ code: 0, signal: null, stderr: '' })
    expect(JSON.parse(r.stdout)).toEqual({ out: Array(6).fill('w19'), mapped: true })
  })

  test('given workers that used the addon and exited when the main thread loads it then its store works and sees their writes', async () => {
    const r = await runCase(`
(async () => {
  const db = path.join(dir, 'shared.db')
  await runWorker(db, 5)
  await Promise.all([runWorker(path.join(dir, 'x.db'), 5), runWorker(path.join(dir, 'y.db'), 5)])
  const { SessionTools } = require(process.env.ST_INDEX)
  const st = await SessionTools.open({ path: db })
  const entry = await st.getSession('agent:main:w4')
  await st.upsertSession('agent:main:main', { label: 'main' })
  await st.close()
  console.log(JSON.stringify(entry.label))
})()`)
    expect({ code: r.code, signal: r.signal, stderr: r.stderr }).toEqual({ code: 0, signal: null, stderr: '' })
    expect(JSON.parse(r.stdout)).toBe('w4')
  })

  test('given a worker terminated with its store still open when another worker opens the same file then nothing is lost and the process ends cleanly', async () => {
    const r = await runCase(`
(async () => {
  const db = path.join(dir, 'left-open.db')
  const first = await runWorker(db, 50, { leaveOpen: true, terminate: true })
  const second = await runWorker(db, 10)
  const { SessionTools } = require(process.env.ST_INDEX)
  const st = await SessionTools.open({ path: db })
  const labels = []
  for (let i = 0; i < 50; i++) labels.push((await st.getSession('agent:main:w' + i))?.label)
  await st.close()
  console.log(JSON.stringify({ first, second, labels }))
})()`)
    expect({ code: r.code, signal: r.signal, stderr: r.stderr }).toEqual({ code: 0, signal: null, stderr: '' })
    const out = JSON.parse(r.stdout)
    expect(out.first).toBe('w49')
    expect(out.second).toBe('w9')
    expect(out.labels).toEqual(Array.from({ length: 50 }, (_, i) => `w${i}`))
  })
})
