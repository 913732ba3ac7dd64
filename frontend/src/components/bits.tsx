/** Small shared pieces: view title bar, state badge, progress bar, field error, device label. */
import type { ComponentChildren } from "preact";
import type { Job } from "../api/types";

/** A view's title bar: its title (a badge beside it), then its controls at the far end. */
export function ViewHead({ title, badge, children }: { title: ComponentChildren; badge?: ComponentChildren; children?: ComponentChildren }) {
  return (
    <div class="view-head">
      <h1>{title}</h1>
      {badge}
      {children !== undefined && <span class="spacer" />}
      {children}
    </div>
  );
}

export function StateBadge({ state, testId }: { state: string; testId?: string }) {
  return (
    <span class={`badge state-${state}`} data-state={state} data-testid={testId}>
      {state}
    </span>
  );
}

export function Progress({ job }: { job: Pick<Job, "step" | "total_steps"> }) {
  const step = job.step ?? 0;
  const total = job.total_steps ?? null;
  const fraction = total ? Math.min(1, step / total) : 0;
  return (
    <span class="progress" title={total ? `${step} of ${total} steps` : `${step} steps`}>
      <span class="progress-bar" aria-hidden="true">
        <span style={{ width: `${(fraction * 100).toFixed(1)}%` }} />
      </span>
      <span class="progress-text">
        {step.toLocaleString("en-US")}/{total?.toLocaleString("en-US") ?? "?"}
      </span>
    </span>
  );
}

export function FieldError({ field, errors }: { field: string; errors: Map<string, string[]> }) {
  const messages = errors.get(field);
  if (!messages?.length) return null;
  return (
    <div class="field-error" role="alert" data-testid={`field-error-${field || "form"}`}>
      {messages.map((m) => (
        <div>{m}</div>
      ))}
    </div>
  );
}

/** "GPU 0" or, honestly, "CPU slot 0" on a machine without GPUs. */
export function deviceLabel(kind: string | undefined, index: number): string {
  return kind === "cpu" ? `CPU slot ${index}` : `GPU ${index}`;
}

export function JobDevices({ job }: { job: Pick<Job, "node" | "devices"> }) {
  if (!job.node || job.devices.length === 0) return <span class="muted">—</span>;
  return (
    <span>
      {job.node}:{job.devices.join(",")}
    </span>
  );
}

/** A table's header row: one column heading per name ("" for a column without one). */
export function TableHead({ columns }: { columns: string[] }) {
  return (
    <thead>
      <tr>
        {columns.map((name) => (
          <th scope="col">{name}</th>
        ))}
      </tr>
    </thead>
  );
}
