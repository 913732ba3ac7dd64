/** Friendly names for the generated OpenAPI types (src/api/schema.d.ts; `npm run gen:api`). */
import type { components } from "./schema";

type Schemas = components["schemas"];

export type Job = Schemas["Job"];
export type JobState = Job["state"];
export type JobSpec = Schemas["JobSpec"];
export type Implications = Schemas["Implications"];
export type JobEvent = Schemas["JobEvent"];
export type Me = Schemas["Me"];
export type Node = Schemas["Node"];
export type Device = Schemas["Device"];
export type Template = Schemas["Template"];
export type HyperParameter = Schemas["HyperParameter"];
export type MetricPoint = Schemas["MetricPoint"];
export type DeviceSample = Schemas["DeviceSample"];
export type LogLine = Schemas["LogLine"];
export type ValidationIssue = Schemas["ValidationError"];

export type Strategy = NonNullable<NonNullable<JobSpec["parallelism"]>["strategy"]>;
export type Precision = NonNullable<JobSpec["precision"]>;
export type Priority = NonNullable<JobSpec["priority"]>;

/** Columnar metric series in a `job:<id>` snapshot: one entry per point. */
export interface SnapshotSeries {
  step: number[];
  time: number[];
  value: number[];
  rank: number[];
}

/** Messages on the websocket, by topic (see docs/architecture.md, "Websocket /api/ws"). */
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
}
export interface ClusterData {
  nodes?: Node[];
  samples?: DeviceSample[];
}
