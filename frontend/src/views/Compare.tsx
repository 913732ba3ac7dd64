/** Compare 2–10 jobs: overlaid curves per metric, the settings that differ, final/best values, CSV. */
import { useEffect, useMemo, useState } from "preact/hooks";
import type uPlot from "uplot";
import { api } from "../api/http";
import type { Job } from "../api/types";
import { StateBadge } from "../components/bits";
import { axis, Chart, type ChartColors } from "../components/Chart";
import { lossMetric, metricAxis } from "../components/MetricCharts";
import { formatMetric } from "../lib/format";
import { alignCurves, MAX_COMPARE, smooth, specDiff, summarize, toCsv, type Curve, type XMode } from "../lib/compare";
import type { AlignedData } from "../lib/series";
import { FINISHED_STATES, sortedJobs } from "../lib/stores";
import { Link, navigate } from "../router";
import { useJobs } from "./Board";



interface Loaded {
  jobs: Job[];
  names: string[];
  /** metric → one curve per job (same order as jobs) */
  curves: Map<string, (Curve | undefined)[]>;
}

async function load(ids: number[]): Promise<Loaded> {
  const jobs = await Promise.all(ids.map((id) => api<Job>(`/api/jobs/${id}`)));
  const perJob = await Promise.all(ids.map((id) => api<{ names: string[] }>(`/api/jobs/${id}/metrics`).then((b) => b.names)));
  const names = [...new Set(perJob.flat())].sort();
  const curves = new Map<string, (Curve | undefined)[]>();
  await Promise.all(
    names.map(async (name) => {
      const row = await Promise.all(
        ids.map((id, i) =>
          perJob[i]!.includes(name) ? api<Curve>(`/api/jobs/${id}/metrics/${encodeURIComponent(name)}`) : Promise.resolve(undefined),
        ),
      );
      curves.set(name, row);
    }),
  );
  const loss = lossMetric(names);
  return { jobs, names: loss ? [loss, ...names.filter((n) => n !== loss)] : names, curves };
}

export function CompareView({ ids }: { ids: number[] }) {
  if (ids.length < 2) return <ComparePicker initial={ids} />;
  return <Comparison key={ids.join(",")} ids={ids.slice(0, MAX_COMPARE)} />;
}

function Comparison({ ids }: { ids: number[] }) {
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [xMode, setXMode] = useState<XMode>("step");
  const [weight, setWeight] = useState(0);
  const [logScale, setLogScale] = useState(false);

  useEffect(() => {
    load(ids).then(setLoaded, (err: unknown) => setError(String(err)));
  }, [ids.join(",")]);

  if (error) {
    return (
      <section>
        <h1>Compare</h1>
        <p class="error">Could not load jobs {ids.join(", ")}: {error}</p>
        <Link href="/compare">Pick other jobs</Link>
      </section>
    );
  }
  if (!loaded) return <p class="muted">Loading jobs {ids.join(", ")}…</p>;
  const { jobs, names, curves } = loaded;
  const diff = specDiff(jobs.map((j) => j.spec as unknown as Record<string, unknown>));
  const differing = diff.filter((r) => r.differs);
  const same = diff.filter((r) => !r.differs);

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

      <table class="compare-jobs">
        <thead>
          <tr>
            <th scope="col">Job</th>
            <th scope="col">State</th>
            <th scope="col">Steps</th>
            <th scope="col">Owner</th>
          </tr>
        </thead>
        <tbody>
          {jobs.map((job, i) => (
            <tr>
              <td>
                <span class="swatch" style={{ background: `var(--series-${(i % 8) + 1})` }} />
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
            </tr>
          ))}
        </tbody>
      </table>

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

      <h2>Final and best</h2>
      {names.length === 0 ? (
        <p class="muted">None of these jobs reported metrics yet.</p>
      ) : (
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
                <th scope="row">{name}</th>
                {curves.get(name)!.map((curve, i) => {
                  const s = summarize(name, curve);
                  return (
                    <td data-testid={`summary-${name}-${jobs[i]!.id}`}>
                      {formatMetric(name, s.final)} <span class="muted">({formatMetric(name, s.best)} @ {s.bestStep ?? "—"})</span>
                    </td>
                  );
                })}
              </tr>
            ))}
          </tbody>
        </table>
      )}

      <h2>Curves</h2>
      <div class="toolbar">
        <label class="inline">
          x axis{" "}
          <select data-testid="compare-x" value={xMode} onChange={(e) => setXMode(e.currentTarget.value as XMode)}>
            <option value="step">step</option>
            <option value="time">wall time since start</option>
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
          <CompareChart key={`${name}:${xMode}:${weight}:${logScale}`} name={name} jobs={jobs} curves={curves.get(name)!} xMode={xMode} weight={weight} logScale={logScale} />
        ))}
      </div>
    </section>
  );
}

function show(value: unknown): string {
  if (value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function DiffTable({ jobs, rows, testId }: { jobs: Job[]; rows: ReturnType<typeof specDiff>; testId?: string }) {
  return (
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
  );
}

interface ChartProps {
  name: string;
  jobs: Job[];
  curves: (Curve | undefined)[];
  xMode: XMode;
  weight: number;
  logScale: boolean;
}

function CompareChart({ name, jobs, curves, xMode, weight, logScale }: ChartProps) {
  const data = useMemo((): AlignedData => {
    const [xs, ...ys] = alignCurves(curves, xMode);
    return [xs, ...ys.map((col) => smooth(col as (number | null)[], weight))];
  }, [curves, xMode, weight]);
  const options = (c: ChartColors): Omit<uPlot.Options, "width" | "height"> => ({
    scales: { x: { time: false }, y: logScale ? { distr: 3 } : {} },
    axes: [axis(c, { label: xMode === "step" ? "step" : "seconds since start" }), axis(c, metricAxis(name, name))],
    series: [
      { label: xMode },
      ...jobs.map((job, i) => ({ label: `#${job.id} ${job.name}`, stroke: c.series[i % c.series.length], width: 1.5, spanGaps: true, points: { show: false } })),
    ],
    cursor: { sync: { key: "compare" } },
  });
  const download = () => {
    const header = [xMode === "step" ? "step" : "seconds", ...jobs.map((j) => `#${j.id} ${j.name}`)];
    const url = URL.createObjectURL(new Blob([toCsv(header, alignCurves(curves, xMode))], { type: "text/csv" }));
    const a = document.createElement("a");
    a.href = url;
    a.download = `compare-${jobs.map((j) => j.id).join("-")}-${name.replace(/[^\w.-]+/g, "_")}.csv`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  };
  return (
    <div>
      <Chart testId={`compare-chart-${name}`} title={name} options={options} data={() => data} subscribe={() => () => {}} countAttr="data-points" />
      <button type="button" class="ghost small" data-testid={`compare-csv-${name}`} onClick={download}>
        Download CSV (raw, {xMode})
      </button>
    </div>
  );
}

/** No selection yet: pick jobs from the list (finished ones first). */
function ComparePicker({ initial }: { initial: number[] }) {
  const jobs = useJobs();
  const [picked, setPicked] = useState<number[]>(initial);
  const list = useMemo(() => {
    const all = jobs ? sortedJobs(jobs) : [];
    return [...all.filter((j) => FINISHED_STATES.has(j.state)), ...all.filter((j) => !FINISHED_STATES.has(j.state))];
  }, [jobs]);
  const toggle = (id: number, on: boolean) => setPicked((held) => (on ? [...held, id].slice(-MAX_COMPARE) : held.filter((x) => x !== id)));
  return (
    <section>
      <div class="view-head">
        <h1>Compare jobs</h1>
        <span class="spacer" />
        <button type="button" data-testid="compare-go" disabled={picked.length < 2} onClick={() => navigate(`/compare?jobs=${picked.join(",")}`)}>
          Compare {picked.length} selected
        </button>
      </div>
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
                    onChange={(e) => toggle(job.id, e.currentTarget.checked)}
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

