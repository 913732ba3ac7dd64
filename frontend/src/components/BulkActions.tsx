/** The board's actions on selected rows: cancel, archive or restore them all at once. */
import { useEffect, useState } from "preact/hooks";
import { client, ok } from "../api/http";
import type { Job } from "../api/types";
import { problemText } from "../lib/problems";

type Action = "cancel" | "archive" | "unarchive";
const DONE: Record<Action, string> = { cancel: "cancelled", archive: "archived", unarchive: "restored" };

export function BulkActions({ picked, onDone }: { picked: number[]; onDone: () => void }) {
  const [result, setResult] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const run = async (action: Action) => {
    setBusy(true);
    try {
      const answers = await ok(client.POST("/api/jobs/bulk", { body: { ids: picked, action } }));
      const refused = answers.filter((a) => !a.ok);
      const done = answers.length - refused.length;
      setResult([`${done} ${DONE[action]}`, ...refused.map((a) => `#${a.id}: ${a.detail}`)].join("; "));
      onDone();
    } catch (err) {
      setResult(problemText(err));
    } finally {
      setBusy(false);
    }
  };
  if (!picked.length) return result ? <span class="muted small" data-testid="bulk-result">{result}</span> : null;
  return (
    <span class="actions" data-testid="bulk-actions">
      <button type="button" class="danger" disabled={busy} data-testid="bulk-cancel" onClick={() => void run("cancel")}>
        Cancel {picked.length}
      </button>
      <button type="button" class="secondary" disabled={busy} data-testid="bulk-archive" onClick={() => void run("archive")}>
        Archive {picked.length}
      </button>
      <button type="button" class="ghost" disabled={busy} data-testid="bulk-restore" onClick={() => void run("unarchive")}>
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
