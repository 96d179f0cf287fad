import { validate as validCron } from 'node-cron';
import { z } from 'zod';

const logLevel = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/** Keywords: one word each, compared in upper case. */
const keywordList = z
  .array(
    z
      .string()
      .trim()
      .min(1)
      .max(40)
      .refine((v) => !/\s/.test(v), { message: 'a keyword is one word' })
      .transform((v) => v.toUpperCase()),
  )
  .max(100);

// Every key is documented in docs/configuration.md and shown in config/msgd.example.json.
export const configSchema = z
  .object({
    dataDir: z.string().min(1).default('./data'),
    /** A file holding the master key (mode 0600); null: MSGD_MASTER_KEY, else <dataDir>/master.key. */
    masterKeyFile: z.string().min(1).nullable().default(null),
    database: z
      .object({
        /**
         * A postgres:// URL: msgd keeps everything in that PostgreSQL database instead of the data
         * directory's SQLite file. null: the data directory (SQLite).
         */
        url: z
          .string()
          .refine((v) => /^postgres(ql)?:\/\/./i.test(v), {
            message: 'must be a postgres:// or postgresql:// URL (or null for the SQLite data directory)',
          })
          .nullable()
          .default(null),
        /**
         * PostgreSQL: how long msgd waits for the server to answer a statement before it gives the
         * connection up and answers 503 storage_unavailable (a server that stopped answering
         * without closing its connections: a dropped network, a paused VM).
         */
        queryTimeoutMs: z.number().int().min(500).max(600_000).default(15_000),
        /**
         * On PostgreSQL, workers LISTEN for the NOTIFY of each enqueue and claim a job enqueued by
         * another instance at once. false: they find it by polling (jobs.pollIntervalMs), for a
         * connection that cannot LISTEN (PgBouncer in transaction mode).
         */
        listen: z.boolean().default(true),
      })
      .strict()
      .prefault({}),
    server: z
      .object({
        host: z.string().min(1).default('127.0.0.1'),
        port: z.number().int().min(0).max(65535).default(8080),
        publicUrl: z
          .url({ protocol: /^https?$/ })
          .nullable()
          .default(null),
        trustProxy: z.boolean().default(false),
        bodyLimitBytes: z
          .number()
          .int()
          .min(1024)
          .max(50 * 1024 * 1024)
          .default(1024 * 1024),
        shutdownTimeoutMs: z.number().int().min(1000).max(600_000).default(30_000),
        requestTimeoutMs: z.number().int().min(1000).max(600_000).default(30_000),
        headersTimeoutMs: z.number().int().min(1000).max(600_000).default(10_000),
        keepAliveTimeoutMs: z.number().int().min(1000).max(600_000).default(5_000),
      })
      .strict()
      .prefault({}),
    metrics: z
      .object({
        host: z.string().min(1).default('127.0.0.1'),
        port: z.number().int().min(0).max(65535).nullable().default(null),
        token: z.string().min(16).nullable().default(null),
      })
      .strict()
      .prefault({}),
    health: z
      .object({
        minFreeDiskMb: z.number().int().min(0).default(100),
      })
      .strict()
      .prefault({}),
    log: z
      .object({
        level: logLevel.default('info'),
        pretty: z.boolean().default(false),
        accessLog: z.boolean().default(false),
      })
      .strict()
      .prefault({}),
    demo: z
      .object({
        enabled: z.boolean().default(true),
      })
      .strict()
      .prefault({}),
    jobs: z
      .object({
        concurrency: z.number().int().min(1).max(4096).default(256),
        leaseSeconds: z.number().int().min(5).max(3600).default(300),
        maxAttempts: z.number().int().min(1).max(100).default(12),
        backoffBaseMs: z.number().int().min(10).default(1000),
        backoffCapMs: z
          .number()
          .int()
          .min(1000)
          .default(15 * 60_000),
        lifelineIntervalSeconds: z.number().int().min(1).default(30),
        /** The longest an idle worker waits before looking for jobs it was not told of (another instance's, msgctl's). */
        pollIntervalMs: z.number().int().min(10).max(600_000).default(1000),
      })
      .strict()
      .prefault({}),
    dispatch: z
      .object({
        timeoutMs: z.number().int().min(100).max(120_000).default(15_000),
        connectionsPerOrigin: z.number().int().min(1).max(1024).default(64),
        ratePerSecond: z
          .object({
            whatsapp_cloud: z.number().positive().default(80),
            meta_messenger: z.number().positive().default(40),
            meta_instagram: z.number().positive().default(40),
            twilio: z.number().positive().default(1),
            sendgrid: z.number().positive().default(100),
            smtp: z.number().positive().default(20),
            sandbox: z.number().positive().default(1000),
          })
          .strict()
          .prefault({}),
        /** Per gateway (src/jobs/circuit-breaker.ts): when to stop calling a failing provider for a while. */
        circuitBreaker: z
          .object({
            /** Opens after this many failed calls in a row. */
            consecutiveFailures: z.number().int().min(1).max(1000).default(5),
            /** …or when at least this share of the calls in the window failed (0 turns this off)… */
            failureRate: z.number().min(0).max(1).default(0.5),
            /** …counted only once the window holds this many calls. */
            minCalls: z.number().int().min(1).max(100_000).default(20),
            windowMs: z.number().int().min(1000).max(3_600_000).default(60_000),
            /** How long it stays open the first time; each reopening from half-open doubles it, up to maxOpenMs. */
            openMs: z.number().int().min(100).max(3_600_000).default(30_000),
            maxOpenMs: z.number().int().min(100).max(86_400_000).default(600_000),
            /** Half-open: this many calls go through as probes; as many successes close it, one failure opens it again. */
            halfOpenProbes: z.number().int().min(1).max(100).default(3),
          })
          .strict()
          .prefault({}),
      })
      .strict()
      .prefault({}),
    billing: z
      .object({
        refundOnProviderFailure: z.enum(['always', 'never']).default('always'),
        balanceLowThreshold: z
          .string()
          .regex(/^(0|[1-9]\d*)(\.\d{1,6})?$/, 'a plain decimal amount such as 5.00')
          .nullable()
          .default(null),
      })
      .strict()
      .prefault({}),
    scheduling: z
      .object({
        /** How soon a scheduled send may be (send_at at least this far ahead), in seconds. */
        minAheadSeconds: z.number().int().min(0).max(3600).default(60),
        /** How far ahead a scheduled send may be, in days. */
        maxAheadDays: z.number().int().min(1).max(366).default(35),
      })
      .strict()
      .prefault({}),
    idempotency: z
      .object({
        ttlHours: z
          .number()
          .int()
          .min(1)
          .max(24 * 30)
          .default(24),
      })
      .strict()
      .prefault({}),
    rateLimit: z
      .object({
        perMinute: z.number().int().min(1).default(600),
      })
      .strict()
      .prefault({}),
    webhooksIn: z
      .object({
        retentionDays: z.number().int().min(1).max(3650).default(30),
        sendgridToleranceSeconds: z.number().int().min(1).default(600),
        acceptLegacySha1: z.boolean().default(false),
      })
      .strict()
      .prefault({}),
    webhooksOut: z
      .object({
        timeoutMs: z.number().int().min(100).max(60_000).default(5000),
        allowPrivateTargets: z.boolean().default(false),
        caFile: z.string().nullable().default(null),
        disableAfterHours: z
          .number()
          .positive()
          .default(5 * 24),
        rotationGraceHours: z.number().positive().default(24),
        concurrency: z.number().int().min(1).max(4096).default(128),
        retentionDays: z.number().int().min(1).max(3650).default(30),
        /** Delay before each attempt of a delivery (the first is normally 0); ±10% jitter is added. */
        retryScheduleMs: z
          .array(
            z
              .number()
              .int()
              .min(0)
              .max(7 * 86_400_000),
          )
          .min(1)
          .max(50)
          .default([0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]),
      })
      .strict()
      .prefault({}),
    backup: z
      .object({
        /** Where scheduled and pre-migration backups go; null: <dataDir>/backups. */
        dir: z.string().min(1).nullable().default(null),
        /** node-cron expression for scheduled backups; null: none. */
        schedule: z
          .string()
          .refine((v) => validCron(v), { message: 'not a valid cron expression (e.g. "15 2 * * *")' })
          .nullable()
          .default(null),
        keep: z.number().int().min(1).max(1000).default(7),
        withKey: z.boolean().default(true),
        beforeMigrate: z.boolean().default(true),
      })
      .strict()
      .prefault({}),
    retention: z
      .object({
        messageContentDays: z.number().int().min(1).max(36500).nullable().default(null),
        loginAuditDays: z.number().int().min(1).max(36500).default(90),
      })
      .strict()
      .prefault({}),
    suppressions: z
      .object({
        /**
         * An inbound SMS whose whole text (trimmed, any case) is one of these opts the sender out
         * (src/core/opt-out-keywords.ts). Add other languages' words here (e.g. ARRET).
         */
        optOutKeywords: keywordList.default([
          'STOP',
          'STOPALL',
          'UNSUBSCRIBE',
          'CANCEL',
          'END',
          'QUIT',
          'OPTOUT',
          'REVOKE',
        ]),
        /** And one of these opts them back in. HELP and INFO are the partner's to answer. */
        optInKeywords: keywordList.default(['START', 'YES', 'UNSTOP']),
      })
      .strict()
      .refine((v) => !v.optOutKeywords.some((k) => v.optInKeywords.includes(k)), {
        message: 'a keyword cannot both opt out and opt in',
      })
      .prefault({}),
    ui: z
      .object({
        /** A console session ends after this long without a request. */
        sessionIdleMinutes: z
          .number()
          .int()
          .min(1)
          .max(7 * 24 * 60)
          .default(30),
        /** And this long after login, however busy. */
        sessionMaxHours: z
          .number()
          .int()
          .min(1)
          .max(30 * 24)
          .default(12),
        /** How long an invite or reset link stays usable. */
        inviteHours: z
          .number()
          .int()
          .min(1)
          .max(30 * 24)
          .default(72),
      })
      .strict()
      .prefault({}),
  })
  .strict();

export type Config = z.infer<typeof configSchema>;
