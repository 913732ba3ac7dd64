/** Compare 2–10 jobs as the server compares them: spec diff, summaries, aligned curves, CSV. */
import { useMemo, useState } from "preact/hooks";
import type uPlot from "uplot";
import type { Comparison, Job } from "../api/types";
import { StateBadge, TableHead } from "../components/bits";
import { axis, Chart, type ChartColors } from "../components/Chart";
import { lossMetric, metricAxis } from "../components/MetricCharts";
import { MAX_COMPARE, useComparison, type XMode } from "../data";
import { ParallelCoords } from "../components/ParallelCoords";
import { ProvenanceDiff } from "../components/Provenance";
import { type Efficiency, formatDeviceHours, formatRate, mfuText } from "../lib/efficiency";
import { formatMetric } from "../lib/format";
import { runColor } from "../lib/palette";
import { useTheme } from "../lib/theme";
import { smooth, type AlignedData } from "../lib/series";
import { Link } from "../router";
import { ComparePicker } from "./ComparePicker";

/** A row of a spec table: one value per job (undefined: the job's spec lacks the key). */
interface DiffRow {
  key: string;
  values: unknown[];
  differs: boolean;
}

/** The server's spec_diff and spec_same as table rows, in the jobs' order. */
function diffRows(comparison: Comparison): { differing: DiffRow[]; same: DiffRow[] } {
  const count = comparison.jobs.length;
  const differing = Object.entries(comparison.spec_diff).map(([key, values]) => ({ key, values, differs: true }));
  const same = Object.entries(comparison.spec_same).map(([key, value]) => ({ key, values: Array<unknown>(count).fill(value), differs: false }));
  return { differing, same };
}

/** Where the server streams one metric of the jobs at every step as CSV. */
function csvHref(ids: number[], metric: string, x: XMode): string {
  const query = new URLSearchParams([...ids.map((id) => ["job", String(id)]), ["metric", metric], ["x", x]]);
  return `/api/series/compare.csv?${query}`;
}

export function CompareView({ ids }: { ids: number[] }) {
  if (ids.length < 2) return <ComparePicker initial={ids} />;
  return <JobsComparison key={ids.join(",")} ids={ids.slice(0, MAX_COMPARE)} />;
}

function JobsComparison({ ids }: { ids: number[] }) {
  const [xMode, setXMode] = useState<XMode>("step");
  const [weight, setWeight] = useState(0);
  const [logScale, setLogScale] = useState(false);
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
  const loss = lossMetric(comparison.metrics);
  const names = loss ? [loss, ...comparison.metrics.filter((n) => n !== loss)] : comparison.metrics;
  const { differing, same } = diffRows(comparison);

  return (
    <section class="compare">
      <div class="view-head">
        <h1>Compare {jobs.length} jobs</h1>
        <span class="spacer" />
        <Link href={`/compare?jobs=${ids.join(",")}`} class="muted small" title="This page's address is shareable">
          link to this comparison
        </Link>
        <Link href="/compare" class="button secondary">
          Change selection
        </Link>
      </div>

      <div class="table-scroll">
      <table class="compare-jobs">
        <TableHead
          columns={[
            "Job", "State", "Steps", "Owner", "Device-hours", "Samples/s per device", "MFU"
          ]}
        />
        <tbody>
          {jobs.map((job, i) => (
            <tr>
              <td>
                <span class="swatch" style={{ background: runColor(i, theme) }} />
                <Link href={`/jobs/${job.id}`} data-testid={`compare-job-${job.id}`}>
                  #{job.id} {job.name}
                </Link>
              </td>
              <td>
                <StateBadge state={job.state} />
              </td>
              <td>
                {job.step}/{job.total_steps ?? "?"}
              </td>
              <td>{job.owner}</td>
              <EfficiencyCells efficiency={comparison.efficiency[String(job.id)]} jobId={job.id} />
            </tr>
          ))}
        </tbody>
      </table>
      </div>

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
      <ProvenanceDiff ids={ids} />

      <h2>Final and best</h2>
      {names.length === 0 ? (
        <p class="muted">None of these jobs reported metrics yet.</p>
      ) : (
        <div class="table-scroll" data-testid="compare-summary-box">
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

      <h2>Curves</h2>
      <div class="toolbar">
        <label class="inline">
          x axis{" "}
          <select data-testid="compare-x" value={xMode} onChange={(e) => setXMode(e.currentTarget.value as XMode)}>
            <option value="step">step</option>
            <option value="time">wall time since start</option>
            <option value="device_hours">device-hours used</option>
          </select>
        </label>
        <label class="inline">
          smoothing {weight.toFixed(2)}{" "}
          <input
            type="range"
            min="0"
            max="0.99"
            step="0.01"
            data-testid="compare-smoothing"
            value={weight}
            onInput={(e) => setWeight(Number(e.currentTarget.value))}
          />
        </label>
        <label class="inline">
          <input type="checkbox" data-testid="compare-log" checked={logScale} onChange={(e) => setLogScale(e.currentTarget.checked)} /> log
          scale
        </label>
      </div>
      <div class="metric-charts">
        {names.map((name) => (
          <CompareChart
            key={`${name}:${loadedX}:${weight}:${logScale}`}
            name={name}
            jobs={jobs}
            curves={comparison.curves[name]!}
            xMode={loadedX}
            csvX={xMode}
            weight={weight}
            logScale={logScale}
          />
        ))}
      </div>
    </section>
  );
}

/** What each direction (one server-side rule, backend/telemetry/series/curves.direction) means. */
const DIRECTION_TEXT: Record<"min" | "max" | "none", string> = {
  min: "lower is better",
  max: "higher is better",
  none: "no best (neither end is better)",
};

function EfficiencyCells({ efficiency, jobId }: { efficiency: Efficiency | undefined; jobId: number }) {
  if (!efficiency) return <td colSpan={3} class="muted">—</td>;
  return (
    <>
      <td data-testid={`compare-device-hours-${jobId}`}>{formatDeviceHours(efficiency.device_hours)}</td>
      <td data-testid={`compare-samples-${jobId}`}>{formatRate(efficiency.samples_per_s_per_device)}</td>
      <td data-testid={`compare-mfu-${jobId}`}>{mfuText(efficiency)}</td>
    </>
  );
}

function show(value: unknown): string {
  if (value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function DiffTable({ jobs, rows, testId }: { jobs: Job[]; rows: DiffRow[]; testId?: string }) {
  return (
    <div class="table-scroll">
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

interface ChartProps {
  name: string;
  jobs: Job[];
  curves: Comparison["curves"][string];
  xMode: XMode;
  /** the axis the CSV link asks for: the one chosen, even while its curves are loading */
  csvX: XMode;
  weight: number;
  logScale: boolean;
}

const X_LABELS: Record<XMode, string> = { step: "step", time: "seconds since start", device_hours: "device-hours" };

function CompareChart({ name, jobs, curves, xMode, csvX, weight, logScale }: ChartProps) {
  const data = useMemo(
    (): AlignedData => [curves.x, ...jobs.map((job) => smooth(curves.values[String(job.id)]!, weight))],
    [curves, jobs, weight],
  );
  const options = (c: ChartColors): Omit<uPlot.Options, "width" | "height"> => ({
    scales: { x: { time: false }, y: logScale ? { distr: 3 } : {} },
    axes: [axis(c, { label: X_LABELS[xMode] }), axis(c, metricAxis(name, name))],
    series: [
      { label: xMode },
      ...jobs.map((job, i) => ({ label: `#${job.id} ${job.name}`, stroke: c.series[i % c.series.length], width: 1.5, spanGaps: true, points: { show: false } })),
    ],
    cursor: { sync: { key: "compare" } },
  });
  return (
    <div data-testid={`compare-curve-${name}`} data-x={xMode}>
      <Chart testId={`compare-chart-${name}`} title={name} options={options} data={() => data} subscribe={() => () => {}} countAttr="data-points" />
      <a class="button ghost small" data-testid={`compare-csv-${name}`} href={csvHref(jobs.map((j) => j.id), name, csvX)} download>
        Download CSV (every step, {csvX})
      </a>
    </div>
  );
}
