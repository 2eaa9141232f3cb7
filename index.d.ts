/* Public types of session-tools (the header of the generated index.d.ts). */

/** The gateway's config object; only the keys below are read, others are ignored. */
export interface GatewayConfig {
  session?: {
    scope?: 'per-sender' | 'global'
    mainKey?: string
    sendPolicy?: {
      default?: 'allow' | 'deny'
      rules?: Array<{
        action?: 'allow' | 'deny'
        match?: { channel?: string; chatType?: 'direct' | 'dm' | 'group' | 'channel'; keyPrefix?: string }
      }>
    }
    agentToAgent?: { maxPingPongTurns?: number; maxChainTurns?: number }
    history?: { maxChars?: number }
    outbox?: { maxAttempts?: number; backoffMs?: number }
    [key: string]: unknown
  }
  tools?: {
    agentToAgent?: { enabled?: boolean; allow?: string[] }
    subagents?: { tools?: { allow?: string[]; deny?: string[] } }
    [key: string]: unknown
  }
  agents?: {
    defaults?: {
      timeoutSeconds?: number
      sandbox?: { sessionToolsVisibility?: 'spawned' | 'all' }
      subagents?: { archiveAfterMinutes?: number; model?: string | { primary?: string }; maxActive?: number }
      [key: string]: unknown
    }
    list?: Array<{
      id: string
      name?: string
      default?: boolean
      subagents?: { allowAgents?: string[]; model?: string | { primary?: string } }
      sandbox?: { sessionToolsVisibility?: 'spawned' | 'all' }
      [key: string]: unknown
    }>
    [key: string]: unknown
  }
  messages?: {
    queue?: {
      mode?: string
      byChannel?: Record<string, string>
      debounceMs?: number
      debounceMsByChannel?: Record<string, number>
      cap?: number
      drop?: string
    }
    [key: string]: unknown
  }
  models?: {
    providers?: Record<
      string,
      { models?: Array<{ id: string; cost?: { input?: number; output?: number; cacheRead?: number; cacheWrite?: number } }> }
    >
  }
  [key: string]: unknown
}

/** A transcript message as the host produced it: any object with a `role`. */
export interface TranscriptMessage {
  role: string
  content?: unknown
  timestamp?: number
  [key: string]: unknown
}

export interface DeliveryContext {
  channel?: string
  to?: string
  accountId?: string
  threadId?: string | number
}

/** A session entry (the gateway's SessionEntry); unknown fields are kept. */
export interface SessionEntry {
  sessionId: string
  updatedAt: number
  sessionFile?: string
  spawnedBy?: string
  systemSent?: boolean
  abortedLastRun?: boolean
  chatType?: 'direct' | 'group' | 'channel'
  thinkingLevel?: string
  verboseLevel?: string
  reasoningLevel?: string
  elevatedLevel?: string
  sendPolicy?: 'allow' | 'deny'
  label?: string
  displayName?: string
  subject?: string
  groupId?: string
  groupChannel?: string
  space?: string
  channel?: string
  origin?: Record<string, unknown>
  deliveryContext?: DeliveryContext
  lastChannel?: string
  lastTo?: string
  lastAccountId?: string
  lastThreadId?: string | number
  inputTokens?: number
  outputTokens?: number
  totalTokens?: number
  contextTokens?: number
  modelProvider?: string
  model?: string
  providerOverride?: string
  modelOverride?: string
  [key: string]: unknown
}

/** Host callback: runs one model turn in a session (API.md §2.1). */
export interface AgentRunRequest {
  runId: string
  idempotencyKey: string
  sessionKey: string
  sessionId: string
  agentId: string
  message: string
  extraSystemPrompt?: string
  lane: 'nested' | 'subagent' | 'announce'
  deliver: boolean
  channel?: string
  to?: string
  accountId?: string
  threadId?: string
  model?: string
  thinking?: string
  label?: string
  spawnedBy?: string
  timeoutMs: number
  chainId: string
}

export interface AgentRunResult {
  messages?: TranscriptMessage[]
  reply?: string
  usage?: { input?: number; output?: number; total?: number }
  model?: string
  provider?: string
}

export interface DeliveryRequest {
  channel: string
  to: string
  accountId?: string
  threadId?: string
  message: string
  idempotencyKey: string
  sessionKey: string
  kind: 'a2a_announce'
}

export interface SessionToolsEvent {
  type: string
  at: number
  runId?: string
  sessionKey?: string
  [key: string]: unknown
}

/** The gateway the engine answers as: OpenClaw of 2026-01-29 (default) or OpenClaw 2026.9.6. */
export type Contract = '2026.1' | '2026.9'

export interface OpenOptions {
  /** SQLite file, created with its folder if missing; ':memory:' for a throwaway store. */
  path: string
  config?: GatewayConfig | null
  /** Default '2026.1'. Decides config defaults, visibility, and the tools' parameters and results. */
  contract?: Contract
  runAgent?: (req: AgentRunRequest) => Promise<AgentRunResult> | AgentRunResult
  deliver?: (msg: DeliveryRequest) => Promise<unknown> | unknown
  onEvent?: (ev: SessionToolsEvent) => unknown
  steer?: (sessionKey: string, text: string) => boolean | Promise<boolean>
  /** JSONL mirror folder; default `transcripts/` beside the database, none for ':memory:'; null turns it off. */
  mirrorDir?: string | null
}

/** Who is calling a tool. */
export interface ToolContext {
  agentSessionKey?: string
  agentChannel?: string
  agentAccountId?: string
  agentTo?: string
  agentThreadId?: string | number
  agentGroupId?: string
  agentGroupChannel?: string
  agentGroupSpace?: string
  sandboxed?: boolean
  requesterAgentIdOverride?: string
  runId?: string
}

export interface SessionsListParams {
  limit?: number
  activeMinutes?: number
  includeGlobal?: boolean
  includeUnknown?: boolean
  includeDerivedTitles?: boolean
  includeLastMessage?: boolean
  label?: string
  spawnedBy?: string
  agentId?: string
  search?: string
}

export interface SessionsListRow {
  key: string
  kind: 'direct' | 'group' | 'global' | 'unknown'
  label?: string
  displayName?: string
  channel?: string
  subject?: string
  groupChannel?: string
  space?: string
  chatType?: string
  origin?: Record<string, unknown>
  updatedAt: number | null
  sessionId?: string
  systemSent?: boolean
  abortedLastRun?: boolean
  thinkingLevel?: string
  verboseLevel?: string
  reasoningLevel?: string
  elevatedLevel?: string
  sendPolicy?: 'allow' | 'deny'
  inputTokens?: number
  outputTokens?: number
  totalTokens: number
  responseUsage?: string
  modelProvider?: string
  model?: string
  contextTokens?: number
  deliveryContext?: DeliveryContext
  lastChannel?: string
  lastTo?: string
  lastAccountId?: string
  derivedTitle?: string
  lastMessagePreview?: string
}

export interface SessionsListResult {
  ts: number
  path: string
  count: number
  sessions: SessionsListRow[]
}

export interface SessionsResolveParams {
  key?: string
  sessionId?: string
  label?: string
  agentId?: string
  spawnedBy?: string
  includeGlobal?: boolean
  includeUnknown?: boolean
}

export interface SessionsPatchParams {
  key: string
  spawnedBy?: string | null
  label?: string | null
  thinkingLevel?: string | null
  verboseLevel?: string | null
  reasoningLevel?: string | null
  responseUsage?: 'on' | 'off' | 'tokens' | 'full' | null
  elevatedLevel?: string | null
  execHost?: 'sandbox' | 'gateway' | 'node' | null
  execSecurity?: 'deny' | 'allowlist' | 'full' | null
  execAsk?: 'off' | 'on-miss' | 'always' | null
  execNode?: string | null
  groupActivation?: 'mention' | 'always' | null
  model?: string | null
  sendPolicy?: 'allow' | 'deny' | null
}

export interface ChatHistoryResult {
  sessionKey: string
  sessionId?: string
  messages: TranscriptMessage[]
  /** cursor for the page before this one; absent on the oldest page */
  nextBefore?: number
}

/** A file or line an import or export left out (`file` relative to the folder, `line` 1-based). */
export interface SkippedItem {
  file: string
  line?: number
  reason: string
}

/** What `importStateDir` added (counts of this import only) and what it left out. */
export interface ImportReport {
  sessions: number
  messages: number
  /** sub-agent registry records */
  runs: number
  skipped: SkippedItem[]
}

/** What `exportStateDir` wrote. */
export interface ExportReport {
  sessions: number
  messages: number
  /** sub-agent registry records */
  runs: number
  files: number
  /** sessions whose transcript could not be written (a sessionId that is not a file name) */
  skipped: SkippedItem[]
}

/** What `stats` reports (`runs`: sub-agent registry records; `dbBytes`: pages in use × page size). */
export interface StoreStats {
  sessions: number
  messages: number
  runs: number
  outboxPending: number
  dbBytes: number
}

export type SessionKind = 'main' | 'group' | 'cron' | 'hook' | 'node' | 'other'

export interface SessionsListToolParams {
  kinds?: SessionKind[] | string[]
  limit?: number
  activeMinutes?: number
  messageLimit?: number
}

export interface SessionsListToolRow {
  key: string
  kind: SessionKind
  channel: string
  label?: string
  displayName?: string
  deliveryContext?: { channel?: string; to?: string; accountId?: string }
  updatedAt?: number
  sessionId?: string
  model?: string
  contextTokens?: number
  totalTokens?: number
  thinkingLevel?: string
  verboseLevel?: string
  systemSent?: boolean
  abortedLastRun?: boolean
  sendPolicy?: string
  lastChannel?: string
  lastTo?: string
  lastAccountId?: string
  transcriptPath?: string
  messages?: TranscriptMessage[]
}

/** A refusal payload of a tool. */
export interface ToolRefusal {
  status: 'error' | 'forbidden'
  error: string
  tool?: string
}

export type SessionsListToolResult = { count: number; sessions: SessionsListToolRow[] } | ToolRefusal

export interface SessionsHistoryToolParams {
  sessionKey: string
  limit?: number
  includeTools?: boolean
  maxChars?: number
}

export type SessionsHistoryToolResult =
  | { sessionKey: string; messages: TranscriptMessage[]; truncated?: true }
  | ToolRefusal

export type AgentsListResult =
  | { requester: string; allowAny: boolean; agents: Array<{ id: string; name?: string; configured: boolean }> }
  | ToolRefusal

export interface SessionsSendParams {
  sessionKey?: string
  label?: string
  agentId?: string
  message: string
  timeoutSeconds?: number
}

export type SessionsSendResult =
  | { runId: string; status: 'accepted'; sessionKey: string; delivery: { status: 'pending'; mode: 'announce' } }
  | { runId: string; status: 'ok'; reply?: string; sessionKey: string; delivery: { status: 'pending'; mode: 'announce' } }
  | { runId: string; status: 'timeout'; error?: string; sessionKey: string }
  | { runId: string; status: 'error' | 'forbidden'; error: string; sessionKey?: string }
  | { status: 'error'; tool: 'sessions_send'; error: string }

export interface SessionsSpawnParams {
  task: string
  label?: string
  agentId?: string
  model?: string
  thinking?: string
  runTimeoutSeconds?: number
  timeoutSeconds?: number
  cleanup?: 'delete' | 'keep'
}

export type SessionsSpawnResult =
  | { status: 'accepted'; childSessionKey: string; runId: string; modelApplied?: boolean; warning?: string }
  | { status: 'error' | 'forbidden'; error: string; childSessionKey?: string; runId?: string }
  | { status: 'error'; tool: 'sessions_spawn'; error: string }

/** `waitRun` (agent.wait semantics): `timeout` while the run is still going. */
export interface WaitRunResult {
  runId: string
  status: 'ok' | 'error' | 'timeout'
  startedAt?: number
  endedAt?: number
  error?: string
}

/** A sub-agent run of the registry (API.md §4). */
export interface SubagentRun {
  runId: string
  childSessionKey: string
  requesterSessionKey: string
  requesterDisplayKey: string
  requesterOrigin?: { channel?: string; accountId?: string; to?: string; threadId?: string }
  task: string
  label?: string
  cleanup: 'delete' | 'keep'
  createdAt: number
  startedAt?: number
  endedAt?: number
  outcome?: { status: 'ok' | 'error' | 'timeout' | 'unknown'; error?: string }
  announce: { status: 'pending' | 'delivered' | 'failed' | 'skipped'; attempts: number; idempotencyKey: string }
  archiveAtMs?: number
  cleanupCompletedAt?: number
}

export interface ToolDefinition {
  name: string
  label: string
  description: string
  parameters: Record<string, unknown>
}

export interface ToolResult<T = unknown> {
  content: Array<{ type: 'text'; text: string }>
  details: T
}

export interface SessionTool extends ToolDefinition {
  execute(toolCallId: string, args: unknown, signal?: AbortSignal): Promise<ToolResult>
}

/** The `code` of every error the addon rejects or throws with. */
export type SessionToolsErrorCode = 'INVALID_REQUEST' | 'STORE_ERROR' | 'CLOSED' | 'INVALID_CONFIG' | 'UNAVAILABLE'

/**
 * Which binding artifact the generated loader actually loaded: `'native'` for
 * a native addon, otherwise the `platformArchABI` of the WASI flavor. Every
 * flavor napi-rs can build is listed, because `NAPI_RS_NATIVE_LIBRARY_PATH`
 * can point the loader at a WASI artifact this package does not build itself.
 */
export declare const __napiBindingTarget: 'native' | 'wasm32-wasi' | 'wasm32-wasip1'

/** The session store, the send-policy engine and the session tools, opened on one SQLite file. */
export declare class SessionTools {
  /**
   * Opens (creating when missing) the store at `options.path` (`':memory:'` for a throwaway
   * store) with the gateway's `options.config`.
   */
  static open(options: OpenOptions): Promise<SessionTools>
  /**
   * Diagnostic: calls `fn` `calls` times (1–100 000, default 1 000), one after another,
   * through the same machinery as the host callbacks (a threadsafe function called from the
   * runtime, a JSON request in, its value or promise awaited), and reports the mean round
   * trip. For the benchmark; it touches no store.
   */
  static measureCallback(fn: (req: unknown) => unknown, calls?: number): Promise<{ calls: number; totalMs: number; perCallUs: number }>
  /**
   * Swaps the config (same validation as `open`); `options.contract` switches the contract
   * (omitted: the current one stays); throws `INVALID_CONFIG` and keeps the old config on
   * error.
   */
  setConfig(config: GatewayConfig | null | undefined, options?: { contract?: Contract }): void
  /**
   * Closes the store without waiting for model runs: runs in flight are recorded as
   * interrupted (the next open announces them) and what their callbacks return later is
   * dropped. Afterwards every method rejects with `CLOSED`. Idempotent.
   */
  close(): Promise<void>
  /**
   * `agent.wait`: how a run ended, or `timeout` when it has not within `timeoutMs`
   * (default 30 000; the run goes on).
   */
  waitRun(runId: string, options?: { timeoutMs?: number }): Promise<WaitRunResult>
  /** The sub-agent runs, all or those of one requester session. */
  listSubagentRuns(requesterKey?: string): Promise<SubagentRun[]>
  /** The path the store was opened with. */
  get path(): string
  getSession(key: string): Promise<SessionEntry | null>
  upsertSession(key: string, patch: Partial<SessionEntry>): Promise<SessionEntry>
  patchSession(params: SessionsPatchParams): Promise<{ ok: true; key: string; entry: SessionEntry }>
  resolveSession(params: SessionsResolveParams): Promise<{ ok: true; key: string }>
  listSessions(params?: SessionsListParams): Promise<SessionsListResult>
  deleteSession(key: string, options?: { deleteTranscript?: boolean }): Promise<{ ok: true; key: string; deleted: boolean }>
  resetSession(key: string): Promise<{ ok: true; key: string; entry: SessionEntry }>
  appendMessages(key: string, messages: TranscriptMessage[]): Promise<{ sessionKey: string; sessionId: string; appended: number }>
  chatHistory(key: string, options?: { limit?: number; before?: number }): Promise<ChatHistoryResult>
  resolveSendPolicy(params: { sessionKey: string; channel?: string; chatType?: string }): Promise<'allow' | 'deny'>
  handleSendCommand(params: { sessionKey: string; text: string; isOwner: boolean }): Promise<{ handled: boolean; reply?: string }>
  /** Reads a gateway state folder into the store (API.md §5). */
  importStateDir(dir: string): Promise<ImportReport>
  /** Writes the store as a gateway state folder (API.md §5). */
  exportStateDir(dir: string): Promise<ExportReport>
  /** Counts of what the store holds, and its size. */
  stats(): Promise<StoreStats>
  /** `sessions_list` */
  sessionsList(params?: SessionsListToolParams, ctx?: ToolContext): Promise<SessionsListToolResult>
  /** `sessions_history` */
  sessionsHistory(params: SessionsHistoryToolParams, ctx?: ToolContext): Promise<SessionsHistoryToolResult>
  /** `sessions_send` */
  sessionsSend(params: SessionsSendParams, ctx?: ToolContext): Promise<SessionsSendResult>
  /** `sessions_spawn` */
  sessionsSpawn(params: SessionsSpawnParams, ctx?: ToolContext): Promise<SessionsSpawnResult>
  /** `agents_list` */
  agentsList(ctx?: ToolContext): Promise<AgentsListResult>
  /** The tool definitions for a caller (sub-agents get none of the session tools). */
  toolDefinitions(ctx?: ToolContext): ToolDefinition[]
  /** Runs a tool by name: `{ content: [{ type: 'text', text }], details }`. */
  executeTool(name: string, args: unknown, ctx?: ToolContext): Promise<ToolResult>
  /** The gateway's tool objects: `{ name, label, description, parameters, execute }`. */
  createTools(ctx?: ToolContext): SessionTool[]
}
