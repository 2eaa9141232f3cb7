// The completion port's own wake-up of the event loop (src/napi/wake.rs, a libuv handle per JS
// environment): answers reach their callers in worker threads as on the main thread, a worker
// that ends (on its own, with `process.exit`, or terminated) with a burst in flight closes the
// handle and leaves the process and the file healthy, and idle it keeps nothing alive.
import path from 'node:path'
import { Worker } from 'node:worker_threads'
import { spawnSync } from 'node:child_process'
import { describe, expect, test } from 'vitest'

import { INDEX_JS, SessionTools, tmpDir, track } from './helpers.js'

/** Runs `body` (CommonJS, `st` the addon's class, `file` a store path) in a worker; its messages and exit code. */
function inWorker(body: string, file: string): Promise<{ messages: any[]; code: number; error?: unknown }> {
  const code = `const { parentPort, workerData } = require('node:worker_threads');
const { SessionTools } = require(workerData.index);
const file = workerData.file;
const post = (m) => parentPort.postMessage(m);
(async () => { ${body} })().catch((e) => { post({ failed: String(e && e.stack || e) }); process.exitCode = 1 });`
  return new Promise((resolve) => {
    const messages: any[] = []
    const w = new Worker(code, { eval: true, workerData: { index: INDEX_JS, file } })
    let error: unknown
    w.on('message', (m) => messages.push(m))
    w.on('error', (e) => (error = e))
    w.on('exit', (c) => resolve({ messages, code: c, error }))
  })
}

const burst = (prefix: string, n: number) => `const outs = await Promise.all(Array.from({ length: ${n} }, (_, i) => st.upsertSession('agent:main:${prefix}' + i, { inputTokens: i })));`

describe('the completion port in worker threads', () => {
  test('given bursts in several workers at once when they settle then each caller in each worker gets its own answer once, and every worker exits cleanly', async () => {
    const dir = tmpDir()
    const runs = await Promise.all(
      [0, 1, 2].map((w) =>
        inWorker(
          `const st = await SessionTools.open({ path: file });
           let calls = 0;
           ${burst(`w${w}-`, 1000)}
           const own = outs.every((e, i) => e.inputTokens === i);
           const read = await st.getSession('agent:main:w${w}-999');
           await st.close();
           post({ n: outs.length, own, last: read && read.inputTokens });`,
          path.join(dir, `w${w}.db`),
        ),
      ),
    )
    for (const r of runs) {
      expect(r.error).toBeUndefined()
      expect(r.code).toBe(0)
      expect(r.messages).toEqual([{ n: 1000, own: true, last: 999 }])
    }
  })

  test('given a worker that exits with a burst in flight when it is gone then the process goes on and every write is either stored whole or absent', async () => {
    const dir = tmpDir()
    const file = path.join(dir, 'exit.db')
    const r = await inWorker(
      `const st = await SessionTools.open({ path: file });
       for (let i = 0; i < 1000; i++) st.upsertSession('agent:main:x' + i, { inputTokens: i });
       await new Promise((r) => setImmediate(r));
       post({ started: true });
       process.exit(0);`,
      file,
    )
    expect(r.error).toBeUndefined()
    expect(r.messages).toEqual([{ started: true }])
    // the main thread's own port still works, and the worker's writes are whole or absent
    const st = track(await SessionTools.open({ path: file }))
    const rows = await Promise.all(Array.from({ length: 1000 }, (_, i) => st.getSession(`agent:main:x${i}`)))
    rows.forEach((e, i) => {
      if (e !== null && e !== undefined) expect(e.inputTokens).toBe(i)
    })
    await st.upsertSession('agent:main:after', { inputTokens: 1 })
    expect((await st.getSession('agent:main:after'))?.inputTokens).toBe(1)
  })

  test('given a worker terminated from outside while its answers come back when it is gone then the process goes on and a new worker works', async () => {
    const dir = tmpDir()
    const file = path.join(dir, 'term.db')
    const code = `const { parentPort, workerData } = require('node:worker_threads');
const { SessionTools } = require(workerData.index);
(async () => {
  const st = await SessionTools.open({ path: workerData.file });
  for (;;) {
    const p = Promise.all(Array.from({ length: 500 }, (_, i) => st.upsertSession('agent:main:t' + i, { inputTokens: i })));
    parentPort.postMessage('burst');
    await p;
  }
})();`
    const w = new Worker(code, { eval: true, workerData: { index: INDEX_JS, file } })
    let bursts = 0
    await new Promise<void>((resolve) => w.on('message', () => ++bursts === 3 && resolve()))
    const exit = new Promise((resolve) => w.on('exit', resolve))
    await w.terminate()
    await exit
    const again = await inWorker(
      `const st = await SessionTools.open({ path: file }); ${burst('t', 500)} await st.close(); post(outs.every((e, i) => e.inputTokens === i));`,
      file,
    )
    expect(again.code).toBe(0)
    expect(again.messages).toEqual([true])
  })

  test('given a child whose answers have all come back when its script ends then it exits on its own', () => {
    const code = `const { SessionTools } = require(process.env.ST_INDEX);
(async () => {
  const st = await SessionTools.open({ path: ':memory:' });
  const outs = await Promise.all(Array.from({ length: 300 }, (_, i) => st.upsertSession('agent:main:k' + i, { inputTokens: i })));
  console.log(outs.every((e, i) => e.inputTokens === i));
})();`
    const r = spawnSync(process.execPath, ['-e', code], { env: { ...process.env, ST_INDEX: INDEX_JS }, encoding: 'utf8', timeout: 20_000 })
    expect(r.status).toBe(0)
    expect(r.stdout.trim()).toBe('true')
  })
})
