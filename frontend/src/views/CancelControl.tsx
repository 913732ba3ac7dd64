/** Cancel with a confirm step: the first click asks, the second cancels. */
import { useState } from "preact/hooks";
import { api } from "../api/http";
import type { Job } from "../api/types";

export function CancelControl({ job, onCancelled }: { job: Job; onCancelled: (job: Job) => void }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const confirm = async () => {
    setBusy(true);
    setError(null);
    try {
      const updated = await api<Job | null>(`/api/jobs/${job.id}/cancel`, { method: "POST" });
      if (updated && typeof updated === "object" && "state" in updated) onCancelled(updated);
      setAsking(false);
    } catch (err) {
      setError(String(err));
    } finally {
      setBusy(false);
    }
  };

  if (!asking) {
    return (
      <button type="button" class="danger" data-testid="cancel-button" onClick={() => setAsking(true)}>
        Cancel job
      </button>
    );
  }
  return (
    <span class="confirm" role="group" aria-label="Confirm cancel">
      <span>Cancel “{job.name}”? A running job saves a final checkpoint first.</span>
      <button type="button" class="danger" data-testid="confirm-button" disabled={busy} onClick={confirm} autofocus>
        {busy ? "Cancelling…" : "Yes, cancel"}
      </button>
      <button type="button" class="secondary" data-testid="confirm-dismiss" onClick={() => setAsking(false)}>
        Keep it
      </button>
      {error && (
        <span class="error" role="alert">
          {error}
        </span>
      )}
    </span>
  );
}
