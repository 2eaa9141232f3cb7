// The store methods: getSession / upsertSession / patchSession / resolveSession / resetSession /
// deleteSession (API.md §4; REFERENCE.md §1.5, §2.5, §2.7; DECISIONS.md).
import { describe, expect, test } from 'vitest'

import { UUID_RE, expectReject, openMem } from './helpers'

const OPS_WORK = { session: { mainKey: 'work' }, agents: { list: [{ id: 'alpha' }, { id: 'ops', default: true }] } }

describe('upsertSession: the merge rule (§2.5)', () => {
  test('given a missing key when upserted then a new entry gets a UUID sessionId and updatedAt about now', async () => {
    const st = await openMem()
    const before = Date.now()
    const e = await st.upsertSession('main', { label: 'first' })
    expect(e.sessionId).toMatch(UUID_RE)
    expect(e.updatedAt).toBeGreaterThanOrEqual(before)
    expect(e.updatedAt).toBeLessThanOrEqual(Date.now() + 1000)
    expect(e.label).toBe('first')
    expect(await st.getSession('main')).toEqual(e)
  })

  test('given an entry when a patch without sessionId is merged then the sessionId is kept', async () => {
    const st = await openMem()
    const a = await st.upsertSession('main', { label: 'a' })
    const b = await st.upsertSession('main', { thinkingLevel: 'low' })
    expect(b.sessionId).toBe(a.sessionId)
    expect(b.label).toBe('a')
    expect(b.thinkingLevel).toBe('low')
  })

  test('given an entry when a patch carries a sessionId then the patch sessionId wins', async () => {
    const st = await openMem()
    await st.upsertSession('main', {})
    const b = await st.upsertSession('main', { sessionId: 'sess-explicit' })
    expect(b.sessionId).toBe('sess-explicit')
  })

  test('given an entry with a future updatedAt when patched with an older updatedAt then updatedAt stays the maximum', async () => {
    const st = await openMem()
    const future = Date.now() + 10 * 60_000
    const a = await st.upsertSession('main', { updatedAt: future, reasoningLevel: 'on' })
    expect(a.updatedAt).toBe(future)
    const b = await st.upsertSession('main', { updatedAt: 200 })
    expect(b.updatedAt).toBe(future)
    expect(b.reasoningLevel).toBe('on')
  })

  test('given a patch with an old updatedAt when merged then updatedAt is at least now (S9)', async () => {
    const st = await openMem()
    const before = Date.now()
    const e = await st.upsertSession('main', { updatedAt: 200 })
    expect(e.updatedAt).toBeGreaterThanOrEqual(before)
  })

  test('given unknown fields when upserted and patched again then they are kept verbatim and the overlay is shallow', async () => {
    const st = await openMem()
    await st.upsertSession('main', { 'x-custom': { a: 1, nested: [1, { b: 2 }] }, queueDebounceMs: 250, origin: { label: 'L', provider: 'p' } })
    const e = await st.upsertSession('main', { origin: { label: 'M' }, skillsSnapshot: { prompt: 'p', skills: [] } })
    expect(e['x-custom']).toEqual({ a: 1, nested: [1, { b: 2 }] })
    expect(e.queueDebounceMs).toBe(250)
    expect(e.origin).toEqual({ label: 'M' })
    expect(e.skillsSnapshot).toEqual({ prompt: 'p', skills: [] })
    expect(await st.getSession('main')).toEqual(e)
  })

  test('given last-route fields with spaces and capitals when upserted then they are normalised and mirrored in deliveryContext (S5)', async () => {
    const st = await openMem()
    const e = await st.upsertSession('main', { lastChannel: ' WhatsApp ', lastTo: ' +1555 ', lastAccountId: ' acct-1 ' })
    expect(e.lastChannel).toBe('whatsapp')
    expect(e.lastTo).toBe('+1555')
    expect(e.lastAccountId).toBe('acct-1')
    expect(e.deliveryContext).toEqual({ channel: 'whatsapp', to: '+1555', accountId: 'acct-1' })
    expect(await st.getSession('main')).toEqual(e)
  })

  test('given an entry with channel but no lastChannel when written then it acquires lastChannel and deliveryContext.channel (§2.4 quirk)', async () => {
    const st = await openMem()
    const e = await st.upsertSession('discord:group:dev', { channel: 'discord' })
    expect(e.lastChannel).toBe('discord')
    expect(e.deliveryContext).toEqual({ channel: 'discord' })
  })

  test('given a numeric lastThreadId and blank route fields when written then the thread id is truncated and blanks disappear (§2.4)', async () => {
    const st = await openMem()
    const e = await st.upsertSession('main', { lastChannel: 'telegram', lastTo: '   ', lastAccountId: '', lastThreadId: 42.7 })
    expect(e.lastThreadId).toBe(42)
    expect(e.deliveryContext).toEqual({ channel: 'telegram', threadId: 42 })
    expect('lastTo' in e).toBe(false)
    expect('lastAccountId' in e).toBe(false)
  })

  test('given an explicit deliveryContext and last* fields when written then last* win field by field', async () => {
    const st = await openMem()
    const e = await st.upsertSession('main', { lastChannel: 'Telegram', deliveryContext: { channel: 'whatsapp', to: '+1', accountId: 'acct' } })
    expect(e.deliveryContext).toEqual({ channel: 'telegram', to: '+1', accountId: 'acct' })
    expect(e).toMatchObject({ lastChannel: 'telegram', lastTo: '+1', lastAccountId: 'acct' })
  })

  test('given a non-finite updatedAt when upserted then it rejects INVALID_REQUEST', async () => {
    const st = await openMem()
    await expectReject(st.upsertSession('main', { updatedAt: 'soon' as any }), 'INVALID_REQUEST', /updatedAt/)
    expect(await st.getSession('main')).toBeNull()
  })
})

describe('getSession: key canonicalisation (§1.5)', () => {
  test('given a missing key when read then null', async () => {
    const st = await openMem()
    expect(await st.getSession('agent:main:nope')).toBeNull()
  })

  test('given default config when main is written then it is agent:main:main', async () => {
    const st = await openMem()
    const e = await st.upsertSession('main', { label: 'm' })
    expect(await st.getSession('agent:main:main')).toEqual(e)
    expect((await st.resolveSession({ key: 'main' })).key).toBe('agent:main:main')
  })

  test('given a bare group key when written then it is stored under the default agent', async () => {
    const st = await openMem()
    const e = await st.upsertSession('discord:group:dev', { subject: 'Dev' })
    expect(await st.getSession('agent:main:discord:group:dev')).toEqual(e)
    const list = await st.listSessions()
    expect(list.sessions.map((r) => r.key)).toEqual(['agent:main:discord:group:dev'])
  })

  test('given a configured default agent ops when a bare key is written then it belongs to ops (DECISIONS §1.3)', async () => {
    const st = await openMem({ agents: { list: [{ id: 'main' }, { id: 'ops', default: true }] } })
    const e = await st.upsertSession('discord:group:dev', { subject: 'Dev' })
    expect(await st.getSession('agent:ops:discord:group:dev')).toEqual(e)
    expect(await st.getSession('agent:main:discord:group:dev')).toBeNull()
  })

  test('given default agent ops and mainKey work when main aliases are resolved then they map as K11 says', async () => {
    const st = await openMem(OPS_WORK)
    await st.upsertSession('main', { label: 'ops-main' })
    expect((await st.getSession('agent:ops:work'))?.label).toBe('ops-main')
    expect((await st.getSession('work'))?.label).toBe('ops-main')
    expect((await st.getSession('agent:ops:main'))?.label).toBe('ops-main')
    await st.upsertSession('agent:alpha:main', { label: 'alpha-main' })
    expect((await st.getSession('agent:alpha:work'))?.label).toBe('alpha-main')
    expect((await st.resolveSession({ key: 'agent:alpha:main' })).key).toBe('agent:alpha:work')
  })

  test('given a case-preserving bare key when written then its case is kept in the canonical key', async () => {
    const st = await openMem()
    const r = await st.appendMessages('Slack:Group:Dev', [{ role: 'user', content: 'x' }])
    expect(r.sessionKey).toBe('agent:main:Slack:Group:Dev')
  })

  test('given scope global when main is written then it is the global session', async () => {
    const st = await openMem({ session: { scope: 'global' } })
    await st.upsertSession('main', { label: 'g' })
    expect((await st.getSession('global'))?.label).toBe('g')
    expect((await st.resolveSession({ key: 'main' })).key).toBe('global')
  })

  test('given mainKey " Work " when main is written then the key is agent:main:work (K2)', async () => {
    const st = await openMem({ session: { mainKey: ' Work ' } })
    const r = await st.appendMessages('main', [{ role: 'user', content: 'x' }])
    expect(r.sessionKey).toBe('agent:main:work')
  })
})

describe('patchSession (sessions.patch, §2.7)', () => {
  test('given a missing key when patched then the entry is created and the result carries the canonical key', async () => {
    const st = await openMem()
    const r = await st.patchSession({ key: 'main', label: 'Home' })
    expect(r.ok).toBe(true)
    expect(r.key).toBe('agent:main:main')
    expect(r.entry.sessionId).toMatch(UUID_RE)
    expect(r.entry.label).toBe('Home')
    expect(await st.getSession('main')).toEqual(r.entry)
  })

  test('given scope global when main is patched then the result key is global', async () => {
    const st = await openMem({ session: { scope: 'global' } })
    expect((await st.patchSession({ key: 'main', label: 'g' })).key).toBe('global')
    expect((await st.getSession('global'))?.label).toBe('g')
  })

  test('given a label on one session when another session is patched with it then label already in use (S20)', async () => {
    const st = await openMem()
    await st.patchSession({ key: 'agent:main:subagent:one', label: 'Briefing' })
    await expectReject(
      st.patchSession({ key: 'agent:main:discord:group:dev', label: 'Briefing' }),
      'INVALID_REQUEST',
      'label already in use: Briefing',
    )
    expect(await st.getSession('agent:main:discord:group:dev')).toBeNull()
  })

  test('given a session with a label when it is patched with the same label then it is accepted', async () => {
    const st = await openMem()
    await st.patchSession({ key: 'agent:main:subagent:one', label: 'Briefing' })
    const r = await st.patchSession({ key: 'agent:main:subagent:one', label: 'Briefing' })
    expect(r.entry.label).toBe('Briefing')
  })

  test('given label texts when patched then empty, too long and null behave as the reference says', async () => {
    const st = await openMem()
    await expectReject(st.patchSession({ key: 'main', label: '   ' }), 'INVALID_REQUEST', 'invalid label: empty')
    await expectReject(st.patchSession({ key: 'main', label: 'x'.repeat(65) }), 'INVALID_REQUEST', 'invalid label: too long (max 64)')
    const ok = await st.patchSession({ key: 'main', label: '  padded  ' })
    expect(ok.entry.label).toBe('padded')
    const sixtyFour = await st.patchSession({ key: 'main', label: 'y'.repeat(64) })
    expect(sixtyFour.entry.label).toBe('y'.repeat(64))
    const cleared = await st.patchSession({ key: 'main', label: null })
    expect('label' in cleared.entry).toBe(false)
  })

  test('given a non-string label when patched then it rejects INVALID_REQUEST', async () => {
    const st = await openMem()
    const err = await expectReject(st.patchSession({ key: 'main', label: 42 as any }), 'INVALID_REQUEST')
    expect(err.message).toMatch(/label/)
  })

  test('given agent:main:main when spawnedBy is patched then it is refused (S21)', async () => {
    const st = await openMem()
    await expectReject(
      st.patchSession({ key: 'agent:main:main', spawnedBy: 'agent:main:other' }),
      'INVALID_REQUEST',
      'spawnedBy is only supported for subagent:* sessions',
    )
  })

  test('given a missing sub-agent key when spawnedBy is patched then it is created with spawnedBy (S21)', async () => {
    const st = await openMem()
    const r = await st.patchSession({ key: 'agent:main:subagent:two', spawnedBy: ' agent:main:main ' })
    expect(r.entry.spawnedBy).toBe('agent:main:main')
    expect((await st.getSession('agent:main:subagent:two'))?.spawnedBy).toBe('agent:main:main')
  })

  test('given a sub-agent with spawnedBy when it is changed, cleared or emptied then each has its text', async () => {
    const st = await openMem()
    await st.patchSession({ key: 'agent:main:subagent:two', spawnedBy: 'agent:main:main' })
    await expectReject(
      st.patchSession({ key: 'agent:main:subagent:two', spawnedBy: 'agent:main:other' }),
      'INVALID_REQUEST',
      'spawnedBy cannot be changed once set',
    )
    await expectReject(
      st.patchSession({ key: 'agent:main:subagent:two', spawnedBy: null }),
      'INVALID_REQUEST',
      'spawnedBy cannot be cleared once set',
    )
    await expectReject(
      st.patchSession({ key: 'agent:main:subagent:three', spawnedBy: '  ' }),
      'INVALID_REQUEST',
      'invalid spawnedBy: empty',
    )
    const same = await st.patchSession({ key: 'agent:main:subagent:two', spawnedBy: 'agent:main:main' })
    expect(same.entry.spawnedBy).toBe('agent:main:main')
    const noop = await st.patchSession({ key: 'agent:main:subagent:four', spawnedBy: null })
    expect('spawnedBy' in noop.entry).toBe(false)
  })

  test('given thinkingLevel values when patched then valid ones are stored, off and null clear, bad ones are refused', async () => {
    const st = await openMem()
    expect((await st.patchSession({ key: 'main', thinkingLevel: 'high' })).entry.thinkingLevel).toBe('high')
    expect('thinkingLevel' in (await st.patchSession({ key: 'main', thinkingLevel: 'off' })).entry).toBe(false)
    await st.patchSession({ key: 'main', thinkingLevel: 'low' })
    expect('thinkingLevel' in (await st.patchSession({ key: 'main', thinkingLevel: null })).entry).toBe(false)
    const err = await expectReject(st.patchSession({ key: 'main', thinkingLevel: 'banana' }), 'INVALID_REQUEST')
    expect(err.message).toMatch(/^invalid thinkingLevel \(use [a-z]+(\|[a-z]+)+\)$/)
  })

  test('given verboseLevel banana when patched then invalid verboseLevel (use "on"|"off")', async () => {
    const st = await openMem()
    await expectReject(st.patchSession({ key: 'main', verboseLevel: 'banana' }), 'INVALID_REQUEST', 'invalid verboseLevel (use "on"|"off")')
    expect((await st.patchSession({ key: 'main', verboseLevel: 'on' })).entry.verboseLevel).toBe('on')
  })

  test('given elevatedLevel off, null, maybe when patched then off is stored, null removes it, maybe is refused (S22)', async () => {
    const st = await openMem()
    expect((await st.patchSession({ key: 'main', elevatedLevel: 'off' })).entry.elevatedLevel).toBe('off')
    expect('elevatedLevel' in (await st.patchSession({ key: 'main', elevatedLevel: null })).entry).toBe(false)
    await expectReject(
      st.patchSession({ key: 'main', elevatedLevel: 'maybe' }),
      'INVALID_REQUEST',
      'invalid elevatedLevel (use "on"|"off"|"ask"|"full")',
    )
  })

  test('given sendPolicy values when patched then allow/deny are stored, null clears, others are refused', async () => {
    const st = await openMem()
    expect((await st.patchSession({ key: 'main', sendPolicy: 'deny' })).entry.sendPolicy).toBe('deny')
    expect((await st.patchSession({ key: 'main', sendPolicy: 'allow' })).entry.sendPolicy).toBe('allow')
    expect('sendPolicy' in (await st.patchSession({ key: 'main', sendPolicy: null })).entry).toBe(false)
    await expectReject(st.patchSession({ key: 'main', sendPolicy: 'maybe' as any }), 'INVALID_REQUEST', 'invalid sendPolicy (use "allow"|"deny")')
  })

  test('given responseUsage on and off when patched then on maps to tokens and off clears', async () => {
    const st = await openMem()
    expect((await st.patchSession({ key: 'main', responseUsage: 'on' })).entry.responseUsage).toBe('tokens')
    expect((await st.patchSession({ key: 'main', responseUsage: 'full' })).entry.responseUsage).toBe('full')
    expect('responseUsage' in (await st.patchSession({ key: 'main', responseUsage: 'off' })).entry).toBe(false)
  })

  test.each([
    ['execHost', 'cloud'],
    ['execSecurity', 'open'],
    ['execAsk', 'sometimes'],
    ['groupActivation', 'never'],
    ['execNode', '   '],
  ])('given %s %j when patched then it is refused', async (field, value) => {
    const st = await openMem()
    const err = await expectReject(st.patchSession({ key: 'main', [field]: value } as any), 'INVALID_REQUEST')
    expect(err.message).toContain(field)
  })

  test('given exec fields in their vocabulary when patched then they are stored', async () => {
    const st = await openMem()
    const r = await st.patchSession({ key: 'main', execHost: 'sandbox', execSecurity: 'allowlist', execAsk: 'on-miss', execNode: 'n1', groupActivation: 'mention' })
    expect(r.entry).toMatchObject({ execHost: 'sandbox', execSecurity: 'allowlist', execAsk: 'on-miss', execNode: 'n1', groupActivation: 'mention' })
  })

  test('given no model catalog when a model is patched then any ref is valid and auth overrides are cleared (S23)', async () => {
    const st = await openMem()
    await st.upsertSession('main', { authProfileOverride: 'p', authProfileOverrideSource: 'user', authProfileOverrideCompactionCount: 2 })
    const r = await st.patchSession({ key: 'main', model: 'openai/gpt-5.2' })
    expect(r.entry.providerOverride).toBe('openai')
    expect(r.entry.modelOverride).toBe('gpt-5.2')
    for (const f of ['authProfileOverride', 'authProfileOverrideSource', 'authProfileOverrideCompactionCount']) {
      expect(f in r.entry, f).toBe(false)
    }
  })

  test('given a model catalog when an unlisted model is patched then invalid model: x and nothing changes', async () => {
    const st = await openMem({ models: { providers: { openai: { models: [{ id: 'gpt-5.2' }] } } } })
    await expectReject(st.patchSession({ key: 'main', model: 'x' }), 'INVALID_REQUEST', 'invalid model: x')
    expect(await st.getSession('main')).toBeNull()
    const listed = await st.patchSession({ key: 'main', model: 'openai/gpt-5.2' })
    expect(listed.entry).toMatchObject({ providerOverride: 'openai', modelOverride: 'gpt-5.2' })
    const bare = await st.patchSession({ key: 'agent:main:other', model: 'gpt-5.2' })
    expect(bare.entry).toMatchObject({ providerOverride: 'openai', modelOverride: 'gpt-5.2' })
    await expectReject(st.patchSession({ key: 'main', model: 'anthropic/gpt-5.2' }), 'INVALID_REQUEST', /invalid model/)
  })

  test('given a model override when model null is patched then the overrides are removed', async () => {
    const st = await openMem()
    await st.patchSession({ key: 'main', model: 'openai/gpt-5.2' })
    const r = await st.patchSession({ key: 'main', model: null })
    expect('providerOverride' in r.entry).toBe(false)
    expect('modelOverride' in r.entry).toBe(false)
  })

  test('given an entry with a future updatedAt when patched then updatedAt is not moved back', async () => {
    const st = await openMem()
    const future = Date.now() + 3_600_000
    await st.upsertSession('main', { updatedAt: future })
    const r = await st.patchSession({ key: 'main', label: 'x' })
    expect(r.entry.updatedAt).toBe(future)
  })

  test('given params with an unknown property or no key when patched then invalid sessions.patch params', async () => {
    const st = await openMem()
    await expectReject(st.patchSession({ key: 'main', foo: 1 } as any), 'INVALID_REQUEST', /^invalid sessions\.patch params: .*unexpected property 'foo'/)
    await expectReject(st.patchSession({} as any), 'INVALID_REQUEST')
    await expectReject(st.patchSession({ key: '   ' } as any), 'INVALID_REQUEST')
  })

  test('given a failing field in a patch when patched then no other field of that patch is applied', async () => {
    const st = await openMem()
    await st.patchSession({ key: 'main', label: 'before' })
    await expectReject(st.patchSession({ key: 'main', label: 'after', thinkingLevel: 'banana' }), 'INVALID_REQUEST')
    expect((await st.getSession('main'))?.label).toBe('before')
  })
})

describe('resolveSession (sessions.resolve, §2.7)', () => {
  test('given both key and label or neither when resolved then the two reference texts', async () => {
    const st = await openMem()
    await expectReject(st.resolveSession({ key: 'main', label: 'x' }), 'INVALID_REQUEST', 'Provide either key, sessionId, or label (not multiple)')
    await expectReject(st.resolveSession({ key: 'main', sessionId: 'x' }), 'INVALID_REQUEST', 'Provide either key, sessionId, or label (not multiple)')
    await expectReject(st.resolveSession({}), 'INVALID_REQUEST', 'Either key, sessionId, or label is required')
  })

  test('given an entry under main when resolved by key then the canonical key (S24)', async () => {
    const st = await openMem()
    await st.upsertSession('main', {})
    expect(await st.resolveSession({ key: 'main' })).toEqual({ ok: true, key: 'agent:main:main' })
    expect(await st.resolveSession({ key: 'agent:main:main' })).toEqual({ ok: true, key: 'agent:main:main' })
  })

  test('given key mode when spawnedBy, agentId or include flags are passed then they are ignored (§2.7)', async () => {
    const st = await openMem()
    await st.upsertSession('discord:group:dev', {})
    await st.upsertSession('global', {})
    expect((await st.resolveSession({ key: 'discord:group:dev', spawnedBy: 'agent:main:nobody', agentId: 'other' })).key).toBe('agent:main:discord:group:dev')
    expect((await st.resolveSession({ key: 'global', includeGlobal: false })).key).toBe('global')
  })

  test('given no such session when resolved by key then No session found', async () => {
    const st = await openMem()
    await expectReject(st.resolveSession({ key: 'agent:main:nope' }), 'INVALID_REQUEST', 'No session found: agent:main:nope')
  })

  test('given a session with sessionId sess-group when resolved by sessionId then its key (S24)', async () => {
    const st = await openMem()
    await st.upsertSession('discord:group:dev', { sessionId: 'sess-group' })
    await st.upsertSession('main', { sessionId: 'sess-group-2' })
    expect(await st.resolveSession({ sessionId: 'sess-group' })).toEqual({ ok: true, key: 'agent:main:discord:group:dev' })
  })

  test('given an unknown sessionId when resolved then No session found: <id>', async () => {
    const st = await openMem()
    await expectReject(
      st.resolveSession({ sessionId: 'aaaaaaaa-aaaa-4aaa-aaaa-aaaaaaaaaaaa' }),
      'INVALID_REQUEST',
      'No session found: aaaaaaaa-aaaa-4aaa-aaaa-aaaaaaaaaaaa',
    )
  })

  test('given two sessions sharing a sessionId when resolved then Multiple sessions found for sessionId', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:a', { sessionId: 'dup' })
    await st.upsertSession('agent:main:b', { sessionId: 'dup' })
    const err = await expectReject(st.resolveSession({ sessionId: 'dup' }), 'INVALID_REQUEST', /^Multiple sessions found for sessionId: dup \(/)
    expect(err.message).toContain('agent:main:a')
    expect(err.message).toContain('agent:main:b')
  })

  test('given the target is older than eight substring matches when resolved by sessionId then it is still found exactly', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:target', { sessionId: 'abc' })
    for (let i = 0; i < 12; i++) await st.upsertSession(`agent:main:n${i}`, { sessionId: `abc-${i}`, updatedAt: Date.now() + 1000 + i })
    expect((await st.resolveSession({ sessionId: 'abc' })).key).toBe('agent:main:target')
  })

  test('given a labelled sub-agent when resolved by label with agentId then its key (S26)', async () => {
    const st = await openMem()
    await st.patchSession({ key: 'agent:main:subagent:one', label: 'Briefing' })
    expect(await st.resolveSession({ label: 'Briefing', agentId: 'main' })).toEqual({ ok: true, key: 'agent:main:subagent:one' })
    expect(await st.resolveSession({ label: ' Briefing ' })).toEqual({ ok: true, key: 'agent:main:subagent:one' })
    await expectReject(st.resolveSession({ label: 'Briefing', agentId: 'other' }), 'INVALID_REQUEST', 'No session found with label: Briefing')
  })

  test('given no session with a label when resolved by label then No session found with label', async () => {
    const st = await openMem()
    await expectReject(st.resolveSession({ label: 'ghost' }), 'INVALID_REQUEST', 'No session found with label: ghost')
  })

  test('given two sessions with one label (set by upsert) when resolved by label then Multiple sessions found with label', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:a', { label: 'twin' })
    await st.upsertSession('agent:main:b', { label: 'twin' })
    const err = await expectReject(st.resolveSession({ label: 'twin' }), 'INVALID_REQUEST', /^Multiple sessions found with label: twin \(/)
    expect(err.message).toContain('agent:main:a')
    expect(err.message).toContain('agent:main:b')
  })

  test('given bad labels when resolved then the label texts', async () => {
    const st = await openMem()
    await expectReject(st.resolveSession({ label: 'x'.repeat(65) }), 'INVALID_REQUEST', 'invalid label: too long (max 64)')
    await expectReject(st.resolveSession({ label: 7 as any }), 'INVALID_REQUEST', /label/)
  })

  test('given a spawned child when resolved by sessionId with spawnedBy then only a matching parent finds it', async () => {
    const st = await openMem()
    await st.upsertSession('agent:main:subagent:c', { sessionId: 'child-sid', spawnedBy: 'agent:main:main' })
    expect((await st.resolveSession({ sessionId: 'child-sid', spawnedBy: 'agent:main:main' })).key).toBe('agent:main:subagent:c')
    await expectReject(st.resolveSession({ sessionId: 'child-sid', spawnedBy: 'agent:main:other' }), 'INVALID_REQUEST', 'No session found: child-sid')
  })

  test('given the global session when resolved by sessionId then includeGlobal decides', async () => {
    const st = await openMem()
    await st.upsertSession('global', { sessionId: 'g-sid' })
    await expectReject(st.resolveSession({ sessionId: 'g-sid' }), 'INVALID_REQUEST', 'No session found: g-sid')
    expect((await st.resolveSession({ sessionId: 'g-sid', includeGlobal: true })).key).toBe('global')
  })
})

describe('resetSession (sessions.reset, §2.7)', () => {
  test('given an entry with counters and metadata when reset then new sessionId, counters 0 and only the carried fields stay (S30)', async () => {
    const st = await openMem()
    const old = await st.upsertSession('main', {
      thinkingLevel: 'low',
      verboseLevel: 'on',
      reasoningLevel: 'on',
      responseUsage: 'full',
      model: 'gpt-x',
      contextTokens: 1234,
      sendPolicy: 'deny',
      label: 'keepme',
      origin: { label: 'o', provider: 'whatsapp' },
      lastChannel: 'whatsapp',
      lastTo: '+1555',
      skillsSnapshot: { prompt: 'p', skills: [{ name: 's' }] },
      inputTokens: 10,
      outputTokens: 20,
      totalTokens: 30,
      systemSent: true,
      abortedLastRun: true,
      providerOverride: 'openai',
      modelOverride: 'gpt-5.2',
      displayName: 'Dropped',
      lastAccountId: 'acct',
      lastThreadId: '42',
      'x-custom': 1,
    })
    await st.appendMessages('main', [{ role: 'user', content: 'before reset' }])
    const r = await st.resetSession('main')
    expect(r.ok).toBe(true)
    expect(r.key).toBe('agent:main:main')
    const e = r.entry
    expect(e.sessionId).toMatch(UUID_RE)
    expect(e.sessionId).not.toBe(old.sessionId)
    expect(e).toMatchObject({
      systemSent: false,
      abortedLastRun: false,
      inputTokens: 0,
      outputTokens: 0,
      totalTokens: 0,
      thinkingLevel: 'low',
      verboseLevel: 'on',
      reasoningLevel: 'on',
      responseUsage: 'full',
      model: 'gpt-x',
      contextTokens: 1234,
      sendPolicy: 'deny',
      label: 'keepme',
      origin: { label: 'o', provider: 'whatsapp' },
      lastChannel: 'whatsapp',
      lastTo: '+1555',
      skillsSnapshot: { prompt: 'p', skills: [{ name: 's' }] },
    })
    for (const f of ['providerOverride', 'modelOverride', 'displayName', 'lastAccountId', 'lastThreadId', 'x-custom']) {
      expect(f in e, f).toBe(false)
    }
    expect(await st.getSession('main')).toEqual(e)
    expect((await st.chatHistory('main')).messages).toEqual([])
  })

  test('given a missing key when reset then it is created', async () => {
    const st = await openMem()
    const r = await st.resetSession('discord:group:new')
    expect(r.key).toBe('agent:main:discord:group:new')
    expect(r.entry.totalTokens).toBe(0)
    expect(await st.getSession('agent:main:discord:group:new')).toEqual(r.entry)
  })

  test('given a sub-agent with spawnedBy when reset then spawnedBy is dropped', async () => {
    const st = await openMem()
    await st.patchSession({ key: 'agent:main:subagent:x', spawnedBy: 'agent:main:main' })
    const r = await st.resetSession('agent:main:subagent:x')
    expect('spawnedBy' in r.entry).toBe(false)
  })
})

describe('deleteSession (sessions.delete, §2.7)', () => {
  test('given the main session when deleted by main or its canonical key then it is refused', async () => {
    const st = await openMem()
    await st.upsertSession('main', {})
    await expectReject(st.deleteSession('main'), 'INVALID_REQUEST', 'Cannot delete the main session (agent:main:main).')
    await expectReject(st.deleteSession('agent:main:main'), 'INVALID_REQUEST', 'Cannot delete the main session (agent:main:main).')
    expect(await st.getSession('main')).not.toBeNull()
  })

  test('given default agent ops with mainKey work when its main session is deleted then the text names agent:ops:work', async () => {
    const st = await openMem(OPS_WORK)
    await expectReject(st.deleteSession('main'), 'INVALID_REQUEST', 'Cannot delete the main session (agent:ops:work).')
  })

  test('given scope global when main is deleted then the text names global', async () => {
    const st = await openMem({ session: { scope: 'global' } })
    await expectReject(st.deleteSession('main'), 'INVALID_REQUEST', 'Cannot delete the main session (global).')
  })

  test("given another agent's main session when deleted then it is deleted", async () => {
    const st = await openMem()
    await st.upsertSession('agent:other:main', {})
    expect(await st.deleteSession('agent:other:main')).toMatchObject({ ok: true, key: 'agent:other:main', deleted: true })
    expect(await st.getSession('agent:other:main')).toBeNull()
  })

  test('given a session stored from a bare key when deleted by the bare key then it is gone and a second delete says deleted false', async () => {
    const st = await openMem()
    await st.upsertSession('discord:group:dev', {})
    expect(await st.deleteSession('discord:group:dev')).toMatchObject({ ok: true, key: 'agent:main:discord:group:dev', deleted: true })
    expect(await st.getSession('agent:main:discord:group:dev')).toBeNull()
    expect((await st.listSessions()).count).toBe(0)
    expect(await st.deleteSession('agent:main:discord:group:dev')).toMatchObject({ ok: true, deleted: false })
  })

  test('given a session with a transcript when deleted then the transcript is removed with it', async () => {
    const st = await openMem()
    const { sessionId } = await st.appendMessages('agent:main:g', [{ role: 'user', content: 'secret' }])
    await st.deleteSession('agent:main:g')
    await st.upsertSession('agent:main:g', { sessionId })
    expect((await st.chatHistory('agent:main:g')).messages).toEqual([])
  })

  test('given deleteTranscript false when deleted then the transcript is kept', async () => {
    const st = await openMem()
    const { sessionId } = await st.appendMessages('agent:main:g', [{ role: 'user', content: 'kept' }])
    await st.deleteSession('agent:main:g', { deleteTranscript: false })
    expect(await st.getSession('agent:main:g')).toBeNull()
    await st.upsertSession('agent:main:g', { sessionId })
    expect((await st.chatHistory('agent:main:g')).messages).toEqual([{ role: 'user', content: 'kept' }])
  })

  test('given a deleted session when the key is used again then it starts a new, empty session', async () => {
    const st = await openMem()
    const a = await st.appendMessages('agent:main:g', [{ role: 'user', content: 'old' }])
    await st.deleteSession('agent:main:g')
    const b = await st.appendMessages('agent:main:g', [{ role: 'user', content: 'new' }])
    expect(b.sessionId).not.toBe(a.sessionId)
    expect((await st.chatHistory('agent:main:g')).messages).toEqual([{ role: 'user', content: 'new' }])
  })
})
