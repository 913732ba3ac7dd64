/**
 * The board's actions on selected rows: cancel (after a confirmation, like a single cancel,
 * and only of the selected jobs that still accept one), archive or restore them all at once.
 */
import { useEffect, useState } from "preact/hooks";
import { client, ok } from "../api/http";
import type { Job } from "../api/types";
import { useEscape } from "../lib/keys";
import { problemText } from "../lib/problems";

type Action = "cancel" | "archive" | "unarchive";
const DONE: Record<Action, string> = { cancel: "cancelled", archive: "archived", unarchive: "restored" };

/** The picked jobs that accept a cancel now (finished ones do not: the server names the actions). */
export function cancellable(picked: number[], jobs: Job[]): number[] {
  const byId = new Map(jobs.map((j) => [j.id, j]));
  return picked.filter((id) => byId.get(id)?.actions.includes("cancel"));
}

export function BulkActions({ picked, jobs, onDone }: { picked: number[]; jobs: Job[]; onDone: () => void }) {
  const [result, setResult] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [asking, setAsking] = useState(false);
  const toCancel = cancellable(picked, jobs);
  // a selection that changes under an open confirmation closes it: it named other jobs
  useEffect(() => setAsking(false), [picked.join(","), toCancel.join(",")]);
  useEscape(asking && !busy ? () => setAsking(false) : null);

  const run = async (action: Action, ids: number[]) => {
    setBusy(true);
    try {
      const answers = await ok(client.POST("/api/jobs/bulk", { body: { ids, action } }));
      const refused = answers.filter((a) => !a.ok);
      const done = answers.length - refused.length;
      setResult([`${done} ${DONE[action]}`, ...refused.map((a) => `#${a.id}: ${a.detail}`)].join("; "));
      setAsking(false);
      onDone();
    } catch (err) {
      setResult(problemText(err));
    } finally {
      setBusy(false);
    }
  };
  if (!picked.length) return result ? <span class="muted small" data-testid="bulk-result">{result}</span> : null;
  if (asking) {
    const finished = picked.length - toCancel.length;
    return (
      <span class="confirm" role="group" aria-label="Confirm cancel" data-testid="confirm-bulk-cancel">
        <span>
          Cancel {toCancel.length === 1 ? "1 job" : `${toCancel.length} jobs`} ({toCancel.map((id) => `#${id}`).join(", ")})? Running ones save a
          final checkpoint first.
          {finished > 0 && ` ${finished} finished ${finished === 1 ? "job stays" : "jobs stay"} as ${finished === 1 ? "it is" : "they are"}.`}
        </span>
        <button type="button" class="danger" disabled={busy} data-testid="bulk-cancel-confirm" onClick={() => void run("cancel", toCancel)} autofocus>
          {busy ? "Cancelling…" : `Yes, cancel ${toCancel.length}`}
        </button>
        <button type="button" class="secondary" disabled={busy} data-testid="bulk-cancel-dismiss" onClick={() => setAsking(false)}>
          Keep them
        </button>
      </span>
    );
  }
  return (
    <span class="actions" data-testid="bulk-actions">
      {toCancel.length > 0 && (
        <button
          type="button"
          class="danger"
          disabled={busy}
          data-testid="bulk-cancel"
          title={toCancel.length < picked.length ? `${picked.length - toCancel.length} of the selected jobs have finished` : undefined}
          onClick={() => (setResult(null), setAsking(true))}
        >
          Cancel {toCancel.length}…
        </button>
      )}
      <button type="button" class="secondary" disabled={busy} data-testid="bulk-archive" onClick={() => void run("archive", picked)}>
        Archive {picked.length}
      </button>
      <button type="button" class="ghost" disabled={busy} data-testid="bulk-restore" onClick={() => void run("unarchive", picked)}>
        Restore {picked.length}
      </button>
      {result && <span class="muted small" data-testid="bulk-result">{result}</span>}
    </span>
  );
}

/** Archived jobs, read only while asked for (the board's live list leaves them out). */
export function useArchivedJobs(show: boolean, version: number): Job[] {
  const [jobs, setJobs] = useState<Job[]>([]);
  useEffect(() => {
    if (!show) return setJobs([]);
    ok(client.GET("/api/jobs", { params: { query: { archived: "only", limit: 500 } } }))
      .then((body) => setJobs(body.jobs))
      .catch(() => setJobs([]));
  }, [show, version]);
  return jobs;
}
