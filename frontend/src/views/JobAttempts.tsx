/** Every start of the job (attempt) with its node, devices, checkpoint it resumed from and left. */
import { useEffect, useState } from "preact/hooks";
import { client, ok } from "../api/http";
import type { Job } from "../api/types";
import type { components } from "../api/schema";
import { formatTime } from "../lib/format";
import { TableHead } from "../components/bits";

type Attempt = components["schemas"]["AttemptOut"];

/**
 * Fetched again on every state change, on every live event (a checkpoint is one) and when the
 * wait reason changes (under Slurm the executor stores the Slurm job id at its next pass, and
 * the reason naming it is how the page learns of it while the job is still pending).
 */
export function JobAttempts({ job, eventsVersion }: { job: Job; eventsVersion: number }) {
  const [attempts, setAttempts] = useState<Attempt[] | null>(null);
  useEffect(() => {
    ok(client.GET("/api/jobs/{job_id}/attempts", { params: { path: { job_id: job.id } } })).then(setAttempts, () => {});
  }, [job.id, job.state, job.attempt, job.wait_reason, eventsVersion]);
  if (!attempts?.length) return null;
  return (
    <div>
      <h2>Attempts and checkpoints</h2>
      <div class="table-scroll" tabIndex={0} role="region" aria-label="Attempts">
      <table data-testid="job-attempts">
        <TableHead
          columns={[
            "#", "State", "Node / devices", "Resumed from", "Last checkpoint", "Exit", "Started",
            "Finished"
          ]}
        />
        <tbody>
          {attempts.map((a) => (
            <tr data-testid={`attempt-${a.number}`}>
              <td>{a.number}</td>
              <td>{a.state}</td>
              <td data-testid={`attempt-placement-${a.number}`}>
                {(a.placement?.length ? a.placement : [{ node: a.node, devices: a.devices }])
                  .map((slice) => `${slice.node}:${slice.devices.join(",")}`)
                  .join("; ")}
                {a.slurm_job_id && <span class="muted small"> (Slurm job {a.slurm_job_id})</span>}
              </td>
              <td class="path">{a.resume_from ? shortPath(a.resume_from) : <span class="muted">fresh start</span>}</td>
              <td class="path">{a.last_checkpoint ? shortPath(a.last_checkpoint) : <span class="muted">none</span>}</td>
              <td class="exit" data-testid={`attempt-exit-${a.number}`}>
                <ExitReason text={a.exit_reason} />
              </td>
              <td>{formatTime(a.claimed_at ?? a.created_at)}</td>
              <td>{formatTime(a.finished_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      </div>
    </div>
  );
}

/** A one-line reason as it is; a traceback as its last line, the whole of it on demand. */
function ExitReason({ text }: { text: string | null | undefined }) {
  const lines = (text ?? "").split("\n").filter((l) => l.trim());
  if (lines.length <= 1) return <>{text ?? ""}</>;
  return (
    <details>
      <summary>{lines[lines.length - 1]}</summary>
      <pre class="traceback">{text}</pre>
    </details>
  );
}

/** The last two path parts (…/step-000120) with the full path on hover. */
function shortPath(path: string) {
  const parts = path.split("/").filter(Boolean);
  return <span title={path}>…/{parts.slice(-2).join("/")}</span>;
}
