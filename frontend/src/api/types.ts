/** Friendly names for the generated OpenAPI types (src/api/schema.d.ts; `npm run gen:api`). */
import type { components } from "./schema";

type Schemas = components["schemas"];

export type Job = Schemas["JobOut"];
export type JobSpec = Schemas["JobSpec"];
export type JobEvent = Schemas["EventOut"];
export type Me = Schemas["Me"];
export type Node = Schemas["NodeOut"];
export type Device = Schemas["DeviceOut"];
export type Template = Schemas["TemplateOut"];
export type HyperParameter = Schemas["HParamOut"];
export type LogLine = Schemas["LogOut"];
export type ValidationIssue = Schemas["ValidationError"];
export type Strategy = Schemas["Strategy"];
export type Precision = Schemas["Precision"];
export type Priority = Schemas["Priority"];
export type Comparison = Schemas["Comparison"];
export type AttemptDevices = Schemas["AttemptDevices"];
export type DeviceFit = Schemas["DeviceFit"];

/** A job's state and what it accepts now: enums of the OpenAPI schema, never kept by hand. */
export type JobState = Schemas["JobState"];
export type JobAction = Schemas["JobAction"];

/**
 * Websocket-only items. They are not in the OpenAPI schema (no REST route returns them), so
 * they mirror workers/contract/protocol.py MetricPoint / DeviceSample / AttemptEvent by hand.
 */
export interface MetricPoint {
  attempt_id: number;
  rank: number;
  step: number;
  name: string;
  value: number;
  time: number;
}
export interface DeviceSample {
  node: string;
  device: number;
  kind: "gpu" | "cpu" | string;
  time: number;
  util?: number | null;
  mem_used?: number | null;
  mem_total?: number | null;
  temperature?: number | null;
  power?: number | null;
  attempt_id?: number | null;
  rank?: number | null;
}
export interface AttemptEvent {
  attempt_id: number;
  kind: string;
  message: string;
  step: number | null;
  time: number;
}

/** Columnar metric series in a `job:<id>` snapshot: one entry per point. */
export interface SnapshotSeries {
  step: number[];
  time: number[];
  value: number[];
  rank: number[];
}

/** Message payloads by topic (docs/architecture.md, "Websocket /api/ws"). */
export interface JobsSnapshot {
  jobs: Job[];
}
export interface JobsDelta {
  job: Job;
}
export interface JobTopicData {
  job?: Job;
  metrics?: Record<string, SnapshotSeries> | MetricPoint[];
  logs?: LogLine[];
  events?: AttemptEvent[];
}
/** A node's machine load and data disk from one heartbeat, live on `cluster`. */
export type HostUpdate = Schemas["HostOut"] & { node: string; time: number; disk?: Schemas["DiskOut"] | null };
export interface ClusterData {
  nodes?: Node[];
  samples?: DeviceSample[];
  hosts?: HostUpdate[];
}
