/** A job's checkpoints: step, size, a download of the weights (owner only), clone from it. */
import { useEffect, useState } from "preact/hooks";
import { client, ok } from "../api/http";
import type { Job } from "../api/types";
import { formatBytes, formatTime } from "../lib/format";
import { problemText } from "../lib/problems";
import { Link } from "../router";
import type { components } from "../api/schema";
import { TableHead } from "./bits";

type Listing = components["schemas"]["CheckpointListOut"];

export function JobCheckpoints({ job, version }: { job: Job; version: string }) {
  const [listing, setListing] = useState<Listing | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    ok(client.GET("/api/jobs/{job_id}/checkpoints", { params: { path: { job_id: job.id } } }))
      .then(setListing)
      .catch((err: unknown) => setError(problemText(err)));
  }, [job.id, version]);

  return (
    <div data-testid="job-checkpoints">
      <h2>Checkpoints</h2>
      {error && <p class="error" role="alert">{error}</p>}
      {listing === null ? (
        <p class="muted">Loading…</p>
      ) : listing.checkpoints.length === 0 ? (
        <p class="muted">No checkpoints on disk.</p>
      ) : (
        <div class="table-scroll" tabIndex={0} role="region" aria-label="Checkpoints">
          <table class="jobs">
            <TableHead columns={["Step", "Attempt", "Size", "Saved", ""]} />
            <tbody>
              {listing.checkpoints.map((c) => (
                <tr key={`${c.attempt}-${c.step}`} data-testid={`checkpoint-${c.step}`}>
                  <td>{c.step}</td>
                  <td>{c.attempt}</td>
                  <td>{formatBytes(c.size_bytes)}</td>
                  <td>{formatTime(c.saved_at)}</td>
                  <td class="actions">
                    <a
                      class="button secondary"
                      href={`/api/jobs/${job.id}/checkpoints/${c.step}/download`}
                      download={`job-${job.id}-step-${c.step}.pt`}
                      title="The model's weights as one state dict for torch.load(path, weights_only=True); the job's owner only"
                      data-testid={`download-${c.step}`}
                    >
                      Download .pt
                    </a>
                    <Link
                      href={`/submit?clone=${job.id}&from_step=${c.step}`}
                      class="button secondary"
                      data-testid={`clone-from-${c.step}`}
                      title="Opens the submit form filled with this job's spec: change hyperparameters or devices, then submit"
                    >
                      Clone from step {c.step}…
                    </Link>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {listing.more > 0 && (
            <p class="muted" data-testid="checkpoints-more">
              {listing.more} older of {listing.total} not shown
            </p>
          )}
        </div>
      )}
    </div>
  );
}
