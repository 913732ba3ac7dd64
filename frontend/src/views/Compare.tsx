/** Compare 2–10 jobs as the server compares them: spec diff, summaries, aligned curves, CSV. */
import { useState } from "preact/hooks";
import { ViewHead } from "../components/bits";
import { lossFirst } from "../components/MetricCharts";
import { ParallelCoords } from "../components/ParallelCoords";
import { ProvenanceDiff } from "../components/Provenance";
import type { Comparison } from "../api/types";
import { MAX_COMPARE, useComparison, type XMode } from "../data";
import { formatTime } from "../lib/format";
import { runColor } from "../lib/palette";
import { useTheme } from "../lib/theme";
import { Link } from "../router";
import { ComparePicker } from "./ComparePicker";
import { ChartTools, useChartTools, yMetricOf } from "../components/ChartTools";
import { showsUpdateCosts, UpdateCosts } from "../components/UpdateCosts";
import { CompareChart, csvHref } from "./compare/CompareChart";
import { JobsTable } from "./compare/JobsTable";
import { SpecDiff } from "./compare/SpecDiff";
import { SummaryTable } from "./compare/SummaryTable";

// the job page's modes (step, wall time, relative time), and device-hours
const X_MODES = [
  ["step", "step"],
  ["wall", "wall time"],
  ["time", "relative time"],
  ["device_hours", "device-hours used"],
] as const;

/** One compact menu of CSV downloads, a metric each (the curves at every step, on the chosen x axis). */
function CsvMenu({ ids, names, x }: { ids: number[]; names: string[]; x: XMode }) {
  if (names.length === 0) return null;
  return (
    <details class="menu" data-testid="compare-csv">
      <summary class="small">Download CSV</summary>
      <ul role="list">
        {names.map((name) => (
          <li>
            <a data-testid={`compare-csv-${name}`} href={csvHref(ids, name, x)} title={`${name} of these jobs at every step, x: ${x}`} download>
              {name}
            </a>
          </li>
        ))}
      </ul>
    </details>
  );
}

/** When each run's first point was (the server's): where its relative time starts, and what wall time lays side by side. */
function RunStarts({ jobs, starts }: { jobs: Comparison["jobs"]; starts: Record<string, number | null> }) {
  return (
    <p class="muted small" data-testid="compare-starts">
      First points:{" "}
      {jobs.map((job, i) => (
        <span data-testid={`compare-start-${job.id}`}>
          {i > 0 && " · "}#{job.id} {formatTime(starts[String(job.id)] ?? null)}
        </span>
      ))}
    </p>
  );
}

export function CompareView({ ids }: { ids: number[] }) {
  if (ids.length < 2) return <ComparePicker initial={ids} />;
  return <JobsComparison key={ids.join(",")} ids={ids.slice(0, MAX_COMPARE)} />;
}

function JobsComparison({ ids }: { ids: number[] }) {
  const tools = useChartTools<XMode>("step");
  const { view, x: xMode } = tools;
  const { comparison, loadedX, error } = useComparison(ids, xMode);
  const theme = useTheme();
  const [chosen, setChosen] = useState<string | null>(null);

  if (error) {
    return (
      <section>
        <h1>Compare</h1>
        <p class="error">Could not load jobs {ids.join(", ")}: {error}</p>
        <Link href="/compare">Pick other jobs</Link>
      </section>
    );
  }
  if (!comparison) return <p class="muted">Loading jobs {ids.join(", ")}…</p>;
  const { jobs, summary } = comparison;
  const names = lossFirst(comparison.metrics);
  const yMetric = yMetricOf(tools, names);

  return (
    <section class="compare">
      <ViewHead title={<>Compare {jobs.length} jobs</>}>
        <Link href={`/compare?jobs=${ids.join(",")}`} class="muted small" title="This page's address is shareable">
          link to this comparison
        </Link>
        <Link href="/compare" class="button secondary">
          Change selection
        </Link>
      </ViewHead>

      <h2 class="first">Curves</h2>
      <ChartTools prefix="compare" tools={tools} xModes={X_MODES} metrics={names}>
        <CsvMenu ids={jobs.map((j) => j.id)} names={names} x={xMode} />
      </ChartTools>
      {loadedX !== "step" && names[0] && <RunStarts jobs={jobs} starts={comparison.curves[names[0]]?.starts ?? {}} />}
      <div class="metric-charts">
        {names.map((name) => (
          <CompareChart
            key={`${name}:${loadedX}:${view.weight > 0}:${view.log}:${view.yMin}:${view.yMax}:${view.clip}:${name === yMetric}`}
            name={name}
            jobs={jobs}
            curves={comparison.curves[name]!}
            xMode={loadedX}
            view={name === yMetric ? view : { ...view, yMin: "", yMax: "" }}
          />
        ))}
      </div>

      <JobsTable comparison={comparison} theme={theme} />
      {jobs.some((job) => showsUpdateCosts(job.spec)) && (
        <UpdateCosts runs={jobs.map((job, i) => ({ ...job, color: runColor(i, theme) }))} version={jobs.map((j) => `${j.state}:${j.step}`).join(",")} />
      )}

      <SpecDiff comparison={comparison} />
      <ProvenanceDiff ids={ids} />

      <h2>Final and best</h2>
      {names.length === 0 ? (
        <p class="muted">None of these jobs reported metrics yet.</p>
      ) : (
        <SummaryTable comparison={comparison} names={names} />
      )}

      {names.length > 0 && (
        <>
          <h2>Settings → {chosen ?? names[0]}</h2>
          <label class="inline">
            metric{" "}
            <select data-testid="parallel-metric" value={chosen ?? names[0]} onChange={(e) => setChosen(e.currentTarget.value)}>
              {names.map((n) => (
                <option value={n}>{n}</option>
              ))}
            </select>
          </label>
          <ParallelCoords
            testId="parallel"
            axes={[
              ...Object.entries(comparison.spec_diff).map(([key, values]) => ({ label: key, values })),
              { label: `${chosen ?? names[0]} (final)`, metric: chosen ?? names[0], values: jobs.map((job) => summary[chosen ?? names[0]!]?.[String(job.id)]?.final ?? null) },
            ]}
            colors={jobs.map((_, i) => runColor(i, theme))}
            labels={jobs.map((job) => `#${job.id} ${job.name}`)}
          />
        </>
      )}

    </section>
  );
}
