/**
 * What a job ran: what its node recorded (script tree hash, git commit and diff, template)
 * and, kept apart and labelled so, what the job's own interpreter reported. Compare diffs them.
 */
import { useEffect, useState } from "preact/hooks";
import { client, ok } from "../api/http";
import type { components } from "../api/schema";
import { problemText } from "../lib/problems";

type Provenance = components["schemas"]["ProvenanceOut"];
type Diff = components["schemas"]["ProvenanceDiff"];
type Loose = Record<string, unknown> | null | undefined;

const at = (value: Loose, path: string): unknown =>
  path.split(".").reduce<unknown>((v, key) => (v && typeof v === "object" ? (v as Record<string, unknown>)[key] : undefined), value);
const text = (value: unknown): string => (value === null || value === undefined || value === "" ? "—" : String(value));

export function JobProvenance({ jobId, version }: { jobId: number; version: string }) {
  const [data, setData] = useState<Provenance | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    ok(client.GET("/api/jobs/{job_id}/provenance", { params: { path: { job_id: jobId } } }))
      .then(setData)
      .catch((err: unknown) => setError(problemText(err)));
  }, [jobId, version]);
  if (error) return <p class="error">{error}</p>;
  if (!data) return null;
  const recorded = data.recorded as Loose;
  const reported = data.reported as Loose;
  const git = at(recorded, "script.git") as Loose;
  const packages = (at(reported, "packages") as string[] | undefined) ?? [];
  return (
    <div data-testid="job-provenance">
      <h2>Provenance</h2>
      {!recorded ? (
        <p class="muted">Recorded when its first attempt starts.</p>
      ) : (
        <dl class="facts">
          <dt>Recorded by node</dt>
          <dd>
            {text(at(recorded, "node"))} (attempt {text(at(recorded, "attempt"))})
          </dd>
          {at(recorded, "template") ? (
            <>
              <dt>Template</dt>
              <dd>{text(at(recorded, "template"))}</dd>
            </>
          ) : (
            <>
              <dt>Script</dt>
              <dd data-testid="prov-script">
                {text(at(recorded, "script.entrypoint"))} in {text(at(recorded, "script.root"))}
              </dd>
              <dt>Script tree sha256</dt>
              <dd data-testid="prov-sha">
                <code>{text(at(recorded, "script.sha256")).slice(0, 16)}</code> ({text(at(recorded, "script.files"))} files
                {at(recorded, "script.complete") === false ? `; partial: ${[at(recorded, "script.limits") ?? []].flat().map(String).join("; ") || "more than the cap"}` : ""})
              </dd>
              <dt>Git</dt>
              <dd data-testid="prov-git">
                {git ? (
                  <>
                    <code>{text(at(git, "commit")).slice(0, 12)}</code> {text(at(git, "branch"))}
                    {at(git, "dirty") ? <strong> + uncommitted changes</strong> : " (clean)"}
                    {at(git, "diff") ? (
                      <details>
                        <summary>Diff{at(git, "diff_truncated") ? " (first 64 KiB)" : ""}</summary>
                        <pre class="diff" tabIndex={0} aria-label="Uncommitted changes">{text(at(git, "diff"))}</pre>
                      </details>
                    ) : null}
                    {at(git, "diff_note") ? <div class="muted small" data-testid="prov-diff-note">{text(at(git, "diff_note"))}</div> : null}
                  </>
                ) : (
                  "not a git checkout"
                )}
              </dd>
            </>
          )}
          <dt>Trainboard</dt>
          <dd>
            <code>{text(at(recorded, "trainboard")).slice(0, 12)}</code>
          </dd>
        </dl>
      )}
      {reported && (
        <dl class="facts reported" data-testid="prov-reported">
          <dt class="label">As reported by the job</dt>
          <dd class="muted">printed by its own interpreter, run as the job's user: not verified</dd>
          {"error" in reported ? (
            <>
              <dt>Error</dt>
              <dd>{text(reported.error)}</dd>
            </>
          ) : (
            <>
              <dt>Python</dt>
              <dd data-testid="prov-python">
                {text(reported.python)} <span class="muted">{text(reported.executable)}</span>
              </dd>
              <dt>torch</dt>
              <dd data-testid="prov-torch">
                {text(reported.torch)}
                {reported.cuda ? ` (CUDA ${text(reported.cuda)})` : ""}
              </dd>
              <dt>Packages</dt>
              <dd>
                <details>
                  <summary data-testid="prov-packages">{packages.length} installed</summary>
                  <pre>{packages.join("\n")}</pre>
                </details>
              </dd>
            </>
          )}
        </dl>
      )}
    </div>
  );
}

/** Compare: the provenance fields (and packages) whose values differ between the jobs. */
export function ProvenanceDiff({ ids }: { ids: number[] }) {
  const [diff, setDiff] = useState<Diff | null>(null);
  useEffect(() => {
    if (ids.length < 2) return;
    ok(client.GET("/api/provenance/diff", { params: { query: { ids } } }))
      .then(setDiff)
      .catch(() => setDiff(null));
  }, [ids.join(",")]);
  if (!diff) return null;
  return (
    <div data-testid="provenance-diff">
      <h2>Provenance</h2>
      {diff.differences.length === 0 ? (
        <p class="muted" data-testid="provenance-same">
          {diff.jobs.some((j) => !j.recorded) ? "Not recorded for every job yet." : "The same code and environment."}
        </p>
      ) : (
        <div class="table-scroll" tabIndex={0} role="region" aria-label="Provenance">
          <table class="jobs prov-diff">
            <thead>
              <tr>
                <th scope="col">Differs</th>
                {diff.jobs.map((j) => (
                  <th scope="col">#{j.job_id}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {diff.differences.map((row) => (
                <tr data-testid={`prov-diff-${String(row.field)}`}>
                  <td>
                    {String(row.field)}
                    {String(row.field).startsWith("recorded") ? "" : <span class="muted small"> (reported)</span>}
                  </td>
                  {(row.values as unknown[]).map((v) => (
                    <td>
                      <div class="clamp" title={text(v)}>
                        {text(v)}
                      </div>
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
