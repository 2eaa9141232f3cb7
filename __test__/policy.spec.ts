// The send policy (REFERENCE.md §7, scenarios Y1–Y7, DECISIONS.md's keyPrefix fix).
import { describe, expect, test } from 'vitest'

import type { GatewayConfig } from '../index.js'
import { expectReject, openMem } from './helpers'

const deny = (match: Record<string, string>): GatewayConfig => ({ session: { sendPolicy: { rules: [{ action: 'deny', match: match as any }] } } })

describe('resolveSendPolicy', () => {
  test('given no sendPolicy config when resolved then allow (Y1)', async () => {
    const st = await openMem()
    expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('allow')
    expect(await st.resolveSendPolicy({ sessionKey: 'discord:group:dev', channel: 'discord', chatType: 'group' })).toBe('allow')
  })

  test('given default allow and an entry with sendPolicy deny when resolved then deny (Y2)', async () => {
    const st = await openMem({ session: { sendPolicy: { default: 'allow' } } })
    await st.upsertSession('main', { sendPolicy: 'deny' })
    expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('deny')
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:main' })).toBe('deny')
  })

  test('given no config at all and an entry with sendPolicy deny when resolved then the entry override still denies', async () => {
    const st = await openMem()
    await st.upsertSession('main', { sendPolicy: 'deny' })
    expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('deny')
  })

  test('given an entry override allow and a matching deny rule when resolved then allow', async () => {
    const st = await openMem(deny({ channel: 'discord' }))
    await st.upsertSession('discord:group:dev', { channel: 'discord', sendPolicy: 'allow' })
    expect(await st.resolveSendPolicy({ sessionKey: 'discord:group:dev' })).toBe('allow')
  })

  test('given rule deny {discord, group} and an entry with those values when resolved then deny (Y3)', async () => {
    const st = await openMem(deny({ channel: 'discord', chatType: 'group' }))
    await st.upsertSession('discord:group:dev', { channel: 'discord', chatType: 'group' })
    expect(await st.resolveSendPolicy({ sessionKey: 'discord:group:dev' })).toBe('deny')
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:discord:group:dev' })).toBe('deny')
  })

  test('given rule deny {discord, group} when only the arguments or the bare key carry them then deny; other channels allow', async () => {
    const st = await openMem(deny({ channel: 'discord', chatType: 'group' }))
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:x', channel: ' Discord ', chatType: 'GROUP' })).toBe('deny')
    expect(await st.resolveSendPolicy({ sessionKey: 'discord:group:nobody' })).toBe('deny')
    expect(await st.resolveSendPolicy({ sessionKey: 'slack:group:nobody' })).toBe('allow')
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:x', channel: 'discord', chatType: 'direct' })).toBe('allow')
  })

  test('given an entry lastChannel when no channel argument then the entry channel decides', async () => {
    const st = await openMem(deny({ channel: 'telegram' }))
    await st.upsertSession('main', { lastChannel: 'Telegram' })
    expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('deny')
    expect(await st.resolveSendPolicy({ sessionKey: 'main', channel: 'whatsapp' })).toBe('allow')
  })

  test('given chatType direct in a rule when the argument says dm then it matches (normalisation)', async () => {
    const st = await openMem(deny({ chatType: 'direct' }))
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:x', chatType: 'dm' })).toBe('deny')
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:x', chatType: 'group' })).toBe('allow')
  })

  test('given rule deny keyPrefix cron: when resolved then the bare and the canonical cron key are denied (Y4 with the DECISIONS fix)', async () => {
    const st = await openMem(deny({ keyPrefix: 'cron:' }))
    expect(await st.resolveSendPolicy({ sessionKey: 'cron:job-1' })).toBe('deny')
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:cron:job-1' })).toBe('deny')
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:main' })).toBe('allow')
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:discord:group:cron:x' })).toBe('allow')
  })

  test('given keyPrefix in another case when resolved then matching is case-insensitive', async () => {
    const st = await openMem(deny({ keyPrefix: 'Cron:' }))
    expect(await st.resolveSendPolicy({ sessionKey: 'cron:x' })).toBe('deny')
    expect(await st.resolveSendPolicy({ sessionKey: 'CRON:x' })).toBe('deny')
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:CRON:x' })).toBe('deny')
  })

  test('given a canonical keyPrefix when a bare key is resolved then its canonical form matches', async () => {
    const st = await openMem(deny({ keyPrefix: 'agent:main:discord:' }))
    expect(await st.resolveSendPolicy({ sessionKey: 'discord:group:dev' })).toBe('deny')
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:other:discord:group:dev' })).toBe('allow')
  })

  test('given rules [allow all, deny all] when resolved then deny (Y5)', async () => {
    const st = await openMem({ session: { sendPolicy: { rules: [{ action: 'allow' }, { action: 'deny' }] } } })
    expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('deny')
  })

  test('given default deny and [deny non-matching, allow matching] when resolved then allow (Y5)', async () => {
    const st = await openMem({
      session: { sendPolicy: { default: 'deny', rules: [{ action: 'deny', match: { channel: 'slack' } }, { action: 'allow', match: { channel: 'discord' } }] } },
    })
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:x', channel: 'discord' })).toBe('allow')
  })

  test('given default deny and no rule applying when resolved then deny (Y5)', async () => {
    const st = await openMem({ session: { sendPolicy: { default: 'deny', rules: [{ action: 'allow', match: { channel: 'discord' } }] } } })
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:x', channel: 'whatsapp' })).toBe('deny')
  })

  test('given default deny and a matching allow rule when resolved then allow (a rule without action, Y6, is refused as the gateway refuses it)', async () => {
    const st = await openMem({ session: { sendPolicy: { default: 'deny', rules: [{ action: 'allow', match: { channel: 'discord' } }] } } })
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:x', channel: 'discord' })).toBe('allow')
    expect(await st.resolveSendPolicy({ sessionKey: 'agent:main:x', channel: 'slack' })).toBe('deny')
  })

  test('given a missing or bad sessionKey when resolved then INVALID_REQUEST', async () => {
    const st = await openMem()
    await expectReject(st.resolveSendPolicy({} as any), 'INVALID_REQUEST')
    await expectReject(st.resolveSendPolicy({ sessionKey: 7 } as any), 'INVALID_REQUEST')
    await expectReject(st.resolveSendPolicy(null as any), 'INVALID_REQUEST')
  })
})

describe('handleSendCommand (/send, Y7)', () => {
  test('given the owner sends /send off when handled then sendPolicy deny and the reply text', async () => {
    const st = await openMem()
    await st.upsertSession('main', { label: 'keep' })
    const r = await st.handleSendCommand({ sessionKey: 'main', text: '/send off', isOwner: true })
    expect(r).toEqual({ handled: true, reply: '⚙️ Send policy set to off.' })
    const e = await st.getSession('main')
    expect(e?.sendPolicy).toBe('deny')
    expect(e?.label).toBe('keep')
    expect(await st.resolveSendPolicy({ sessionKey: 'main' })).toBe('deny')
  })

  test('given /send on, allow, deny when handled then the mapped policy and reply', async () => {
    const st = await openMem()
    expect(await st.handleSendCommand({ sessionKey: 'main', text: '/send on', isOwner: true })).toEqual({ handled: true, reply: '⚙️ Send policy set to on.' })
    expect((await st.getSession('main'))?.sendPolicy).toBe('allow')
    expect(await st.handleSendCommand({ sessionKey: 'main', text: '/send deny', isOwner: true })).toEqual({ handled: true, reply: '⚙️ Send policy set to off.' })
    expect((await st.getSession('main'))?.sendPolicy).toBe('deny')
    expect(await st.handleSendCommand({ sessionKey: 'main', text: '/send allow', isOwner: true })).toEqual({ handled: true, reply: '⚙️ Send policy set to on.' })
    expect((await st.getSession('main'))?.sendPolicy).toBe('allow')
  })

  test('given /send inherit (or default, reset) when handled then the field is removed and the reply says inherit', async () => {
    const st = await openMem()
    for (const word of ['inherit', 'default', 'reset']) {
      await st.upsertSession('main', { sendPolicy: 'deny' })
      const r = await st.handleSendCommand({ sessionKey: 'main', text: `/send ${word}`, isOwner: true })
      expect(r).toEqual({ handled: true, reply: '⚙️ Send policy set to inherit.' })
      expect('sendPolicy' in (await st.getSession('main'))!, word).toBe(false)
    }
  })

  test('given /send maybe or a bare /send when handled then the usage text and no change', async () => {
    const st = await openMem()
    await st.upsertSession('main', { sendPolicy: 'deny' })
    for (const text of ['/send maybe', '/send']) {
      expect(await st.handleSendCommand({ sessionKey: 'main', text, isOwner: true })).toEqual({ handled: true, reply: '⚙️ Usage: /send on|off|inherit' })
    }
    expect((await st.getSession('main'))?.sendPolicy).toBe('deny')
  })

  test('given other spellings (case, colon form, spaces) when handled then they are the same command', async () => {
    const st = await openMem()
    expect(await st.handleSendCommand({ sessionKey: 'main', text: '/SEND OFF', isOwner: true })).toEqual({ handled: true, reply: '⚙️ Send policy set to off.' })
    expect(await st.handleSendCommand({ sessionKey: 'main', text: '/send: on', isOwner: true })).toEqual({ handled: true, reply: '⚙️ Send policy set to on.' })
    expect(await st.handleSendCommand({ sessionKey: 'main', text: '  /send off  ', isOwner: true })).toEqual({ handled: true, reply: '⚙️ Send policy set to off.' })
  })

  test('given a /send from a non-owner when handled then {handled: true} with no reply and no change', async () => {
    const st = await openMem()
    await st.upsertSession('main', { sendPolicy: 'allow' })
    const before = await st.getSession('main')
    const r = await st.handleSendCommand({ sessionKey: 'main', text: '/send off', isOwner: false })
    expect(r).toEqual({ handled: true })
    expect(await st.getSession('main')).toEqual(before)
  })

  test('given text that is not a /send command when handled then {handled: false} and no change', async () => {
    const st = await openMem()
    for (const text of ['hello', '/sender off', '/status', 'please /send off', '/send off now', '']) {
      expect(await st.handleSendCommand({ sessionKey: 'main', text, isOwner: true }), text).toEqual({ handled: false })
    }
    expect(await st.getSession('main')).toBeNull()
  })

  test('given a bare group key when /send off is handled then the canonical entry gets it', async () => {
    const st = await openMem()
    await st.handleSendCommand({ sessionKey: 'discord:group:dev', text: '/send off', isOwner: true })
    expect((await st.getSession('agent:main:discord:group:dev'))?.sendPolicy).toBe('deny')
  })

  test('given bad params when handled then INVALID_REQUEST', async () => {
    const st = await openMem()
    await expectReject(st.handleSendCommand({ sessionKey: 'main', text: 5, isOwner: true } as any), 'INVALID_REQUEST')
    await expectReject(st.handleSendCommand({ text: '/send off', isOwner: true } as any), 'INVALID_REQUEST', 'sessionKey required')
    await expectReject(st.handleSendCommand({ sessionKey: 'main', text: '/send off', isOwner: 'yes' } as any), 'INVALID_REQUEST')
  })

  test('given no params or no text when handled then it is not a command: {handled: false}', async () => {
    const st = await openMem()
    expect(await st.handleSendCommand(undefined as any)).toEqual({ handled: false })
    expect(await st.handleSendCommand({ sessionKey: 'main', isOwner: true } as any)).toEqual({ handled: false })
    expect(await st.getSession('main')).toBeNull()
  })
})
