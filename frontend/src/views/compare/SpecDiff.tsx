/** The compared jobs' specs as tables: the settings that differ, and those that are the same. */
import type { Comparison, Job } from "../../api/types";

/** A row of a spec table: one value per job (undefined: the job's spec lacks the key). */
export interface DiffRow {
  key: string;
  values: unknown[];
  differs: boolean;
}

/** The server's spec_diff and spec_same as table rows, in the jobs' order. */
export function diffRows(comparison: Comparison): { differing: DiffRow[]; same: DiffRow[] } {
  const count = comparison.jobs.length;
  const differing = Object.entries(comparison.spec_diff).map(([key, values]) => ({ key, values, differs: true }));
  const same = Object.entries(comparison.spec_same).map(([key, value]) => ({ key, values: Array<unknown>(count).fill(value), differs: false }));
  return { differing, same };
}

function show(value: unknown): string {
  if (value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

export function DiffTable({ jobs, rows, testId }: { jobs: Job[]; rows: DiffRow[]; testId?: string }) {
  return (
    <div class="table-scroll" tabIndex={0} role="region" aria-label="Settings that differ">
    <table class="diff" data-testid={testId}>
      <thead>
        <tr>
          <th scope="col">Setting</th>
          {jobs.map((job) => (
            <th scope="col">#{job.id}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((row) => (
          <tr data-testid={`diff-row-${row.key}`} data-differs={row.differs}>
            <th scope="row">{row.key}</th>
            {row.values.map((v, i) => (
              <td data-testid={`diff-cell-${row.key}-${jobs[i]!.id}`}>{show(v)}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
    </div>
  );
}

/** "Settings that differ", then the identical ones folded away. */
export function SpecDiff({ comparison }: { comparison: Comparison }) {
  const { jobs } = comparison;
  const { differing, same } = diffRows(comparison);
  return (
    <>
      <h2>Settings that differ</h2>
      {differing.length === 0 ? (
        <p class="muted" data-testid="compare-no-diff">
          The specs are identical apart from their names.
        </p>
      ) : (
        <DiffTable jobs={jobs} rows={differing} testId="compare-diff" />
      )}
      {same.length > 0 && (
        <details class="identical" data-testid="compare-identical">
          <summary>{same.length} identical settings</summary>
          <DiffTable jobs={jobs} rows={same} />
        </details>
      )}
    </>
  );
}
