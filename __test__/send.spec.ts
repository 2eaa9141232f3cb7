// sessions_send through the real addon (REFERENCE.md §5, DECISIONS.md #1, #2, #4): the
// reply-back exchange and the announce delivered through `deliver`, a late reply after a timeout,
// the chain budget across hops, the send policy on the target and on the delivery, and the
// outbox's retries with one idempotency key. The fine-grained §11 scenarios run in cargo test
// with a fake host (src/orchestrate/send.rs); these check the same behaviour end to end.
import { describe, expect, it } from 'vitest'

import type { AgentRunRequest, DeliveryRequest, SessionToolsEvent } from '../index.js'
import { openMem, until } from './helpers'

const REQ = 'agent:main:discord:group:req'
const DEV = 'agent:main:discord:group:dev'


/** A scripted pair of agents: the target answers, the requester answers once, then skips. */
function scripted(requests: AgentRunRequest[], script: Record<string, string[]>) {
  return async (req: AgentRunRequest) => {
    requests.push(req)
    const lines = script[req.sessionKey] ?? []
    return { reply: lines.length > 1 ? lines.shift()! : (lines[0] ?? 'ok') }
  }
}

describe('sessions_send end to end', () => {
  it('given two agents when one sends and waits then it gets the reply, they talk back and forth, and the announce is delivered to the target channel', async () => {
    const requests: AgentRunRequest[] = []
    const deliveries: DeliveryRequest[] = []
    const st = await openMem(
      { session: { agentToAgent: { maxPingPongTurns: 2 } } },
      {
        runAgent: scripted(requests, { [DEV]: ['initial', 'pong-2', 'announce now'], [REQ]: ['pong-1'] }),
        deliver: async (msg) => void deliveries.push(msg),
      },
    )
    const result: any = await st.sessionsSend({ sessionKey: DEV, message: 'hello', timeoutSeconds: 5 }, { agentSessionKey: REQ, agentChannel: 'discord' })
    expect(result).toMatchObject({ status: 'ok', reply: 'initial', sessionKey: DEV, delivery: { status: 'pending', mode: 'announce' } })
    expect(Object.keys(result)).toEqual(['runId', 'status', 'reply', 'sessionKey', 'delivery'])
    await until(() => deliveries.length === 1)
    expect(deliveries[0]).toMatchObject({ channel: 'discord', to: 'channel:dev', message: 'announce now', sessionKey: DEV, kind: 'a2a_announce' })
    expect(requests.map((r) => [r.sessionKey, r.lane])).toEqual([
      [DEV, 'nested'],
      [REQ, 'nested'],
      [DEV, 'nested'],
      [DEV, 'nested'],
    ])
    expect(requests[1].extraSystemPrompt).toContain('Turn 1 of 2.')
    expect(requests[3].message).toBe('Agent-to-agent announce step.')
    // every run of the exchange is one chain
    expect(new Set(requests.map((r) => r.chainId)).size).toBe(1)
  })

  it('given a reply that comes after the wait timed out then the reply-back and the announce still happen', async () => {
    const deliveries: DeliveryRequest[] = []
    // the reply is held until the send has answered `timeout`: late whatever the machine's load
    let waitEnded!: () => void
    const late = new Promise<void>((r) => (waitEnded = r))
    const st = await openMem(
      { session: { agentToAgent: { maxPingPongTurns: 0 } } },
      {
        runAgent: async (req) => {
          if (req.message === 'slow question') await late
          return { reply: req.message.startsWith('Agent-to-agent announce') ? 'late but here' : 'the answer' }
        },
        deliver: async (msg) => void deliveries.push(msg),
      },
    )
    const result: any = await st.sessionsSend({ sessionKey: DEV, message: 'slow question', timeoutSeconds: 1 }, { agentSessionKey: REQ })
    expect(result.status).toBe('timeout')
    waitEnded()
    await until(() => deliveries.length === 1)
    expect(deliveries[0]).toMatchObject({ to: 'channel:dev', message: 'late but here' })
    expect(await st.waitRun(result.runId, { timeoutMs: 0 })).toMatchObject({ status: 'ok' })
  })

  it('given three agents that keep sending to each other then the chain stops at maxChainTurns', async () => {
    let st: any
    const runs: AgentRunRequest[] = []
    const results: any[] = []
    const next: Record<string, string> = { 'agent:main:a': 'agent:main:b', 'agent:main:b': 'agent:main:c', 'agent:main:c': 'agent:main:a' }
    st = await openMem(
      { session: { agentToAgent: { maxPingPongTurns: 0, maxChainTurns: 5 } } },
      {
        runAgent: async (req) => {
          runs.push(req)
          if (!req.message.startsWith('Agent-to-agent announce')) {
            // each agent passes the message on from inside its run
            results.push(await st.sessionsSend({ sessionKey: next[req.sessionKey], message: 'pass it on', timeoutSeconds: 0 }, { agentSessionKey: req.sessionKey, runId: req.runId }))
          }
          return { reply: 'ANNOUNCE_SKIP' }
        },
      },
    )
    await st.sessionsSend({ sessionKey: 'agent:main:b', message: 'start', timeoutSeconds: 0 }, { agentSessionKey: 'agent:main:a' })
    await until(() => results.some((r) => r.status === 'forbidden'))
    await new Promise((r) => setTimeout(r, 200))
    expect(runs.length).toBeLessThanOrEqual(5)
    expect(new Set(runs.map((r) => r.chainId)).size).toBe(1)
    expect(results.find((r) => r.status === 'forbidden').error).toBe('Agent-to-agent chain limit reached (5 turns).')
  })

  it('given a target whose policy denies then no run is made; given a delivery whose session denies then it is not delivered', async () => {
    const requests: AgentRunRequest[] = []
    const deliveries: DeliveryRequest[] = []
    const events: SessionToolsEvent[] = []
    const st = await openMem(
      { session: { agentToAgent: { maxPingPongTurns: 0 } } },
      {
        runAgent: async (req) => {
          requests.push(req)
          // the target's owner turns sends off while the exchange is under way
          if (req.message.startsWith('Agent-to-agent announce')) await st.patchSession({ key: DEV, sendPolicy: 'deny' })
          return { reply: 'to the channel' }
        },
        deliver: async (msg) => void deliveries.push(msg),
        onEvent: (ev) => void events.push(ev),
      },
    )
    await st.upsertSession('agent:main:quiet', { sendPolicy: 'deny' })
    const blocked: any = await st.sessionsSend({ sessionKey: 'agent:main:quiet', message: 'x' }, { agentSessionKey: REQ })
    expect(blocked).toMatchObject({ status: 'error', error: 'send blocked by session policy', sessionKey: 'agent:main:quiet' })
    expect(requests).toHaveLength(0)

    const ok: any = await st.sessionsSend({ sessionKey: DEV, message: 'x', timeoutSeconds: 5 }, { agentSessionKey: REQ })
    expect(ok.status).toBe('ok')
    await until(() => events.some((e) => e.type === 'delivery.blocked'))
    expect(deliveries).toHaveLength(0)
  })

  it('given a deliver that fails twice then it is tried again with backoff and the same idempotency key', async () => {
    const tries: DeliveryRequest[] = []
    const st = await openMem(
      { session: { agentToAgent: { maxPingPongTurns: 0 }, outbox: { backoffMs: 20 } } },
      {
        runAgent: async () => ({ reply: 'news' }),
        deliver: async (msg) => {
          tries.push(msg)
          if (tries.length < 3) throw new Error('channel offline')
        },
      },
    )
    await st.sessionsSend({ sessionKey: DEV, message: 'x', timeoutSeconds: 0 }, { agentSessionKey: REQ })
    await until(() => tries.length === 3)
    expect(new Set(tries.map((t) => t.idempotencyKey)).size).toBe(1)
    await new Promise((r) => setTimeout(r, 150))
    expect(tries).toHaveLength(3)
  })

  it('given what a model sends is not usable then the result is a payload, never a rejection', async () => {
    const st = await openMem(null, { runAgent: async () => ({ reply: 'x' }) })
    expect(await st.sessionsSend({} as any)).toEqual({ status: 'error', tool: 'sessions_send', error: 'message required' })
    expect(await st.sessionsSend({ message: 'hi' })).toMatchObject({ status: 'error', error: 'Either sessionKey or label is required' })
    expect(await st.sessionsSend({ message: 'hi', sessionKey: 'a', label: 'b' })).toMatchObject({
      status: 'error',
      error: 'Provide either sessionKey or label (not both).',
    })
    expect(await st.sessionsSend({ message: 'hi', label: 'nobody' })).toMatchObject({ status: 'error', error: expect.stringContaining('No session found with label') })
    const wrapped: any = await st.executeTool('sessions_send', { message: 7 })
    expect(wrapped.details).toEqual({ status: 'error', tool: 'sessions_send', error: 'message required' })
  })
})
