/**
 * A starting job's phases (#33 item 6): the supervisor reports each as a `startup:*` event
 * (workers/supervisor/startup.py), live through the job topic's `events` deltas, so the page
 * says what the ranks do between `running` and the first step instead of blank charts.
 */
import type { Job, JobEvent } from "../api/types";

const PHASES: [kind: string, label: string][] = [
  ["startup:ranks", "ranks starting"],
  ["startup:imported", "interpreter and torch imported"],
  ["startup:rendezvous", "rendezvous"],
  ["startup:data", "model and data ready"],
  ["startup:first_step", "first step"],
];
/** "(3.1 s; 4.2 s since the ranks started)" at the end of a phase's message: how long it took. */
const TOOK = /\((\d+(?:\.\d+)?) s; (\d+(?:\.\d+)?) s since the ranks started\)$/;

export function StartupPhases({ job, events }: { job: Job; events: JobEvent[] }) {
  if (job.state !== "running" && job.state !== "scheduled") return null;
  // the current attempt: the newest event that names one (its placement, start, phases)
  const current = [...events].reverse().find((e) => e.attempt_id != null)?.attempt_id;
  const reached = new Map(
    events.filter((e) => e.attempt_id === current && e.kind.startsWith("startup:")).map((e) => [e.kind, e]),
  );
  if (reached.has("startup:first_step") && job.state === "running" && (job.step ?? 0) > 0) {
    const total = TOOK.exec(reached.get("startup:first_step")!.message)?.[2];
    return (
      <p class="muted" data-testid="startup-phases" data-done="true">
        Started in {total ?? "?"} s ({PHASES.map(([kind, label]) => phaseText(label, reached.get(kind))).join(" · ")})
      </p>
    );
  }
  const next = PHASES.findIndex(([kind]) => !reached.has(kind));
  return (
    <ol class="startup-phases" data-testid="startup-phases" aria-label="Start-up" style={{ listStyle: "none", paddingLeft: 0, display: "flex", flexWrap: "wrap", gap: "0 1.2em" }}>
      {PHASES.map(([kind, label], i) => {
        const event = reached.get(kind);
        const state = event ? "done" : i === next ? "now" : "later";
        return (
          <li data-testid={`startup-${kind.slice("startup:".length)}`} data-state={state} class={state === "later" ? "muted" : undefined} title={event?.message}>
            {state === "done" ? "✓ " : state === "now" ? "… " : ""}
            {phaseText(label, event)}
          </li>
        );
      })}
    </ol>
  );
}

function phaseText(label: string, event: JobEvent | undefined): string {
  const took = event ? TOOK.exec(event.message)?.[1] : undefined;
  return took ? `${label} ${took} s` : label;
}
