// Writes gathered in JS (src/napi/gather.rs): `upsertSession` and `appendMessages` read their
// arguments at call time, make their promise in JS and cross into the addon once per turn. These
// tests hold what callers relied on before: each call's own promise, result and error, call
// order across gathered and native calls, and arguments read when the call is made.
import { describe, expect, test } from 'vitest'

import { SessionTools, openFile, openMem } from './helpers.js'

const nextTurn = () => new Promise((r) => setImmediate(r))

describe('gathered writes are installed', () => {
  test('given the module loaded when its class is read then upsertSession and appendMessages are the gathering JS functions, not the native methods', () => {
    // napi-rs keeps one load hook per library: a second one silently replaced this install once
    for (const name of ['upsertSession', 'appendMessages'] as const) {
      const source = Function.prototype.toString.call(SessionTools.prototype[name])
      expect(source, name).not.toContain('[native code]')
    }
  })
})

describe('gathered writes keep every caller semantics', () => {
  test('given a patch changed right after the call when it settles then what was written is the patch as it was at the call', async () => {
    const st = await openMem()
    const patch: any = { label: 'before', inputTokens: 1 }
    const done = st.upsertSession('agent:main:m', patch)
    patch.label = 'after'
    patch.inputTokens = 2
    const msgs: any[] = [{ role: 'user', content: 'first' }]
    const appended = st.appendMessages('agent:main:m', msgs)
    msgs[0].content = 'changed'
    msgs.push({ role: 'user', content: 'extra' })
    const out = await done
    expect([out.label, out.inputTokens]).toEqual(['before', 1])
    expect((await appended).appended).toBe(1)
    expect((await st.getSession('agent:main:m'))?.label).toBe('before')
    const h = await st.chatHistory('agent:main:m')
    expect(h.messages.map((m: any) => m.content)).toEqual(['first'])
  })

  test('given calls the native path answers in the middle of a burst when they settle then every write applied in call order', async () => {
    const st = await openMem()
    const key = 'agent:main:order'
    const ps: Promise<any>[] = []
    for (let i = 0; i < 60; i++) {
      // a key given as a String object takes the native path (it is read as the same key)
      const k: any = i % 5 === 2 ? new String(key) : key
      ps.push(st.upsertSession(k, { inputTokens: i }))
    }
    const outs = await Promise.all(ps)
    outs.forEach((e, i) => expect(e.inputTokens).toBe(i))
    expect((await st.getSession(key))?.inputTokens).toBe(59)
  })

  test('given an argument JSON cannot carry among good calls when they settle then only that call rejects, as a lone call does, and the others apply in order', async () => {
    const st = await openMem()
    const cyclic: any = { label: 'x' }
    cyclic.self = cyclic
    const alone = await st.upsertSession('agent:main:lone', cyclic).then(
      () => null,
      (e) => e,
    )
    expect(alone?.code).toBe('INVALID_REQUEST')
    const key = 'agent:main:mixed'
    const calls = [
      st.upsertSession(key, { inputTokens: 1 }),
      st.upsertSession(key, cyclic),
      st.upsertSession(key, { inputTokens: 2 }),
      st.appendMessages(key, [{ role: 'user', content: 10n } as any]),
      st.upsertSession(key, { inputTokens: 3 }),
    ]
    const settled = await Promise.allSettled(calls)
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled'])
    const reason = (settled[1] as PromiseRejectedResult).reason
    expect([reason.code, reason.message]).toEqual([alone.code, alone.message])
    expect((settled[3] as PromiseRejectedResult).reason.code).toBe('INVALID_REQUEST')
    expect(settled.filter((s) => s.status === 'fulfilled').map((s: any) => s.value.inputTokens)).toEqual([1, 2, 3])
    expect((await st.chatHistory(key)).messages).toHaveLength(0)
  })

  test('given 8 gathered upserts in one turn, one refused by the engine, when they settle then each caller gets its own entry or error, in call order', async () => {
    // a turn's writes that run inline are settled together (one parse for the run of answers);
    // a refusal in the middle splits the run and keeps its place
    const { st } = await openFile()
    await st.upsertSession('agent:main:warm', {})
    for (let i = 0; i < 5; i++) await nextTurn()
    const order: number[] = []
    const calls = Array.from({ length: 8 }, (_, i) =>
      st.upsertSession(`agent:main:g${i}`, i === 3 ? { spawnedBy: 'a\u0000b' } : { inputTokens: i, label: `L${i}` }).then(
        (e) => (order.push(i), e),
        (e) => {
          order.push(i)
          throw e
        },
      ),
    )
    const settled = await Promise.allSettled(calls)
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
    settled.forEach((s, i) => {
      if (i === 3) {
        expect(s.status).toBe('rejected')
        expect((s as PromiseRejectedResult).reason.code).toBe('INVALID_REQUEST')
        return
      }
      expect(s.status).toBe('fulfilled')
      const e = (s as PromiseFulfilledResult<any>).value
      expect([e.inputTokens, e.label]).toEqual([i, `L${i}`])
    })
    expect(await st.getSession('agent:main:g3')).toBeNull()
    expect((await st.getSession('agent:main:g7'))?.label).toBe('L7')
  })

  test('given writes to two stores interleaved in one turn when they settle then each write is in its own store', async () => {
    const a = await openMem()
    const b = await openMem()
    const ps: Promise<any>[] = []
    for (let i = 0; i < 40; i++) ps.push((i % 3 === 0 ? b : a).upsertSession(`agent:main:s${i}`, { inputTokens: i }))
    const outs = await Promise.all(ps)
    outs.forEach((e, i) => expect(e.inputTokens).toBe(i))
    for (let i = 0; i < 40; i++) {
      expect((await (i % 3 === 0 ? b : a).getSession(`agent:main:s${i}`))?.inputTokens).toBe(i)
      expect(await (i % 3 === 0 ? a : b).getSession(`agent:main:s${i}`)).toBeNull()
    }
  })

  test('given a burst of 1,000 writes when the answers come back then each reaches its own caller, in call order, over several turns of the event loop', async () => {
    const { st } = await openFile()
    let turn = 0
    let ticking = true
    const tick = () => {
      turn++
      if (ticking) setImmediate(tick)
    }
    setImmediate(tick)
    const order: number[] = []
    const turns: number[] = []
    const outs = await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        st.upsertSession(`agent:main:b${i}`, { inputTokens: i }).then((e) => {
          order.push(i)
          turns.push(turn)
          return e
        }),
      ),
    )
    ticking = false
    outs.forEach((e, i) => expect(e.inputTokens).toBe(i))
    expect(order).toEqual(Array.from({ length: 1000 }, (_, i) => i))
    // the answers were settled a slice at a time, the loop turning between slices
    expect(new Set(turns).size).toBeGreaterThan(1)
    await nextTurn()
  })

  test('given a write issued after a burst, before the burst went to the writer, when they settle then it applied after the burst', async () => {
    const st = await openMem()
    const key = 'agent:main:late'
    const burst = Array.from({ length: 100 }, (_, i) => st.upsertSession(key, { inputTokens: i }))
    // a later turn of JS code (a microtask), before the next turn of the event loop
    await Promise.resolve()
    const late = st.upsertSession(key, { inputTokens: 1000 })
    const outs = await Promise.all([...burst, late])
    outs.slice(0, 100).forEach((e, i) => expect(e.inputTokens).toBe(i))
    expect(outs[100].inputTokens).toBe(1000)
    expect((await st.getSession(key))?.inputTokens).toBe(1000)
  })

  test('given gathered patches changed right after their calls when they settle then each wrote its patch as it was at its call, flat or nested', async () => {
    const st = await openMem()
    const first = st.upsertSession('agent:main:g0', { label: 'native' }) // the turn's first call takes the native path
    const flat: any = { label: 'flat-before', inputTokens: 1, spawnDepth: null, skip: undefined }
    const nested: any = { label: 'nested-before', deliveryContext: { channel: 'telegram', to: '+1' } }
    const proto = JSON.parse('{"__proto__": "x", "label": "proto"}')
    const withJson = { toJSON: () => ({ label: 'from-toJSON' }) }
    let reads = 0
    const getter = Object.defineProperty({}, 'label', { enumerable: true, get: () => `got-${++reads}` })
    const calls = [
      st.upsertSession('agent:main:g1', flat),
      st.upsertSession('agent:main:g2', nested),
      st.upsertSession('agent:main:g3', proto),
      st.upsertSession('agent:main:g4', withJson as any),
      st.upsertSession('agent:main:g5', getter),
    ]
    flat.label = 'flat-after'
    flat.inputTokens = 2
    nested.label = 'nested-after'
    nested.deliveryContext.to = '+2'
    const outs = await Promise.all([first, ...calls])
    expect(outs[1]).toMatchObject({ label: 'flat-before', inputTokens: 1 })
    expect(outs[2]).toMatchObject({ label: 'nested-before', deliveryContext: { channel: 'telegram', to: '+1' } })
    expect(outs[3].label).toBe('proto')
    expect(outs[4].label).toBe('from-toJSON')
    expect(outs[5].label).toBe('got-1')
    expect(reads).toBe(1)
    // each as a lone (native) call writes it
    const lone = await st.upsertSession('agent:main:l3', JSON.parse('{"__proto__": "x", "label": "proto"}'))
    expect(Object.keys(outs[3]).filter((k) => k !== 'updatedAt' && k !== 'sessionId').sort()).toEqual(
      Object.keys(lone).filter((k) => k !== 'updatedAt' && k !== 'sessionId').sort(),
    )
    expect((await st.getSession('agent:main:g1'))?.label).toBe('flat-before')
  })

  test('given a burst still being handed on when later turns write the same key then every write applied in call order', async () => {
    const st = await openMem()
    const key = 'agent:main:slices'
    const first = Array.from({ length: 1000 }, (_, i) => st.upsertSession(key, { inputTokens: i, label: `a${i}` }))
    // the next turn of the event loop: the burst is being handed on a slice at a time
    await new Promise((r) => setImmediate(r))
    const second = Array.from({ length: 300 }, (_, i) => st.upsertSession(key, { inputTokens: 1000 + i, label: `b${i}` }))
    await Promise.resolve()
    const late = st.upsertSession(key, { inputTokens: 5000 })
    const outs = await Promise.all([...first, ...second, late])
    outs.slice(0, 1300).forEach((e, i) => expect(e.inputTokens).toBe(i))
    expect(outs[1300].inputTokens).toBe(5000)
    const last = await st.getSession(key)
    expect([last?.inputTokens, last?.label]).toEqual([5000, 'b299'])
  })

  test('given the method called on something that is not a store when called then it fails as the native method does', async () => {
    const st = await openMem()
    const run = (f: () => unknown) => {
      try {
        const out: any = f()
        return out && typeof out.then === 'function' ? out.then(() => 'resolved', (e: any) => `rejected ${e?.code ?? e?.message}`) : 'returned'
      } catch (e: any) {
        return `threw ${e?.message}`
      }
    }
    const upsert = st.upsertSession
    const append = st.appendMessages
    const a = await run(() => upsert.call({}, 'agent:main:x', { label: 'x' }))
    const b = await run(() => append.call({}, 'agent:main:x', [{ role: 'user', content: 'x' }]))
    expect(a).toMatch(/^threw /)
    expect(b).toMatch(/^threw /)
    expect(await st.getSession('agent:main:x')).toBeNull()
    expect(upsert.name).toBe('upsertSession')
    expect(append.name).toBe('appendMessages')
  })

  test('given a store closed before the call when called then it rejects CLOSED', async () => {
    const st = await openMem()
    await st.close()
    const errs = await Promise.all([
      st.upsertSession('agent:main:c', { label: 'x' }).catch((e) => e),
      st.appendMessages('agent:main:c', [{ role: 'user', content: 'x' }]).catch((e) => e),
    ])
    expect(errs.map((e) => e.code)).toEqual(['CLOSED', 'CLOSED'])
  })
})
