/**
 * What each run's update mode costs (#35), one row per run: every rank's step time and the
 * bytes it sent and received per step (measured by the engine), rank 0's queue of waiting
 * gradients and the updates' staleness (async). Bars share one scale across the rows, so a
 * straggler that slows every rank of a sync run (and only itself in async) and a parameter
 * server's rank 0 moving N−1 times the others' bytes read at a glance. The server aggregates
 * (GET /api/series/costs); the job page and Compare show the same panel.
 */
import { useEffect, useState } from "preact/hooks";
import { client, ok } from "../api/http";
import type { components } from "../api/schema";
import type { JobSpec } from "../api/types";
import { formatBytes } from "../lib/format";
import { updateModeText } from "../lib/updateMode";
import { TableHead } from "./bits";

export type Costs = components["schemas"]["UpdateCosts"];
type RankCosts = components["schemas"]["RankCosts"];

export interface CostRun {
  id: number;
  name: string;
  spec: JobSpec;
  color?: string;
}

/** Whether a job is data-parallel over 2+ devices: the jobs this panel is about. */
export function showsUpdateCosts(spec: JobSpec): boolean {
  const par = spec.parallelism;
  return !!par && (par.strategy ?? "data") === "data" && (par.devices ?? 1) >= 2;
}

/** Largest step time and largest bytes per step (sent + received) over every rank of every run. */
export function costScales(all: Costs[]): { time: number; bytes: number } {
  const ranks = all.flatMap((c) => c.ranks);
  return {
    time: Math.max(0, ...ranks.map((r) => r.step_time ?? 0)),
    bytes: Math.max(0, ...ranks.map((r) => (r.bytes_sent ?? 0) + (r.bytes_received ?? 0))),
  };
}

/** The slowest rank's step time over the fastest's (1: even), null with fewer than 2 ranks timed. */
export function spread(ranks: RankCosts[]): number | null {
  const times = ranks.map((r) => r.step_time).filter((t): t is number => t !== null && t !== undefined && t > 0);
  return times.length >= 2 ? Math.max(...times) / Math.min(...times) : null;
}

const ms = (s: number | null | undefined) => (s == null ? "—" : `${(s * 1000).toFixed(1)} ms`);
const num = (v: number | null | undefined, digits = 1) => (v == null ? "—" : v.toFixed(digits));

function Bar({ value, scale, class: cls }: { value: number; scale: number; class: string }) {
  const width = scale > 0 ? Math.max(1, (value / scale) * 100) : 0;
  return (
    <span class="cost-bar" aria-hidden="true">
      <span class={cls} style={{ width: `${width}%` }} />
    </span>
  );
}

function RankLines({ run, costs, scale }: { run: number; costs: Costs; scale: { time: number; bytes: number } }) {
  return (
    <>
      <td>
        {costs.ranks.map((r) => (
          <div class="cost-line" data-testid={`cost-time-${run}-${r.rank}`} data-value={r.step_time ?? ""}>
            <span class="muted small">r{r.rank}</span> <Bar value={r.step_time ?? 0} scale={scale.time} class="cost-time" /> {ms(r.step_time)}
          </div>
        ))}
      </td>
      <td>
        {costs.ranks.map((r) => (
          <div
            class="cost-line"
            data-testid={`cost-bytes-${run}-${r.rank}`}
            data-sent={r.bytes_sent ?? ""}
            data-received={r.bytes_received ?? ""}
          >
            <span class="muted small">r{r.rank}</span>{" "}
            <Bar value={(r.bytes_sent ?? 0) + (r.bytes_received ?? 0)} scale={scale.bytes} class="cost-bytes" /> ↑{formatBytes(r.bytes_sent)} ↓
            {formatBytes(r.bytes_received)}
          </div>
        ))}
      </td>
    </>
  );
}

/** Fetched again whenever `version` changes (a running job's step or state moved). */
export function UpdateCosts({ runs, version, title = "Update costs" }: { runs: CostRun[]; version: string; title?: string }) {
  const [costs, setCosts] = useState<Costs[] | null>(null);
  const ids = runs.map((r) => r.id);
  useEffect(() => {
    let current = true;
    ok(client.GET("/api/series/costs", { params: { query: { job: ids } } }))
      .then((body) => current && setCosts(body))
      .catch(() => {});
    return () => {
      current = false;
    };
  }, [ids.join(","), version]);
  if (!costs || costs.every((c) => c.ranks.length === 0)) return null;
  const byId = new Map(costs.map((c) => [c.job_id, c]));
  const scale = costScales(costs);
  const window = costs[0]?.window ?? 50;
  return (
    <div data-testid="update-costs">
      <h2>{title}</h2>
      <p class="muted small">
        Per rank, the mean of its last {window} steps: step time, and bytes sent (↑) and received (↓) per step as the engine
        measured them. Server: rank 0's queue of waiting gradients and the updates' staleness (updates between a gradient's
        weights and its application), over the whole run; async only.
      </p>
      <div class="table-scroll" tabIndex={0} role="region" aria-label={title}>
        <table class="update-costs">
          <TableHead columns={["Run and update mode", "Step time per rank", "Bytes per step per rank", "Slowest ÷ fastest", "Server queue", "Staleness"]} />
          <tbody>
            {runs.map((run) => {
              const c = byId.get(run.id);
              const s = c ? spread(c.ranks) : null;
              return (
                <tr data-testid={`update-costs-${run.id}`}>
                  <td>
                    {run.color && <span class="swatch" style={{ background: run.color }} />}#{run.id} {run.name}
                    <div class="muted small" data-testid={`cost-mode-${run.id}`}>
                      {updateModeText(run.spec)}, {run.spec.parallelism?.devices ?? 1} ranks
                    </div>
                  </td>
                  {c && c.ranks.length ? (
                    <RankLines run={run.id} costs={c} scale={scale} />
                  ) : (
                    <td colSpan={2} class="muted">
                      no points yet
                    </td>
                  )}
                  <td data-testid={`cost-spread-${run.id}`}>{s === null ? "—" : `${s.toFixed(2)}×`}</td>
                  <td data-testid={`cost-queue-${run.id}`}>
                    {c?.server ? `${num(c.server.queue_mean)} mean · ${num(c.server.queue_max, 0)} max` : "—"}
                  </td>
                  <td data-testid={`cost-staleness-${run.id}`}>
                    {c?.server ? (
                      <>
                        {num(c.server.staleness_mean, 2)} mean · {num(c.server.staleness_max, 0)} max
                        <div class="muted small">{num(c.server.updates_applied, 0)} updates</div>
                      </>
                    ) : (
                      "—"
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </div>
  );
}
