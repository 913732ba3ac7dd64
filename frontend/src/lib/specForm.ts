/** The submit form's state (strings, as typed) and its conversion to a JobSpec body. */
import type { HyperParameter, Precision, Priority, Strategy, Template } from "../api/types";
import { implications, type ParallelInput } from "./implications";

export interface SpecForm {
  name: string;
  template: string;
  strategy: Strategy;
  devices: string;
  pipelineStages: string;
  microbatches: string;
  precision: Precision;
  gradAccum: string;
  checkpointEvery: string;
  priority: Priority;
  tags: string;
  hyperparameters: Record<string, string | boolean>;
}

/** Input text for a hyperparameter's default. */
function initialValue(hp: HyperParameter): string | boolean {
  return typeof hp.default === "boolean" ? hp.default : String(hp.default ?? "");
}

export function defaultHyperparameters(template: Template | undefined): Record<string, string | boolean> {
  return Object.fromEntries((template?.hyperparameters ?? []).map((hp) => [hp.name, initialValue(hp)]));
}

export function initialForm(template: Template | undefined): SpecForm {
  return {
    name: "",
    template: template?.name ?? "",
    strategy: "data",
    devices: "1",
    pipelineStages: "2",
    microbatches: "4",
    precision: "fp32",
    gradAccum: "1",
    checkpointEvery: "",
    priority: "normal",
    tags: "",
    hyperparameters: defaultHyperparameters(template),
  };
}

/** A number when the text is one; otherwise the text, so the server names the problem. */
function numberOrText(text: string): number | string {
  const trimmed = text.trim();
  return trimmed !== "" && Number.isFinite(Number(trimmed)) ? Number(trimmed) : text;
}

function hpValue(hp: HyperParameter | undefined, value: string | boolean): unknown {
  if (typeof value === "boolean") return value;
  if (hp && (hp.type === "string" || hp.choices)) return value;
  return numberOrText(value);
}

/** The JobSpec JSON to POST; fields the strategy ignores are left at their defaults. */
export function toSpec(form: SpecForm, template: Template | undefined): Record<string, unknown> {
  const hps = new Map((template?.hyperparameters ?? []).map((hp) => [hp.name, hp]));
  const parallelism: Record<string, unknown> = { strategy: form.strategy, devices: numberOrText(form.devices) };
  if (form.strategy === "hybrid") parallelism.pipeline_stages = numberOrText(form.pipelineStages);
  if (form.strategy !== "data") parallelism.microbatches = numberOrText(form.microbatches);
  const tags = form.tags
    .split(/[,\s]+/)
    .map((t) => t.trim())
    .filter(Boolean);
  return {
    name: form.name,
    template: form.template || null,
    parallelism,
    hyperparameters: Object.fromEntries(
      Object.entries(form.hyperparameters).map(([name, value]) => [name, hpValue(hps.get(name), value)]),
    ),
    precision: form.precision,
    grad_accum: numberOrText(form.gradAccum),
    checkpoint: { every_steps: form.checkpointEvery.trim() === "" ? null : numberOrText(form.checkpointEvery) },
    priority: form.priority,
    tags,
  };
}

const asInt = (text: string): number | null => (/^\s*\d+\s*$/.test(text) ? Number(text) : null);

/** What the form implies right now, or null while a number field is not a number yet. */
export function formImplications(form: SpecForm) {
  const devices = asInt(form.devices);
  const microbatches = form.strategy === "data" ? 1 : asInt(form.microbatches);
  const stages = form.strategy === "hybrid" ? asInt(form.pipelineStages) : null;
  const gradAccum = asInt(form.gradAccum);
  const batch = form.hyperparameters.batch_size;
  if (devices === null || devices < 1 || microbatches === null || microbatches < 1 || gradAccum === null) return null;
  if (form.strategy === "hybrid" && (stages === null || stages < 1)) return null;
  const input: ParallelInput = {
    strategy: form.strategy,
    devices,
    pipelineStages: stages,
    microbatches,
    batchSize: typeof batch === "string" ? asInt(batch) : null,
    gradAccum,
  };
  return implications(input);
}

/** Fill a form from a pasted spec object (unknown keys are left for the server to refuse). */
export function formFromSpec(spec: Record<string, unknown>, base: SpecForm): SpecForm {
  const par = (spec.parallelism ?? {}) as Record<string, unknown>;
  const checkpoint = (spec.checkpoint ?? {}) as Record<string, unknown>;
  const text = (v: unknown, fallback: string) => (v === undefined || v === null ? fallback : String(v));
  const hps = (spec.hyperparameters ?? {}) as Record<string, unknown>;
  return {
    ...base,
    name: text(spec.name, base.name),
    template: text(spec.template, base.template),
    strategy: (par.strategy as Strategy | undefined) ?? base.strategy,
    devices: text(par.devices, base.devices),
    pipelineStages: text(par.pipeline_stages, base.pipelineStages),
    microbatches: text(par.microbatches, base.microbatches),
    precision: (spec.precision as Precision | undefined) ?? base.precision,
    gradAccum: text(spec.grad_accum, base.gradAccum),
    checkpointEvery: text(checkpoint.every_steps, ""),
    priority: (spec.priority as Priority | undefined) ?? base.priority,
    tags: Array.isArray(spec.tags) ? spec.tags.join(", ") : base.tags,
    hyperparameters: {
      ...base.hyperparameters,
      ...Object.fromEntries(Object.entries(hps).map(([k, v]) => [k, typeof v === "boolean" ? v : String(v)])),
    },
  };
}
