/** Cancel, pause, resume (on a chosen device count) and clone; each confirms what it will do. */
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { client, ok } from "../api/http";
import type { Job } from "../api/types";
import { resumeText } from "../lib/runShape";
import { useEscape } from "../lib/keys";
import { Link } from "../router";

type Asking = "cancel" | "pause" | "resume" | null;

export function JobActions({ job, onChanged }: { job: Job; onChanged: (job: Job) => void }) {
  const [asking, setAsking] = useState<Asking>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const current = job.spec.parallelism?.devices ?? job.devices.length;
  const [devices, setDevices] = useState(String(current));

  const run = async (action: "cancel" | "pause" | "resume", devices?: number) => {
    setBusy(true);
    setError(null);
    const path = { path: { job_id: job.id } };
    try {
      const updated = await ok(
        action === "resume"
          ? client.POST("/api/jobs/{job_id}/resume", { params: path, body: devices === undefined ? {} : { devices } })
          : client.POST(action === "cancel" ? "/api/jobs/{job_id}/cancel" : "/api/jobs/{job_id}/pause", { params: path }),
      );
      onChanged(updated);
      setAsking(null);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };

  const ask = (what: Asking) => {
    setError(null);
    setDevices(String(current));
    setAsking(what);
  };

  // Escape dismisses the open confirmation (wherever the focus is), like "Keep it"
  useEscape(asking === null || busy ? null : () => setAsking(null));

  if (asking === null) {
    return (
      <span class="actions">
        {job.actions.includes("pause") && (
          <button type="button" class="secondary" data-testid="pause-button" onClick={() => ask("pause")}>
            Pause
          </button>
        )}
        {job.actions.includes("resume") && (
          <button type="button" data-testid="resume-button" onClick={() => ask("resume")}>
            Resume…
          </button>
        )}
        <Link href={`/submit?clone=${job.id}`} class="button secondary" data-testid="clone-button">
          Clone…
        </Link>
        {job.actions.includes("cancel") && (
          <button type="button" class="danger" data-testid="cancel-button" onClick={() => ask("cancel")}>
            Cancel job
          </button>
        )}
      </span>
    );
  }

  const wanted = Number(devices);
  const validDevices = Number.isInteger(wanted) && wanted >= 1;
  const panels: Record<Exclude<Asking, null>, { text: ComponentChildren; label: string; go: () => void; danger?: boolean }> = {
    cancel: {
      text: <>Cancel “{job.name}”? A running job saves a final checkpoint first.</>,
      label: busy ? "Cancelling…" : "Yes, cancel",
      go: () => void run("cancel"),
      danger: true,
    },
    pause: {
      text: <>Pause “{job.name}”? Its ranks save a checkpoint and stop; resume it later, on any device count.</>,
      label: busy ? "Pausing…" : "Yes, pause",
      go: () => void run("pause"),
    },
    resume: {
      text: (
        <>
          Resume “{job.name}” from its newest checkpoint.{" "}
          <label for="resume-devices" class="inline">
            Devices:
          </label>{" "}
          <input
            id="resume-devices"
            class="narrow"
            type="number"
            min="1"
            step="1"
            data-testid="resume-devices"
            value={devices}
            onInput={(e) => setDevices(e.currentTarget.value)}
          />{" "}
          <span data-testid="resume-summary">{resumeText(wanted, current)}</span>
        </>
      ),
      label: busy ? "Resuming…" : "Resume",
      go: () => void run("resume", validDevices && wanted !== current ? wanted : undefined),
    },
  };
  const panel = panels[asking];
  return (
    <span class="confirm" role="group" aria-label={`Confirm ${asking}`} data-testid={`confirm-${asking}`}>
      <span>{panel.text}</span>
      <button
        type="button"
        class={panel.danger ? "danger" : undefined}
        data-testid="confirm-button"
        disabled={busy || (asking === "resume" && !validDevices)}
        onClick={panel.go}
        autofocus
      >
        {panel.label}
      </button>
      <button type="button" class="secondary" data-testid="confirm-dismiss" onClick={() => setAsking(null)}>
        Keep it
      </button>
      {error && (
        <span class="error" role="alert" data-testid="action-error">
          {error}
        </span>
      )}
    </span>
  );
}
