/** Each rank's Python stacks when the job was flagged hung (GET /api/jobs/{id}/hang-stacks), collapsed. */
import { useEffect, useState } from "preact/hooks";
import { client, ok } from "../api/http";
import type { components } from "../api/schema";
import { formatTime } from "../lib/format";

type HangStack = components["schemas"]["HangStackOut"];

/** Fetched again whenever `version` changes (new events, a new attempt); nothing shown before a hang. */
export function HangStacks({ jobId, version }: { jobId: number; version: string }) {
  const [stacks, setStacks] = useState<HangStack[]>([]);
  useEffect(() => {
    ok(client.GET("/api/jobs/{job_id}/hang-stacks", { params: { path: { job_id: jobId } } })).then(setStacks, () => {});
  }, [jobId, version]);
  if (stacks.length === 0) return null;
  return (
    <section data-testid="hang-stacks">
      <h2>Stacks at hang</h2>
      <p class="muted small">
        Every thread's Python stack of each rank when the job was flagged hung, current thread first (also kept as
        hang-stacks/rank-N.txt in the attempt's log directory on its node).
      </p>
      {stacks.map((s) => (
        <details class="hang-stack" data-testid={`hang-stack-${s.attempt_id}-${s.rank}`}>
          <summary>
            Rank {s.rank}
            <span class="muted">
              {" "}
              · attempt {s.attempt ?? "—"} · step {s.step ?? "—"} · {formatTime(s.time)}
            </span>
          </summary>
          <pre class="traceback" tabIndex={0} aria-label={`Rank ${s.rank} stacks`}>{s.stack}</pre>
        </details>
      ))}
    </section>
  );
}
