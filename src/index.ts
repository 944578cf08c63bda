/** okengine's whole public vocabulary. Everything else is internal. */
export { flow } from "./flow/flow.ts";
export type { Flow, FlowOptions } from "./flow/flow.ts";
export { on } from "./flow/on.ts";
export type { Binding, Trigger } from "./flow/on.ts";
export { http } from "./flow/http-trigger.ts";
export type { BareHttpTrigger, HttpMethod, HttpTrigger, HttpTriggerOptions } from "./flow/http-trigger.ts";
export type { Effects } from "./flow/effects.ts";
export { signalReadRef } from "./flow/effects.ts";
export { signal } from "./signal/signal.ts";
export type {
  BroadcastOptions,
  BroadcastSignal,
  LiveOptions,
  LiveSignal,
  OnceOptions,
  OnceSignal,
  PayloadOf,
  SignalHandle,
} from "./signal/signal.ts";
export type { LiveEntry, LiveGap, LiveListener, LiveOptionsRead } from "./signal/live-runtime.ts";
export { channel } from "./channel/channel.ts";
export type { Channel, ChannelOptions, SendDriverName } from "./channel/channel.ts";
export { defineConfig } from "./app/config.ts";
export type { InstanceRole, JournalDriverName, OkeConfig, OkeSettings } from "./app/config.ts";
export { createApp } from "./app/app.ts";
export type {
  App,
  CreateAppOptions,
  Env,
  HttpRoute,
  ModuleInput,
  OperatorApi,
  Readiness,
  Sleeper,
  WakeEarlyResult,
} from "./app/types.ts";
export type {
  Manifest,
  ManifestChannel,
  ManifestClock,
  ManifestFlow,
  ManifestSignal,
} from "./app/manifest.ts";
export { clock, every } from "./clock/schedule.ts";
export type { ClockInput, ClockOptions, ClockSchedule } from "./clock/schedule.ts";
export type {
  ScheduleEdit,
  ScheduleOperatorApi,
  ScheduleView,
  TriggerResult,
} from "./clock/operator-types.ts";
export { createTimeTravel } from "./clock/time-travel.ts";
export type { TimeTravel } from "./clock/time-travel.ts";
export type { Clock } from "./clock/clock.ts";
export type { Duration } from "./clock/duration.ts";
export { duration, isDuration } from "./clock/duration.ts";
export type { Jsonify } from "./fx/jsonify.ts";
export {
  OkeError,
  JournalLeaseBusy,
  ClockResourceNotFoundError,
  ScheduleNotOverridableError,
} from "./errors.ts";
export { StepError } from "./durable/step-errors.ts";
export type {
  DeadLetter,
  EmitOptions,
  Fx,
  FxClock,
  PendingMessage,
  Resource,
  StepOptions,
} from "./fx/types.ts";
export type {
  FailureReason,
  SignalFailureReason,
  JournalEntry,
  RunHold,
  RunRecord,
  RunStatus,
  SignalStats,
  SleepEntry,
} from "./store/types.ts";
export type { Logger } from "./log/logger.ts";
