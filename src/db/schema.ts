import { sql } from 'drizzle-orm';
import { index, integer, primaryKey, real, sqliteTable, text, uniqueIndex, blob } from 'drizzle-orm/sqlite-core';
import { CHANNEL_TYPES } from '../lib/channel-types.js';

// All times are integer milliseconds since the epoch (UTC); all money integer micro-units.
// Ids are prefixed ULIDs (src/lib/ids.ts) and sort in creation order.

export const partners = sqliteTable('partners', {
  id: text('id').primaryKey(),
  slug: text('slug').notNull().unique(),
  name: text('name').notNull(),
  status: text('status', { enum: ['active', 'suspended'] })
    .notNull()
    .default('active'),
  currency: text('currency').notNull().default('USD'),
  balance: integer('balance').notNull().default(0),
  creditLimit: integer('credit_limit').notNull().default(0),
  /** Requests per minute per token on /v1 and /api; null = config default. */
  rateLimitPerMinute: integer('rate_limit_per_minute'),
  /** partner.balance_low fires when the balance falls below this; null = config default. */
  lowBalanceThreshold: integer('low_balance_threshold'),
  /** 1: every console user of the partner must use two-factor authentication (set by its admins). */
  require2fa: integer('require_2fa').notNull().default(0),
  /**
   * Where an SMS opt-out (STOP, Twilio 21610) applies: 'sender', the number the customer
   * replied to (as carriers and Twilio do), or 'partner', every number of the partner.
   */
  optOutScope: text('opt_out_scope', { enum: ['sender', 'partner'] })
    .notNull()
    .default('sender'),
  createdAt: integer('created_at').notNull(),
  updatedAt: integer('updated_at').notNull(),
});

export const tokens = sqliteTable(
  'tokens',
  {
    id: text('id').primaryKey(),
    partnerId: text('partner_id')
      .notNull()
      .references(() => partners.id),
    name: text('name').notNull(),
    /** Space-separated scopes; "*" means all. */
    scopes: text('scopes').notNull(),
    /** First characters of the secret, shown for recognition. */
    prefix: text('prefix').notNull(),
    /** Hex SHA-256 of the full secret. The secret itself is never stored. */
    hash: text('hash').notNull().unique(),
    expiresAt: integer('expires_at'),
    revokedAt: integer('revoked_at'),
    lastUsedAt: integer('last_used_at'),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [index('tokens_partner').on(t.partnerId)],
);

export const gateways = sqliteTable('gateways', {
  id: text('id').primaryKey(),
  kind: text('kind', {
    enum: ['whatsapp_cloud', 'meta_messenger', 'meta_instagram', 'twilio', 'sendgrid', 'smtp', 'sandbox'],
  }).notNull(),
  name: text('name').notNull().unique(),
  /** JSON object of non-secret settings, validated per kind. */
  settings: text('settings').notNull().default('{}'),
  /** AES-256-GCM sealed JSON object of secrets (src/core/secrets.ts). */
  secrets: text('secrets').notNull(),
  status: text('status', { enum: ['active', 'disabled'] })
    .notNull()
    .default('active'),
  createdAt: integer('created_at').notNull(),
  updatedAt: integer('updated_at').notNull(),
});

export const channels = sqliteTable(
  'channels',
  {
    id: text('id').primaryKey(),
    partnerId: text('partner_id')
      .notNull()
      .references(() => partners.id),
    gatewayId: text('gateway_id')
      .notNull()
      .references(() => gateways.id),
    type: text('type', { enum: CHANNEL_TYPES }).notNull(),
    /** The sender address: E.164 number, page id, Instagram account id, or from-address. */
    sender: text('sender').notNull(),
    status: text('status', { enum: ['active', 'inactive'] })
      .notNull()
      .default('active'),
    /**
     * The route's place in the partner's order for this type: 0 is the primary (the send path
     * picks it), 1, 2, … the fallbacks dispatch moves on to (SMS and email only, src/core/routes.ts).
     */
    position: integer('position').notNull().default(0),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [
    index('channels_partner').on(t.partnerId, t.type),
    index('channels_gateway').on(t.gatewayId),
    // One active channel per partner, type and place in the order (the send path picks place 0),
    // and one owner per primary address (a fallback may reuse its partner's own sender; core
    // checks that no other partner owns it).
    uniqueIndex('channels_active_partner_type')
      .on(t.partnerId, t.type, t.position)
      .where(sql`status = 'active'`),
    uniqueIndex('channels_active_address')
      .on(t.type, t.sender)
      .where(sql`status = 'active' AND position = 0`),
  ],
);

export const prices = sqliteTable(
  'prices',
  {
    id: text('id').primaryKey(),
    channelType: text('channel_type', { enum: CHANNEL_TYPES }).notNull(),
    /** Empty string = the default price for every partner without an override. */
    partnerId: text('partner_id').notNull().default(''),
    /** Empty string = every gateway; else the price of messages sent through this gateway (a route's own price). */
    gatewayId: text('gateway_id').notNull().default(''),
    /** Empty string = every message; else a WhatsApp template category (marketing, utility, authentication). */
    category: text('category').notNull().default(''),
    /** Micro-units per message (per segment for SMS). */
    amount: integer('amount').notNull(),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [uniqueIndex('prices_channel_partner').on(t.channelType, t.partnerId, t.gatewayId, t.category)],
);

/**
 * A WhatsApp Cloud gateway's message templates as Meta's catalogue lists them
 * (GET /{waba_id}/message_templates), kept current by its status and category webhooks.
 */
export const whatsappTemplates = sqliteTable(
  'whatsapp_templates',
  {
    id: text('id').primaryKey(),
    gatewayId: text('gateway_id')
      .notNull()
      .references(() => gateways.id, { onDelete: 'cascade' }),
    /** Meta's template id. */
    metaId: text('meta_id'),
    name: text('name').notNull(),
    /** Meta's language code, e.g. en_US. */
    language: text('language').notNull(),
    /** Meta's status: APPROVED, PENDING, REJECTED, PAUSED, DISABLED, ... */
    status: text('status').notNull(),
    /** Lowercase: marketing, utility, authentication (or what Meta names next). */
    category: text('category').notNull(),
    /** positional or named. */
    parameterFormat: text('parameter_format').notNull().default('positional'),
    /** The components as Meta lists them (JSON). */
    components: text('components').notNull().default('[]'),
    /** The parameters a send must give, normalized from the components (JSON, src/core/whatsapp-templates.ts). */
    spec: text('spec').notNull(),
    /** When status or category last changed by webhook or sync: an older webhook does not undo a newer state. */
    stateAt: integer('state_at').notNull(),
    syncedAt: integer('synced_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [uniqueIndex('whatsapp_templates_gateway_name_language').on(t.gatewayId, t.name, t.language)],
);

/** The last catalogue sync of each WhatsApp Cloud gateway: a gateway without a row was never synced. */
export const whatsappTemplateSyncs = sqliteTable('whatsapp_template_syncs', {
  gatewayId: text('gateway_id')
    .primaryKey()
    .references(() => gateways.id, { onDelete: 'cascade' }),
  /** The last sync that read every page; null: none has succeeded yet. */
  syncedAt: integer('synced_at'),
  templates: integer('templates').notNull().default(0),
  attemptedAt: integer('attempted_at').notNull(),
  /** Why the last attempt failed (redacted), null when it succeeded. */
  error: text('error'),
});

export const ledgerEntries = sqliteTable(
  'ledger_entries',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    partnerId: text('partner_id')
      .notNull()
      .references(() => partners.id),
    kind: text('kind', { enum: ['topup', 'debit', 'refund', 'adjustment'] }).notNull(),
    amount: integer('amount').notNull(),
    balanceAfter: integer('balance_after').notNull(),
    messageId: text('message_id'),
    note: text('note'),
    actor: text('actor').notNull(),
    createdAt: integer('created_at').notNull(),
  },
  // No index on message_id: nothing looks a message's entries up by it (migration 0007 dropped it).
  (t) => [index('ledger_partner').on(t.partnerId, t.id)],
);

export const auditLog = sqliteTable(
  'audit_log',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    actor: text('actor').notNull(),
    action: text('action').notNull(),
    targetType: text('target_type').notNull(),
    targetId: text('target_id'),
    details: text('details'),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [index('audit_created').on(t.createdAt)],
);

export const contacts = sqliteTable(
  'contacts',
  {
    id: text('id').primaryKey(),
    partnerId: text('partner_id')
      .notNull()
      .references(() => partners.id),
    name: text('name'),
    phone: text('phone'),
    email: text('email'),
    /** Messenger page-scoped id. */
    psid: text('psid'),
    /** Instagram-scoped id. */
    igsid: text('igsid'),
    /** JSON object of partner-defined attributes. */
    attributes: text('attributes').notNull().default('{}'),
    lastInboundAt: integer('last_inbound_at'),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [
    index('contacts_partner').on(t.partnerId, t.id),
    uniqueIndex('contacts_phone').on(t.partnerId, t.phone),
    uniqueIndex('contacts_email').on(t.partnerId, t.email),
    uniqueIndex('contacts_psid').on(t.partnerId, t.psid),
    uniqueIndex('contacts_igsid').on(t.partnerId, t.igsid),
  ],
);

export const conversations = sqliteTable(
  'conversations',
  {
    id: text('id').primaryKey(),
    partnerId: text('partner_id')
      .notNull()
      .references(() => partners.id),
    contactId: text('contact_id')
      .notNull()
      .references(() => contacts.id),
    channelType: text('channel_type', { enum: CHANNEL_TYPES }).notNull(),
    channelId: text('channel_id'),
    status: text('status', { enum: ['open', 'closed'] })
      .notNull()
      .default('open'),
    lastMessageAt: integer('last_message_at'),
    lastInboundAt: integer('last_inbound_at'),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [
    index('conversations_partner').on(t.partnerId, t.id),
    index('conversations_partner_updated').on(t.partnerId, t.updatedAt),
    index('conversations_contact').on(t.contactId, t.channelType, t.status),
  ],
);

export const messages = sqliteTable(
  'messages',
  {
    id: text('id').primaryKey(),
    partnerId: text('partner_id')
      .notNull()
      .references(() => partners.id),
    direction: text('direction', { enum: ['outbound', 'inbound'] }).notNull(),
    channelType: text('channel_type', { enum: CHANNEL_TYPES }).notNull(),
    channelId: text('channel_id'),
    gatewayId: text('gateway_id'),
    conversationId: text('conversation_id'),
    contactId: text('contact_id'),
    to: text('to').notNull(),
    from: text('from').notNull(),
    /** JSON: a MessageContent (src/core/message-content.ts), by kind: text, template, email, media, reaction, contacts, other. */
    content: text('content').notNull(),
    status: text('status').notNull(),
    providerMessageId: text('provider_message_id'),
    /**
     * 1 when provider reports name this message only by provider_message_id, which is then
     * indexed (messages_provider); 0 when every report carries msgd's own id (Twilio's
     * StatusCallback URL names the message) or none comes (SMTP), so settling the send writes no
     * random index page.
     */
    providerIdIndexed: integer('provider_id_indexed').notNull().default(1),
    price: integer('price').notNull().default(0),
    segments: integer('segments').notNull().default(1),
    errorCode: text('error_code'),
    errorMessage: text('error_message'),
    /** 1 when the provider call may have been in flight during a crash (possible duplicate). */
    dispatchUncertain: integer('dispatch_uncertain').notNull().default(0),
    /**
     * 1 from just before a provider request for it may be written (committed first) until that
     * attempt's outcome is recorded: set after a crash, the request may have left msgd.
     */
    dispatchInFlight: integer('dispatch_in_flight').notNull().default(0),
    /** 1 once the price has been refunded (refund applied at most once). */
    refunded: integer('refunded').notNull().default(0),
    /** Messenger/IG: provider timestamp of the send, for delivery/read watermarks. */
    sentAt: integer('sent_at'),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
    /** When the customer unsent this inbound message (Messenger/Instagram is_deleted); its content is then redacted. */
    deletedAt: integer('deleted_at'),
    /** A scheduled send's time (ms): it waits as 'scheduled', debited, and is dispatched then. */
    sendAt: integer('send_at'),
  },
  (t) => [
    index('messages_partner').on(t.partnerId, t.id),
    index('messages_conversation').on(t.conversationId, t.id),
    // Partial: a queued message has no provider id yet, so a send writes no entry here, and a
    // message whose reports name msgd's id never does. A lookup must say provider_id_indexed = 1.
    index('messages_provider')
      .on(t.providerMessageId)
      .where(sql`provider_message_id IS NOT NULL AND provider_id_indexed = 1`),
    // Partial: only failed messages (core/statuses.ts FAILURE_STATUSES), so a filter on a
    // failure answers from one short range. A send (queued) and a delivery write no entry;
    // a message enters it when it fails, and leaves it if proof of delivery comes later.
    // The list must repeat this WHERE to use it (core/message-list.ts FAILED_WHERE).
    index('messages_partner_failed')
      .on(t.partnerId, t.id)
      .where(sql`status IN ('failed', 'undelivered', 'bounced', 'dropped')`),
    // Partial: only messages waiting for their send_at, few at any time, so a status=scheduled
    // list reads full pages from it; a send that is not scheduled writes nothing here.
    index('messages_partner_scheduled')
      .on(t.partnerId, t.id)
      .where(sql`status = 'scheduled'`),
  ],
);

export const messageStatusHistory = sqliteTable(
  'message_status_history',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    messageId: text('message_id').notNull(),
    status: text('status').notNull(),
    /** The provider's own word for it (e.g. SendGrid "bounce", Twilio "undelivered"). */
    providerStatus: text('provider_status'),
    errorCode: text('error_code'),
    errorMessage: text('error_message'),
    /** 1 when recorded in history but the status did not move (late or duplicate). */
    ignored: integer('ignored').notNull().default(0),
    occurredAt: integer('occurred_at').notNull(),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [index('message_status_history_message').on(t.messageId, t.id)],
);

export const idempotencyKeys = sqliteTable(
  'idempotency_keys',
  {
    partnerId: text('partner_id').notNull(),
    key: text('key').notNull(),
    /** Hex SHA-256 of method + path + body: the same key with another body is refused. */
    requestHash: text('request_hash').notNull(),
    /**
     * What the request came to, as core names it ('accepted'): each surface maps it to its own
     * answer's status, so no HTTP status is stored.
     */
    outcome: text('outcome', { enum: ['accepted'] })
      .notNull()
      .default('accepted'),
    /** The answer the surface rendered for the first request, replayed as it was. */
    responseBody: text('response_body').notNull(),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.partnerId, t.key] }), index('idempotency_created').on(t.createdAt)],
);

export const jobs = sqliteTable(
  'jobs',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    kind: text('kind').notNull(),
    payload: text('payload').notNull(),
    state: text('state', { enum: ['available', 'running', 'retry', 'dead', 'held'] })
      .notNull()
      .default('available'),
    priority: integer('priority').notNull().default(0),
    runAt: integer('run_at').notNull(),
    attempts: integer('attempts').notNull().default(0),
    maxAttempts: integer('max_attempts').notNull(),
    lockedUntil: integer('locked_until'),
    lockedBy: text('locked_by'),
    /** Times the lifeline took this job back from a worker that died holding it. */
    reclaims: integer('reclaims').notNull().default(0),
    /** Set on jobs that must exist once (cron slots); most jobs have none and stay out of its index. */
    uniqueKey: text('unique_key'),
    lastError: text('last_error'),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [
    index('jobs_claim').on(t.state, t.priority, t.runAt),
    // A worker that runs some kinds seeks its own jobs: it must not scan a backlog of others.
    // No index on locked_until: the lifeline reads the few running jobs off state.
    index('jobs_kind_claim').on(t.kind, t.state, t.priority, t.runAt),
    // Partial: a NULL key (every dispatch job) costs no index entry.
    uniqueIndex('jobs_unique_key')
      .on(t.uniqueKey)
      .where(sql`unique_key IS NOT NULL`),
  ],
);

export const cronRuns = sqliteTable('cron_runs', {
  /** task name + ":" + scheduled minute: a restart never runs one slot twice. */
  key: text('key').primaryKey(),
  createdAt: integer('created_at').notNull(),
});

export const providerWebhooks = sqliteTable(
  'provider_webhooks',
  {
    id: text('id').primaryKey(),
    provider: text('provider').notNull(),
    gatewayId: text('gateway_id'),
    method: text('method').notNull(),
    path: text('path').notNull(),
    /** JSON of request headers with secrets redacted. */
    headers: text('headers').notNull(),
    body: blob('body', { mode: 'buffer' }),
    verification: text('verification', { enum: ['ok', 'failed', 'skipped'] }).notNull(),
    verificationReason: text('verification_reason'),
    processing: text('processing', {
      enum: ['pending', 'processed', 'duplicate', 'unroutable', 'ignored', 'error', 'rejected'],
    }).notNull(),
    error: text('error'),
    receivedAt: integer('received_at').notNull(),
    processedAt: integer('processed_at'),
  },
  (t) => [
    index('provider_webhooks_received').on(t.receivedAt),
    index('provider_webhooks_provider').on(t.provider, t.receivedAt),
  ],
);

export const providerEventKeys = sqliteTable('provider_event_keys', {
  /** provider + ":" + the provider's own event identity, for dedupe. */
  key: text('key').primaryKey(),
  createdAt: integer('created_at').notNull(),
});

export const events = sqliteTable(
  'events',
  {
    id: text('id').primaryKey(),
    partnerId: text('partner_id').notNull(),
    type: text('type').notNull(),
    /** JSON: the exact body delivered to endpoints. */
    payload: text('payload').notNull(),
    /** 0 until fanned out to endpoints as deliveries. */
    fannedOut: integer('fanned_out').notNull().default(0),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [
    index('events_partner').on(t.partnerId, t.id),
    // Partial: only events still to fan out are in it (most are stored already fanned out).
    index('events_pending')
      .on(t.fannedOut)
      .where(sql`fanned_out = 0`),
  ],
);

export const webhookEndpoints = sqliteTable(
  'webhook_endpoints',
  {
    id: text('id').primaryKey(),
    partnerId: text('partner_id')
      .notNull()
      .references(() => partners.id),
    url: text('url').notNull(),
    description: text('description'),
    /** JSON array of event types; null = every event. */
    events: text('events'),
    /** Sealed secret (src/core/secrets.ts), "whsec_..." when opened. */
    secret: text('secret').notNull(),
    previousSecret: text('previous_secret'),
    previousSecretExpiresAt: integer('previous_secret_expires_at'),
    status: text('status', { enum: ['enabled', 'disabled'] })
      .notNull()
      .default('enabled'),
    disabledReason: text('disabled_reason'),
    failingSince: integer('failing_since'),
    deletedAt: integer('deleted_at'),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [index('webhook_endpoints_partner').on(t.partnerId)],
);

export const webhookDeliveries = sqliteTable(
  'webhook_deliveries',
  {
    id: text('id').primaryKey(),
    eventId: text('event_id').notNull(),
    endpointId: text('endpoint_id').notNull(),
    partnerId: text('partner_id').notNull(),
    status: text('status', { enum: ['pending', 'succeeded', 'failed', 'dead', 'cancelled'] }).notNull(),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: integer('next_attempt_at'),
    lastStatusCode: integer('last_status_code'),
    lastError: text('last_error'),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [
    uniqueIndex('webhook_deliveries_event_endpoint').on(t.eventId, t.endpointId),
    index('webhook_deliveries_endpoint').on(t.endpointId, t.id),
    index('webhook_deliveries_status').on(t.status, t.id),
  ],
);

export const webhookAttempts = sqliteTable(
  'webhook_attempts',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    deliveryId: text('delivery_id').notNull(),
    attemptNo: integer('attempt_no').notNull(),
    statusCode: integer('status_code'),
    durationMs: integer('duration_ms').notNull(),
    responseSnippet: text('response_snippet'),
    error: text('error'),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [index('webhook_attempts_delivery').on(t.deliveryId, t.id), index('webhook_attempts_created').on(t.createdAt)],
);

/**
 * Recipients a partner must not send to on a channel (src/core/suppressions.ts). One row per
 * reason (and SendGrid unsubscribe group) and scope: a STOP and a later hard bounce are two
 * facts with their own sources. The unique index leads with what a send looks up, so the
 * check before the price is one seek on it.
 */
export const suppressions = sqliteTable(
  'suppressions',
  {
    id: text('id').primaryKey(),
    partnerId: text('partner_id')
      .notNull()
      .references(() => partners.id),
    channel: text('channel').notNull(),
    /** Normalized: E.164 (sms, whatsapp), lowercase email, PSID/IGSID. */
    address: text('address').notNull(),
    /** The sender address it applies to; '' = every sender of the partner on the channel. */
    scope: text('scope').notNull().default(''),
    reason: text('reason', {
      enum: [
        'opt_out_keyword',
        'hard_bounce',
        'spam_report',
        'unsubscribe',
        'group_unsubscribe',
        'manual',
        'provider_refused',
      ],
    }).notNull(),
    /** SendGrid unsubscribe group (asm_group_id) of a group_unsubscribe; '' otherwise. */
    groupId: text('group_id').notNull().default(''),
    /** What it came from: msg_…, pwh_… (provider webhook), token:…, user:…, operator:…. */
    source: text('source').notNull(),
    /** The provider's words or the person's note. */
    detail: text('detail'),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [
    uniqueIndex('suppressions_address').on(t.partnerId, t.channel, t.address, t.scope, t.reason, t.groupId),
    index('suppressions_partner').on(t.partnerId, t.id),
  ],
);

export const meta = sqliteTable('meta', {
  key: text('key').primaryKey(),
  value: text('value').notNull(),
});

/**
 * People who use the web console (/ui). Email is unique: it is the login. What a person may do
 * for a partner is a membership (below); a person may belong to several partners.
 */
export const users = sqliteTable('users', {
  id: text('id').primaryKey(),
  email: text('email').notNull().unique(),
  /** scrypt$N$r$p$salt$hash (src/core/passwords.ts); null until an invite link is used. */
  passwordHash: text('password_hash'),
  status: text('status', { enum: ['active', 'disabled'] })
    .notNull()
    .default('active'),
  /** Sessions created before this moment are no longer valid. */
  sessionsValidAfter: integer('sessions_valid_after').notNull().default(0),
  lastLoginAt: integer('last_login_at'),
  /** The person's TOTP secret, sealed with the master key (src/core/secrets.ts); set when enrolment starts. */
  totpSecret: text('totp_secret'),
  /** When the first valid code confirmed the secret: two-factor authentication is on from then. */
  totpEnabledAt: integer('totp_enabled_at'),
  /** The last 30-second step a code was accepted for: a code of that step or earlier is refused. */
  totpLastStep: integer('totp_last_step'),
  createdAt: integer('created_at').notNull(),
  updatedAt: integer('updated_at').notNull(),
});

/** A person's place in a partner's console: a role, and whether it is accepted (pending until then). */
export const memberships = sqliteTable(
  'memberships',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id),
    partnerId: text('partner_id')
      .notNull()
      .references(() => partners.id),
    role: text('role', { enum: ['admin', 'developer', 'billing'] }).notNull(),
    status: text('status', { enum: ['pending', 'active', 'disabled'] })
      .notNull()
      .default('pending'),
    /**
     * 1 when the person had no password yet at the invitation. A record only: every invitation
     * of a person msgd knows is accepted through its own link, never by the password alone.
     */
    acceptByLink: integer('accept_by_link', { mode: 'boolean' }).notNull().default(false),
    /** The audit actor who invited (user:usr_…, operator:…). */
    invitedBy: text('invited_by'),
    createdAt: integer('created_at').notNull(),
    acceptedAt: integer('accepted_at'),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [
    uniqueIndex('memberships_user_partner').on(t.userId, t.partnerId),
    index('memberships_partner').on(t.partnerId),
  ],
);

/**
 * One-time links: an invite (set the first password, accept the membership), a join (an
 * existing person is asked to log in and accept) or a reset. Only a hash of the link's secret.
 */
export const userInvites = sqliteTable(
  'user_invites',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id),
    hash: text('hash').notNull().unique(),
    kind: text('kind', { enum: ['invite', 'join', 'reset'] }).notNull(),
    /** The membership an invite or join link is for; null for a reset. */
    membershipId: text('membership_id').references(() => memberships.id),
    expiresAt: integer('expires_at').notNull(),
    usedAt: integer('used_at'),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [index('user_invites_user').on(t.userId)],
);

/** One-time recovery codes for two-factor authentication: only their SHA-256, each usable once. */
export const userRecoveryCodes = sqliteTable(
  'user_recovery_codes',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id),
    hash: text('hash').notNull().unique(),
    usedAt: integer('used_at'),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [index('user_recovery_codes_user').on(t.userId)],
);

/**
 * A login between its password and its second factor: the cookie holds the secret, the table
 * its SHA-256. Short-lived and ended by the login it leads to.
 */
export const uiPendingLogins = sqliteTable(
  'ui_pending_logins',
  {
    id: text('id').primaryKey(),
    hash: text('hash').notNull().unique(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id),
    /** The password's attempt in login_attempts, forgiven with the code's when the login succeeds. */
    attempt: integer('attempt').notNull(),
    createdAt: integer('created_at').notNull(),
    expiresAt: integer('expires_at').notNull(),
  },
  (t) => [index('ui_pending_logins_user').on(t.userId)],
);

/** Console sessions. The cookie holds the secret; only its SHA-256 is kept. */
export const uiSessions = sqliteTable(
  'ui_sessions',
  {
    id: text('id').primaryKey(),
    hash: text('hash').notNull().unique(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id),
    /** The partner picked for the session; null until one is picked. */
    partnerId: text('partner_id').references(() => partners.id),
    createdAt: integer('created_at').notNull(),
    lastSeenAt: integer('last_seen_at').notNull(),
    expiresAt: integer('expires_at').notNull(),
  },
  (t) => [index('ui_sessions_user').on(t.userId)],
);

/**
 * Console login attempts (src/core/login-throttle.ts): a row when an attempt starts, so
 * attempts still being checked count against the limit; shared by every msgd on the database.
 * `account` is the lower-cased email, cleared when the account logs in. Pruned past the window.
 */
export const loginAttempts = sqliteTable(
  'login_attempts',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    account: text('account'),
    address: text('address').notNull(),
    at: integer('at').notNull(),
  },
  (t) => [
    index('login_attempts_account').on(t.account, t.at),
    index('login_attempts_address').on(t.address, t.at),
    index('login_attempts_at').on(t.at),
  ],
);

/** Spend per partner and UTC day, rolled up from the ledger's new rows (src/core/spend.ts). */
export const spendDaily = sqliteTable(
  'spend_daily',
  {
    partnerId: text('partner_id').notNull(),
    /** UTC day as YYYY-MM-DD. */
    day: text('day').notNull(),
    /** Debits minus refunds, micro-units (positive = spent). */
    spend: integer('spend').notNull().default(0),
    messages: integer('messages').notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.partnerId, t.day] })],
);
/**
 * Work counters msgd keeps in memory (src/core/counters.ts), added up per 10-second bucket
 * every few seconds: what the console's overview reads for "last minute / last hour" without
 * counting the messages table. A row exists only for a series that moved in its bucket.
 */
export const counterBuckets = sqliteTable(
  'counter_buckets',
  {
    /** Start of the bucket, ms since the epoch, a multiple of 10 s. */
    bucket: integer('bucket').notNull(),
    name: text('name').notNull(),
    /** The series' labels as "k=v,k=v" (sorted keys), "" when it has none. */
    labels: text('labels').notNull(),
    value: integer('value').notNull(),
  },
  (t) => [primaryKey({ columns: [t.bucket, t.name, t.labels] })],
);

/**
 * One row per msgd instance (a process serving this store): who it is, that it is alive, and
 * what it counted. On SQLite there is one (the process holding the data directory); on
 * PostgreSQL one per instance sharing the database. A row whose beat is older than
 * INSTANCE_DEAD_AFTER_MS (src/core/counter-store.ts) is dead; stopped and dead rows are pruned
 * after a day.
 */
export const heartbeat = sqliteTable('heartbeat', {
  /** The instance's id, drawn at its start (`ins_…`). */
  id: text('id').primaryKey(),
  version: text('version').notNull(),
  pid: integer('pid').notNull(),
  /** On PostgreSQL, times are the database's clock (so instances on skewed hosts agree). */
  startedAt: integer('started_at').notNull(),
  beatAt: integer('beat_at').notNull(),
  /** 0 once msgd stopped cleanly, or was found dead; the beat's age tells a crash. */
  running: integer('running').notNull(),
  /** JSON of gauges read at the beat (queue depths), capped counts: the leader's only. */
  gauges: text('gauges').notNull().default('{}'),
  /** The host msgd runs on (os.hostname()): a console on the same host also checks its pid. */
  host: text('host'),
  /** 1 while this instance is the leader (src/db/leader.ts). */
  leader: integer('leader').notNull().default(0),
  /** JSON: this instance's work counters since its start, summed per counter name. */
  counters: text('counters').notNull().default('{}'),
  /** When another instance found its beat too old and marked it dead; null otherwise. */
  deadAt: integer('dead_at'),
});

/**
 * Each gateway's circuit breaker as msgd last saw it (src/jobs/circuit-breaker.ts keeps the
 * state in memory and writes a row here on every transition), for msgctl and the console,
 * which run in other processes. msgd clears the table when it starts: every circuit starts closed.
 */
export const gatewayCircuits = sqliteTable('gateway_circuits', {
  gatewayId: text('gateway_id').primaryKey(),
  state: text('state', { enum: ['closed', 'open', 'half_open'] }).notNull(),
  /** Consecutive failures counted towards opening. */
  failures: integer('failures').notNull().default(0),
  /** When an open circuit lets its first probe through; null unless open. */
  retryAt: integer('retry_at'),
  /** Why it last opened, e.g. "5 consecutive failures (ECONNREFUSED)". */
  reason: text('reason'),
  /** How many times it has opened since msgd started. */
  opened: integer('opened').notNull().default(0),
  changedAt: integer('changed_at').notNull(),
});

/**
 * Each gateway's line for its rate, shared by every msgd on one PostgreSQL database
 * (src/jobs/shared-lines.ts); a single SQLite msgd keeps its lines in memory and leaves this
 * table empty. A row is locked while a claim gives out slots on it.
 */
export const gatewayLines = sqliteTable('gateway_lines', {
  gatewayId: text('gateway_id').primaryKey(),
  /** Counts the starts over (enabled, disabled, given another rate): a place in an older line is void. */
  line: integer('line').notNull().default(0),
  /** The rate the line was given at, as the slot spacing in µs. */
  intervalUs: integer('interval_us').notNull(),
  /** 1 while the gateway is active. */
  active: integer('active').notNull(),
  /** The next free slot (ms, the database's clock): the GCRA's theoretical arrival time. */
  tat: integer('tat').notNull().default(0),
  /** The earliest the next message holding a place may go: late places go one slot apart. */
  nextGo: integer('next_go').notNull().default(0),
  updatedAt: integer('updated_at').notNull(),
});

/** A dispatch job's place in its gateway's line (gateway_lines), taken back when the job is claimed. */
export const gatewayPlaces = sqliteTable(
  'gateway_places',
  {
    jobId: integer('job_id').primaryKey(),
    gatewayId: text('gateway_id').notNull(),
    line: integer('line').notNull(),
    /** The slot (ms, the database's clock). */
    at: integer('at').notNull(),
    /** 1: moved back behind others that fell due with it (a line that fell behind). */
    respaced: integer('respaced').notNull().default(0),
  },
  (t) => [index('gateway_places_gateway').on(t.gatewayId)],
);

/**
 * The API's request limits shared by the instances of a cluster (src/http/rate-limit.ts): per key
 * (`tok:<token id>`, `ip:<address>`) GCRA's theoretical arrival time. Used on PostgreSQL only:
 * one SQLite msgd keeps its limits in memory. Rows whose time has passed are deleted (they mean
 * the same as no row).
 */
export const apiRateLimits = sqliteTable('api_rate_limits', {
  key: text('key').primaryKey(),
  /** When the key's next request is due, ms since the epoch (a fraction of a ms kept). */
  tat: real('tat').notNull(),
  /** How many requests the last update let through: what the statement that made it answers. */
  taken: integer('taken').notNull().default(0),
});
