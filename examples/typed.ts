// A typed consumer of session-tools: what a TypeScript gateway writes against the published
// types. `__test__/package.spec.ts` installs the packed tarball into a fresh project, checks this
// file with `tsc --strict --noEmit`, then compiles and runs it there. It imports the package by
// name, so it type-checks only where `session-tools` is installed.
import { SessionTools } from 'session-tools'
import type {
  AgentRunRequest,
  AgentRunResult,
  ChatHistoryResult,
  DeliveryRequest,
  GatewayConfig,
  OpenOptions,
  SessionEntry,
  SessionTool,
  SessionToolsErrorCode,
  SessionToolsEvent,
  SessionsListToolResult,
  SessionsListToolRow,
  ToolContext,
  ToolResult,
  TranscriptMessage,
} from 'session-tools'

const config: GatewayConfig = {
  session: { mainKey: 'main', sendPolicy: { default: 'allow', rules: [{ action: 'deny', match: { channel: 'discord', chatType: 'group' } }] } },
  agents: { list: [{ id: 'main', default: true }] },
}

// The host callbacks, typed as the gateway would write them.
async function runAgent(req: AgentRunRequest): Promise<AgentRunResult> {
  return { reply: `echo ${req.message}`, usage: { input: 1, output: 1 } }
}
const events: SessionToolsEvent[] = []
const options: OpenOptions = {
  path: ':memory:',
  config,
  runAgent,
  deliver: async (_msg: DeliveryRequest): Promise<void> => {},
  onEvent: (ev) => { events.push(ev) },
  steer: (_sessionKey: string, _text: string) => false,
  mirrorDir: null,
}

function isErrorCode(x: unknown): x is SessionToolsErrorCode {
  return x === 'INVALID_REQUEST' || x === 'STORE_ERROR' || x === 'CLOSED' || x === 'INVALID_CONFIG' || x === 'UNAVAILABLE'
}

export async function main(): Promise<{ sessionId: string; lastChannel: string | undefined; listed: string[]; history: number; tools: string[]; closedCode: string }> {
  const st: SessionTools = await SessionTools.open(options)

  const entry: SessionEntry = await st.upsertSession('main', { lastChannel: 'whatsapp', lastTo: '+15550001' })
  const again: SessionEntry | null = await st.getSession('main')
  if (again === null) throw new Error('session missing after upsert')

  const messages: TranscriptMessage[] = [
    { role: 'user', content: 'hello', timestamp: Date.now() },
    { role: 'assistant', content: [{ type: 'text', text: 'hi' }], timestamp: Date.now() },
  ]
  await st.appendMessages('main', messages)
  const page: ChatHistoryResult = await st.chatHistory('main', { limit: 20 })

  const ctx: ToolContext = { agentSessionKey: 'agent:main:main', agentChannel: 'whatsapp' }
  const listed: SessionsListToolResult = await st.sessionsList({ kinds: ['main'], limit: 10 }, ctx)
  // The result is a union with the refusal payload: narrow before reading rows.
  const rows: SessionsListToolRow[] = 'sessions' in listed ? listed.sessions : []

  const tools: SessionTool[] = st.createTools(ctx)
  const result: ToolResult = await tools[0].execute('call-1', { limit: 5 })
  if (result.content[0].type !== 'text') throw new Error('unexpected content')

  await st.close()
  let closedCode = ''
  try {
    await st.getSession('main')
  } catch (err) {
    const code: unknown = (err as { code?: unknown }).code
    closedCode = isErrorCode(code) ? code : `unexpected ${String(code)}`
  }

  return {
    sessionId: entry.sessionId,
    lastChannel: again.lastChannel,
    listed: rows.map((r) => `${r.key}:${r.kind}`),
    history: page.messages.length,
    tools: tools.map((t) => t.name),
    closedCode,
  }
}

// Strict mode must refuse these; if a type loosened to `any`, tsc would report the unused directive.
export async function misuse(st: SessionTools): Promise<void> {
  // @ts-expect-error: `path` or `url` is required
  await SessionTools.open({ config })
  // @ts-expect-error: a session key is a string
  await st.getSession(42)
  const e = await st.upsertSession('main', {})
  // @ts-expect-error: updatedAt is a number
  const s: string = e.updatedAt
  void s
}

main().then(
  (out) => console.log(JSON.stringify(out)),
  (err: unknown) => {
    console.error(err)
    throw err
  },
)
