/** Pick 2–10 jobs to compare (finished ones first); the comparison's address is the selection. */
import { useMemo } from "preact/hooks";
import { StateBadge, ViewHead } from "../components/bits";
import { MAX_COMPARE, useJobs } from "../data";
import { PickLimit, usePicks } from "../lib/picks";
import { sortedJobs } from "../lib/stores";
import { Link, navigate } from "../router";

/** No selection yet: pick jobs from the list (finished ones first). */
export function ComparePicker({ initial }: { initial: number[] }) {
  const jobs = useJobs();
  const { picked, pick: toggle, refused } = usePicks(MAX_COMPARE, initial);
  const list = useMemo(() => {
    const all = jobs ? sortedJobs(jobs) : [];
    return [...all.filter((j) => j.phase === "finished"), ...all.filter((j) => j.phase !== "finished")];
  }, [jobs]);
  return (
    <section>
      <ViewHead title="Compare jobs">
        <PickLimit refused={refused} max={MAX_COMPARE} />
        <button type="button" data-testid="compare-go" disabled={picked.length < 2} onClick={() => navigate(`/compare?jobs=${picked.join(",")}`)}>
          Compare {picked.length} selected
        </button>
      </ViewHead>
      <p class="muted">Pick 2 to {MAX_COMPARE} jobs. The comparison's address captures the selection, so it can be shared.</p>
      {jobs === null ? (
        <p class="muted">Loading jobs…</p>
      ) : list.length === 0 ? (
        <p class="empty">
          No jobs yet — <Link href="/submit">submit one</Link>, then come back to compare runs.
        </p>
      ) : (
        <table data-testid="compare-picker">
          <tbody>
            {list.map((job) => (
              <tr>
                <td>
                  <input
                    type="checkbox"
                    id={`pick-${job.id}`}
                    data-testid={`compare-pick-${job.id}`}
                    checked={picked.includes(job.id)}
                    onChange={(e) => toggle(job.id, e.currentTarget.checked, e.currentTarget)}
                  />
                </td>
                <td>
                  <label for={`pick-${job.id}`} class="inline">
                    #{job.id} {job.name}
                  </label>
                </td>
                <td>
                  <StateBadge state={job.state} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

