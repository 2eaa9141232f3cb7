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
    agentToAgent?: {
      maxPingPongTurns?: number
      /** @deprecated not a gateway key (the gateway refuses the file): use `settings.agentToAgent.maxChainTurns` */
      maxChainTurns?: number
    }
    /** @deprecated not a gateway key (the gateway refuses the file): use `settings.history` */
    history?: { maxChars?: number }
    /** @deprecated not a gateway key (the gateway refuses the file): use `settings.outbox` */
    outbox?: {
    maxAttempts?: number
    backoffMs?: number
    /** 2026.9: a sub-agent completion's retry window (default 15 000, 300 000, 1 800 000 ms), then blocked */
    completionRetry?: { firstMs?: number; maxMs?: number; expireMs?: number }
  }
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

/** Host callback: runs one model turn in a session (API.md §2.1). Absent fields are left out. */
export interface AgentRunRequest {
  /** The run's id (also what `waitRun` takes). */
  runId: string
  /** Stable for this run; for a sub-agent announce run, the announce's own key. */
  idempotencyKey: string
  /** The canonical key of the session the run is in. */
  sessionKey: string
  /** That session's id. */
  sessionId: string
  /** The agent that owns the session. */
  agentId: string
  /** The incoming message, already appended to the transcript (the host must not append it again). */
  message: string
  /** Text for the system prompt: the agent-to-agent context of a send step, or a sub-agent's system prompt. */
  extraSystemPrompt?: string
  /** `'nested'`: a send's runs; `'subagent'`: a child's own run; `'announce'`: a sub-agent's announce run on its requester. */
  lane: 'nested' | 'subagent' | 'announce'
  /** `true` in the `announce` lane (the host delivers the run's reply to the route below), and for a 2026.9 child bound to a thread in `mode: 'session'` (it answers on that thread). */
  deliver: boolean
  /** The route's channel: `webchat` for a send's runs, the requester's for a child's run or an announce run. */
  channel?: string
  /** The route's recipient. */
  to?: string
  /** The route's account. */
  accountId?: string
  /** The route's thread. */
  threadId?: string
  /** A child's model, when set. */
  model?: string
  /** A child's thinking level, when set. */
  thinking?: string
  /** A child's label. */
  label?: string
  /** A child's requester (canonical key). */
  spawnedBy?: string
  /** When the host should abort the run, in ms. */
  timeoutMs: number
  /** The agent-to-agent chain the run belongs to. */
  chainId: string
  /** 2026.9 `sessions_spawn` `lightContext: true`: start the child with a light bootstrap. */
  lightContext?: true
}

/** What `bindThread` is asked to bind (API.md §2.6). */
export interface ThreadBindRequest {
  /** The new child session. */
  childSessionKey: string
  /** The agent the child runs as. */
  agentId: string
  label?: string
  /** `'session'`: a persistent child answering on the thread; `'run'`: one run, its result handed to the requester. */
  mode: 'run' | 'session'
  /** The requester (canonical key). */
  requesterSessionKey: string
  /** Where the requester was called from. */
  requester: { channel: string; to?: string; accountId?: string; threadId?: string | number }
}

/** What `bindThread` answers: the bound conversation, a refusal, or null when nothing could be bound. */
export type ThreadBindResult =
  | { channel?: string; to: string; accountId?: string; threadId?: string | number }
  | { error: string }
  | null

/** What `unbindThread` is asked to release: the binding `bindThread` made for a spawn that then failed (API.md §2.6). */
export interface ThreadUnbindRequest {
  /** The child session the thread was bound to (it is deleted again). */
  targetSessionKey: string
  reason: 'session-delete'
}

/** What `stageAttachments` is asked to stage (API.md §2.7); `discard: true` (no `files`): drop what was staged under `attachmentId`. */
export interface AttachmentStageRequest {
  childSessionKey: string
  agentId: string
  attachmentId: string
  /** Whether the child runs sandboxed (2026.9 mounts the files read-only at `/openclaw/attachments/<id>`). */
  sandboxed?: boolean
  /** `tools.sessions_spawn.attachments.retainOnSessionKeep`: keep the files with a kept child session. */
  retainOnSessionKeep?: boolean
  files?: Array<{ name: string; mimeType: string; bytes: number; sha256: string; contentBase64: string }>
  discard?: true
}

/** What `stageAttachments` answers: the directory the child sees the files in, or a refusal. */
export type AttachmentStageResult = { dir: string } | { error: string; status?: 'error' | 'forbidden' }

/** What `runAgent` resolves with (API.md §2.1). */
export interface AgentRunResult {
  /** What the run produced, appended in order; each an object with a string `role`. */
  messages?: TranscriptMessage[]
  /** Used when `messages` is absent: becomes one assistant text message. */
  reply?: string
  /** Recorded on the session as `inputTokens`, `outputTokens`, `totalTokens`. */
  usage?: { input?: number; output?: number; total?: number }
  /** Recorded on the session as `model`. */
  model?: string
  /** Recorded on the session as `modelProvider`. */
  provider?: string
}

/** Host callback: posts an agent-to-agent announce to an external channel (API.md §2.2). */
export interface DeliveryRequest {
  /** The route's channel. */
  channel: string
  /** The route's recipient. */
  to: string
  /** The route's account. */
  accountId?: string
  /** The route's thread. */
  threadId?: string
  /** The text to post. */
  message: string
  /** The same on every try of this announce: drop a key already delivered. */
  idempotencyKey: string
  /** Canonical key of the target session whose announce this is. */
  sessionKey: string
  kind: 'a2a_announce'
}

/** Fields every event has (API.md §7). */
export interface SessionToolsEventBase {
  /** When, in ms since the epoch. */
  at: number
  /** The run the event is about, when it is about one. */
  runId?: string
  /** The session the event is about (canonical key), when it is about one. */
  sessionKey?: string
  [key: string]: unknown
}

/** The gateway the engine answers as: OpenClaw of 2026-01-29 (default) or OpenClaw 2026.9.6. */
export type Contract = '2026.1' | '2026.9'

/** A run is about to call `runAgent`. */
export interface RunStartEvent extends SessionToolsEventBase {
  type: 'run.start'
  lane: 'nested' | 'subagent' | 'announce'
}
/** A run ended `ok`. */
export interface RunEndEvent extends SessionToolsEventBase {
  type: 'run.end'
}
/** A run ended `error` or `timeout`. */
export interface RunFailedEvent extends SessionToolsEventBase {
  type: 'run.error' | 'run.timeout'
  error: string
}
/** A `sessions_send` run was not started: the target's send policy denies (or could not be evaluated). */
export interface SendBlockedEvent extends SessionToolsEventBase {
  type: 'send.blocked'
  reason: string
}
/** One reply-back step of a send ended. */
export interface A2aTurnEvent extends SessionToolsEventBase {
  type: 'a2a.turn'
  turn: number
  maxTurns: number
  speaker: 'requester' | 'target'
  status: string
  skipped: boolean
}
/** The announce of a send went to the outbox (`queued`) or was not made (`skipped`). */
export interface A2aAnnounceEvent extends SessionToolsEventBase {
  type: 'a2a.announce'
  status: 'queued' | 'skipped'
}
/** The exchange of a send is over. */
export interface A2aEndEvent extends SessionToolsEventBase {
  type: 'a2a.end'
  reason: string
  chainId: string
}
/** The exchange of a send failed (followed by `a2a.end`). */
export interface A2aErrorEvent extends SessionToolsEventBase {
  type: 'a2a.error'
  error: string
}
/** An outbox item was delivered, failed a try, or was blocked by the send policy. */
export interface DeliveryEvent extends SessionToolsEventBase {
  type: 'delivery.sent' | 'delivery.failed' | 'delivery.blocked'
  idempotencyKey: string
  kind: 'a2a_announce' | 'subagent_announce'
}
/** A sub-agent's announce was delivered, or a kept sub-agent was archived. */
export interface SubagentEvent extends SessionToolsEventBase {
  type: 'subagent.announced' | 'subagent.archived'
  childSessionKey: string
}
/** 2026.9: `subagents` cancel stopped a task (never announced). */
export interface SubagentCancelledEvent extends SessionToolsEventBase {
  type: 'subagent.cancelled'
  taskId: string
  requesterSessionKey: string
}
/** 2026.9: a child paused in its own `sessions_yield` (`waitFor: "message"`; its completion is held back), or a later run of it adopted the paused task (`sessions_send` `mode: 'resume'`). */
export interface SubagentPauseEvent extends SessionToolsEventBase {
  type: 'subagent.paused' | 'subagent.resumed'
  childSessionKey: string
  /** `subagent.resumed`: the paused run, and the run the task started with */
  previousRunId?: string
  taskRunId?: string
}
/** 2026.9: `unbindThread` failed for a thread-bound spawn that then failed (the spawn's answer is its refusal). */
export interface SubagentUnbindFailedEvent extends SessionToolsEventBase {
  type: 'subagent.thread_unbind_failed'
  error: string
}
/** 2026.9: a completion was blocked and 25 or more blocked completions are kept. */
export interface DeliveryBacklogEvent extends SessionToolsEventBase {
  type: 'delivery.backlog'
  suspendedCount: number
  warningThreshold: number
}
/** 2026.9: `sessions_yield` recorded a yield; the session's resume run started; or could not. */
export interface SessionYieldEvent extends SessionToolsEventBase {
  type: 'session.yielded' | 'session.resumed' | 'session.resume_failed'
  yieldId: string
}
/** 2026.9: a human wrote in a session the event's session watches or owns; queue `text` for its next turn, wake it when `wake`. */
export interface SessionChangedEvent extends SessionToolsEventBase {
  type: 'session.changed'
  targetSessionKey: string
  sequence: number
  lastSeenSequence: number
  text: string
  wake: boolean
}
/** The store could not record something in the background. */
export interface StoreErrorEvent extends SessionToolsEventBase {
  type: 'store.error'
  error: string
}
/** The config given to `open` or `setConfig` still carries one of our settings at its old place. */
export interface ConfigDeprecatedEvent extends SessionToolsEventBase {
  type: 'config.deprecated'
  /** where it is, e.g. `session.history` */
  key: string
  /** where it goes now, e.g. `settings.history` */
  use: string
}

/** What `onEvent` receives: one of the event kinds the engine emits (API.md §7). */
export type SessionToolsEvent =
  | RunStartEvent
  | RunEndEvent
  | RunFailedEvent
  | SendBlockedEvent
  | A2aTurnEvent
  | A2aAnnounceEvent
  | A2aEndEvent
  | A2aErrorEvent
  | DeliveryEvent
  | SubagentEvent
  | SubagentCancelledEvent
  | SubagentPauseEvent
  | SubagentUnbindFailedEvent
  | DeliveryBacklogEvent
  | SessionYieldEvent
  | SessionChangedEvent
  | StoreErrorEvent
  | ConfigDeprecatedEvent

/** Where a store lives: a SQLite file (`path`) or a PostgreSQL server (`url`); exactly one. */
export type StoreLocation =
  | {
      /** SQLite file, created with its folder if missing; ':memory:' for a throwaway store. */
      path: string
      url?: never
    }
  | {
      /**
       * PostgreSQL: `postgres://user:password@host:5432/db?sslmode=…` (docs/API.md §1.8). Our own
       * query parameters: `schema` (the schema holding the tables, created when missing),
       * `pool_max_size` (default 8), `sslrootcert`.
       */
      url: string
      path?: never
    }

/** Options of `SessionTools.open`: where the store is, and the rest. */
export type OpenOptions = StoreLocation & OpenSettings

/** Options of `SessionTools.open` besides where the store is. */
export interface OpenSettings {
  /** The gateway's config; validated (`INVALID_CONFIG`). */
  config?: GatewayConfig | null
  /** Default '2026.1'. Decides config defaults, visibility, and the tools' parameters and results. */
  contract?: Contract
  /** Runs one model turn (API.md §2.1); without it, runs end with `error`. */
  runAgent?: (req: AgentRunRequest) => Promise<AgentRunResult> | AgentRunResult
  /** Posts an agent-to-agent announce (API.md §2.2); resolving counts as delivered. */
  deliver?: (msg: DeliveryRequest) => Promise<unknown> | unknown
  /** Receives lifecycle events (API.md §7). */
  onEvent?: (ev: SessionToolsEvent) => unknown
  /** Hands `text` to the active run of `sessionKey`; `true` when it took it. */
  steer?: (sessionKey: string, text: string) => boolean | Promise<boolean>
  /** 2026.9 `subagents` cancel: stop the model turn of run `runId` (the engine has ended the run already). */
  abortRun?: (runId: string, reason: string) => unknown
  /** 2026.9 `sessions_spawn` `thread: true`: bind the child to a thread of the requester's channel (API.md §2.6); without it, thread spawns are refused. */
  bindThread?: (req: ThreadBindRequest) => ThreadBindResult | Promise<ThreadBindResult>
  /** 2026.9: release a thread binding made for a spawn that then failed (API.md §2.6); its answer is ignored. */
  unbindThread?: (req: ThreadUnbindRequest) => unknown
  /** 2026.9 `sessions_spawn` `attachments`: write the files where the child can read them (API.md §2.7); without it, attachments are refused. */
  stageAttachments?: (req: AttachmentStageRequest) => AttachmentStageResult | Promise<AttachmentStageResult>
  /** JSONL mirror folder; default `transcripts/` beside the database, none for ':memory:'; null turns it off. */
  mirrorDir?: string | null
  /** Our own settings, which have no place in the gateway's config. */
  settings?: Settings | null
}

/**
 * The addon's own settings (not gateway config keys). An unknown key, or a value that is not a
 * finite non-negative number, is `INVALID_CONFIG` naming the key.
 */
export interface Settings {
  /** the gateway the engine answers as (default '2026.1'); settings without it keep the one in force */
  contract?: Contract
  /** `sessions_history`'s default `maxChars` (none: no character budget) */
  history?: { maxChars?: number }
  /** announce delivery retries: attempts (default 5, min 1) and the first backoff (default 1000 ms, doubling, max 60 000) */
  outbox?: {
    maxAttempts?: number
    backoffMs?: number
    /** 2026.9: a sub-agent completion's retry window (default 15 000, 300 000, 1 800 000 ms), then blocked */
    completionRetry?: { firstMs?: number; maxMs?: number; expireMs?: number }
  }
  /** the agent-to-agent chain budget (default 20 turns, DECISIONS.md #4) */
  agentToAgent?: { maxChainTurns?: number }
  /** how long an open store holds its runs and announce claims without renewing its lease (default 30 000 ms, clamped to 1000..86 400 000; API.md §1.7) */
  ownership?: { leaseMs?: number }
}

/** What `SessionTools.measureCallback` reports. */
export interface MeasureCallbackResult {
  calls: number
  totalMs: number
  perCallUs: number
}

/** Options of `waitRun`. */
export interface WaitRunOptions {
  /** How long to wait, in ms (default 30 000). */
  timeoutMs?: number
}

/** What `patchSession` and `resetSession` answer. */
export interface SessionEntryResult {
  ok: true
  key: string
  entry: SessionEntry
}

/** What `resolveSession` answers. */
export interface SessionsResolveResult {
  ok: true
  key: string
}

/** Options of `deleteSession`. */
export interface DeleteSessionOptions {
  /** Delete the transcript too (default true). */
  deleteTranscript?: boolean
}

/** What `deleteSession` answers. */
export interface DeleteSessionResult {
  ok: true
  key: string
  deleted: boolean
}

/** What `appendMessages` answers. */
export interface AppendMessagesResult {
  sessionKey: string
  sessionId: string
  appended: number
}

/** Options of `chatHistory`. */
export interface ChatHistoryOptions {
  /** Most messages (1..1000, default 200). */
  limit?: number
  /** The cursor: `nextBefore` of the page after the one wanted. */
  before?: number
}

/** The arguments of `resolveSendPolicy`. */
export interface ResolveSendPolicyParams {
  sessionKey: string
  channel?: string
  chatType?: string
}

/** The arguments of `handleSendCommand`. */
export interface SendCommandParams {
  sessionKey: string
  /** The chat message, e.g. `/send off`. */
  text: string
  /** Whether the sender owns the session (only an owner's command changes the policy). */
  isOwner: boolean
}

/** What `handleSendCommand` answers. */
export interface SendCommandResult {
  /** Whether `text` was a `/send` command. */
  handled: boolean
  /** The reply to show. */
  reply?: string
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
  /** task ledger rows of a 2026.9 folder (`state/openclaw.sqlite` `task_runs`) */
  tasks: number
  /** each layout found in the folder, with what it added (a half-done migration has both) */
  layouts: ImportLayoutCounts[]
  skipped: SkippedItem[]
  /** entries that landed on a key another entry of the folder also landed on */
  merged: MergedItem[]
}

/**
 * An entry of the folder that collided with another on one key: dropped for the newer one (the
 * gateway's rule), or, under `session.scope: "global"`, kept under its own agent's key `keptAs`.
 */
export interface MergedItem {
  /** the store file, relative to the folder */
  file: string
  /** its key as the file has it */
  key: string
  sessionId: string
  /** the key it landed on */
  into: string
  keptAs?: string
}

/** What one layout of a state folder added to the store. */
export interface ImportLayoutCounts {
  /** `2026.1`: `sessions.json` + JSONL transcripts + `subagents/runs.json`; `2026.9`: the SQLite databases */
  layout: '2026.1' | '2026.9'
  sessions: number
  messages: number
  runs: number
  tasks: number
}

/** How `exportStateDir` writes. */
export interface ExportOptions {
  /**
   * `2026.1` (default): `sessions.json` + JSONL transcripts + `subagents/runs.json`.
   * `2026.9`: into the SQLite databases of a state folder the 2026.9 gateway has initialised
   * (its `agents/<id>/agent/openclaw-agent.sqlite` and `state/openclaw.sqlite` exist).
   */
  layout?: '2026.1' | '2026.9'
  /**
   * `2026.1` only: the absolute path the folder will be used from once moved into place (each
   * session's `sessionFile` is written below it); default: `dir`.
   */
  stateDir?: string
}

/** What `exportStateDir` wrote. */
export interface ExportReport {
  /** the layout written */
  layout: '2026.1' | '2026.9'
  sessions: number
  messages: number
  /** sub-agent registry records */
  runs: number
  /** task ledger rows (2026.9 only) */
  tasks: number
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
  /** The rest are read under `contract: '2026.9'` only (docs/API.md §10.4). */
  offset?: number
  label?: string
  agentId?: string
  search?: string
  archived?: boolean | 'all'
  pinned?: boolean
  ownerId?: string
  creatorId?: string
  projectId?: string
  workspaceDir?: string
  group?: string
  excludeSubagents?: boolean
  includeDerivedTitles?: boolean
  includeLastMessage?: boolean
  relationship?: 'owned' | 'created' | 'involving'
  activeOnly?: boolean
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

/** A `sessions_list` row under `contract: '2026.9'` (closed: exactly these fields). */
export interface SessionsListToolRow9 {
  key: string
  sessionId?: string
  agentId: string
  kind: SessionKind
  channel: string
  archived: boolean
  pinned: boolean
  label?: string
  createdActor?: { type?: string; id?: string; label?: string; identity?: unknown }
  owner?: { actor: { type?: string; id?: string; label?: string; identity?: unknown } }
  worktree?: { id?: string; branch?: string; repoRoot?: string }
  repositoryWorkspaceId?: string
  repository?: { url?: string; ref?: string; branch?: string }
  execCwd?: string
  spawnedCwd?: string
  spawnedWorkspaceDir?: string
  projectId?: string
  workspaceDir?: string
  group?: string
  displayName?: string
  derivedTitle?: string
  lastMessagePreview?: string
  parentSessionKey?: string
  updatedAt?: number
  model?: string
  contextTokens?: number
  totalTokens?: number
  status?: 'queued' | 'running' | 'done' | 'failed' | 'killed' | 'timeout'
  abortedLastRun?: boolean
  childSessions?: string[]
  messages?: TranscriptMessage[]
}

/** `sessions_list` under `contract: '2026.9'`. */
export interface SessionsListToolResult9 {
  count: number
  sessions: SessionsListToolRow9[]
  hasMore: boolean
  nextOffset?: number
  limitApplied: number
  truncationReason?: 'scan-limit' | 'byte-limit'
  enrichmentOmitted?: true
  visibility?: { mode: 'self' | 'tree' | 'agent'; restricted: true; warning: string }
}

export type SessionsListToolResult =
  | { count: number; sessions: SessionsListToolRow[] }
  | SessionsListToolResult9
  | ToolRefusal

export interface SessionsHistoryToolParams {
  sessionKey: string
  limit?: number
  includeTools?: boolean
  maxChars?: number
  /** The rest are read under `contract: '2026.9'` only (docs/API.md §10.5). */
  offset?: number
  messageId?: string
  sessionId?: string
  pendingBefore?: number
}

/** `sessions_history` under `contract: '2026.9'`. */
export interface SessionsHistoryToolResult9 {
  sessionKey: string
  messages: Array<TranscriptMessage & { __openclaw: { seq: number; id: string } }>
  truncated: boolean
  droppedMessages: boolean
  contentTruncated: boolean
  contentRedacted: boolean
  bytes: number
  offset?: number
  nextOffset?: number
  hasMore?: boolean
  totalMessages?: number
}

export type SessionsHistoryToolResult =
  | { sessionKey: string; messages: TranscriptMessage[]; truncated?: true }
  | SessionsHistoryToolResult9
  | ToolRefusal

export type AgentsListResult =
  | {
      requester: string
      allowAny: boolean
      /** `model` and `agentRuntime` under `contract: '2026.9'` only */
      agents: Array<{ id: string; name?: string; configured: boolean; model?: string; agentRuntime?: { id: string; source: string } }>
    }
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

/**
 * The session store, the send-policy engine and the session tools, opened on one SQLite file or
 * a PostgreSQL database.
 */
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
  static measureCallback(fn: (req: unknown) => unknown, calls?: number): Promise<MeasureCallbackResult>
  /**
   * Swaps the config (same validation as `open`); throws `INVALID_CONFIG` and keeps the old
   * config on error.
   */
  setConfig(config: GatewayConfig | null | undefined, settings?: Settings): void
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
  waitRun(runId: string, options?: WaitRunOptions): Promise<WaitRunResult>
  /** The sub-agent runs, all or those of one requester session. */
  listSubagentRuns(requesterKey?: string): Promise<SubagentRun[]>
  /** 2026.9: the watcher's turn took in its `session.changed` notices about `targetKeys`. */
  acknowledgeWatchNotices(watcherKey: string, targetKeys: string[]): Promise<{ acknowledged: number; followUps: number }>
  /** The path the store was opened with. */
  get path(): string
  /** The entry stored under the canonical form of `key`, or `null`. */
  getSession(key: string): Promise<SessionEntry | null>
  /**
   * Creates or updates the entry under `key` with the gateway's merge rule (the patch's fields
   * over the stored ones); the merged entry.
   */
  upsertSession(key: string, patch: Partial<SessionEntry>): Promise<SessionEntry>
  /** `sessions.patch`: validates and applies a patch (label, levels, send policy, model, …). */
  patchSession(params: SessionsPatchParams): Promise<SessionEntryResult>
  /** `sessions.resolve`: the key a `key`, `sessionId` or `label` names. */
  resolveSession(params: SessionsResolveParams): Promise<SessionsResolveResult>
  /** `sessions.list`: the sessions, filtered and ordered as the gateway does. */
  listSessions(params?: SessionsListParams): Promise<SessionsListResult>
  /**
   * `sessions.delete`: removes a session (not the main one) and, unless `deleteTranscript` is
   * false, its transcript; its running sub-agents are stopped.
   */
  deleteSession(key: string, options?: DeleteSessionOptions): Promise<DeleteSessionResult>
  /** `sessions.reset`: starts the session under `key` afresh (a new session id). */
  resetSession(key: string): Promise<SessionEntryResult>
  /** Appends transcript messages to the session under `key` (created when missing). */
  appendMessages(key: string, messages: TranscriptMessage[]): Promise<AppendMessagesResult>
  /**
   * `chat.history`: a page of the transcript, oldest first: the last `limit` messages
   * (default 200), or those before the cursor `before`.
   */
  chatHistory(key: string, options?: ChatHistoryOptions): Promise<ChatHistoryResult>
  /**
   * The send policy of a session (`'allow'` or `'deny'`): its own override, else the
   * configured rules; a store that cannot be read denies.
   */
  resolveSendPolicy(params: ResolveSendPolicyParams): Promise<'allow' | 'deny'>
  /**
   * The `/send` chat command: `handled: false` when `text` is not one; else the reply to
   * show (an owner's command sets the session's send policy).
   */
  handleSendCommand(params: SendCommandParams): Promise<SendCommandResult>
  /** Reads a gateway state folder into the store (API.md §5). */
  importStateDir(dir: string): Promise<ImportReport>
  /** Writes the store as a gateway state folder (API.md §5). */
  exportStateDir(dir: string, options?: ExportOptions): Promise<ExportReport>
  /** Counts of what the store holds, and its size. */
  stats(): Promise<StoreStats>
  /** The `sessions_list` tool: the payload the model sees. */
  sessionsList(params?: SessionsListToolParams, ctx?: ToolContext): Promise<SessionsListToolResult>
  /** The `sessions_history` tool: the payload the model sees. */
  sessionsHistory(params: SessionsHistoryToolParams, ctx?: ToolContext): Promise<SessionsHistoryToolResult>
  /** The `sessions_send` tool: the payload the model sees (`accepted`, `ok`, `timeout`, `error`, `forbidden`). */
  sessionsSend(params: SessionsSendParams, ctx?: ToolContext): Promise<SessionsSendResult>
  /** The `sessions_spawn` tool: the payload the model sees (`accepted`, `error`, `forbidden`). */
  sessionsSpawn(params: SessionsSpawnParams, ctx?: ToolContext): Promise<SessionsSpawnResult>
  /** The `agents_list` tool: the agent ids this caller may spawn. */
  agentsList(ctx?: ToolContext): Promise<AgentsListResult>
  /** The tool definitions for a caller (sub-agents get none of the session tools). */
  toolDefinitions(ctx?: ToolContext): ToolDefinition[]
  /** Runs a tool by name: `{ content: [{ type: 'text', text }], details }`. */
  executeTool(name: string, args: unknown, ctx?: ToolContext): Promise<ToolResult>
  /** The gateway's tool objects: `{ name, label, description, parameters, execute }`. */
  createTools(ctx?: ToolContext): SessionTool[]
}
