/** "Final and best": each metric's final value and best (at its step) per compared job. */
import type { Comparison } from "../../api/types";
import { formatMetric } from "../../lib/format";

/** What each direction (one server-side rule, backend/telemetry/series/curves.direction) means. */
const DIRECTION_TEXT: Record<"min" | "max" | "none", string> = {
  min: "lower is better",
  max: "higher is better",
  none: "no best (neither end is better)",
};

/** `names`: the metrics in display order (the loss first). */
export function SummaryTable({ comparison, names }: { comparison: Comparison; names: string[] }) {
  const { jobs, summary } = comparison;
  return (
    <div class="table-scroll" tabIndex={0} role="region" aria-label="Final and best values" data-testid="compare-summary-box">
    <table data-testid="compare-summary">
      <thead>
        <tr>
          <th scope="col">Metric</th>
          {jobs.map((job) => (
            <th scope="col">#{job.id} final (best @ step)</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {names.map((name) => (
          <tr>
            <th scope="row">
              {name} <span class="muted small" data-testid={`direction-${name}`}>{DIRECTION_TEXT[comparison.directions[name] ?? "none"]}</span>
            </th>
            {jobs.map((job) => {
              const s = summary[name]![String(job.id)]!;
              return (
                <td data-testid={`summary-${name}-${job.id}`} title={`min ${formatMetric(name, s.min)}, max ${formatMetric(name, s.max)}`}>
                  {formatMetric(name, s.final)}{" "}
                  <span class="muted">{s.best === null || s.best === undefined ? "" : `(${formatMetric(name, s.best)} @ ${s.best_step ?? "—"})`}</span>
                </td>
              );
            })}
          </tr>
        ))}
      </tbody>
    </table>
    </div>
  );
}
