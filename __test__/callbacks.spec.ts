// The host callbacks through the real addon (API.md §2): the failure matrix of runAgent (sync
// throw, rejection with an Error and with a non-Error, a non-object result, a promise that never
// settles, a callback that calls back into the store), the shapes a callback may return, events,
// deliver, and what close() does to runs in flight.
import { spawnSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'

import type { AgentRunRequest, AgentRunResult, OpenOptions, SessionToolsEvent } from '../index.js'
import { INDEX_JS, SessionTools, expectReject, neverSettles, openFile, openMem, track, until } from './helpers'

const TARGET = 'agent:main:target'
const CTX = { agentSessionKey: 'agent:main:main' }
const noPingPong = { session: { agentToAgent: { maxPingPongTurns: 0 } } }

async function sendWith(runAgent: OpenOptions['runAgent'], timeoutSeconds = 5, extra: Partial<OpenOptions> = {}) {
  const st = await openMem(noPingPong, { runAgent, ...extra })
  const result: any = await st.sessionsSend({ sessionKey: TARGET, message: 'ping', timeoutSeconds }, CTX)
  return { st, result }
}


describe('runAgent failure matrix: every failure ends the run with status error, never the process', () => {
  it('given a callback that throws synchronously when a send waits then the result is error with its message', async () => {
    const { result } = await sendWith(() => {
      throw new Error('model exploded')
    })
    expect(result).toMatchObject({ status: 'error', error: 'model exploded', sessionKey: TARGET })
  })

  it('given a callback that rejects with an Error then the error text is its message', async () => {
    const { st, result } = await sendWith(async () => {
      throw Object.assign(new Error('rate limited'), { code: 'E429' })
    })
    expect(result).toMatchObject({ status: 'error', error: 'rate limited' })
    const wait = await st.waitRun(result.runId, { timeoutMs: 0 })
    expect(wait).toMatchObject({ runId: result.runId, status: 'error', error: 'rate limited' })
    expect(typeof wait.startedAt).toBe('number')
    expect(typeof wait.endedAt).toBe('number')
  })

  it('given rejections with non-Error values then each becomes a readable error', async () => {
    for (const [value, text] of [
      ['plain string', 'plain string'],
      [42, 'rejected with 42'],
      [{ why: 'quota' }, 'rejected with {"why":"quota"}'],
      [undefined, 'agent error'],
    ] as const) {
      const { result } = await sendWith(() => Promise.reject(value))
      expect(result, String(value)).toMatchObject({ status: 'error', error: text })
    }
  })

  it('given a result that is not an object then the run errors naming what was expected', async () => {
    for (const bad of [5, 'text', null, [1, 2], true]) {
      const { result } = await sendWith(async () => bad as unknown as AgentRunResult)
      expect(result, JSON.stringify(bad)).toMatchObject({ status: 'error', error: 'runAgent must resolve to an object' })
    }
    const { result } = await sendWith(async () => ({ messages: [{ content: 'no role' }] }) as unknown as AgentRunResult)
    expect(result.error).toContain('messages[0]')
  })

  it('given a result that is not JSON (a cycle, a BigInt) then the run errors instead of crashing', async () => {
    const cyclic: any = { reply: 'x' }
    cyclic.self = cyclic
    expect((await sendWith(async () => cyclic)).result.status).toBe('error')
    expect((await sendWith(async () => ({ reply: 'x', n: 10n }) as any)).result.status).toBe('error')
  })

  it('given a promise that never settles then the send times out, and the run ends as timeout at the agents\' timeout', async () => {
    const st = await openMem({ ...noPingPong, agents: { defaults: { timeoutSeconds: 1 } } }, { runAgent: () => neverSettles<AgentRunResult>() })
    const result: any = await st.sessionsSend({ sessionKey: TARGET, message: 'ping', timeoutSeconds: 1 }, CTX)
    expect(result).toMatchObject({ status: 'timeout', sessionKey: TARGET })
    const ended = await st.waitRun(result.runId, { timeoutMs: 3000 })
    expect(ended.status).toBe('timeout')
    expect(ended.error).toMatch(/timed out after 1000 ms/)
    expect(typeof ended.endedAt).toBe('number')
  })

  it('given a callback that calls back into the store while it runs then both work and nothing deadlocks', async () => {
    let st!: SessionTools
    const runAgent = async (req: AgentRunRequest) => {
      const hist = await st.chatHistory(req.sessionKey, { limit: 5 })
      await st.upsertSession(req.sessionKey, { label: 'visited' })
      const list = await st.sessionsList({}, { agentSessionKey: req.sessionKey })
      return { reply: `seen ${hist.messages.length} message(s), ${list.count} session(s)` }
    }
    st = await openMem(noPingPong, { runAgent })
    const result: any = await st.sessionsSend({ sessionKey: TARGET, message: 'ping', timeoutSeconds: 5 }, CTX)
    expect(result).toMatchObject({ status: 'ok', reply: 'seen 1 message(s), 1 session(s)' })
    expect((await st.getSession(TARGET))?.label).toBe('visited')
  })

  it('given no runAgent callback then a send is an error saying so', async () => {
    const { result } = await sendWith(undefined)
    expect(result).toMatchObject({ status: 'error', error: 'no runAgent callback is configured' })
  })
})

describe('what a callback may return', () => {
  it('given a plain value, a native promise, or a thenable then each is the run result', async () => {
    const thenable = { then: (ok: (v: AgentRunResult) => void) => setTimeout(() => ok({ reply: 'from a thenable' }), 5) }
    for (const [runAgent, reply] of [
      [() => ({ reply: 'sync value' }), 'sync value'],
      [async () => ({ reply: 'native promise' }), 'native promise'],
      [() => thenable as unknown as Promise<AgentRunResult>, 'from a thenable'],
    ] as const) {
      const { result } = await sendWith(runAgent as OpenOptions['runAgent'])
      expect(result).toMatchObject({ status: 'ok', reply })
    }
  })

  it('given messages, usage and model then the transcript and the entry record them', async () => {
    const { st, result } = await sendWith(async (req) => ({
      messages: [
        { role: 'assistant', content: [{ type: 'text', text: 'one' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'two' }], custom: { kept: true } },
      ],
      usage: { input: 100, output: 20 },
      model: 'm-1',
      provider: 'p',
    }))
    expect(result).toMatchObject({ status: 'ok', reply: 'two' })
    // the primary's messages come first; the announce step (a second run) may follow them
    const h = await st.chatHistory(TARGET)
    expect(h.messages.slice(0, 3).map((m: any) => m.role)).toEqual(['user', 'assistant', 'assistant'])
    expect(h.messages[0].provenance).toEqual({ kind: 'inter_session', sourceSessionKey: 'agent:main:main', runId: result.runId })
    expect(h.messages[2].custom).toEqual({ kept: true })
    const entry = await st.getSession(TARGET)
    expect(entry).toMatchObject({ inputTokens: 100, outputTokens: 20, totalTokens: 120, model: 'm-1', modelProvider: 'p' })
  })

  it('given a request then runAgent sees the documented fields', async () => {
    const seen: AgentRunRequest[] = []
    await sendWith(async (req) => {
      seen.push(req)
      return { reply: 'ok' }
    }, 7)
    expect(seen[0]).toMatchObject({
      sessionKey: TARGET,
      agentId: 'main',
      message: 'ping',
      lane: 'nested',
      deliver: false,
      channel: 'webchat',
      timeoutMs: 7000,
    })
    expect(seen[0].runId).toBe(seen[0].idempotencyKey)
    expect(typeof seen[0].sessionId).toBe('string')
    expect(typeof seen[0].chainId).toBe('string')
    expect(seen[0].extraSystemPrompt).toContain('Agent-to-agent message context')
  })
})

describe('events and waits', () => {
  it('given onEvent then run.start and run.end arrive in order, and a throwing onEvent changes nothing', async () => {
    const events: SessionToolsEvent[] = []
    const onEvent = (ev: SessionToolsEvent) => {
      events.push(ev)
      throw new Error('listener bug')
    }
    const { result } = await sendWith(async () => ({ reply: 'pong' }), 5, { onEvent })
    expect(result.status).toBe('ok')
    await until(async () => events.some((e) => e.type === 'run.end'))
    const mine = events.filter((e) => e.runId === result.runId).map((e) => e.type)
    expect(mine.slice(0, 2)).toEqual(['run.start', 'run.end'])
    expect(typeof events[0].at).toBe('number')
  })

  it('given bad waitRun arguments then it rejects with INVALID_REQUEST; an unknown run with timeoutMs 0 is a timeout', async () => {
    const st = await openMem()
    await expectReject(st.waitRun('' as string), 'INVALID_REQUEST', /runId/)
    await expectReject(st.waitRun(5 as unknown as string), 'INVALID_REQUEST', /runId/)
    await expectReject(st.waitRun('r', { timeoutMs: -1 }), 'INVALID_REQUEST', /timeoutMs/)
    await expectReject(st.waitRun('r', 'x' as any), 'INVALID_REQUEST', /options/)
    expect(await st.waitRun('no-such-run', { timeoutMs: 0 })).toEqual({ runId: 'no-such-run', status: 'timeout' })
  })
})

describe('close with runs in flight', () => {
  it('given a run in flight when the store closes then close does not wait, the run is recorded as interrupted, and a reopen answers for it', async () => {
    let started!: () => void
    const running = new Promise<void>((r) => (started = r))
    const { st, db } = await openFile(noPingPong, {
      runAgent: () => {
        started()
        return neverSettles<AgentRunResult>()
      },
    })
    const sent: any = await st.sessionsSend({ sessionKey: TARGET, message: 'long job', timeoutSeconds: 0 }, CTX)
    expect(sent.status).toBe('accepted')
    await running
    await st.close()
    await expectReject(st.waitRun(sent.runId), 'CLOSED')
    const again = track(await SessionTools.open({ path: db }))
    expect(await again.waitRun(sent.runId, { timeoutMs: 0 })).toMatchObject({
      status: 'error',
      error: 'interrupted: the process stopped before the run finished',
    })
  })

  it('given a script that sends without waiting then node stays up until the run and its announce are done, then exits', () => {
    const code = `
      const { SessionTools } = require(process.env.ST_INDEX)
      ;(async () => {
        const st = await SessionTools.open({ path: ':memory:', config: { session: { agentToAgent: { maxPingPongTurns: 0 } } },
          runAgent: async (req) => { await new Promise((r) => setTimeout(r, 100)); console.log('ran ' + req.lane); return { reply: 'ANNOUNCE_SKIP' } } })
        const r = await st.sessionsSend({ sessionKey: 'agent:main:x', message: 'hi', timeoutSeconds: 0 }, { agentSessionKey: 'main' })
        console.log(r.status)
      })()`
    const r = spawnSync(process.execPath, ['-e', code], { env: { ...process.env, ST_INDEX: INDEX_JS }, encoding: 'utf8', timeout: 20_000 })
    expect(r.status).toBe(0)
    // the primary run and the announce step both ran before node exited
    expect(r.stdout.trim().split('\n')).toEqual(['accepted', 'ran nested', 'ran nested'])
  })

  it('given a run that never settles then node exits once the run times out, and at once after close', () => {
    const script = (close: boolean) => `
      const { SessionTools } = require(process.env.ST_INDEX)
      const stuck = new Promise(() => {}) // reachable: a collected one would end the run at once, not at its timeout
      ;(async () => {
        const st = await SessionTools.open({ path: ':memory:', config: { agents: { defaults: { timeoutSeconds: 1 } } },
          runAgent: () => stuck, deliver: async () => {}, onEvent: () => {}, steer: () => false })
        const r = await st.sessionsSend({ sessionKey: 'agent:main:x', message: 'hi', timeoutSeconds: 0 }, { agentSessionKey: 'main' })
        console.log(r.status)
        ${close ? 'await st.close()' : ''}
      })()`
    for (const close of [false, true]) {
      // exit status 0: node ended by itself; had the never-settling run kept it alive, the 20 s
      // guard would have killed it (status null)
      const r = spawnSync(process.execPath, ['-e', script(close)], { env: { ...process.env, ST_INDEX: INDEX_JS }, encoding: 'utf8', timeout: 20_000 })
      expect(r.signal, r.stderr).toBeNull()
      expect(r.status, r.stderr).toBe(0)
      expect(r.stdout.trim()).toBe('accepted')
    }
  })
})
