/**
 * A banner on every page while the executor's cluster manager (Slurm) does not answer: running
 * jobs go on, nothing new starts, and what the pages show is as last seen. The words are the
 * server's (GET /api/executor); under Trainboard's own node pool it never shows and asks once.
 */
import { useEffect, useState } from "preact/hooks";
import { client, ok } from "../api/http";

/** How often the banner asks again under an executor with a cluster manager (ms). */
export const EXECUTOR_POLL_MS = 10_000;

export function ExecutorBanner() {
  const [warning, setWarning] = useState<string | null>(null);
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let current = true;
    const load = () =>
      ok(client.GET("/api/executor"))
        .then((status) => {
          if (!current) return;
          setWarning(status.warning ?? null);
          // the node pool has no manager to lose: one answer is enough
          if (status.executor !== "nodes") timer = setTimeout(load, EXECUTOR_POLL_MS);
        })
        .catch(() => {
          if (current) timer = setTimeout(load, EXECUTOR_POLL_MS);
        });
    void load();
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, []);
  if (!warning) return null;
  return (
    <div class="conn-banner" role="status" data-testid="executor-warning">
      {warning} — running jobs go on; nothing new starts until it answers; job states are as last seen.
    </div>
  );
}
