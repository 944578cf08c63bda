/** defineConfig and the resolved settings: every option, its default, and how env vars and NODE_ENV pick them. */
import { OkeError } from "../errors.ts";
import type { SendDriverName } from "../channel/channel.ts";
import { unknownKey, type KeysOf } from "../options.ts";

export type Env = "dev" | "test" | "prod";

export type JournalDriverName = "memory" | "file" | "postgres";

/**
 * What one instance of the app does: `all` serves HTTP and consumes; `web` serves HTTP and emits but
 * consumes no queue work; `worker` consumes (workers, durable wakes, schedules, retention) and serves
 * only `/_/health` and `/_/ready`.
 */
export type InstanceRole = "all" | "web" | "worker";

export const INSTANCE_ROLES: readonly InstanceRole[] = ["all", "web", "worker"];

/** Every setting, with its default. Per-environment overrides go under `env`. */
export interface OkeSettings {
  drivers?: {
    /** Where queues and journals live. Default: `memory` in test; `postgres` in dev/prod when DATABASE_URL is set; `file` in dev otherwise. */
    journal?: JournalDriverName;
    /** How `fx.send` delivers. Default: `console` in dev, `memory` in test, `webhook` in prod. */
    send?: SendDriverName;
  };
  database?: {
    /** PostgreSQL URL. Default: DATABASE_URL. */
    url?: string;
    /** Schema for okengine's tables. Default `okengine`. */
    schema?: string;
    /** Pool size. Default 10. */
    poolSize?: number;
    /** Use LISTEN/NOTIFY for wake-ups (`false` = poll only, for PgBouncer transaction pooling). Default true. */
    notify?: boolean;
    /** Fallback poll interval in ms. Default 5 000. */
    pollIntervalMs?: number;
    /**
     * How long boot keeps trying to reach a database that is down or starting up (refused or
     * dropped connections, SQLSTATE classes 08, 53, 57, 58, XX), in ms from the first attempt:
     * retried after 100 ms, doubling to 2 s, a warning per failure; then boot fails with OKE1096.
     * Statement errors (a failed migration, permission denied) fail at once. `0` = fail at once.
     * Default 30 000.
     */
    connectTimeoutMs?: number;
    /**
     * How long one connection attempt to PostgreSQL (TCP, TLS, authentication) may take, in ms, at
     * boot and after; one that runs out counts as a failed attempt (retried at boot). Without a
     * bound a connect to a host that drops packets hangs for minutes, and so does stop(). `0` = no
     * bound. Default 5 000.
     */
    connectAttemptTimeoutMs?: number;
    /**
     * A store call PostgreSQL has not answered after this many ms (it waits on a lock another session
     * holds, or the server is overloaded) is logged at `warn` naming the calls waiting, again each
     * minute it lasts, and its end at `info`. `0` = off. Default 10 000.
     */
    stallWarnMs?: number;
  };
  file?: {
    /** Directory of the file driver, relative to the project root. Default `.oke`. */
    dir?: string;
  };
  http?: {
    /** Port. Default: PORT, else 6530. */
    port?: number;
    /**
     * Address to bind. Default: loopback (`127.0.0.1`), reachable from this machine only. In test and
     * prod the `HOST` variable is read when this is not set: a container sets `HOST=0.0.0.0`.
     */
    host?: string;
    /** Largest accepted request body in bytes. Default 1 MiB. */
    bodyLimit?: number;
    /** A client must send its request headers within this many ms of connecting (else 408). Default 10 000. */
    headersTimeoutMs?: number;
    /** A client must send its whole request (headers and body) within this many ms (else 408). Default 30 000. */
    requestTimeoutMs?: number;
    /** An idle keep-alive connection is closed after this many ms. Default 72 000. */
    keepAliveTimeoutMs?: number;
    /** Open connections at most; connections past it are closed as they arrive. Default 1 000. */
    maxConnections?: number;
    /** How long an Idempotency-Key and its response are kept, from the first request, in ms. Default 24 h. */
    idempotencyWindowMs?: number;
    /**
     * On stop, how long `/_/ready` answers 503 while the app still serves and works, before the port
     * closes and the graceful stop begins — the time a load balancer needs to see the instance leave
     * (Kubernetes: the readiness probe's period × failure threshold, plus endpoint propagation).
     * Not part of `shutdownTimeoutMs`. Default 0: the port closes at once.
     */
    drainDelayMs?: number;
  };
  signals?: {
    /** Visibility lease of a once claim in ms. Default 30 000. */
    leaseMs?: number;
    /** Handlers running at once per once-bound flow. Default 16. */
    concurrency?: number;
    /**
     * Messages claimed ahead of free slots and held locally, so one claim feeds
     * many handlers. An upper bound: while handlers are slow the pool holds
     * fewer, and a held message left with under half its lease is given back
     * unstarted, never run late. Default: `concurrency`.
     */
    prefetch?: number;
    /**
     * Claim at emit: an unkeyed emit from an instance whose worker pool for
     * that signal has a free slot (and nothing claimed waiting) writes the
     * message already claimed by that pool and starts the handler when the
     * commit returns — one database round trip from emit to handler instead
     * of two. Only drivers whose claim costs I/O support it (postgres); with
     * `false` every message waits in the queue for any instance to claim.
     * Default `true`.
     */
    claimAtEmit?: boolean;
    /** How long delivered messages are kept before pruning, in ms. Default 24 h. */
    retentionMs?: number;
  };
  /** Server-sent event streams of live tapes (fx.live). */
  live?: {
    /** Open streams per instance; one more is answered 503 with Retry-After. Default 10 000. */
    maxConnections?: number;
    /**
     * Bytes queued for one client. Following the tape, one past it is disconnected as too slow (it
     * resumes from its last id); a resume's replay waits for it to drain instead (up to 30 s). Default 1 MiB.
     */
    maxBufferBytes?: number;
    /** Period of the heartbeat comment on idle streams, in ms. Default 15 000. */
    heartbeatMs?: number;
  };
  durable?: {
    /** Lease of a running durable run in ms, renewed by a heartbeat. Default 30 000. */
    leaseMs?: number;
    /** How long completed and failed runs (and their journals) are kept before pruning, in ms. Default 7 days. */
    retentionMs?: number;
    /** Resumes (wake, orphan scan, wake early, redelivery) running at once per instance. Default 32. */
    concurrency?: number;
    /**
     * Recoveries (takeovers after the run's holder died or hung past its lease) a run may have; the
     * next one ends it from its journal, failed with OKE1303 after its undos. Default 10.
     */
    maxRecoveries?: number;
  };
  /** The operator Console (docs/console.md), served by `app.start()` on its own port. */
  console?: {
    /** Port, or `false` to turn it off. Default: OKE_CONSOLE_PORT, else 6533 (off in test). */
    port?: number | false;
    /** Address to bind. Default `127.0.0.1` (loopback only). */
    host?: string;
    /** Operator tokens by label (the label is who the audit log names). OKE_CONSOLE_TOKEN adds one labelled "operator". */
    tokens?: Record<string, string>;
    /**
     * How many reverse proxies in front of the Console to trust (their X-Forwarded-For and
     * X-Forwarded-Host). With 1, the sign-in limit counts the address the proxy saw the client at (the
     * last X-Forwarded-For entry), not the proxy's, and the page's actions are checked against
     * X-Forwarded-Host. Default: OKE_CONSOLE_TRUST_PROXY, else 0 (the headers are ignored: a client
     * can write them).
     */
    trustProxy?: number;
  };
  /** What this instance runs (docs/cli.md#web-and-worker-processes). */
  instance?: {
    /** `all` · `web` · `worker`. Default: OKE_ROLE, else `all`; `oke start --role` wins over both. */
    role?: InstanceRole;
  };
  /** Graceful shutdown deadline in ms. Default 10 000. */
  shutdownTimeoutMs?: number;
}

export interface OkeConfig extends OkeSettings {
  env?: Partial<Record<Env, OkeSettings>>;
}

type Section = {
  [K in keyof OkeSettings]-?: NonNullable<OkeSettings[K]> extends object ? K : never;
}[keyof OkeSettings];

/**
 * Every setting a config may hold; anything else is refused by name at boot.
 * A new setting goes into OkeSettings above AND here (the type check insists).
 */
export const CONFIG_SECTIONS = {
  drivers: { journal: true, send: true },
  database: {
    url: true,
    schema: true,
    poolSize: true,
    notify: true,
    pollIntervalMs: true,
    connectTimeoutMs: true,
    connectAttemptTimeoutMs: true,
    stallWarnMs: true,
  },
  file: { dir: true },
  http: {
    port: true,
    host: true,
    bodyLimit: true,
    headersTimeoutMs: true,
    requestTimeoutMs: true,
    keepAliveTimeoutMs: true,
    maxConnections: true,
    idempotencyWindowMs: true,
    drainDelayMs: true,
  },
  signals: { leaseMs: true, concurrency: true, prefetch: true, claimAtEmit: true, retentionMs: true },
  durable: { retentionMs: true, leaseMs: true, concurrency: true, maxRecoveries: true },
  live: { maxConnections: true, maxBufferBytes: true, heartbeatMs: true },
  console: { port: true, host: true, tokens: true, trustProxy: true },
  instance: { role: true },
} as const satisfies { [K in Section]: KeysOf<NonNullable<OkeSettings[K]>> };
/** Top-level settings that are plain values, not sections. */
const CONFIG_VALUES = { shutdownTimeoutMs: true } as const satisfies KeysOf<Omit<OkeSettings, Section>>;
const ENVS = { dev: true, test: true, prod: true } as const satisfies KeysOf<Record<Env, unknown>>;

const unknownSetting = (path: string, expected: readonly string[]): OkeError =>
  new OkeError({
    code: "OKE1095",
    message: `oke config: unknown setting "${path}"`,
    fix: `Check its spelling; the settings here are ${expected.join(", ")} (docs/drivers.md and docs/signals.md list them all).`,
  });

function checkSettings(settings: unknown, prefix: string, allowEnv: boolean): void {
  const top = { ...CONFIG_SECTIONS, ...CONFIG_VALUES, ...(allowEnv ? { env: true } : {}) };
  const bad = unknownKey(settings, top);
  if (bad !== undefined)
    throw unknownSetting(
      prefix + bad,
      Object.keys(top).map((k) => prefix + k),
    );
  const s = settings as Record<string, unknown>;
  for (const [section, keys] of Object.entries(CONFIG_SECTIONS)) {
    const badKey = unknownKey(s[section], keys);
    if (badKey !== undefined)
      throw unknownSetting(
        `${prefix}${section}.${badKey}`,
        Object.keys(keys).map((k) => `${prefix}${section}.${k}`),
      );
  }
  if (allowEnv && s.env !== undefined) {
    const badEnv = unknownKey(s.env, ENVS);
    if (badEnv !== undefined) throw unknownSetting(`env.${badEnv}`, ["env.dev", "env.test", "env.prod"]);
    for (const [env, over] of Object.entries(s.env as object)) checkSettings(over, `env.${env}.`, false);
  }
}

/** Refuses settings okengine does not have (OKE1095), so a typo is not silently ignored. */
export const checkConfig = (config: unknown): void => checkSettings(config ?? {}, "", true);

/** Type-checks an okengine config and refuses unknown settings by name (OKE1095). */
export const defineConfig = (config: OkeConfig): OkeConfig => {
  checkConfig(config);
  return config;
};

export interface ResolvedConfig {
  env: Env;
  journal: JournalDriverName;
  send: SendDriverName;
  databaseUrl: string | undefined;
  databaseSchema: string;
  poolSize: number;
  notify: boolean;
  pollIntervalMs: number;
  connectTimeoutMs: number;
  connectAttemptTimeoutMs: number;
  stallWarnMs: number;
  fileDir: string;
  port: number;
  host: string;
  bodyLimit: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnections: number;
  idempotencyWindowMs: number;
  drainDelayMs: number;
  leaseMs: number;
  concurrency: number;
  prefetch: number;
  claimAtEmit: boolean;
  retentionMs: number;
  durableLeaseMs: number;
  durableRetentionMs: number;
  durableConcurrency: number;
  durableMaxRecoveries: number;
  liveMaxConnections: number;
  liveMaxBufferBytes: number;
  liveHeartbeatMs: number;
  shutdownTimeoutMs: number;
  /** What this instance runs: instance.role, else OKE_ROLE, else `all` (a createApp `role` wins over both). */
  role: InstanceRole;
  /** Console settings as given (base + env override); src/console/config.ts resolves them. */
  console: NonNullable<OkeSettings["console"]>;
}

const JOURNALS: readonly string[] = ["memory", "file", "postgres"];

export function resolveEnv(explicit?: Env): Env {
  if (explicit) return explicit;
  const node = process.env.NODE_ENV;
  if (node === "production" || node === "prod") return "prod";
  if (node === "test") return "test";
  return "dev";
}

/** Merges base + env overrides + process env, and checks driver names (exact boot texts from the docs). */
export function resolveConfig(
  config: OkeConfig | undefined,
  env: Env,
  vars: NodeJS.ProcessEnv = process.env,
  /** createApp({ store }): the store is the caller's, so the journal setting picks nothing and needs no URL. */
  o: { storeGiven?: boolean } = {},
): ResolvedConfig {
  checkConfig(config);
  const base = config ?? {};
  const over = base.env?.[env] ?? {};
  const pick = <
    K extends
      "drivers" | "database" | "file" | "http" | "signals" | "durable" | "live" | "console" | "instance",
  >(
    k: K,
  ): NonNullable<OkeSettings[K]> => ({ ...(base[k] ?? {}), ...(over[k] ?? {}) });
  const drivers = pick("drivers");
  const database = pick("database");
  const httpS = pick("http");
  const signals = pick("signals");
  const durable = pick("durable");
  const live = pick("live");
  const file = pick("file");
  const instance = pick("instance");
  const databaseUrl = database.url ?? (vars.DATABASE_URL || undefined);
  const journal =
    drivers.journal ??
    (vars.OKE_JOURNAL as JournalDriverName | undefined) ??
    defaultJournal(env, databaseUrl);
  if (!JOURNALS.includes(journal)) {
    throw new OkeError({
      code: "OKE1090",
      message: `oke boot: unknown journal driver "${String(journal)}" (expected memory · file · postgres)`,
    });
  }
  if (journal === "postgres" && !databaseUrl && o.storeGiven !== true) {
    throw new OkeError({
      code: "OKE1091",
      message: 'oke boot: journal driver "postgres" needs DATABASE_URL',
      fix: "Set DATABASE_URL, or pin drivers.journal to file or memory.",
    });
  }
  const send = drivers.send ?? (env === "test" ? "memory" : env === "dev" ? "console" : "webhook");
  if (!["console", "memory", "webhook"].includes(send)) {
    throw new OkeError({
      code: "OKE1092",
      message: `oke boot: unknown send driver "${String(send)}" (expected console · memory · webhook)`,
    });
  }
  const portVar = vars.PORT ? Number(vars.PORT) : undefined;
  const port = httpS.port ?? portVar ?? 6530;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new OkeError({ code: "OKE1093", message: `oke boot: invalid port ${String(vars.PORT ?? port)}` });
  }
  const positive = (name: string, v: number): number => {
    if (!Number.isFinite(v) || v <= 0) {
      throw new OkeError({
        code: "OKE1094",
        message: `oke boot: ${name} must be a positive number, got ${String(v)}`,
      });
    }
    return v;
  };
  // A count of permits: a fraction would hand out fractional permits.
  const positiveWhole = (name: string, v: number): number => {
    if (!Number.isInteger(v) || v <= 0) {
      throw new OkeError({
        code: "OKE1094",
        message: `oke boot: ${name} must be a positive whole number, got ${String(v)}`,
      });
    }
    return v;
  };
  const boolean = (name: string, v: unknown): boolean => {
    if (typeof v !== "boolean") {
      throw new OkeError({
        code: "OKE1094",
        message: `oke boot: ${name} must be true or false, got ${JSON.stringify(v)}`,
      });
    }
    return v;
  };
  const nonNegative = (name: string, v: number): number => {
    if (!Number.isInteger(v) || v < 0) {
      throw new OkeError({
        code: "OKE1094",
        message: `oke boot: ${name} must be a non-negative integer, got ${String(v)}`,
      });
    }
    return v;
  };
  return {
    env,
    journal,
    send,
    databaseUrl,
    databaseSchema: database.schema ?? "okengine",
    poolSize: positive("database.poolSize", database.poolSize ?? 10),
    notify: database.notify ?? true,
    pollIntervalMs: positive("database.pollIntervalMs", database.pollIntervalMs ?? 5_000),
    connectTimeoutMs: nonNegative("database.connectTimeoutMs", database.connectTimeoutMs ?? 30_000),
    connectAttemptTimeoutMs: nonNegative(
      "database.connectAttemptTimeoutMs",
      // The postgres store's own default (CONNECT_ATTEMPT_TIMEOUT_MS, which says why 5 s).
      database.connectAttemptTimeoutMs ?? 5_000,
    ),
    // The postgres store's own default (STALL_WARN_MS, which says why 10 s).
    stallWarnMs: nonNegative("database.stallWarnMs", database.stallWarnMs ?? 10_000),
    fileDir: file.dir ?? ".oke",
    port,
    host: bindHost(httpS.host, env, vars),
    bodyLimit: positive("http.bodyLimit", httpS.bodyLimit ?? 1024 * 1024),
    headersTimeoutMs: positive("http.headersTimeoutMs", httpS.headersTimeoutMs ?? 10_000),
    requestTimeoutMs: positive("http.requestTimeoutMs", httpS.requestTimeoutMs ?? 30_000),
    keepAliveTimeoutMs: positive("http.keepAliveTimeoutMs", httpS.keepAliveTimeoutMs ?? 72_000),
    maxConnections: positive("http.maxConnections", httpS.maxConnections ?? 1_000),
    idempotencyWindowMs: positive("http.idempotencyWindowMs", httpS.idempotencyWindowMs ?? 24 * 3_600_000),
    drainDelayMs: nonNegative("http.drainDelayMs", httpS.drainDelayMs ?? 0),
    leaseMs: positive("signals.leaseMs", signals.leaseMs ?? 30_000),
    concurrency: positive("signals.concurrency", signals.concurrency ?? 16),
    prefetch: nonNegative("signals.prefetch", signals.prefetch ?? signals.concurrency ?? 16),
    claimAtEmit: boolean("signals.claimAtEmit", signals.claimAtEmit ?? true),
    retentionMs: positive("signals.retentionMs", signals.retentionMs ?? 24 * 3_600_000),
    durableLeaseMs: positive("durable.leaseMs", durable.leaseMs ?? 30_000),
    durableRetentionMs: positive("durable.retentionMs", durable.retentionMs ?? 7 * 24 * 3_600_000),
    durableConcurrency: positiveWhole("durable.concurrency", durable.concurrency ?? 32),
    durableMaxRecoveries: nonNegative("durable.maxRecoveries", durable.maxRecoveries ?? 10),
    liveMaxConnections: positive("live.maxConnections", live.maxConnections ?? 10_000),
    liveMaxBufferBytes: positive("live.maxBufferBytes", live.maxBufferBytes ?? 1024 * 1024),
    liveHeartbeatMs: positive("live.heartbeatMs", live.heartbeatMs ?? 15_000),
    shutdownTimeoutMs: positive(
      "shutdownTimeoutMs",
      over.shutdownTimeoutMs ?? base.shutdownTimeoutMs ?? 10_000,
    ),
    role: checkRole(
      instance.role !== undefined ? "instance.role" : "OKE_ROLE",
      instance.role ?? (vars.OKE_ROLE || undefined) ?? "all",
    ),
    console: pick("console"),
  };
}

/** Refuses a role okengine does not have (OKE1094), naming where it came from. */
export function checkRole(from: string, role: unknown): InstanceRole {
  if (typeof role === "string" && (INSTANCE_ROLES as readonly string[]).includes(role))
    return role as InstanceRole;
  throw new OkeError({
    code: "OKE1094",
    message: `oke boot: ${from} must be all, web or worker, got ${JSON.stringify(role) ?? String(role)}`,
    fix: "all (the default) serves HTTP and runs the background work; web serves HTTP only; worker runs the background work only.",
  });
}

/** Loopback unless told otherwise: `HOST` counts outside dev, where a shell's stray HOST must not open the port to the network. */
function bindHost(configured: string | undefined, env: Env, vars: NodeJS.ProcessEnv): string {
  if (configured !== undefined && configured !== "") return configured;
  if (env !== "dev" && vars.HOST) return vars.HOST;
  return "127.0.0.1";
}

function defaultJournal(env: Env, databaseUrl: string | undefined): JournalDriverName {
  if (env === "test") return "memory";
  if (databaseUrl) return "postgres";
  // prod without a database is refused by the postgres check above.
  return env === "prod" ? "postgres" : "file";
}
