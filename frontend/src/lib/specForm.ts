/** The submit form's state (strings, as typed) and its conversion to a JobSpec body. */
import type { HyperParameter, Precision, Priority, Strategy, Template } from "../api/types";
import { formatEnv, parseEnv } from "./envVars";
import { hasServer, type Reduce, type Server, type Update } from "./updateMode";

/** What the job runs: one of the server's templates, or the user's own script or module. */
export type SubmitMode = "template" | "script";

export interface SpecForm {
  name: string;
  mode: SubmitMode;
  template: string;
  /** Script mode: a path under the server's TRAINBOARD_SCRIPT_ROOTS, or a dotted module name. */
  script: string;
  module: string;
  /** Script mode: arguments, one per line or a shell-like list (see parseArgs). */
  args: string;
  strategy: Strategy;
  devices: string;
  pipelineStages: string;
  microbatches: string;
  /** Data strategy only: when replicas update, how a sync step's gradients meet (lib/updateMode.ts). */
  update: Update;
  reduce: Reduce;
  /** Sync parameter server and async: the server on rank 0 or a rank of its own. */
  server: Server;
  /** local_sgd: steps between averages; async: the staleness bound (empty: none). */
  syncEvery: string;
  maxStaleness: string;
  precision: Precision;
  gradAccum: string;
  checkpointEvery: string;
  priority: Priority;
  tags: string;
  /** The job's own environment variables, NAME=value per line (lib/envVars.ts). */
  env: string;
  /** Queue it even if no registered node could hold it (spec wait_for_capacity). */
  waitForCapacity: boolean;
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
    mode: "template",
    template: template?.name ?? "",
    script: "",
    module: "",
    args: "",
    strategy: "data",
    devices: "1",
    pipelineStages: "2",
    microbatches: "4",
    update: "sync",
    reduce: "allreduce",
    server: "rank0",
    syncEvery: "8",
    maxStaleness: "",
    precision: "fp32",
    gradAccum: "1",
    checkpointEvery: "",
    priority: "normal",
    tags: "",
    env: "",
    waitForCapacity: false,
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

/**
 * Arguments as typed → the argv list. Each line is split like a shell would (whitespace
 * separates; '...' keeps everything literally; "..." and a backslash escape), so one argument
 * per line and `--lr 0.1 --name "my run"` both work. A quote left open closes at the line's end.
 */
export function parseArgs(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    let current = "";
    let started = false;
    let quote: "'" | '"' | null = null;
    for (let i = 0; i < line.length; i += 1) {
      const ch = line[i]!;
      if (quote === "'") {
        if (ch === "'") quote = null;
        else current += ch;
      } else if (quote === '"') {
        if (ch === '"') quote = null;
        else if (ch === "\\" && i + 1 < line.length && /["\\$`]/.test(line[i + 1]!)) current += line[++i];
        else current += ch;
      } else if (/\s/.test(ch)) {
        if (started) out.push(current);
        current = "";
        started = false;
      } else {
        started = true;
        if (ch === "'" || ch === '"') quote = ch;
        else if (ch === "\\" && i + 1 < line.length) current += line[++i];
        else current += ch;
      }
    }
    if (started) out.push(current);
  }
  return out;
}

/** An argv list → text that parseArgs reads back: one argument per line, quoted when needed. */
export function formatArgs(args: readonly string[]): string {
  return args.map((a) => (a !== "" && /^[^\s'"\\]+$/.test(a) ? a : `'${a.replace(/'/g, `'"'"'`)}'`)).join("\n");
}

/** The JobSpec JSON to POST; fields the strategy ignores are left at their defaults. */
export function toSpec(form: SpecForm, template: Template | undefined): Record<string, unknown> {
  const hps = new Map((template?.hyperparameters ?? []).map((hp) => [hp.name, hp]));
  const parallelism: Record<string, unknown> = { strategy: form.strategy, devices: numberOrText(form.devices) };
  if (form.strategy === "hybrid") parallelism.pipeline_stages = numberOrText(form.pipelineStages);
  if (form.strategy !== "data") parallelism.microbatches = numberOrText(form.microbatches);
  else Object.assign(parallelism, updateFields(form));
  const tags = form.tags
    .split(/[,\s]+/)
    .map((t) => t.trim())
    .filter(Boolean);
  // A script job names no template and sends no hyperparameters (the spec checks those only
  // against a template; the program reads its own settings from its arguments).
  const target =
    form.mode === "script"
      ? { entrypoint: entrypointOf(form) }
      : {
          template: form.template || null,
          hyperparameters: Object.fromEntries(
            Object.entries(form.hyperparameters).map(([name, value]) => [name, hpValue(hps.get(name), value)]),
          ),
        };
  return {
    name: form.name,
    ...target,
    parallelism,
    precision: form.precision,
    grad_accum: numberOrText(form.gradAccum),
    checkpoint: { every_steps: form.checkpointEvery.trim() === "" ? null : numberOrText(form.checkpointEvery) },
    priority: form.priority,
    tags,
    // refused variables are the server's to name (422 at env); the form checks first
    ...(form.env.trim() ? { env: parseEnv(form.env).env } : {}),
    ...(form.waitForCapacity ? { wait_for_capacity: true } : {}),
  };
}

/** The update-mode fields of a data-parallel job; the defaults (sync, all-reduce) are left out. */
function updateFields(form: SpecForm): Record<string, unknown> {
  if (form.update === "local_sgd") return { update: "local_sgd", sync_every: numberOrText(form.syncEvery) };
  const server = hasServer(form.update, form.reduce) && form.server === "dedicated" ? { server: "dedicated" } : {};
  if (form.update === "async") {
    const bound = form.maxStaleness.trim() === "" ? {} : { max_staleness: numberOrText(form.maxStaleness) };
    return { update: "async", ...bound, ...server };
  }
  return form.reduce === "parameter_server" ? { reduce: "parameter_server", ...server } : {};
}

/** Script mode's entrypoint: whichever of script / module is filled (both or neither: the server says which to give). */
function entrypointOf(form: SpecForm): Record<string, unknown> {
  const entrypoint: Record<string, unknown> = {};
  if (form.script.trim() !== "") entrypoint.script = form.script.trim();
  if (form.module.trim() !== "") entrypoint.module = form.module.trim();
  entrypoint.args = parseArgs(form.args);
  return entrypoint;
}

/** Fill a form from a pasted spec object (unknown keys are left for the server to refuse). */
export function formFromSpec(spec: Record<string, unknown>, base: SpecForm): SpecForm {
  const par = (spec.parallelism ?? {}) as Record<string, unknown>;
  const checkpoint = (spec.checkpoint ?? {}) as Record<string, unknown>;
  const text = (v: unknown, fallback: string) => (v === undefined || v === null ? fallback : String(v));
  const hps = (spec.hyperparameters ?? {}) as Record<string, unknown>;
  const entry = spec.entrypoint && typeof spec.entrypoint === "object" ? (spec.entrypoint as Record<string, unknown>) : null;
  return {
    ...base,
    name: text(spec.name, base.name),
    mode: entry ? "script" : spec.template ? "template" : base.mode,
    template: text(spec.template, base.template),
    script: entry ? text(entry.script, "") : base.script,
    module: entry ? text(entry.module, "") : base.module,
    args: entry ? (Array.isArray(entry.args) ? formatArgs(entry.args.map(String)) : "") : base.args,
    strategy: (par.strategy as Strategy | undefined) ?? base.strategy,
    devices: text(par.devices, base.devices),
    pipelineStages: text(par.pipeline_stages, base.pipelineStages),
    microbatches: text(par.microbatches, base.microbatches),
    update: (par.update as Update | undefined) ?? base.update,
    reduce: (par.reduce as Reduce | undefined) ?? base.reduce,
    server: (par.server as Server | undefined) ?? base.server,
    syncEvery: text(par.sync_every, base.syncEvery),
    maxStaleness: text(par.max_staleness, base.maxStaleness),
    precision: (spec.precision as Precision | undefined) ?? base.precision,
    gradAccum: text(spec.grad_accum, base.gradAccum),
    checkpointEvery: text(checkpoint.every_steps, ""),
    priority: (spec.priority as Priority | undefined) ?? base.priority,
    tags: Array.isArray(spec.tags) ? spec.tags.join(", ") : base.tags,
    env: spec.env && typeof spec.env === "object" ? formatEnv(spec.env as Record<string, string>) : base.env,
    waitForCapacity: spec.wait_for_capacity === true || base.waitForCapacity,
    hyperparameters: {
      ...base.hyperparameters,
      ...Object.fromEntries(Object.entries(hps).map(([k, v]) => [k, typeof v === "boolean" ? v : String(v)])),
    },
  };
}
